"""The steps of the loop: `generate`, `critique` and `finalize`, each a pair of plain functions over shared steps.

A node function is `fn(step, state, config)`: `step` (a `Step`) is this run's settings and roles (the built ones
with the run's `Context` applied), the strategy, the trigger and the memory; `Node` (the one wrapper, the
`Runnable` LangGraph pairs a sync and an async body with) makes it for each call and runs the node inside the
step's budget (reflection_graph/_budget.py). The sync and async twins are a few lines each: the shared steps decide
the job, build the prompts (reflection_graph/_focus.py), apply the rules (reflection_graph/_rules.py), ask the
strategy (reflection_graph/strategies/) and shape the state updates; the twins only make the calls
(reflection_graph/_calls.py), either directly or awaited.

Who writes what:
- `generate` decides its job (`draft`, `revise` or `glean` a given candidate) and writes only `rg_pending`: the
  round's candidates, each with the usage of the call that made it. When no critique will follow (the trigger
  said no, the round limit is already reached, a model error, a strategy's last revision) it writes `stop_reason`.
- `critique` judges the pending candidates and writes the round (`trajectory`), `iterations`, and `stop_reason`
  only when a rule stops the loop. With nothing pending for this round (generate stopped) it passes.
- `finalize` alone builds the outputs: it picks the answer (`select`), reports the critique, the stop reason and
  the usage totals (summed once, here, from the rounds).
The edges after `critique` (and any node there, such as the tree's `select`) are the strategy's.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import difflib
import warnings
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langchain_core.runnables import Runnable, RunnableConfig, ensure_config
from langgraph.runtime import get_runtime

from reflection_graph import _budget, _focus, _rules
from reflection_graph._budget import BudgetExhausted, current_budget
from reflection_graph._calls import acall, call, sampled
from reflection_graph._input import validate_input
from reflection_graph._judge import Judged, ajudge, critique_history, judge
from reflection_graph._overrides import Overrides, Roles
from reflection_graph._usage import Meter, RoleUsage, merge_usage, metering, run_usage, sum_usage, with_total
from reflection_graph.context import Context
from reflection_graph.critics.base import CritiqueRequest
from reflection_graph.settings import Settings
from reflection_graph.state import Job, Pending, Round
from reflection_graph.strategies import Strategy

__all__ = ["Node", "Setup", "Step", "make_nodes"]

_ROLE: dict[Job, str] = {"draft": "generate", "revise": "revise", "glean": "generate"}
"""The usage role of each job (drafts are reported under `generate`, as the output schema documents)."""


@dataclass
class Setup:
    """What the graph was built with: the settings and roles (`overrides`), the strategy, trigger and memory."""

    overrides: Overrides
    strategy: Strategy
    should_refine: Callable[[Mapping[str, Any]], bool] | None = None
    memory: Any = None

    def step(self, runtime: Any) -> Step:
        """What a node of this run works with: the built settings and roles with the run's `Context` applied."""
        settings, roles = self.overrides.for_run(runtime.context)
        store = getattr(self.memory, "store", None) or runtime.store
        return Step(settings, roles, self.strategy, self.should_refine, self.memory, store)


@dataclass(frozen=True)
class Step:
    """This run's settings and roles, the strategy, the trigger, the memory and the store it uses."""

    settings: Settings
    roles: Roles
    strategy: Strategy
    should_refine: Callable[[Mapping[str, Any]], bool] | None
    memory: Any
    store: Any


NodeFn = Callable[[Step, Any, RunnableConfig], dict[str, Any]]
AsyncNodeFn = Callable[[Step, Any, RunnableConfig], Awaitable[dict[str, Any]]]


class Node(Runnable[Any, Any]):
    """A graph node with a sync and an async body, each a plain function `fn(step, state, config)`, run inside
    the step's budget.

    LangGraph pairs a sync and an async body only for a `Runnable` (a plain sync function runs under `ainvoke` in a
    worker thread, which would serialize the async critiques); `runtime` is read with `get_runtime`. Measured with
    the CPU clock on the bench's 3-round run (25 x 10 runs, interleaved): this pairing costs the same as LangGraph's
    own plain-function node (0.98x), `RunnableLambda(func, afunc=...)` 1.32x (it opens a traced child run per call).
    """

    def __init__(self, name: str, setup: Setup, func: NodeFn, afunc: AsyncNodeFn) -> None:
        self.name = name
        self._setup = setup
        self._func = func
        self._afunc = afunc

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        step = self._setup.step(get_runtime(Context))
        with _budget.step_budget(step.settings, input) as settle:
            return settle(self._func(step, input, ensure_config(config)))

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        step = self._setup.step(get_runtime(Context))
        with _budget.step_budget(step.settings, input) as settle:
            return settle(await self._afunc(step, input, ensure_config(config)))


def make_nodes(setup: Setup) -> dict[str, Node]:
    """The nodes bound to `setup`, by name."""
    pairs: dict[str, tuple[NodeFn, AsyncNodeFn]] = {
        "generate": (generate, agenerate),
        "critique": (critique, acritique),
        "finalize": (finalize, afinalize),
    }
    return {name: Node(name, setup, func, afunc) for name, (func, afunc) in pairs.items()}


# ------------------------------------------------------------------------------------------------ helpers


def _text(message: Any) -> str:
    """A model reply's text (content blocks joined by `BaseMessage.text`), stripped."""
    return (message.text if isinstance(message, BaseMessage) else str(message)).strip()


def _nonempty(message: Any) -> bool:
    return bool(_text(message))


def _diff(previous: str | None, current: str) -> str:
    if previous is None:
        return ""
    lines = difflib.unified_diff(
        previous.splitlines(), current.splitlines(), "previous", "current", lineterm="", n=1
    )
    return "\n".join(lines)


def _trigger(step: Step, state: Mapping[str, Any]) -> dict[str, Any] | None:
    """`should_refine` before a round: False stops with `not_triggered`, an exception with `error`."""
    if step.should_refine is None:
        return None
    rounds = state.get("trajectory") or []
    if rounds:  # the predicate sees the latest round as `candidate` and `critique`
        state = {**state, "candidate": rounds[-1]["candidate"], "critique": rounds[-1]["critique"]}
    try:
        go = step.should_refine(state)
    except Exception as exc:  # reported, never skipped
        return {
            "stop_reason": "error",
            "error": f"should_refine raised {type(exc).__name__}: {exc}. Fix the predicate; it gets the state.",
        }
    return None if go else {"stop_reason": "not_triggered"}


def _over_limit(step: Step, state: Mapping[str, Any]) -> dict[str, Any] | None:
    """Stop before a round when this run's `max_iterations` is already reached (a resumed run may lower it),
    unless the strategy returns that round's revision without a critique."""
    settings, done = step.settings, int(state.get("iterations") or 0)
    if done < settings.max_iterations or step.strategy.last_revision(settings, done + 1):
        return None
    if done > settings.max_iterations:
        warnings.warn(
            f"the stored run already ran {done} rounds, past max_iterations={settings.max_iterations}: "
            "it stops here without another round",
            stacklevel=2,
        )
    return {"stop_reason": "max_iterations"}


# ------------------------------------------------------------------------------------------------ generate


@dataclass
class _Plan:
    """What `generate` does this step: its job, and the `count` replies to sample for it."""

    job: Job
    iteration: int
    model: BaseChatModel
    messages: list[BaseMessage]
    count: int
    settings: Settings
    finish: Callable[[str], str]
    prompts: tuple[str, ...]
    """What a candidate must not echo (the task and the system messages; none for code)."""
    last: bool = False
    """The strategy returns this revision without a critique."""
    feedback_used: bool = False
    """A reviewer's words went into this revision (and are cleared once used)."""


def _start(step: Step, state: Mapping[str, Any]) -> dict[str, Any] | Job:
    """The job of this `generate` step, or the update that stops (or, for a given candidate, gleans) instead."""
    validate_input(state)
    if state.get("stop_reason") is not None:
        return {}
    over = _over_limit(step, state)
    if over is not None:
        return over
    if state.get("trajectory"):
        return _trigger(step, state) or "revise"
    if state.get("candidate"):
        stop = _trigger(step, state)
        if stop is not None:
            return stop
        sample = {"candidate": state["candidate"], "usage": {}, "echo": False}
        return {"rg_pending": Pending(iteration=1, job="glean", samples=[sample])}
    return "draft"


def _recalls(step: Step, job: Job) -> bool:
    """A draft reads the lessons of earlier similar tasks when memory is on."""
    return job == "draft" and step.memory is not None


def _plan(step: Step, state: Mapping[str, Any], job: Job, lessons: Any) -> _Plan:
    """The messages, model and sample count of this `generate` step (`lessons`: what memory recalled)."""
    settings, roles = step.settings, step.roles
    iteration = int(state.get("iterations") or 0) + 1
    if job == "draft":
        text = str(step.memory.format_lessons(lessons)) if lessons else ""
        messages = _focus.draft(settings, state, text, roles.generator)
        model, count = roles.generator, settings.n_drafts
    else:
        previous, critique = step.strategy.revise_from(state)
        if state.get("rg_feedback"):
            critique["feedback"] = f"{critique.get('feedback', '')}\nReviewer: {state['rg_feedback']}".strip()
        rounds: list[Round] = list(state.get("trajectory") or [])
        history = _rules.bounded(rounds[:-1], settings.history_window)
        messages = _focus.revision(settings, state, previous, critique, history, roles.reviser)
        model, count = roles.reviser, settings.n_revisions
    assert model is not None
    budget = current_budget()
    if (
        budget is not None
    ):  # samples the token budget cannot cover are not started; they leave half for critiques
        count = budget.affordable(model, messages, count)
        budget.split(2 * count)
    return _Plan(
        job,
        iteration,
        model,
        messages,
        count,
        settings,
        _focus.finisher(settings, state, _ROLE[job]),
        _focus.echo_sources(settings, state),
        last=job == "revise" and step.strategy.last_revision(settings, iteration),
        feedback_used=job == "revise" and bool(state.get("rg_feedback")),
    )


_Sampled = tuple[str | None, RoleUsage, BaseException | None]


def _generated(plan: _Plan, results: Sequence[_Sampled]) -> dict[str, Any]:
    """The state update of `generate` from its samples (text, usage, error): the pending candidates."""
    role = _ROLE[plan.job]
    samples: list[dict[str, Any]] = [
        {"candidate": plan.finish(text), "usage": {role: part}}
        for text, part, _ in results
        if text  # an empty reply was retried by the call layer; one still empty is dropped
    ]
    if not samples:
        usage = {role: sum_usage([part for _, part, _ in results])}
        error = next((e for _, _, e in results if e is not None and not isinstance(e, BudgetExhausted)), None)
        if error is None and any(isinstance(e, BudgetExhausted) for _, _, e in results):
            return {"stop_reason": "budget", "rg_spent": usage}  # the step's budget says why
        detail = f"{type(error).__name__}: {error}" if error else "every sample was empty"
        return {"stop_reason": "error", "error": f"{role} failed: {detail}", "rg_spent": usage}
    for sample in samples:
        sample["echo"] = _rules.echoes(sample["candidate"], plan.prompts)
    lost = [part for text, part, _ in results if not text]  # failed samples' calls count too
    if lost:
        samples[0]["usage"] = {role: sum_usage([samples[0]["usage"][role], *lost])}
    update: dict[str, Any] = {"rg_pending": Pending(iteration=plan.iteration, job=plan.job, samples=samples)}
    if plan.last:
        update["stop_reason"] = "max_iterations"  # the strategy returns this revision without a critique
    if plan.feedback_used:
        update["rg_feedback"] = None
    return update


def _limits(settings: Settings) -> dict[str, Any]:
    return {"retries": settings.retries, "timeout_s": settings.timeout_s, "ok": _nonempty}


def _sample(plan: _Plan, config: RunnableConfig, index: int) -> _Sampled:
    with metering() as meter:
        try:
            model = sampled(plan.model, index, greedy=plan.job == "draft")
            reply = call(model, plan.messages, config, **_limits(plan.settings))
            return _text(reply), meter.usage, None
        except Exception as exc:
            return None, meter.usage, exc


async def _asample(plan: _Plan, config: RunnableConfig, index: int) -> _Sampled:
    with metering() as meter:
        try:
            model = sampled(plan.model, index, greedy=plan.job == "draft")
            reply = await acall(model, plan.messages, config, **_limits(plan.settings))
            return _text(reply), meter.usage, None
        except Exception as exc:
            return None, meter.usage, exc


def generate(step: Step, state: Mapping[str, Any], config: RunnableConfig) -> dict[str, Any]:
    """Draft `n_drafts` (or revise into `n_revisions`) candidates; the critique node judges them."""
    if isinstance(job := _start(step, state), dict):
        return job
    found = step.memory.search(state["task"], store=step.store) if _recalls(step, job) else None
    plan = _plan(step, state, job, found)
    if plan.count == 1:
        return _generated(plan, [_sample(plan, config, 0)])
    with concurrent.futures.ThreadPoolExecutor(max_workers=plan.count) as pool:  # each sample sees the budget
        runs = [
            pool.submit(contextvars.copy_context().run, _sample, plan, config, i) for i in range(plan.count)
        ]
        return _generated(plan, [run.result() for run in runs])


async def agenerate(step: Step, state: Mapping[str, Any], config: RunnableConfig) -> dict[str, Any]:
    """Async twin of `generate`: the samples run concurrently."""
    if isinstance(job := _start(step, state), dict):
        return job
    found = await step.memory.asearch(state["task"], store=step.store) if _recalls(step, job) else None
    plan = _plan(step, state, job, found)
    return _generated(plan, await asyncio.gather(*(_asample(plan, config, i) for i in range(plan.count))))


# ------------------------------------------------------------------------------------------------ critique


def _request(state: Mapping[str, Any], settings: Settings, candidate: str) -> CritiqueRequest:
    return CritiqueRequest(
        task=state["task"],
        candidate=candidate,
        context=state.get("context"),
        iteration=int(state.get("iterations") or 0) + 1,
        score_threshold=settings.score_threshold,
        history=critique_history(list(state.get("trajectory") or []), settings.history_window),
    )


def _to_judge(step: Step, state: Mapping[str, Any]) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """The candidates pending for this round, or the update when there is nothing to judge (generate stopped,
    or this run's round limit is already reached)."""
    pending = state.get("rg_pending")
    iteration = int(state.get("iterations") or 0) + 1
    if state.get("stop_reason") is not None or not pending or pending["iteration"] != iteration:
        return [], {}
    over = _over_limit(step, state)
    if over is not None:
        return [], over
    budget = current_budget()
    if budget is not None:  # the critiques share what the token budget has left
        budget.split(len(pending["samples"]))
    return pending["samples"], None


def _judged_sample(settings: Settings, sample: Mapping[str, Any], verdict: Judged) -> dict[str, Any]:
    """A judged candidate: its score, verdict, critique, echo flag and the usage of its calls."""
    critique, part, _ = verdict
    assert critique is not None
    return {
        "candidate": sample["candidate"],
        "score": critique.score,
        "accepted": _rules.accepts(critique.score, critique.is_acceptable, settings.score_threshold),
        "critique": critique.model_dump(),
        "echo": sample.get("echo", False),
        "usage": with_total({**sample.get("usage", {}), "critique": part}),
    }


def _critiqued(
    step: Step,
    state: Mapping[str, Any],
    judged: Sequence[tuple[dict[str, Any], Judged]],
    cancelled: Sequence[RoleUsage] = (),
) -> dict[str, Any]:
    """The state update of `critique`: one trajectory round holding the best sample (and all samples).

    Samples whose critique the budget refused, or that were cancelled, are left out of the round; the usage of
    their calls is kept."""
    spent = {"critique": sum_usage([*(part for _, (_, part, _) in judged), *cancelled])}
    failed = next(
        (e for _, (_, _, e) in judged if e is not None and not isinstance(e, BudgetExhausted)), None
    )
    if failed is not None:
        message = f"critique failed: {type(failed).__name__}: {failed}"
        return {"stop_reason": "error", "error": message, "rg_spent": spent}
    refused = [*(part for _, (_, part, e) in judged if e is not None), *cancelled]
    judged = [(sample, verdict) for sample, verdict in judged if verdict[2] is None]
    if not judged:
        return {"stop_reason": "budget", "rg_spent": spent}  # the step's budget says why
    settings, trajectory = step.settings, list(state.get("trajectory") or [])
    iteration = int(state.get("iterations") or 0) + 1
    samples = [_judged_sample(settings, sample, verdict) for sample, verdict in judged]
    chosen = samples[_rules.best_sample(samples)]
    seen = [id(sample) for sample, _ in judged]
    unjudged = [s.get("usage") or {} for s in state["rg_pending"]["samples"] if id(s) not in seen]
    record: Round = {
        "iteration": iteration,
        "candidate": chosen["candidate"],
        "critique": chosen["critique"],
        "score": chosen["score"],
        "accepted": chosen["accepted"],
        "diff": _diff(trajectory[-1]["candidate"] if trajectory else None, chosen["candidate"]),
        "usage": merge_usage(
            [*(s["usage"] for s in samples), *unjudged, *({"critique": r} for r in refused)]
        ),
        "job": state["rg_pending"]["job"],
        "echo": chosen["echo"],
    }
    if len(samples) > 1:
        record["samples"] = samples
    update: dict[str, Any] = {"trajectory": [record], "iterations": iteration}
    stop = _rules.stop_reason(
        settings, trajectory, iteration, chosen["critique"], chosen["accepted"], step.strategy.stop_rules
    )
    if stop is not None:
        update["stop_reason"] = stop
    return update


def _ends_search(settings: Settings, verdict: Judged) -> bool:
    """A failed critique ends this round's search, and so does (with a threshold) a passing sample; a critique
    the budget refused does not (the others already admitted finish)."""
    critique, _, error = verdict
    if error is not None:
        return not isinstance(error, BudgetExhausted)
    return (
        critique is not None
        and settings.score_threshold is not None
        and critique.score >= settings.score_threshold
    )


def critique(step: Step, state: Mapping[str, Any], config: RunnableConfig) -> dict[str, Any]:
    """Judge the pending candidates one after another (stopping at the first that passes a set threshold)."""
    pending, skip = _to_judge(step, state)
    if skip is not None:
        return skip
    judged: list[tuple[dict[str, Any], Judged]] = []
    for sample in pending:
        verdict = judge(step.roles.critic, _request(state, step.settings, sample["candidate"]), config)
        judged.append((sample, verdict))
        if _ends_search(step.settings, verdict):
            break
    return _critiqued(step, state, judged)


async def acritique(step: Step, state: Mapping[str, Any], config: RunnableConfig) -> dict[str, Any]:
    """Async twin of `critique`: the candidates are judged concurrently; once one passes a set threshold (or
    fails), the critiques still running are cancelled, and awaited, so that no critic's work outlives the node
    (a test critic's processes and directories are gone when the node returns or is cancelled)."""
    pending, skip = _to_judge(step, state)
    if skip is not None:
        return skip
    meters = [Meter() for _ in pending]

    async def one(index: int) -> tuple[int, Judged]:
        request = _request(state, step.settings, pending[index]["candidate"])
        return index, await ajudge(step.roles.critic, request, config, meters[index])

    tasks = [asyncio.ensure_future(one(i)) for i in range(len(pending))]
    done: dict[int, Judged] = {}
    try:
        for finished in asyncio.as_completed(tasks):
            index, verdict = await finished
            done[index] = verdict
            if _ends_search(step.settings, verdict):
                break
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    cancelled = [m.usage for i, m in enumerate(meters) if i not in done]
    return _critiqued(step, state, [(pending[i], done[i]) for i in sorted(done)], cancelled)


# ------------------------------------------------------------------------------------------------ finalize


def _lessons_to_save(step: Step, state: Mapping[str, Any]) -> list[str]:
    """This run's lessons for the Reflexion memory (none without memory or rounds)."""
    if step.memory is None or not state.get("trajectory"):
        return []
    critiques = [r["critique"] for r in state.get("trajectory") or [] if r["critique"]]
    return list(step.memory.lessons_from_critiques(state["task"], critiques))


def _outputs(step: Step, state: Mapping[str, Any], failure: BaseException | None) -> dict[str, Any]:
    """The graph's outputs: the answer (`select`), its critique, the stop reason, the rounds and the usage."""
    trajectory: list[Round] = list(state.get("trajectory") or [])
    memory_error = f"memory save failed: {type(failure).__name__}: {failure}" if failure else None
    error = "; ".join(e for e in (state.get("error"), memory_error) if e) or None
    update: dict[str, Any] = {
        "stop_reason": state.get("stop_reason") or "max_iterations",
        "error": error,
        "iterations": int(state.get("iterations") or 0),
        "usage": run_usage(state),
    }
    pending = state.get("rg_pending")
    unjudged = (
        pending is not None and pending["iteration"] > update["iterations"] and pending["job"] == "revise"
    )
    if pending is not None and unjudged and step.strategy.last_revision(step.settings, pending["iteration"]):
        update["candidate"] = pending["samples"][0]["candidate"]  # a last revision, returned unjudged
        update["critique"] = trajectory[-1]["critique"] if trajectory else None
    elif trajectory:
        chosen = _rules.select_round(trajectory, step.settings.select)
        update["candidate"], update["critique"] = chosen["candidate"], chosen["critique"]
    elif pending is not None and pending["samples"]:  # a first critique failed: the best unjudged candidate
        samples = pending["samples"]
        update["candidate"] = samples[_rules.best_sample(samples)]["candidate"]
        update["critique"] = None
    else:
        update["candidate"], update["critique"] = state.get("candidate") or "", None
    if "trajectory" not in state:
        update["trajectory"] = []
    return update


def finalize(step: Step, state: Mapping[str, Any], config: RunnableConfig) -> dict[str, Any]:
    """Save this run's lessons (when memory is on) and build the outputs."""
    lessons = _lessons_to_save(step, state)
    failure: Exception | None = None
    try:
        if lessons:
            step.memory.save(state["task"], lessons, store=step.store)
    except Exception as exc:  # never lose the run's answer for a lesson
        failure = exc
    return _outputs(step, state, failure)


async def afinalize(step: Step, state: Mapping[str, Any], config: RunnableConfig) -> dict[str, Any]:
    """Async twin of `finalize`."""
    lessons = _lessons_to_save(step, state)
    saving = [step.memory.asave(state["task"], lessons, store=step.store)] if lessons else []
    results = await asyncio.gather(*saving, return_exceptions=True)
    return _outputs(step, state, next((r for r in results if isinstance(r, Exception)), None))
