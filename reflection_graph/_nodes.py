"""The steps of the loop: `generate`, `critique`, `review`, `finalize`, and the router after `critique`.

Each node is a pair of plain functions `fn(state, runtime, config)` (sync) and `afn(...)` (async), made by
`make_nodes(setup)`: `runtime.context` (a `Context`) carries this run's overrides, `runtime.store` the graph's
store. The twins are a few lines each around shared steps: the steps decide the job, build the prompts
(reflection_graph/prompts.py), apply the rules (reflection_graph/_rules.py) and shape the state updates; the twins
only make the calls (reflection_graph/_calls.py), either directly or awaited.

Who writes what:
- `generate` decides its job (`draft`, `revise` or `glean` a given candidate) and writes only `rg_pending`: the
  round's candidates, each with the usage of the call that made it. When no critique will follow (the trigger
  said no, the round limit is already reached, a model error, Self-Refine's last refine) it writes `stop_reason`.
- `critique` judges the pending candidates and writes the round (`trajectory`), `iterations`, and `stop_reason`
  only when a rule stops the loop. With nothing pending for this round (generate stopped) it passes.
- `finalize` alone builds the outputs: it picks the answer (`select`), reports the critique, the stop reason and
  the usage totals (summed once, here, from the rounds).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import difflib
import warnings
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime
from langgraph.types import interrupt

from reflection_graph import _budget, _rules
from reflection_graph._budget import BudgetExhausted, current_budget
from reflection_graph._calls import acall, call, sampled
from reflection_graph._code import chat_prompted, code_messages, finish_candidate
from reflection_graph._extract import well_formed
from reflection_graph._judge import Judged, ajudge, judge
from reflection_graph._overrides import Overrides, Roles
from reflection_graph._usage import Meter, RoleUsage, add_role_usage, metering, run_usage, sum_usage
from reflection_graph.context import Context
from reflection_graph.critics.base import CritiqueRequest
from reflection_graph.prompts import (
    CRITIQUE_SYSTEM,
    GENERATE_SYSTEM,
    HISTORY_CHARS,
    REVISE_SYSTEM,
    draft_messages,
    revise_messages,
)
from reflection_graph.settings import Settings
from reflection_graph.state import Job, Pending, ReflectionState, Round, RouteReads

__all__ = ["MAX_TASK_CHARS", "Setup", "after_critique", "make_nodes", "review"]

MAX_TASK_CHARS = 200_000
_ROLE: dict[Job, str] = {"draft": "generate", "revise": "revise", "glean": "generate"}
"""The usage role of each job (drafts are reported under `generate`, as the output schema documents)."""

NodeFn = Callable[[ReflectionState, Runtime[Context], RunnableConfig], dict[str, Any]]
AsyncNodeFn = Callable[[ReflectionState, Runtime[Context], RunnableConfig], Awaitable[dict[str, Any]]]


@dataclass
class Setup:
    """What the nodes close over: the built settings and roles (`overrides`), the trigger and the memory."""

    overrides: Overrides
    should_refine: Callable[[Mapping[str, Any]], bool] | None = None
    memory: Any = None

    @property
    def settings(self) -> Settings:
        return self.overrides.settings

    def for_run(self, runtime: Runtime[Context]) -> tuple[Settings, Roles]:
        """This run's settings and roles: the built ones with the run's `Context` overrides applied."""
        return self.overrides.for_run(runtime.context)

    def memory_store(self, runtime: Runtime[Context]) -> Any:
        return getattr(self.memory, "store", None) or runtime.store


# ------------------------------------------------------------------------------------------------ helpers


def validate_input(state: Mapping[str, Any]) -> None:
    """Reject a bad input before any model call, saying what to pass instead."""
    task = state.get("task")
    if not isinstance(task, str):
        raise ValueError(f"'task' must be a string describing what to produce, got {type(task).__name__}")
    if not task.strip():
        raise ValueError(
            "'task' is empty: give the graph a task such as {'task': 'Write a haiku about rain'}"
        )
    if len(task) > MAX_TASK_CHARS:
        raise ValueError(
            f"'task' is {len(task):,} characters, over the {MAX_TASK_CHARS:,} limit: put long material in "
            "'context' or shorten it"
        )
    for key, hint in (("candidate", "serialize it first, e.g. json.dumps(value)"), ("context", "")):
        value = state.get(key)
        if value is not None and not isinstance(value, str):
            raise ValueError(
                f"'{key}' must be a string, got {type(value).__name__}{'; ' + hint if hint else ''}"
            )
    for key in ("task", "candidate", "context"):  # text no model or HTTP client can send: a lone surrogate
        try:
            (state.get(key) or "").encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ValueError(
                f"'{key}' has a character with no UTF-8 form at position {exc.start} "
                f"(U+{ord(exc.object[exc.start]):04X}, a lone surrogate); pass valid Unicode text"
            ) from None


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


def _trigger(setup: Setup, state: Mapping[str, Any]) -> dict[str, Any] | None:
    """`should_refine` before a round: False stops with `not_triggered`, an exception with `error`."""
    if setup.should_refine is None:
        return None
    rounds = state.get("trajectory") or []
    if rounds:  # the predicate sees the latest round as `candidate` and `critique`
        state = {**state, "candidate": rounds[-1]["candidate"], "critique": rounds[-1]["critique"]}
    try:
        go = setup.should_refine(state)
    except Exception as exc:  # reported, never skipped
        return {
            "stop_reason": "error",
            "error": f"should_refine raised {type(exc).__name__}: {exc}. Fix the predicate; it gets the state.",
        }
    return None if go else {"stop_reason": "not_triggered"}


def _over_limit(settings: Settings, state: Mapping[str, Any]) -> dict[str, Any] | None:
    """Stop before a round when this run's `max_iterations` is already reached (a resumed run may lower it)."""
    done = int(state.get("iterations") or 0)
    if done < settings.max_iterations or settings.strategy == "self_refine":
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
    feedback_used: bool = False
    """A reviewer's words went into this revision (and are cleared once used)."""
    """Self-Refine's one refine: no critique follows."""


def _start(setup: Setup, state: Mapping[str, Any], runtime: Runtime[Context]) -> dict[str, Any] | Job:
    """The job of this `generate` step, or the update that stops (or, for a given candidate, gleans) instead."""
    validate_input(state)
    if state.get("stop_reason") is not None:
        return {}
    settings, _ = setup.for_run(runtime)
    over = _over_limit(settings, state)
    if over is not None:
        return over
    if state.get("trajectory"):
        return _trigger(setup, state) or "revise"
    if state.get("candidate"):
        stop = _trigger(setup, state)
        if stop is not None:
            return stop
        sample = {"candidate": state["candidate"], "usage": {}, "echo": False}
        return {"rg_pending": Pending(iteration=1, job="glean", samples=[sample])}
    return "draft"


def _plan(setup: Setup, state: Mapping[str, Any], runtime: Runtime[Context], job: Job, lessons: str) -> _Plan:
    settings, roles = setup.for_run(runtime)
    iteration = int(state.get("iterations") or 0) + 1
    code = settings.focus == "code"
    prompts = () if code else (state["task"], GENERATE_SYSTEM, REVISE_SYSTEM, CRITIQUE_SYSTEM)
    role = _ROLE[job]
    if job == "draft":
        messages = _code_messages(settings, role, state, None, None, roles.generator) or draft_messages(
            state["task"],
            state.get("context"),
            lessons,
            focus=settings.focus,
            template=settings.prompts.get("generate"),
        )
        model, count = roles.generator, settings.n_drafts
    else:
        rounds: list[Round] = list(state.get("trajectory") or [])
        previous, critique = rounds[-1]["candidate"], dict(rounds[-1]["critique"] or {})
        target = state.get("rg_target") if settings.strategy == "tree" else None
        if target:  # the tree search picked the candidate to expand (reflection_graph/_tree.py)
            previous, critique = target["candidate"], dict(target.get("critique") or {})
        if state.get("rg_feedback"):
            critique["feedback"] = f"{critique.get('feedback', '')}\nReviewer: {state['rg_feedback']}".strip()
        history = _rules.bounded(rounds[:-1], settings.history_window)
        messages = _code_messages(
            settings, role, state, previous, critique, roles.reviser
        ) or revise_messages(
            state["task"],
            state.get("context"),
            previous,
            critique,
            history,
            focus=settings.focus,
            preserve_correct=settings.preserve_correct,
            template=settings.prompts.get("revise"),
        )
        model, count = roles.reviser, settings.n_revisions
    assert model is not None
    budget = current_budget()
    if budget is not None:  # samples the token budget cannot cover are not started
        count = budget.affordable(model, messages, count)
    last = job == "revise" and settings.strategy == "self_refine"
    finish = _finisher(settings, state, role)
    used = job == "revise" and bool(state.get("rg_feedback"))
    return _Plan(job, iteration, model, messages, count, settings, finish, prompts, last, used)


def _code_messages(
    settings: Settings,
    role: str,
    state: Mapping[str, Any],
    candidate: str | None,
    critique: Any,
    model: Any,
) -> list[BaseMessage] | None:
    """Code prompts when the focus is code, the task holds a stub and no prompt is overridden: chat-style for a
    model prompted through its chat template, else completion-style (`code_messages`)."""
    if settings.focus != "code" or settings.prompts.get(role) is not None:
        return None
    task, context = state["task"], state.get("context")
    return code_messages(task, context, candidate=candidate, critique=critique, chat=chat_prompted(model))


def _finisher(settings: Settings, state: Mapping[str, Any], role: str) -> Callable[[str], str]:
    """Code focus: a stub's continuation becomes the full function, and fences are balanced (the default prompts
    open a ```python fence the reply does not repeat). An overridden prompt's replies only get their fences
    balanced. Other focuses keep the reply as it is."""
    if settings.focus != "code":
        return lambda text: text
    if settings.prompts.get(role) is not None:
        return lambda text: well_formed(text) or text
    task = state["task"]
    return lambda text: finish_candidate(task, text) or text


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
        update["stop_reason"] = "max_iterations"  # Self-Refine returns its one refine without a critique
    if plan.feedback_used:
        update["rg_feedback"] = None
    return update


def _sample_sync(plan: _Plan, config: RunnableConfig, index: int) -> _Sampled:
    with metering() as meter:
        try:
            model = sampled(plan.model, index, greedy=plan.job == "draft")
            reply = call(model, plan.messages, config, **_limits(plan.settings))
            return _text(reply), meter.usage, None
        except Exception as exc:
            return None, meter.usage, exc


async def _sample_async(plan: _Plan, config: RunnableConfig, index: int) -> _Sampled:
    with metering() as meter:
        try:
            model = sampled(plan.model, index, greedy=plan.job == "draft")
            reply = await acall(model, plan.messages, config, **_limits(plan.settings))
            return _text(reply), meter.usage, None
        except Exception as exc:
            return None, meter.usage, exc


def _limits(settings: Settings) -> dict[str, Any]:
    return {"retries": settings.retries, "timeout_s": settings.timeout_s, "ok": _nonempty}


def _lessons_text(setup: Setup, lessons: Any) -> str:
    return str(setup.memory.format_lessons(lessons)) if lessons else ""


def _recalls(setup: Setup, job: Job) -> bool:
    """A draft reads the lessons of earlier similar tasks when memory is on."""
    return job == "draft" and setup.memory is not None


def _generate(
    setup: Setup, state: ReflectionState, runtime: Runtime[Context], config: RunnableConfig
) -> dict[str, Any]:
    """Draft `n_drafts` (or revise into `n_revisions`) candidates; the critique node judges them."""
    job = _start(setup, state, runtime)
    if isinstance(job, dict):
        return job
    store = setup.memory_store(runtime)
    found = setup.memory.search(state["task"], store=store) if _recalls(setup, job) else None
    plan = _plan(setup, state, runtime, job, _lessons_text(setup, found))
    if plan.count == 1:
        return _generated(plan, [_sample_sync(plan, config, 0)])
    with concurrent.futures.ThreadPoolExecutor(max_workers=plan.count) as pool:  # each sample sees the budget
        runs = [
            pool.submit(contextvars.copy_context().run, _sample_sync, plan, config, i)
            for i in range(plan.count)
        ]
        return _generated(plan, [run.result() for run in runs])


async def _agenerate(
    setup: Setup, state: ReflectionState, runtime: Runtime[Context], config: RunnableConfig
) -> dict[str, Any]:
    """Async twin of `_generate`: the samples run concurrently."""
    if isinstance(job := _start(setup, state, runtime), dict):
        return job
    found = None
    if _recalls(setup, job):
        found = await setup.memory.asearch(state["task"], store=setup.memory_store(runtime))
    plan = _plan(setup, state, runtime, job, _lessons_text(setup, found))
    samples = await asyncio.gather(*(_sample_async(plan, config, i) for i in range(plan.count)))
    return _generated(plan, samples)


# ------------------------------------------------------------------------------------------------ critique


def _request(state: Mapping[str, Any], settings: Settings, candidate: str) -> CritiqueRequest:
    window = _rules.bounded(list(state.get("trajectory") or []), settings.history_window)
    history = tuple(
        {
            "candidate": r["candidate"][:HISTORY_CHARS],
            "score": r["score"],
            "feedback": ((r["critique"] or {}).get("feedback") or "")[:HISTORY_CHARS],
        }
        for r in window
    )
    return CritiqueRequest(
        task=state["task"],
        candidate=candidate,
        context=state.get("context"),
        iteration=int(state.get("iterations") or 0) + 1,
        score_threshold=settings.score_threshold,
        history=history,
    )


def _to_judge(
    state: Mapping[str, Any], settings: Settings
) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """The candidates pending for this round, or the update when there is nothing to judge (generate stopped,
    or this run's round limit is already reached)."""
    pending = state.get("rg_pending")
    iteration = int(state.get("iterations") or 0) + 1
    if state.get("stop_reason") is not None or not pending or pending["iteration"] != iteration:
        return [], {}
    over = _over_limit(settings, state)
    return (pending["samples"], None) if over is None else ([], over)


def _critiqued(
    state: Mapping[str, Any],
    settings: Settings,
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
    trajectory: list[Round] = list(state.get("trajectory") or [])
    iteration = int(state.get("iterations") or 0) + 1
    samples = []
    for sample, (critique, part, _) in judged:
        assert critique is not None
        usage: dict[str, RoleUsage] = {**sample.get("usage", {}), "critique": part}
        usage["total"] = sum_usage(list(usage.values()))  # type: ignore[typeddict-unknown-key]
        samples.append(
            {
                "candidate": sample["candidate"],
                "score": critique.score,
                "accepted": _rules.accepts(critique.score, critique.is_acceptable, settings.score_threshold),
                "critique": critique.model_dump(),
                "echo": sample.get("echo", False),
                "usage": usage,
            }
        )
    chosen = samples[_rules.best_sample(samples)]
    round_usage: dict[str, RoleUsage] = {}
    seen = [id(sample) for sample, _ in judged]
    unjudged = [s.get("usage") or {} for s in state["rg_pending"]["samples"] if id(s) not in seen]
    for part in [*(s["usage"] for s in samples), *unjudged, *({"critique": r} for r in refused)]:
        for role, value in part.items():
            round_usage[role] = add_role_usage(round_usage.get(role), value)
    round_usage["total"] = sum_usage([v for k, v in round_usage.items() if k != "total"])
    record: Round = {
        "iteration": iteration,
        "candidate": chosen["candidate"],
        "critique": chosen["critique"],
        "score": chosen["score"],
        "accepted": chosen["accepted"],
        "diff": _diff(trajectory[-1]["candidate"] if trajectory else None, chosen["candidate"]),
        "usage": round_usage,
        "job": state["rg_pending"]["job"],
        "echo": chosen["echo"],
    }
    if len(samples) > 1:
        record["samples"] = samples
    update: dict[str, Any] = {"trajectory": [record], "iterations": iteration}
    stop = _rules.stop_reason(settings, trajectory, iteration, chosen["critique"], chosen["accepted"])
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


def _critique(
    setup: Setup, state: ReflectionState, runtime: Runtime[Context], config: RunnableConfig
) -> dict[str, Any]:
    """Judge the pending candidates one after another (stopping at the first that passes a set threshold)."""
    settings, roles = setup.for_run(runtime)
    pending, skip = _to_judge(state, settings)
    if skip is not None:
        return skip
    judged: list[tuple[dict[str, Any], Judged]] = []
    for sample in pending:
        verdict = judge(roles.critic, _request(state, settings, sample["candidate"]), config)
        judged.append((sample, verdict))
        if _ends_search(settings, verdict):
            break
    return _critiqued(state, settings, judged)


async def _acritique(
    setup: Setup, state: ReflectionState, runtime: Runtime[Context], config: RunnableConfig
) -> dict[str, Any]:
    """Async twin of `_critique`: the candidates are judged concurrently; once one passes a set threshold (or
    fails), the critiques still running are cancelled, and awaited, so that no critic's work outlives the node
    (a test critic's processes and directories are gone when the node returns or is cancelled)."""
    settings, roles = setup.for_run(runtime)
    pending, skip = _to_judge(state, settings)
    if skip is not None:
        return skip

    meters = [Meter() for _ in pending]

    async def one(index: int) -> tuple[int, Judged]:
        request = _request(state, settings, pending[index]["candidate"])
        return index, await ajudge(roles.critic, request, config, meters[index])

    tasks = [asyncio.ensure_future(one(i)) for i in range(len(pending))]
    done: dict[int, Judged] = {}
    try:
        for finished in asyncio.as_completed(tasks):
            index, verdict = await finished
            done[index] = verdict
            if _ends_search(settings, verdict):
                break
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    cancelled = [m.usage for i, m in enumerate(meters) if i not in done]
    return _critiqued(state, settings, [(pending[i], done[i]) for i in sorted(done)], cancelled)


# ------------------------------------------------------------------------------------------ review, finalize


def review(state: ReflectionState) -> dict[str, Any]:
    """Pause for a person: resume with `Command(resume={"accept": True})`, `{"feedback": "..."}` or `{}`."""
    if state.get("stop_reason") is not None:
        return {}
    rounds = state.get("trajectory") or []
    decision = interrupt(
        {
            "iteration": state.get("iterations"),
            "candidate": rounds[-1]["candidate"] if rounds else None,
            "critique": rounds[-1]["critique"] if rounds else None,
            "resume_with": {"accept": "bool", "feedback": "str"},
        }
    )
    if not isinstance(decision, Mapping):
        return {}
    if decision.get("accept"):
        return {"stop_reason": "accepted"}
    feedback = decision.get("feedback")
    return {"rg_feedback": str(feedback)} if feedback else {}


def _lessons_to_save(setup: Setup, state: Mapping[str, Any]) -> list[str]:
    """This run's lessons for the Reflexion memory (none without memory or rounds)."""
    if setup.memory is None or not state.get("trajectory"):
        return []
    critiques = [r["critique"] for r in state.get("trajectory") or [] if r["critique"]]
    return list(setup.memory.lessons_from_critiques(state["task"], critiques))


def _outputs(settings: Settings, state: Mapping[str, Any], memory_error: str | None) -> dict[str, Any]:
    """The graph's outputs: the answer (`select`), its critique, the stop reason, the rounds and the usage."""
    trajectory: list[Round] = list(state.get("trajectory") or [])
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
    if pending is not None and unjudged and settings.strategy == "self_refine":
        update["candidate"] = pending["samples"][0]["candidate"]  # Self-Refine's refine, returned unjudged
        update["critique"] = trajectory[-1]["critique"] if trajectory else None
    elif trajectory:
        chosen = _rules.select_round(trajectory, settings.select)
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


def _finalize(
    setup: Setup, state: ReflectionState, runtime: Runtime[Context], config: RunnableConfig
) -> dict[str, Any]:
    """Save this run's lessons (when memory is on) and build the outputs."""
    lessons = _lessons_to_save(setup, state)
    failure: Exception | None = None
    try:
        if lessons:
            setup.memory.save(state["task"], lessons, store=setup.memory_store(runtime))
    except Exception as exc:  # never lose the run's answer for a lesson
        failure = exc
    return _finalized(setup, state, runtime, failure)


async def _afinalize(
    setup: Setup, state: ReflectionState, runtime: Runtime[Context], config: RunnableConfig
) -> dict[str, Any]:
    """Async twin of `_finalize`."""
    lessons = _lessons_to_save(setup, state)
    saving = (
        setup.memory.asave(state["task"], lessons, store=setup.memory_store(runtime)) if lessons else None
    )
    results = await asyncio.gather(*([saving] if saving else []), return_exceptions=True)
    failure = next((r for r in results if isinstance(r, Exception)), None)
    return _finalized(setup, state, runtime, failure)


def _finalized(
    setup: Setup, state: Mapping[str, Any], runtime: Runtime[Context], failure: Exception | None
) -> dict[str, Any]:
    problem = f"memory save failed: {type(failure).__name__}: {failure}" if failure else None
    return _outputs(setup.for_run(runtime)[0], state, problem)


# ------------------------------------------------------------------------------------------------- router


def after_critique(state: RouteReads) -> Literal["generate", "finalize"]:
    """Route after `critique` (or `review`): a set `stop_reason` ends the loop (it reads only that key)."""
    return "finalize" if state.get("stop_reason") is not None else "generate"


def make_nodes(setup: Setup) -> dict[str, tuple[NodeFn, AsyncNodeFn]]:
    """The node functions bound to `setup`: name -> (sync, async) twins, each `fn(state, runtime, config)`.

    Under a run budget, `generate` and `critique` make their calls inside the step's `Budget`
    (reflection_graph/_budget.py), which the call layer checks before each call."""

    def bind(fn: Any) -> Any:
        def node(state: ReflectionState, runtime: Runtime[Context], config: RunnableConfig) -> Any:
            return fn(setup, state, runtime, config)

        node.__name__ = fn.__name__.lstrip("_")
        return node

    def settings_of(runtime: Runtime[Context]) -> Settings:
        return setup.for_run(runtime)[0]

    pairs = {"generate": (_generate, _agenerate), "critique": (_critique, _acritique)}
    nodes = {
        name: (_budget.budgeted(bind(fn), settings_of), _budget.abudgeted(bind(afn), settings_of))
        for name, (fn, afn) in pairs.items()
    }
    return {**nodes, "finalize": (bind(_finalize), bind(_afinalize))}
