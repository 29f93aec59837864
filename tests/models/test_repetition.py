"""The repetition stop, offline: the detector on token lists (`models._repetition`), its llama-cpp-python stopping
criterion fed as `Llama.generate` feeds it, and `EmbeddedChatModel` over a scripted llama.cpp whose reply loops
(invoke and streaming, on and off). The real model's loops are tested in tests/models/test_embedded_repetition.py
(`embedded`)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path

import numpy
import pytest
from hypothesis import given
from hypothesis import strategies as st
from langchain_core.messages import HumanMessage

from reflection_graph.models import _record
from reflection_graph.models._repetition import (
    MAX_PERIOD,
    MIN_REPEATED_TOKENS,
    REPETITION,
    Loop,
    RepetitionDetector,
    RepetitionStop,
    requested_copies,
)
from reflection_graph.models.embedded import EmbeddedChatModel
from tests.fakes import EOG, scripted_embedded


def _first_loop(tokens: list[int], **limits: int) -> tuple[int, Loop] | None:
    """(how many tokens were read when the detector first reported a loop, the loop), or None."""
    detector = RepetitionDetector(**limits)
    for n, token in enumerate(tokens, start=1):
        loop = detector.push(token)
        if loop is not None:
            return n, loop
    return None


def _needed(period: int) -> int:
    """Tokens a loop of `period` needs after its first copy: two more copies, and at least 64 tokens of repeats."""
    return max(2 * period, MIN_REPEATED_TOKENS)


PREFIX = list(range(10_000, 10_037))  # 37 distinct tokens no span below uses


@pytest.mark.parametrize("period", [1, 2, 3, 7, 31, 32, 33, 90, 200, MAX_PERIOD])
def test_a_loop_is_caught_at_the_first_token_it_qualifies_and_keeps_its_first_copy(period: int) -> None:
    span = list(range(1, period + 1))
    tokens = PREFIX + span * (2 + _needed(period) // period + 2)
    found = _first_loop(tokens)
    assert found is not None
    n, loop = found
    assert n == len(PREFIX) + period + _needed(period)  # not a token later ...
    assert _first_loop(tokens[: n - 1]) is None  # ... nor a token earlier
    assert loop == Loop(period=period, start=len(PREFIX), end=n)
    assert tokens[: loop.keep] == PREFIX + span  # what the model said before it looped


def test_the_kept_copy_starts_as_far_back_as_the_copies_go() -> None:
    """Text before the loop that happens to end like the span belongs to the first copy: the cut falls where the
    repeats begin, so the reply keeps exactly one copy, whatever rotation of the span the model started with."""
    span = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20]
    prefix = [500, 501, 18, 19, 20]  # ends with the span's last three tokens
    tokens = prefix + span * 6
    found = _first_loop(tokens)
    assert found is not None
    _, loop = found
    assert loop.start == 2 and loop.period == 20
    assert tokens[: loop.keep] == [500, 501, 18, 19, 20, *span[:17]]
    assert tokens[loop.keep : loop.keep + 20] == [18, 19, 20, *span[:17]]  # the first repeat, dropped


def test_a_span_that_repeats_itself_inside_is_cut_at_its_shortest_period() -> None:
    span = [1, 2, 3, 1, 2, 3]  # period 6 holds period 3
    found = _first_loop(PREFIX + span * 20)
    assert found is not None and found[1].period == 3 and found[1].keep == len(PREFIX) + 3


@pytest.mark.parametrize(
    "tokens",
    [
        [7, 8] * 32,  # `| --- |` 32 times: 62 tokens of repeats
        [5, 6] * 16 + [1],  # `0, 0, 0` 16 times
        [9] * MIN_REPEATED_TOKENS,  # `====` 64 tokens long: 63 repeats
        list(range(3000)),  # a long list that never repeats
        [t for i in range(400) for t in (i, 44, 45)],  # "1, 2, 3, ...": every copy has a new number
    ],
    ids=["table-rule", "zeros", "one-token-run", "no-repeat", "counting"],
)
def test_short_legitimate_repeats_and_non_repeating_text_are_never_caught(tokens: list[int]) -> None:
    assert _first_loop(PREFIX + tokens + PREFIX) is None


def test_a_span_copied_with_one_token_changed_in_each_copy_is_never_caught() -> None:
    span = list(range(1, 41))
    copies = [
        [*span[:20], 1000 + k, *span[21:]] for k in range(20)
    ]  # copy k differs from the others in one token
    assert _first_loop(PREFIX + [t for copy in copies for t in copy]) is None


def test_after_a_near_repeat_the_loop_starts_where_the_copies_become_exact() -> None:
    span = list(range(1, 41))
    changed = [*span[:20], 999, *span[21:]]
    tokens = PREFIX + span + span + changed + span * 6
    found = _first_loop(tokens)
    assert found is not None
    _, loop = found
    assert loop.period == 40
    assert loop.start == len(PREFIX) + 2 * 40 + 21  # just after the changed token
    assert tokens[: loop.keep] == PREFIX + span + span + changed + span[:21]


def test_once_found_the_loop_is_kept_and_later_tokens_are_not_read() -> None:
    detector = RepetitionDetector()
    loop = detector.extend(PREFIX + [1, 2, 3] * 40)
    assert loop is not None
    read = len(detector.tokens)
    assert detector.push(12345) == loop and len(detector.tokens) == read
    assert detector.settled == loop.keep


@pytest.mark.parametrize(
    ("limits", "named"),
    [
        ({"max_period": 0}, "max_period"),
        ({"min_repeated": 0}, "min_repeated"),
        ({"min_copies": 1}, "min_copies"),
    ],
)
def test_bad_limits_are_refused_by_name(limits: dict[str, int], named: str) -> None:
    with pytest.raises(ValueError, match=named):
        RepetitionDetector(**limits)


@given(
    prefix=st.lists(st.integers(0, 6), max_size=120),
    span=st.lists(st.integers(0, 6), min_size=1, max_size=60),
    copies=st.integers(0, 8),
    tail=st.lists(st.integers(0, 6), max_size=40),
)
def test_settled_tokens_are_never_dropped_by_a_loop_found_later(
    prefix: list[int], span: list[int], copies: int, tail: list[int]
) -> None:
    """What streaming may send (`settled`) never runs past what a later loop keeps, and it only grows."""
    tokens = prefix + span * copies + tail
    detector, settled = RepetitionDetector(), [0]
    for token in tokens:
        if detector.push(token) is not None:
            break
        settled.append(detector.settled)
    assert settled == sorted(settled)
    if detector.loop is not None:
        assert max(settled) <= detector.loop.keep
    else:
        assert settled[-1] <= len(detector.tokens)


# -- as llama-cpp-python's stopping criterion --------------------------------------------------------------------


def _generate(stop: RepetitionStop, prompt: list[int], reply: list[int]) -> int:
    """Feed `stop` as `Llama.generate` does (prompt first, then one more token a call, the newest sampled token
    not yet among them) and once more after the loop, as `_create_completion` does; the tokens generated."""
    generated: list[int] = []
    for token in reply:
        if stop(numpy.array(prompt + generated, dtype=numpy.intc), None):
            break
        generated.append(token)
    assert stop(numpy.array(prompt + generated, dtype=numpy.intc), None) == (stop.loop is not None)
    return len(generated)


def test_the_criterion_reads_only_generated_tokens_and_stops_at_the_loop() -> None:
    prompt = [1, 2, 3] * 50  # a prompt that repeats itself is no loop of the reply
    span = list(range(100, 130))
    reply = [200, 201, *span * 10]
    stop = RepetitionStop()
    generated = _generate(stop, prompt, reply)
    assert stop.loop is not None
    assert generated == stop.loop.end == 2 + 30 + _needed(30)
    assert stop.kept() == [200, 201, *span]


def test_the_criterion_lets_a_reply_without_a_loop_run_to_its_end() -> None:
    stop = RepetitionStop()
    assert _generate(stop, [1, 2, 3], list(range(500))) == 500
    assert stop.loop is None and stop.kept() == list(range(500))


def test_the_same_criterion_replays_a_recorded_call_to_the_same_stop() -> None:
    """A call record keeps its `RepetitionStop` (`_record`): a replay of the call (a new completion: its first call
    holds only the prompt) stops at the same token, not at once."""
    stop = RepetitionStop()
    prompt, reply = [7, 7, 7], [50, 51, *list(range(60, 90)) * 6]
    first = _generate(stop, prompt, reply)
    assert _generate(stop, prompt, reply) == first and stop.kept() == [50, 51, *range(60, 90)]


# -- EmbeddedChatModel over a scripted llama.cpp ------------------------------------------------------------------


@pytest.fixture
def scripted(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Callable[..., EmbeddedChatModel]:
    pytest.importorskip("llama_cpp", reason='needs pip install "reflection-graph[local]"')
    return functools.partial(scripted_embedded, monkeypatch, tmp_path)


INTRO = ["Rai", " and", " Lily", " talk", ".\n\n"]
# a two-line exchange of 24 tokens, repeated: 3 copies and 64 tokens of repeats are reached within the 5th copy
EXCHANGE = [
    "Rai",
    ":",
    " I",
    " can",
    "'t",
    " do",
    " that",
    "!",
    "\n\n",
    "Lily",
    ":",
    " It",
    "'s",
    " just",
    " a",
]
EXCHANGE += [" fun", " experiment", ".", " You", "'ll", " see", " soon", ".", "\n\n"]
LOOPING = [*INTRO, *EXCHANGE * 8]
ASK = [HumanMessage(content="Task: a dialogue\n\nDraft:\n")]


def test_a_looping_reply_is_stopped_trimmed_to_its_first_copy_and_flagged(
    scripted: Callable[..., EmbeddedChatModel],
) -> None:
    model = scripted(LOOPING, max_tokens=400, temperature=0)
    reply = model.invoke(ASK)
    first_copy = "".join(INTRO + EXCHANGE).strip()
    assert reply.text == first_copy
    assert reply.response_metadata["finish_reason"] == REPETITION
    loop_end = len(INTRO) + len(EXCHANGE) + _needed(len(EXCHANGE))
    assert model._loaded().llama.sampled == loop_end + 1  # stopped at once, far from its 400-token limit
    assert reply.usage_metadata is not None and reply.usage_metadata["output_tokens"] == loop_end


def test_off_the_same_reply_runs_on_and_a_reply_that_does_not_loop_is_the_same_either_way(
    scripted: Callable[..., EmbeddedChatModel],
) -> None:
    model = scripted(LOOPING, max_tokens=400, temperature=0, stop_repetition=False)
    whole = model.invoke(ASK)
    assert whole.text == "".join(LOOPING).strip() and whole.response_metadata["finish_reason"] == "stop"
    # on per call, as a call option
    assert model.invoke(ASK, stop_repetition=True).response_metadata["finish_reason"] == REPETITION

    plain = [*INTRO, *EXCHANGE, *EXCHANGE, " The", " end", ".", EOG]  # two copies: no loop
    model = scripted(plain, max_tokens=400, temperature=0)
    on, off = model.invoke(ASK), model.invoke(ASK, stop_repetition=False)
    assert on.text == off.text == "".join(plain[:-1]).strip()
    assert on.response_metadata == off.response_metadata and on.response_metadata["finish_reason"] == "stop"


def test_a_streamed_looping_reply_never_sends_the_repeats_and_ends_as_invoke_does(
    scripted: Callable[..., EmbeddedChatModel],
) -> None:
    model = scripted(LOOPING, max_tokens=400, temperature=0)
    whole = model.invoke(ASK)
    chunks = list(model.stream(ASK))
    assert "".join(c.text for c in chunks) == whole.text
    assert chunks[-1].response_metadata["finish_reason"] == REPETITION
    assert len(chunks) > 2  # the intro and the first exchange went out before the stop, not all at the end
    assert chunks[0].text == "Rai and Lily talk."


def test_a_call_record_replays_to_the_same_stop(scripted: Callable[..., EmbeddedChatModel]) -> None:
    model = scripted(LOOPING, max_tokens=400, temperature=0)
    with _record.recording(model) as calls:
        model.invoke(ASK)
    (call,) = calls
    llama = model._loaded().llama
    replayed = llama.create_completion(call.prompt, **call.args)
    assert replayed["usage"]["completion_tokens"] == call.completion_tokens < 400
    assert replayed["choices"][0]["text"] == call.text


def test_json_replies_are_not_watched(scripted: Callable[..., EmbeddedChatModel]) -> None:
    model = scripted(LOOPING, max_tokens=400, temperature=0)
    plan = model._replies().completion.plan(
        ASK, model.render_prompt(ASK), {"json_schema": {"type": "object"}}
    )
    assert plan.stop_repetition is False
    assert model._replies().completion.plan(ASK, model.render_prompt(ASK), {}).stop_repetition is True


def test_every_bundled_model_stops_repetition_by_default_and_a_user_setting_wins() -> None:
    from reflection_graph.models.profile import PROFILES

    assert all(profile.stop_repetition for profile in PROFILES.values())
    assert EmbeddedChatModel(model="gemma-3-270m").stop_repetition is True
    assert EmbeddedChatModel(model="gemma-3-270m", stop_repetition=False).stop_repetition is False


# -- a repetition the task asks for ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("prompt", "copies"),
    [
        ("Write a Python literal with 6 rows of nine zeros.", 9),
        ("Give me 5 identical user dicts in a list.", 5),
        ("Print five identical lines saying hi.", 5),
        ("Repeat the word 'ok' 10 times.", 10),
        ("A table of twenty-five rows, please.", 25),
        ("Write 3 paragraphs and 12 bullet points.", 12),
        ("Write an essay of at least 300 words in under 2000 characters.", 1),
        ("Write a haiku about rain.", 1),
        ("In 3 is a prime, and x times two is even.", 1),
    ],
)
def test_the_copies_a_prompt_asks_for_are_its_largest_count_of_things(prompt: str, copies: int) -> None:
    assert requested_copies(prompt) == copies


ROW = [11, 12, *[13, 14] * 8, 13, 15, 16]  # `    [0, 0, 0, 0, 0, 0, 0, 0, 0],\n`: 21 tokens
ROWS_PROMPT = "Write a Python literal with 6 rows of nine zeros."


def test_six_rows_the_prompt_asks_for_are_not_a_loop_though_the_same_rows_unasked_are() -> None:
    rows = [500, 501, *ROW * 6, 502, 503]  # `grid = [`, six rows, `]` and the end of the block
    assert _first_loop(rows, requested=requested_copies(ROWS_PROMPT)) is None
    unasked = _first_loop(rows)  # told of no count: three copies and 64 tokens of repeats are a loop
    assert unasked is not None and unasked[1].keep == 2 + len(ROW)


def test_copies_beyond_the_ones_asked_for_are_still_a_loop_and_the_asked_ones_are_kept() -> None:
    span = list(range(100, 130))  # a 30-token line
    asked = requested_copies("Print the line below 4 times.")
    tokens = PREFIX + span * 40
    found = _first_loop(tokens, requested=asked)
    assert found is not None
    n, loop = found
    assert asked == 4 and n == len(PREFIX) + 5 * 30  # stopped as the fifth copy is complete ...
    assert _first_loop(tokens[: n - 1], requested=asked) is None  # ... not a token earlier
    assert tokens[: loop.keep] == PREFIX + span * 4  # the four copies asked for


def test_a_short_span_asked_for_many_times_still_needs_its_copies_and_64_tokens() -> None:
    """A request lets more copies through, never fewer: `0, 0, 0` asked for 3 times is no loop at 4 copies of a
    two-token span (under 64 tokens of repeats), as before."""
    assert _first_loop(PREFIX + [5, 6] * 20, requested=3) is None
    found = _first_loop(PREFIX + [5, 6] * 60, requested=3)
    assert found is not None and found[0] == len(PREFIX) + 2 + MIN_REPEATED_TOKENS


def test_a_requested_count_below_one_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="requested"):
        RepetitionDetector(requested=0)


SCRIPT_ROW = ["    [", *["0", ", "] * 8, "0", "],\n"]  # one token a text: 19 tokens a row
SIX_ROWS = ["grid", " =", " [\n", *SCRIPT_ROW * 6, "]", EOG]


def test_the_embedded_model_answers_the_rows_its_prompt_asks_for_whole_and_stops_them_unasked(
    scripted: Callable[..., EmbeddedChatModel],
) -> None:
    model = scripted(SIX_ROWS, max_tokens=400, temperature=0)
    asked = model.invoke([HumanMessage(content=f"Task: {ROWS_PROMPT}\n\nDraft:\n")])
    assert asked.text == "".join(SIX_ROWS[:-1]).strip() and asked.response_metadata["finish_reason"] == "stop"
    streamed = model.stream([HumanMessage(content=f"Task: {ROWS_PROMPT}\n\nDraft:\n")])
    assert "".join(c.text for c in streamed) == asked.text
    unasked = model.invoke([HumanMessage(content="Task: a Python literal of zeros\n\nDraft:\n")])
    assert unasked.response_metadata["finish_reason"] == REPETITION
    assert unasked.text == "".join(SIX_ROWS[:3] + SCRIPT_ROW).strip()
