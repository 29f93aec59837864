"""A reply cut by its reply limit (`finish_reason` "length") or stopped in a loop (`finish_reason` "repetition",
the embedded model's `stop_repetition`) is known as such: never accepted, never selected over a whole one."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGenerationChunk, ChatResult

from reflection_graph import create_reflection_graph
from reflection_graph.critics import LengthCritic
from reflection_graph.critics.code_tests import CodeTestCritic
from reflection_graph.loop._rules import CUT_ISSUE, REPETITION_ISSUE
from tests.fakes import FakeCriticModel, RecordingChatModel, SeededModel, critique


def _cut(text: str, reason: str = "length") -> AIMessage:
    return AIMessage(content=text, response_metadata={"finish_reason": reason})


def test_a_cut_draft_is_marked_and_not_accepted_even_when_its_critic_accepts_it() -> None:
    generator = RecordingChatModel(
        replies=[_cut("Dear Ana, thank you for"), "Dear Ana, thank you. I decline."]
    )
    critic = FakeCriticModel(critiques=[critique(9.5, ok=True), critique(8.0, ok=True)])
    result = create_reflection_graph(generator, critic=critic, max_iterations=2).invoke(
        {"task": "Decline Ana"}
    )
    first, second = result["trajectory"]
    assert first["cut"] is True and first["accepted"] is False
    assert first["critique"]["issues"][0] == CUT_ISSUE and first["critique"]["is_acceptable"] is False
    assert "cut" not in second and second["accepted"] is True
    # the cut draft scored higher, yet the whole answer is returned
    assert first["score"] > second["score"]
    assert result["candidate"] == "Dear Ana, thank you. I decline." and result["stop_reason"] == "accepted"


def test_a_cut_sample_is_not_chosen_over_a_whole_one_whatever_the_scores() -> None:
    generator = RecordingChatModel(replies=[_cut("one two three four five six seven"), "one two three"])
    graph = create_reflection_graph(
        generator, critic=LengthCritic(min_words=5), n_drafts=2, max_iterations=1, select="best"
    )
    result = graph.invoke({"task": "Write a few words"})
    (round_,) = result["trajectory"]
    # the two samples run concurrently: which one gets the cut reply is not fixed; only the cut one is long
    # enough for the critic, so without the rule it would win
    assert sorted(bool(s.get("cut")) for s in round_["samples"]) == [False, True]
    assert result["candidate"] == "one two three" and "cut" not in round_


def test_a_reply_stopped_in_a_loop_is_cut_with_its_own_issue_and_not_accepted() -> None:
    generator = RecordingChatModel(
        replies=[_cut("Rai: I can't do that!\n\nLily: It's fun.", "repetition"), "Rai and Lily talk it over."]
    )
    critic = FakeCriticModel(critiques=[critique(9.5, ok=True), critique(8.0, ok=True)])
    result = create_reflection_graph(generator, critic=critic, max_iterations=2).invoke(
        {"task": "A dialogue"}
    )
    first, second = result["trajectory"]
    assert first["cut"] is True and first["accepted"] is False and first["critique"]["is_acceptable"] is False
    assert first["critique"]["issues"][0] == REPETITION_ISSUE != CUT_ISSUE
    assert "token limit" not in " ".join(first["critique"]["issues"])
    assert REPETITION_ISSUE in generator.prompts[1], "the reviser was told why the draft stopped"
    assert "cut" not in second and second["accepted"] is True
    assert result["candidate"] == "Rai and Lily talk it over." and result["stop_reason"] == "accepted"


@pytest.mark.parametrize("reason", ["length", "repetition"])
def test_a_cut_code_draft_is_not_chosen_over_a_whole_one_even_when_it_passes_more_tests(reason: str) -> None:
    tests = "from solution import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
    passing = "```python\ndef add(a, b):\n    return a + b\n```"
    failing = "```python\ndef add(a, b):\n    return a * b\n```"
    generator = RecordingChatModel(replies=[_cut(passing, reason), failing])
    graph = create_reflection_graph(
        generator, critic=CodeTestCritic(tests), focus="code", n_drafts=2, max_iterations=1, strategy="loop"
    )
    result = graph.invoke({"task": "Write add(a, b) returning the sum."})
    (round_,) = result["trajectory"]
    by_cut = {bool(s.get("cut")): s for s in round_["samples"]}
    assert by_cut[True]["critique"]["checks_passed"] > by_cut[False]["critique"]["checks_passed"]
    issue = {"length": CUT_ISSUE, "repetition": REPETITION_ISSUE}[reason]
    assert by_cut[True]["critique"]["issues"][0] == issue
    assert "return a * b" in result["candidate"] and "cut" not in round_


# -- a cut sample never ends a best-of-N search ------------------------------------------------------------------

CUT_REPLY = "Paris is the capital of France. Paris is the"
WHOLE_REPLY = "Paris is the capital of France."


def _paris(seed: int, temperature: float, prompt: str) -> Any:
    """Sample 0 (the greedy draft) falls into a loop and is stopped there; sample 1 is whole."""
    if seed == 0:
        return AIMessage(content=CUT_REPLY, response_metadata={"finish_reason": "repetition"})
    return WHOLE_REPLY


class _StreamedSeeds(SeededModel):
    """`SeededModel` streamed as the embedded model streams: the text in pieces, then a last chunk with the
    reply's `finish_reason` (LangChain's generic fake drops it when it streams)."""

    def _stream(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> Iterator[ChatGenerationChunk]:
        message = self._generate(messages).generations[0].message
        for piece in re.split(r"(\s)", message.text):
            chunk = ChatGenerationChunk(message=AIMessageChunk(content=piece, id=message.id))
            if run_manager is not None:
                run_manager.on_llm_new_token(piece, chunk=chunk)
            yield chunk
        last = AIMessageChunk(
            content="", response_metadata=dict(message.response_metadata), chunk_position="last"
        )
        yield ChatGenerationChunk(message=last)


class _CutJudgedFirst(FakeCriticModel):
    """Scores every answer 10. Called async, the whole answer's critique waits until the cut one's is done, so the
    cut sample is always the first judged, as it is in the sync node (which judges the samples in order)."""

    cut_done: Any = None

    async def _agenerate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        if self.cut_done is None:
            self.cut_done = asyncio.Event()
        if CUT_REPLY in " ".join(str(m.content) for m in messages):
            result = self._generate(messages)
            self.cut_done.set()
            return result
        await self.cut_done.wait()
        return self._generate(messages)


def _paris_graph() -> Any:
    generator = _StreamedSeeds(reply_of=_paris)
    critic = _CutJudgedFirst(critiques=[critique(10, ok=True, issues=[])])
    return create_reflection_graph(generator, critic=critic, n_drafts=2, max_iterations=1, score_threshold=8)


def _check_paris(result: Mapping[str, Any]) -> None:
    (round_,) = result["trajectory"]
    judged = {s["candidate"]: s for s in round_["samples"]}
    assert set(judged) == {CUT_REPLY, WHOLE_REPLY}, "the cut sample scored 10, yet the search went on"
    assert judged[CUT_REPLY]["cut"] is True and judged[CUT_REPLY]["accepted"] is False
    assert result["candidate"] == WHOLE_REPLY and result["stop_reason"] == "accepted"


def test_a_cut_sample_scored_above_the_threshold_does_not_end_the_search() -> None:
    _check_paris(_paris_graph().invoke({"task": "What is the capital of France?"}))


def test_a_cut_sample_does_not_end_the_search_when_streamed_async() -> None:
    async def run() -> dict[str, Any]:
        final: dict[str, Any] = {}
        async for values in _paris_graph().astream(
            {"task": "What is the capital of France?"}, stream_mode="values"
        ):
            final = values
        return final

    _check_paris(asyncio.run(run()))


def test_a_cut_sample_does_not_end_the_search_on_the_messages_stream() -> None:
    events = list(
        _paris_graph().stream({"task": "What is the capital of France?"}, stream_mode=["messages", "values"])
    )
    streamed = "".join(p[0].text for mode, p in events if mode == "messages")
    assert CUT_REPLY in streamed and WHOLE_REPLY in streamed.replace(CUT_REPLY, "")  # both drafts streamed
    _check_paris(next(payload for mode, payload in reversed(events) if mode == "values"))
