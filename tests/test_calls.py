"""The one retry layer (reflection_graph/_runtime/_calls.py): the call bound holds under every fault, refusals
fall back once and are remembered, concurrent runs share no mutable critic state, and timeouts leave nothing
running."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import time
from typing import Any
from unittest import mock

import httpx
import openai
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage
from langchain_core.runnables import Runnable, RunnableLambda

from reflection_graph import LLMCritic, create_reflection_graph, max_model_calls
from reflection_graph._runtime import _budget
from reflection_graph.critics import CritiqueRequest
from tests.fakes import FakeCriticModel, RecordingChatModel, WordCritic, WordModel, critique

ROOT = __import__("pathlib").Path(__file__).resolve().parent.parent


def rate_limit() -> openai.RateLimitError:
    request = httpx.Request("POST", "http://127.0.0.1:9/v1/chat/completions")
    return openai.RateLimitError("rate limited", response=httpx.Response(429, request=request), body=None)


def server_error_500() -> openai.InternalServerError:
    request = httpx.Request("POST", "http://127.0.0.1:9/v1/chat/completions")
    return openai.InternalServerError(
        "response_format json_schema is not supported",
        response=httpx.Response(500, request=request),
        body=None,
    )


no_backoff = mock.patch.multiple("reflection_graph._runtime._calls", BACKOFF_INITIAL_S=0.0, BACKOFF_MAX_S=0.0)

GEN_FAULTS = st.sampled_from(["ok", "empty", "transient"])
CRIT_FAULTS = st.sampled_from(["ok", "reject", "unparsable", "transient"])


def scripted(kinds: list[str], make: Any) -> Any:
    counter = {"n": 0}

    def reply(_: Any) -> Any:
        kind = kinds[counter["n"] % len(kinds)]
        counter["n"] += 1
        return make(kind, counter["n"])

    return reply


def gen_reply(kind: str, n: int) -> Any:
    return {"ok": f"draft {n}", "empty": "", "transient": rate_limit()}[kind]


def crit_reply(kind: str, n: int) -> Any:
    if kind == "transient":
        return rate_limit()
    if kind == "unparsable":
        return "no verdict here"
    return critique(9 if kind == "ok" else 2, ok=kind == "ok", issues=[] if kind == "ok" else [f"issue {n}"])


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(GEN_FAULTS, min_size=1, max_size=6),
    st.lists(CRIT_FAULTS, min_size=1, max_size=6),
    st.integers(1, 4),
    st.integers(0, 2),
    st.integers(0, 2),
    st.integers(1, 3),
    st.integers(1, 2),
    st.one_of(st.none(), st.integers(1, 1500)),
    st.sampled_from(["sync", "async"]),
)
def test_call_bound_and_token_budget_hold_under_any_fault_script(
    gen_kinds: list[str],
    crit_kinds: list[str],
    max_iterations: int,
    retries: int,
    parse_retries: int,
    n_drafts: int,
    n_revisions: int,
    token_budget: int | None,
    mode: str,
) -> None:
    """Calls stay within `max_model_calls`, usage counts every one, a run never reports more tokens than its
    budget (the fakes say exactly what a call can use), and it stops with `budget` exactly when a call was refused."""
    gen = WordModel(replies=[scripted(gen_kinds, gen_reply)])
    crit = WordCritic(critiques=[scripted(crit_kinds, crit_reply)])
    graph = create_reflection_graph(
        gen,
        critic=crit,
        max_iterations=max_iterations,
        retries=retries,
        parse_retries=parse_retries,
        n_drafts=n_drafts,
        n_revisions=n_revisions,
        patience=None,
        stop_on_no_new_issues=False,
        token_budget=token_budget,
    )
    refusals: list[str] = []
    rule = _budget.budget_refusal

    def spy(**kwargs: Any) -> str | None:
        why = rule(**kwargs)
        refusals.extend([why] if why else [])
        return why

    with no_backoff, mock.patch.object(_budget, "budget_refusal", spy):
        task = {"task": "t"}
        result = graph.invoke(task) if mode == "sync" else asyncio.run(graph.ainvoke(task))
    made = len(gen.received) + len(crit.received)
    bound = max_model_calls(
        max_iterations,
        retries=retries,
        parse_retries=parse_retries,
        n_drafts=n_drafts,
        n_revisions=n_revisions,
    )
    assert made <= bound, (made, bound, result["stop_reason"], result.get("error"))
    counted = result["usage"]["total"]["calls"]
    if mode == "sync":
        assert counted == made  # usage counts every call, retries included
    else:
        # Under ainvoke a run that stops (a budget refusal) cancels its sibling samples' calls; one cancelled after
        # the call layer counted it but before the fake model saw it is counted, never one the model saw and not.
        assert made <= counted <= bound, (made, counted, bound)
    assert result["usage"]["total"]["total_tokens"] <= (token_budget or 10**9)
    assert (result["stop_reason"] == "budget") == bool(refusals), (result["stop_reason"], refusals)


@pytest.mark.parametrize("iterations", [1, 3])
def test_call_bound_is_tight_with_retries_and_parse_retries(iterations: int) -> None:
    """Every generation needs its retry and every critique its retry and its parse retry: the bound is reached."""
    gen = RecordingChatModel(replies=[scripted(["transient", "ok"], gen_reply)])
    crit = FakeCriticModel(critiques=[scripted(["transient", "unparsable"], crit_reply)])
    graph = create_reflection_graph(
        gen,
        critic=crit,
        max_iterations=iterations,
        retries=1,
        parse_retries=1,
        patience=None,
        stop_on_no_new_issues=False,
    )
    with no_backoff:
        result = graph.invoke({"task": "t"})
    assert result["stop_reason"] == "max_iterations" and result["iterations"] == iterations
    made = len(gen.received) + len(crit.received)
    assert made == max_model_calls(iterations, retries=1, parse_retries=1) == 6 * iterations


def test_empty_replies_count_against_the_same_retry_budget() -> None:
    gen = RecordingChatModel(replies=[""])
    graph = create_reflection_graph(gen, critic=FakeCriticModel(critiques=[critique(9, ok=True)]), retries=2)
    with no_backoff:
        result = graph.invoke({"task": "t"})
    assert result["stop_reason"] == "error" and "empty reply (3 attempt(s))" in result["error"]
    assert len(gen.received) == 3  # 1 + retries, not (1 + retries) squared


class RefusingStructuredModel(FakeCriticModel):
    """Answers HTTP 500 to `json_schema` (as llama.cpp's server does) and parses `function_calling` replies."""

    methods: list[str] = []
    asked: list[tuple[str, str]] = []  # (method, the prompt's last message), per call

    def with_structured_output(
        self, schema: Any, *, include_raw: bool = False, **kwargs: Any
    ) -> Runnable[Any, Any]:  # type: ignore[override]
        method = kwargs.get("method", "json_schema")
        parse = super().with_structured_output(schema, include_raw=include_raw)

        def guard(messages: Any) -> Any:
            self.methods.append(method)
            self.asked.append((method, str(messages[-1].content)))
            if method == "json_schema":
                raise server_error_500()
            return messages

        return RunnableLambda(guard) | parse


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_json_schema_refusal_falls_back_to_function_calling_and_is_remembered(mode: str) -> None:
    model = RefusingStructuredModel(critiques=[critique(3, issues=["a"]), critique(9, ok=True, issues=[])])
    model.methods = []
    critic = LLMCritic(model)
    request = CritiqueRequest(task="t", candidate="c")
    for _ in range(2):
        verdict = critic.critique(request) if mode == "sync" else asyncio.run(critic.acritique(request))
        assert verdict.parsed
    # first call: auto (json_schema) refused with 500, then function_calling answered; second call: straight to it
    assert model.methods == ["json_schema", "function_calling", "function_calling"]
    assert critic._order[0] == "function_calling"


def test_critic_shared_by_64_concurrent_runs_keeps_each_runs_verdict() -> None:
    def judge(messages: Any) -> dict[str, Any]:
        text = str(messages[-1].content)
        number = int(text.split("answer number ")[1].split()[0])
        return critique(float(number % 11), ok=True, issues=[], feedback=f"judged {number}")

    model = RefusingStructuredModel(critiques=[judge])
    model.methods, model.asked = [], []
    critic = LLMCritic(model)
    graph = create_reflection_graph(lambda prompt: "ignored", critic=critic, max_iterations=1)
    inputs = [{"task": f"t{i}", "candidate": f"answer number {i} here"} for i in range(64)]

    async def run_all() -> list[dict[str, Any]]:
        return await graph.abatch(inputs, config={"max_concurrency": 64})

    results = asyncio.run(run_all())
    for i, result in enumerate(results):
        assert result["stop_reason"] == "accepted", result
        assert result["critique"]["feedback"] == f"judged {i}" and result["critique"]["score"] == float(
            i % 11
        )
    # each run: json_schema at most once (only the runs that asked before the first refusal was remembered), then
    # function_calling exactly once; at least the first run was refused
    per_run: dict[int, list[str]] = {}
    for method, prompt in model.asked:
        per_run.setdefault(int(prompt.split("answer number ")[1].split()[0]), []).append(method)
    assert sorted(per_run) == list(range(64))
    assert all(m in (["function_calling"], ["json_schema", "function_calling"]) for m in per_run.values()), (
        per_run
    )
    assert 1 <= model.methods.count("json_schema") and critic._order == ("function_calling", "text")
    # remembered for good: a later run goes straight to function_calling
    model.asked = []
    asyncio.run(graph.ainvoke({"task": "t", "candidate": "answer number 64 here"}))
    assert [method for method, _ in model.asked] == ["function_calling"]


def test_async_timeout_cancels_the_call() -> None:
    state = {"started": 0, "finished": 0, "cancelled": 0}

    class Sleepy(RecordingChatModel):
        async def _agenerate(
            self, messages: Any, stop: Any = None, run_manager: Any = None, **kw: Any
        ) -> Any:
            state["started"] += 1
            try:
                await asyncio.sleep(120)  # far longer than any bound below, whatever the machine's load
            except asyncio.CancelledError:
                state["cancelled"] += 1
                raise
            state["finished"] += 1
            return self._generate(messages)

    graph = create_reflection_graph(
        Sleepy(), critic=FakeCriticModel(critiques=[critique(9, ok=True)]), retries=1, timeout_s=0.2
    )
    start = time.monotonic()
    with no_backoff:
        result = asyncio.run(graph.ainvoke({"task": "t"}))
    assert time.monotonic() - start < 60  # the calls were cancelled, not waited out (120 s each)
    assert result["stop_reason"] == "error" and "timed out after 0.2s" in result["error"]
    assert state == {"started": 2, "finished": 0, "cancelled": 2}  # retried once, both attempts cancelled


def test_sync_timeout_does_not_keep_the_process_alive() -> None:
    """A model that sleeps 600 s under timeout_s=0.5: the run returns on time and the process exits at once.

    The bound is generous (importing the package alone took 15 s on a 2-core machine at load 28); what matters
    is that the process does not wait out the abandoned call."""
    script = textwrap.dedent(
        """
        import time
        from reflection_graph import create_reflection_graph
        def slow(prompt):
            time.sleep(600)
            return "late"
        graph = create_reflection_graph(slow, critic=lambda p: '{"is_acceptable": true, "score": 9}',
                                        timeout_s=0.5, retries=3)
        started = time.monotonic()  # CLOCK_MONOTONIC, the parent's clock too: imports (slow when loaded) not timed
        result = graph.invoke({"task": "t"})
        print(started, result["stop_reason"], result["usage"]["generate"]["calls"])
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, cwd=ROOT
    )
    exited = time.monotonic()
    assert proc.returncode == 0, proc.stderr
    started, *rest = proc.stdout.split()
    assert rest == ["error", "1"]  # a sync timeout is not retried beside the abandoned call
    elapsed = exited - float(started)
    assert elapsed < 120, (
        f"the process ended {elapsed:.1f}s after the run started (the abandoned call sleeps 600s)"
    )


def test_reply_text_ok_check_sees_message_text() -> None:
    from reflection_graph.loop._sample import _nonempty

    assert not _nonempty(AIMessage(content="  ")) and _nonempty(AIMessage(content="x"))
