"""Fault injection on every role (generator, critic, reviser), sync and async, and bad input on the async path.

Transient faults (rate limits, timeouts) are retried with backoff and the run succeeds when the fault clears;
permanent ones end the run with `stop_reason="error"`, an `error` naming the role and the cause, and the best
candidate so far. None of them escapes as an exception from inside LangGraph.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx
import openai
import pytest

from reflection_graph import Context, create_reflection_graph
from reflection_graph.critics import BaseCritic, CritiqueRequest
from reflection_graph.critique import Critique
from tests.fakes import FakeCriticModel, RecordingChatModel, critique

ROLES = ("generator", "reviser", "critic")
ERROR_ROLE = {"generator": "generate", "reviser": "revise", "critic": "critique"}


def rate_limit() -> openai.RateLimitError:
    """What `openai` raises on HTTP 429 (built from a fake httpx response, no network)."""
    request = httpx.Request("POST", "http://127.0.0.1:9/v1/chat/completions")
    response = httpx.Response(429, request=request, headers={"retry-after": "0"})
    return openai.RateLimitError("Rate limit reached for requests", response=response, body=None)


def auth_error() -> openai.AuthenticationError:
    request = httpx.Request("POST", "http://127.0.0.1:9/v1/chat/completions")
    return openai.AuthenticationError(
        "Incorrect API key", response=httpx.Response(401, request=request), body=None
    )


class Held:
    """A reply held back until the test releases it (or 60 s pass): longer than any `timeout_s` here, on any
    machine. `started` and `finished` tell whether the call began and whether anyone waited for its end."""

    def __init__(self, reply: Any) -> None:
        self.reply = reply
        self.started, self.finished, self.gate = threading.Event(), threading.Event(), threading.Event()

    def __call__(self, _: Any) -> Any:
        self.started.set()
        self.gate.wait(60)
        self.finished.set()
        return self.reply


TIMEOUT_S = 1.5
"""The graph's `timeout_s` in the timeout tests: the held reply never arrives in time, and every other call (a fake
model's reply) comes back well within it, even on a loaded 2-core machine."""


def run_then_release(graph: Any, mode: str, held: Held) -> tuple[dict[str, Any], bool]:
    """Run the graph, then release the held reply; also whether the run waited for that reply to finish.

    The release happens inside the event loop: `asyncio.run`'s teardown waits for the abandoned worker thread.
    """
    awaited: list[bool] = []

    def release() -> None:
        awaited.append(held.finished.is_set())
        held.gate.set()

    async def ainvoke() -> dict[str, Any]:
        try:
            return await graph.ainvoke({"task": "Write a polite email declining a job offer"})
        finally:
            release()

    if mode == "async":
        return asyncio.run(ainvoke()), awaited[0]
    try:
        return run(graph, mode), held.finished.is_set()
    finally:
        held.gate.set()


class Timed:
    """Wrap a reply list so each call's start time is recorded (to see the backoff between attempts)."""

    def __init__(self) -> None:
        self.times: list[float] = []

    def __call__(self, item: Any) -> Callable[[Any], Any]:
        def _reply(messages: Any) -> Any:
            self.times.append(time.monotonic())
            return item(messages) if callable(item) else item

        return _reply


def build(
    role: str, faults: list[Any], *, crit_ok_after: bool = True, **kwargs: Any
) -> tuple[Any, RecordingChatModel, RecordingChatModel, FakeCriticModel]:
    """A graph whose `role` gets `faults` first, then normal replies.

    Normal script: draft 1 (score 4, new issue) -> revision 1 (accepted, when `crit_ok_after`).
    """
    gen_replies: list[Any] = ["draft 1"]
    rev_replies: list[Any] = ["revision 1"]
    crit_script: list[Any] = [critique(4, issues=["too vague"]), critique(9, ok=crit_ok_after, issues=[])]
    if role == "generator":
        gen_replies = [*faults, "draft 1"]
    elif role == "reviser":
        rev_replies = [*faults, "revision 1"]
    else:  # the critic's second critique is the faulty one, so there is a scored candidate to fall back on
        crit_script = [crit_script[0], *faults, crit_script[1]]
    gen = RecordingChatModel(replies=gen_replies)
    rev = RecordingChatModel(replies=rev_replies)
    crit = FakeCriticModel(critiques=crit_script)
    graph = create_reflection_graph(gen, critic=crit, reviser=rev, max_iterations=3, **kwargs)
    return graph, gen, rev, crit


def run(graph: Any, mode: str, state: dict[str, Any] | None = None, **kw: Any) -> dict[str, Any]:
    state = state or {"task": "Write a polite email declining a job offer"}
    if mode == "async":
        return asyncio.run(graph.ainvoke(state, **kw))
    return graph.invoke(state, **kw)


def calls(role: str, gen: RecordingChatModel, rev: RecordingChatModel, crit: FakeCriticModel) -> int:
    return len({"generator": gen, "reviser": rev, "critic": crit}[role].received)


def assert_error_with_best_so_far(result: dict[str, Any], role: str, needle: str) -> None:
    assert result["stop_reason"] == "error"
    assert result["error"].startswith(f"{ERROR_ROLE[role]} failed:"), result["error"]
    assert needle in result["error"], result["error"]
    if role == "generator":
        assert result["candidate"] == "" and result["trajectory"] == []
    else:  # round 1 was critiqued (score 4): that candidate is the best so far
        assert result["candidate"] == "draft 1"
        assert [r["candidate"] for r in result["trajectory"]] == ["draft 1"]


# ------------------------------------------------------------------------------------------ permanent faults


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("role", ROLES)
def test_permanent_exception_ends_run_with_error_and_best_so_far(role: str, mode: str) -> None:
    graph, gen, rev, crit = build(role, [RuntimeError("backend exploded")], retries=2)
    result = run(graph, mode)
    assert_error_with_best_so_far(result, role, "RuntimeError: backend exploded")
    assert calls(role, gen, rev, crit) == (2 if role == "critic" else 1)  # a permanent error is not retried


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("role", ROLES)
def test_auth_error_is_permanent_not_retried(role: str, mode: str) -> None:
    graph, gen, rev, crit = build(role, [auth_error()], retries=3)
    result = run(graph, mode)
    assert_error_with_best_so_far(result, role, "AuthenticationError")
    if role != "critic":  # the critic may try another structured-output method on a 4xx, never more retries
        assert calls(role, gen, rev, crit) == 1


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("role", ROLES)
def test_timeout_without_retries_ends_run_with_error(role: str, mode: str) -> None:
    reply = critique(5) if role == "critic" else "late reply"
    held = Held(reply)
    graph, *_ = build(role, [held], retries=0, timeout_s=TIMEOUT_S)
    result, awaited = run_then_release(graph, mode, held)
    # the call began, and the run ended while it was still held: abandoned at the limit, not awaited
    assert held.started.is_set() and not awaited
    assert_error_with_best_so_far(result, role, f"timed out after {TIMEOUT_S:g}s")


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("role", ROLES)
def test_rate_limit_that_never_clears_ends_with_error_after_retries(role: str, mode: str) -> None:
    graph, gen, rev, crit = build(role, [rate_limit()] * 5, retries=0)
    result = run(graph, mode)
    assert_error_with_best_so_far(result, role, "RateLimitError")
    assert calls(role, gen, rev, crit) == (2 if role == "critic" else 1)


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("role", ["generator", "reviser"])
def test_empty_reply_is_retried_then_reported(role: str, mode: str) -> None:
    graph, gen, rev, crit = build(role, ["", "  "] * 3, retries=1)
    result = run(graph, mode)
    assert_error_with_best_so_far(result, role, "empty reply")
    assert calls(role, gen, rev, crit) == 2  # retries + 1 attempts, then a clear error


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("role", ["generator", "reviser"])
def test_empty_reply_once_then_text_succeeds(role: str, mode: str) -> None:
    graph, gen, rev, crit = build(role, [""], retries=1)
    result = run(graph, mode)
    assert result["stop_reason"] == "accepted" and result["error"] is None
    assert result["candidate"] == "revision 1"
    assert calls(role, gen, rev, crit) == 2


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_empty_or_unparsable_critique_follows_the_policy(mode: str) -> None:
    # feedback policy: the raw reply becomes feedback and the loop goes on to an accepted revision
    graph, _, rev, crit = build("critic", ["", "not json at all"], parse_retries=1)
    result = run(graph, mode)
    assert result["stop_reason"] == "accepted", result
    second = result["trajectory"][1]["critique"]
    assert second["parsed"] is False and second["is_acceptable"] is False
    assert "not json at all" in second["feedback"]
    assert "not json at all" in str(rev.received[-1][-1].content)  # the reviser saw what the critic said
    # raise policy: the run ends with a clear error and the best candidate so far
    strict, *_ = build("critic", ["", "still not json"], parse_retries=1, on_parse_error="raise")
    out = run(strict, mode)
    assert out["stop_reason"] == "error" and "unparsable critique" in out["error"]
    assert out["candidate"] == "draft 1"


# ------------------------------------------------------------------------------------------ transient faults


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("role", ROLES)
def test_rate_limit_is_retried_with_backoff_and_run_succeeds(role: str, mode: str) -> None:
    timed = Timed()
    good: Any = (
        critique(9, ok=True, issues=[])
        if role == "critic"
        else ("draft 1" if role == "generator" else "revision 1")
    )
    graph, gen, rev, crit = build(role, [timed(rate_limit())], retries=2)
    # the fault clears: the reply after the rate limit is the normal one (recorded to time the backoff)
    model = {"generator": gen, "reviser": rev, "critic": crit}[role]
    script = model.critiques if role == "critic" else model.replies  # type: ignore[attr-defined]
    index = script.index(next(s for s in script if callable(s)))
    script[index + 1] = timed(good)
    result = run(graph, mode)
    assert result["stop_reason"] == "accepted" and result["error"] is None, result
    assert result["candidate"] == "revision 1"
    assert len(timed.times) == 2
    assert timed.times[1] - timed.times[0] >= 0.25  # waited (exponential backoff) before retrying


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("role", ROLES)
def test_timeout_is_retried_and_run_succeeds_when_it_clears(role: str, mode: str) -> None:
    late: Any = critique(9, ok=True, issues=[]) if role == "critic" else "late"
    held = Held(late)
    graph, gen, rev, crit = build(role, [held], retries=1, timeout_s=TIMEOUT_S)
    result, awaited = run_then_release(graph, mode, held)
    assert held.started.is_set() and not awaited
    if mode == "sync":
        # a sync call cannot be cancelled: it is abandoned (daemon thread) and not retried beside itself
        assert result["stop_reason"] == "error" and f"timed out after {TIMEOUT_S:g}s" in result["error"], (
            result
        )
        assert calls(role, gen, rev, crit) == (2 if role == "critic" else 1)
        return
    assert result["stop_reason"] == "accepted" and result["error"] is None, result
    assert result["candidate"] == "revision 1"
    assert "late" not in [r["candidate"] for r in result["trajectory"]]  # the timed-out reply was discarded
    assert calls(role, gen, rev, crit) == (3 if role == "critic" else 2)


def test_transient_faults_never_exceed_the_call_budget() -> None:
    """A rate limit on every call: each role call is tried `retries + 1` times, and the run stops at the first role."""
    gen = RecordingChatModel(replies=[rate_limit()])
    crit = FakeCriticModel(critiques=[rate_limit()])
    result = create_reflection_graph(gen, critic=crit, retries=1, max_iterations=5).invoke({"task": "t"})
    assert result["stop_reason"] == "error" and "RateLimitError" in result["error"]
    assert len(gen.received) == 2 and crit.received == []


# ------------------------------------------------------------------------------------------ custom critics


class _ExplodingCritic(BaseCritic):
    name = "exploding"

    def critique(self, request: CritiqueRequest, config: Any = None) -> Critique:
        if request.iteration == 2:
            raise OSError("linter binary missing")
        return Critique(issues=["short"], suggestions=[], is_acceptable=False, score=3.0, feedback="longer")


class _NoneCritic(BaseCritic):
    name = "none"

    def critique(self, request: CritiqueRequest, config: Any = None) -> Critique:
        return None  # type: ignore[return-value]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_custom_critic_exception_is_reported(mode: str) -> None:
    gen = RecordingChatModel(replies=["draft 1", "draft 2"])
    result = run(create_reflection_graph(gen, critic=_ExplodingCritic(), max_iterations=3), mode)
    assert result["stop_reason"] == "error"
    assert "critique failed: OSError: linter binary missing" in result["error"]
    assert result["candidate"] == "draft 1" and len(result["trajectory"]) == 1


def test_custom_critic_returning_none_is_a_clear_error() -> None:
    gen = RecordingChatModel(replies=["draft 1"])
    result = create_reflection_graph(gen, critic=_NoneCritic()).invoke({"task": "t"})
    assert result["stop_reason"] == "error"
    assert "Critique" in result["error"] and "NoneType" in result["error"]


# ------------------------------------------------------------------------------------------ bad input, async path


@pytest.mark.parametrize(
    "state, needle",
    [
        ({"task": ""}, "'task' is empty"),
        ({"task": "   \n"}, "'task' is empty"),
        ({}, "'task' must be a string"),
        ({"task": None}, "'task' must be a string"),
        ({"task": "x" * 1_000_000}, "1,000,000 characters"),
        ({"task": "t", "candidate": ["a", "b"]}, "'candidate' must be a string"),
        ({"task": "t", "candidate": 3}, "json.dumps"),
        ({"task": "t", "context": {"k": 1}}, "'context' must be a string"),
    ],
)
def test_bad_input_async_names_the_problem(state: dict[str, Any], needle: str) -> None:
    gen = RecordingChatModel()
    crit = FakeCriticModel(critiques=[critique(1)])
    graph = create_reflection_graph(gen, critic=crit)
    with pytest.raises(ValueError, match=needle):
        asyncio.run(graph.ainvoke(state))
    assert gen.received == [] and crit.received == []  # rejected before any model call


def test_one_megabyte_task_is_rejected_fast_with_the_fix() -> None:
    gen, crit = RecordingChatModel(), FakeCriticModel(critiques=[critique(1)])
    graph = create_reflection_graph(gen, critic=crit)
    start = time.monotonic()
    with pytest.raises(ValueError, match="put long material in 'context'"):
        graph.invoke({"task": "word " * 200_000})
    assert gen.received == [] and crit.received == []  # refused before any model call
    # a generous bound for a loaded 2-core machine (it takes milliseconds): no check slower than linear in the task
    assert time.monotonic() - start < 20


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_should_refine_that_raises_is_reported_on_both_paths(mode: str) -> None:
    def broken(state: Any) -> bool:
        raise KeyError("score")

    gen = RecordingChatModel()
    crit = FakeCriticModel(critiques=[critique(3)])
    graph = create_reflection_graph(gen, critic=crit, should_refine=broken)
    result = run(graph, mode, {"task": "t", "candidate": "existing output"})
    assert result["stop_reason"] == "error"
    assert "should_refine raised KeyError" in result["error"] and "Fix the predicate" in result["error"]
    assert gen.received == [] and crit.received == []
    assert result["candidate"] == "existing output"


@pytest.mark.parametrize(
    "kwargs, needle",
    [
        ({"retries": -1}, "retries"),
        ({"timeout_s": 0}, "timeout_s"),
        ({"timeout_s": -5}, "timeout_s"),
        ({"history_window": -1}, "history_window"),
        ({"min_improvement": -0.1}, "min_improvement"),
        ({"max_iterations": True}, "max_iterations"),
        ({"max_iterations": 2.5}, "max_iterations"),
        ({"max_iterations": 1001}, "max_iterations"),
        ({"focus": "poetry"}, "focus"),
        ({"parse_retries": -1}, "parse_retries"),
        ({"memory": object()}, "memory"),
        ({"prompts": {"generate": 42}}, "prompt 'generate'"),
    ],
)
def test_more_bad_config_raises_at_build_time(kwargs: dict[str, Any], needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        create_reflection_graph(
            RecordingChatModel(), critic=FakeCriticModel(critiques=[critique(1)]), **kwargs
        )


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_bad_per_run_context_is_a_clear_error(mode: str) -> None:
    gen = RecordingChatModel()
    graph = create_reflection_graph(gen, critic=FakeCriticModel(critiques=[critique(1)]))
    with pytest.raises(ValueError, match="max_iterations must be >= 1"):
        run(graph, mode, context=Context(max_iterations=0))
    with pytest.raises(ValueError, match="score_threshold must be between 0 and 10"):
        run(graph, mode, context=Context(score_threshold=42))
    assert gen.received == []
