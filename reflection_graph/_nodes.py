"""The node functions: `generate`, `critique`, `review`, `finalize`, and the routers.

Each node is `fn(state, runtime, config)`: `runtime.context` (a `Context`) carries this run's overrides,
`runtime.store` the graph's store. The sync and async twins are a few lines around shared helpers: the helpers
build the prompts (reflection_graph/prompts.py), apply the rules (reflection_graph/_rules.py) and shape the state
updates; the twins only make the calls (reflection_graph/_calls.py), either directly or awaited.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import difflib
import threading
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, cast

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langchain_core.runnables import Runnable, RunnableConfig, ensure_config
from langgraph.runtime import Runtime, get_runtime
from langgraph.types import interrupt
from pydantic import BaseModel

from reflection_graph import _rules
from reflection_graph._calls import acall, call
from reflection_graph._code import code_messages, finish_candidate
from reflection_graph._extract import well_formed
from reflection_graph._usage import RoleUsage, add_role_usage, empty_usage, track_usage
from reflection_graph.context import Context
from reflection_graph.critics.base import Critic, CritiqueRequest
from reflection_graph.critique import Critique, parse_critique
from reflection_graph.prompts import HISTORY_CHARS, draft_messages, revise_messages
from reflection_graph.settings import Settings
from reflection_graph.state import ReflectionState, Round

__all__ = ["MAX_TASK_CHARS", "Node", "Roles", "Setup"]

MAX_TASK_CHARS = 200_000
SAMPLE_TEMPERATURE = 0.7
"""The least temperature of each sample when several drafts or revisions are drawn (distinct seeds too)."""


@dataclass(frozen=True)
class Roles:
    """The models and critic of one run."""

    generator: BaseChatModel
    reviser: BaseChatModel
    critic: Critic


@dataclass
class Setup:
    """What the nodes close over: the built settings and roles, and how to resolve a run's own models."""

    settings: Settings
    roles: Roles
    make_roles: Callable[[Context, Settings], Roles]
    should_refine: Callable[[Mapping[str, Any]], bool] | None = None
    memory: Any = None
    _cache: dict[tuple[Any, ...], Roles] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def for_run(self, runtime: Runtime[Context]) -> tuple[Settings, Roles]:
        """This run's settings and roles: the built ones with the run's `Context` overrides applied."""
        ctx = runtime.context
        if not isinstance(ctx, Context):
            return self.settings, self.roles
        settings = ctx.settings(self.settings)
        critique_prompt = settings.prompts.get("critique")
        key = (*ctx.models(), critique_prompt)
        if key == (None, None, None, None, self.settings.prompts.get("critique")):
            return settings, self.roles
        with self._lock:
            if key not in self._cache:
                self._cache[key] = self.make_roles(ctx, settings)
            return settings, self._cache[key]

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


def _text(message: Any) -> str:
    """A model reply's text (content blocks joined by `BaseMessage.text`), stripped."""
    return (message.text if isinstance(message, BaseMessage) else str(message)).strip()


def _nonempty(message: Any) -> bool:
    return bool(_text(message))


def _with_counter(config: RunnableConfig | None, counter: Any) -> RunnableConfig:
    merged: dict[str, Any] = dict(config or {})
    callbacks = merged.get("callbacks")
    if callbacks is None:
        merged["callbacks"] = [counter]
    elif isinstance(callbacks, list):
        merged["callbacks"] = [*callbacks, counter]
    else:
        manager = callbacks.copy()
        manager.add_handler(counter, inherit=True)
        merged["callbacks"] = manager
    return cast(RunnableConfig, merged)


def _diff(previous: str | None, current: str) -> str:
    if previous is None:
        return ""
    lines = difflib.unified_diff(
        previous.splitlines(), current.splitlines(), "previous", "current", lineterm="", n=1
    )
    return "\n".join(lines)


def _sampler(model: BaseChatModel, index: int, count: int) -> BaseChatModel:
    """Sample `index` of `count`: the first is the model as configured (at temperature 0: its greedy answer, so a
    first draft is what a plain call gives); the others get a distinct seed (the model's + index) and a temperature
    of at least `SAMPLE_TEMPERATURE` where the model has those fields."""
    if count == 1 or index == 0:
        return model
    fields = type(model).model_fields
    update: dict[str, Any] = {}
    if "seed" in fields:
        update["seed"] = int(getattr(model, "seed", None) or 0) + index
    if "temperature" in fields:
        update["temperature"] = max(float(getattr(model, "temperature", None) or 0.0), SAMPLE_TEMPERATURE)
    return model.model_copy(update=update) if update else model


def _trigger(setup: Setup, state: Mapping[str, Any]) -> dict[str, Any] | None:
    """`should_refine` before a round: False stops with `not_triggered`, an exception with `error`."""
    if setup.should_refine is None:
        return None
    try:
        go = setup.should_refine(state)
    except Exception as exc:  # reported, never skipped
        return {
            "stop_reason": "error",
            "error": f"should_refine raised {type(exc).__name__}: {exc}. Fix the predicate; it gets the state.",
        }
    return None if go else {"stop_reason": "not_triggered"}


@dataclass
class _Plan:
    """What `generate` does this step: stop early, pass a given candidate on, or sample `count` replies."""

    early: dict[str, Any] | None = None
    role: str = "generate"
    model: BaseChatModel | None = None
    messages: list[BaseMessage] = field(default_factory=list)
    count: int = 1
    settings: Settings | None = None
    finish: Callable[[str], str] | None = None
    """Turns each reply into the candidate to store (the code focus completes a stub, balances fences)."""


def _plan(setup: Setup, state: Mapping[str, Any], runtime: Runtime[Context], lessons: str) -> _Plan:
    settings, roles = setup.for_run(runtime)
    critique = state.get("critique")
    if state.get("candidate"):
        stop = _trigger(setup, state)
        if stop is not None:
            return _Plan(early=stop)
        if critique is None:  # glean an existing candidate: critique it first
            return _Plan(early={"rg_pending": [{"candidate": state["candidate"], "usage": {}}]})
        history = _rules.bounded(list(state.get("trajectory") or [])[:-1], settings.history_window)
        messages = _code_messages(settings, "revise", state, state["candidate"], critique) or revise_messages(
            state["task"],
            state.get("context"),
            state["candidate"],
            critique,
            history,
            focus=settings.focus,
            preserve_correct=settings.preserve_correct,
            template=settings.prompts.get("revise"),
        )
        return _Plan(
            None,
            "revise",
            roles.reviser,
            messages,
            settings.n_revisions,
            settings,
            _finisher(settings, state, "revise"),
        )
    messages = _code_messages(settings, "generate", state, None, None) or draft_messages(
        state["task"],
        state.get("context"),
        lessons,
        focus=settings.focus,
        template=settings.prompts.get("generate"),
    )
    return _Plan(
        None,
        "generate",
        roles.generator,
        messages,
        settings.n_drafts,
        settings,
        _finisher(settings, state, "generate"),
    )


def _code_messages(
    settings: Settings, role: str, state: Mapping[str, Any], candidate: str | None, critique: Any
) -> list[BaseMessage] | None:
    """Completion-style code prompts when the focus is code, the task holds a stub and no prompt is overridden."""
    if settings.focus != "code" or settings.prompts.get(role) is not None:
        return None
    return code_messages(state["task"], state.get("context"), candidate=candidate, critique=critique)


def _finisher(settings: Settings, state: Mapping[str, Any], role: str) -> Callable[[str], str] | None:
    """Code focus: a stub's continuation becomes the full function, and fences are balanced (the default prompts
    open a ```python fence the reply does not repeat). An overridden prompt's replies only get their fences
    balanced."""
    if settings.focus != "code":
        return None
    if settings.prompts.get(role) is not None:
        return lambda text: well_formed(text) or text
    task = state["task"]
    return lambda text: finish_candidate(task, text) or text


def _needs_lessons(setup: Setup, state: Mapping[str, Any]) -> bool:
    return setup.memory is not None and not state.get("candidate")


def _lessons_text(setup: Setup, lessons: Any) -> str:
    return str(setup.memory.format_lessons(lessons)) if lessons else ""


def _generated(
    plan: _Plan, results: Sequence[tuple[str | None, RoleUsage, BaseException | None]]
) -> dict[str, Any]:
    """The state update of `generate` from its samples (text, usage, error)."""
    usage = empty_usage()
    for _, part, _ in results:
        usage = add_role_usage(usage, part)
    finish = plan.finish or (lambda text: text)
    pending = [{"candidate": finish(text), "usage": {plan.role: part}} for text, part, _ in results if text]
    update: dict[str, Any] = {"usage": {plan.role: usage, "total": usage}}
    if not pending:
        error = next(e for _, _, e in results if e is not None)
        return {
            **update,
            "stop_reason": "error",
            "error": f"{plan.role} failed: {type(error).__name__}: {error}",
        }
    update["candidate"] = pending[0]["candidate"]
    update["rg_pending"] = pending
    if plan.role == "revise":
        update["rg_revisions"] = 1
    return update


def _sample(plan: _Plan, config: RunnableConfig, settings: Settings, index: int) -> tuple[Any, ...]:
    assert plan.model is not None
    limits = {"retries": settings.retries, "timeout_s": settings.timeout_s, "ok": _nonempty}
    return (_sampler(plan.model, index, plan.count), plan.messages, config, limits)


def generate(
    setup: Setup, state: ReflectionState, runtime: Runtime[Context], config: RunnableConfig
) -> dict[str, Any]:
    """Draft (or revise) `n_drafts` (`n_revisions`) candidates; the critique node judges them."""
    validate_input(state)
    lessons = ""
    if _needs_lessons(setup, state):
        lessons = _lessons_text(setup, setup.memory.search(state["task"], store=setup.memory_store(runtime)))
    plan = _plan(setup, state, runtime, lessons)
    if plan.early is not None:
        return plan.early
    assert plan.settings is not None

    def one(index: int) -> tuple[str | None, RoleUsage, BaseException | None]:
        model, messages, cfg, limits = _sample(plan, config, cast(Settings, plan.settings), index)
        with track_usage() as counter:
            try:
                return (
                    _text(call(model, messages, _with_counter(cfg, counter), **limits)),
                    counter.usage,
                    None,
                )
            except Exception as exc:
                return None, counter.usage, exc

    if plan.count == 1:
        return _generated(plan, [one(0)])
    with concurrent.futures.ThreadPoolExecutor(max_workers=plan.count) as pool:
        return _generated(plan, list(pool.map(one, range(plan.count))))


async def agenerate(
    setup: Setup, state: ReflectionState, runtime: Runtime[Context], config: RunnableConfig
) -> dict[str, Any]:
    """Async twin of `generate`: the samples run concurrently."""
    validate_input(state)
    lessons = ""
    if _needs_lessons(setup, state):
        lessons = _lessons_text(
            setup, await setup.memory.asearch(state["task"], store=setup.memory_store(runtime))
        )
    plan = _plan(setup, state, runtime, lessons)
    if plan.early is not None:
        return plan.early
    assert plan.settings is not None

    async def one(index: int) -> tuple[str | None, RoleUsage, BaseException | None]:
        model, messages, cfg, limits = _sample(plan, config, cast(Settings, plan.settings), index)
        with track_usage() as counter:
            try:
                return (
                    _text(await acall(model, messages, _with_counter(cfg, counter), **limits)),
                    counter.usage,
                    None,
                )
            except Exception as exc:
                return None, counter.usage, exc

    return _generated(plan, await asyncio.gather(*(one(i) for i in range(plan.count))))


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


def _checked(critic: Critic, result: Any) -> Critique:
    """A critic's reply as a `Critique`: mappings and pydantic models are parsed, anything else is an error."""
    if isinstance(result, Critique):
        return result
    if isinstance(result, (Mapping, BaseModel)):
        return parse_critique(dict(result) if isinstance(result, Mapping) else result)
    name = getattr(critic, "name", type(critic).__name__)
    raise TypeError(
        f"critic {name!r} returned {type(result).__name__}, expected a Critique: return "
        "reflection_graph.Critique(...) from critique()/acritique()"
    )


_Judged = tuple[dict[str, Any], Critique | None, RoleUsage, BaseException | None]


def _pending(state: Mapping[str, Any]) -> list[dict[str, Any]]:
    pending = state.get("rg_pending")
    if isinstance(pending, list) and pending:
        return pending
    return [{"candidate": state.get("candidate") or "", "usage": {}}]


def _critiqued(state: Mapping[str, Any], settings: Settings, judged: Sequence[_Judged]) -> dict[str, Any]:
    """The state update of `critique`: one trajectory round holding the best sample (and all samples)."""
    usage = empty_usage()
    for _, _, part, _ in judged:
        usage = add_role_usage(usage, part)
    failed = next((e for _, c, _, e in judged if e is not None), None)
    if failed is not None:
        message = f"critique failed: {type(failed).__name__}: {failed}"
        return {"stop_reason": "error", "error": message, "usage": {"critique": usage, "total": usage}}
    trajectory: list[Round] = list(state.get("trajectory") or [])
    iteration = int(state.get("iterations") or 0) + 1
    samples = []
    for sample, critique, part, _ in judged:
        assert critique is not None
        round_usage: dict[str, RoleUsage] = {**sample.get("usage", {}), "critique": part}
        total = empty_usage()
        for value in round_usage.values():
            total = add_role_usage(total, value)
        round_usage["total"] = total
        accepted = _rules.accepts(critique.score, critique.is_acceptable, settings.score_threshold)
        samples.append((sample["candidate"], critique, accepted, round_usage))
    chosen = _rules.best_index([c.score for _, c, _, _ in samples])
    candidate, critique, accepted, _ = samples[chosen]
    round_total: dict[str, RoleUsage] = {}
    for _, _, _, part_usage in samples:
        for role, value in part_usage.items():
            round_total[role] = add_role_usage(round_total.get(role), value)
    record: Round = {
        "iteration": iteration,
        "candidate": candidate,
        "critique": critique.model_dump(),
        "score": critique.score,
        "accepted": accepted,
        "diff": _diff(trajectory[-1]["candidate"] if trajectory else None, candidate),
        "usage": round_total,
    }
    if len(samples) > 1:
        record["samples"] = [
            {"candidate": text, "score": c.score, "accepted": ok, "critique": c.model_dump(), "usage": u}
            for text, c, ok, u in samples
        ]
    stop = _rules.stop_reason(settings, trajectory, iteration, critique.score, accepted, critique.issues)
    return {
        "candidate": candidate,
        "critique": critique.model_dump(),
        "iterations": iteration,
        "trajectory": [record],
        "stop_reason": stop,
        "rg_pending": [],
        "usage": {"critique": usage, "total": usage},
    }


def _passes(settings: Settings, critique: Critique) -> bool:
    """With a threshold, one passing sample ends the search for this round."""
    return settings.score_threshold is not None and critique.score >= settings.score_threshold


def critique(
    setup: Setup, state: ReflectionState, runtime: Runtime[Context], config: RunnableConfig
) -> dict[str, Any]:
    """Judge the pending candidates one after another (stopping at the first that passes a set threshold)."""
    settings, roles = setup.for_run(runtime)
    judged: list[_Judged] = []
    for sample in _pending(state):
        with track_usage() as counter:
            try:
                reply = roles.critic.critique(
                    _request(state, settings, sample["candidate"]), _with_counter(config, counter)
                )
                result: Critique | None = _checked(roles.critic, reply)
                error: BaseException | None = None
            except Exception as exc:
                result, error = None, exc
        judged.append((sample, result, counter.usage, error))
        if error is not None or (result is not None and _passes(settings, result)):
            break
    return _critiqued(state, settings, judged)


async def acritique(
    setup: Setup, state: ReflectionState, runtime: Runtime[Context], config: RunnableConfig
) -> dict[str, Any]:
    """Async twin of `critique`: the candidates are judged concurrently; once one passes a set threshold, the
    critiques still running are cancelled."""
    settings, roles = setup.for_run(runtime)

    async def one(sample: dict[str, Any]) -> _Judged:
        with track_usage() as counter:
            try:
                reply = await roles.critic.acritique(
                    _request(state, settings, sample["candidate"]), _with_counter(config, counter)
                )
                return sample, _checked(roles.critic, reply), counter.usage, None
            except Exception as exc:
                return sample, None, counter.usage, exc

    pending = _pending(state)
    tasks = [asyncio.ensure_future(one(sample)) for sample in pending]
    judged: list[_Judged] = []
    try:
        for finished in asyncio.as_completed(tasks):
            item = await finished
            judged.append(item)
            if item[3] is not None or (item[1] is not None and _passes(settings, item[1])):
                break
    finally:
        for task in tasks:
            task.cancel()
    judged.sort(key=lambda item: next(i for i, sample in enumerate(pending) if sample is item[0]))
    return _critiqued(state, settings, judged)


# ------------------------------------------------------------------------------------------ review, finalize


def review(state: ReflectionState) -> dict[str, Any]:
    """Pause for a person: resume with `Command(resume={"accept": True})`, `{"feedback": "..."}` or `{}`."""
    if state.get("stop_reason") is not None:
        return {}
    decision = interrupt(
        {
            "iteration": state.get("iterations"),
            "candidate": state.get("candidate"),
            "critique": state.get("critique"),
            "resume_with": {"accept": "bool", "feedback": "str"},
        }
    )
    if not isinstance(decision, Mapping):
        return {}
    if decision.get("accept"):
        return {"stop_reason": "accepted"}
    feedback = decision.get("feedback")
    if feedback:
        critique = dict(state.get("critique") or {})
        critique["feedback"] = f"{critique.get('feedback', '')}\nReviewer: {feedback}".strip()
        return {"critique": critique}
    return {}


def _lessons_to_save(setup: Setup, state: Mapping[str, Any]) -> list[str]:
    """This run's lessons for the Reflexion memory (none without memory or rounds)."""
    if setup.memory is None or not state.get("trajectory"):
        return []
    critiques = [r["critique"] for r in state.get("trajectory") or [] if r["critique"]]
    return list(setup.memory.lessons_from_critiques(state["task"], critiques))


def _selected(settings: Settings, state: Mapping[str, Any], memory_error: str | None) -> dict[str, Any]:
    trajectory: list[Round] = list(state.get("trajectory") or [])
    update: dict[str, Any] = {
        "stop_reason": state.get("stop_reason") or "max_iterations",
        "error": state.get("error"),
        "iterations": int(state.get("iterations") or 0),
    }
    if memory_error:  # the answer is kept; the lesson that could not be saved is reported
        update["error"] = "; ".join(e for e in (update["error"], memory_error) if e)
    last_is_unscored = settings.strategy == "self_refine" and int(state.get("rg_revisions") or 0) > 0
    if last_is_unscored or not trajectory:
        update["candidate"] = state.get("candidate") or ""
        update["critique"] = state.get("critique")
    else:
        chosen = _rules.select_round(trajectory, settings.select)
        update["candidate"] = chosen["candidate"]
        update["critique"] = chosen["critique"]
    if "trajectory" not in state:
        update["trajectory"] = []
    # every role is reported, with zeros for a role that never ran (e.g. no revision when round 1 accepts)
    update["usage"] = {role: empty_usage() for role in ("generate", "critique", "revise", "total")}
    return update


def finalize(
    setup: Setup, state: ReflectionState, runtime: Runtime[Context], config: RunnableConfig
) -> dict[str, Any]:
    """Save this run's lessons (when memory is on) and pick the answer (`select`)."""
    settings, _ = setup.for_run(runtime)
    problem = None
    lessons = _lessons_to_save(setup, state)
    if lessons:
        try:
            setup.memory.save(state["task"], lessons, store=setup.memory_store(runtime))
        except Exception as exc:  # never lose the run's answer for a lesson
            problem = f"memory save failed: {type(exc).__name__}: {exc}"
    return _selected(settings, state, problem)


async def afinalize(
    setup: Setup, state: ReflectionState, runtime: Runtime[Context], config: RunnableConfig
) -> dict[str, Any]:
    """Async twin of `finalize`."""
    settings, _ = setup.for_run(runtime)
    problem = None
    lessons = _lessons_to_save(setup, state)
    if lessons:
        try:
            await setup.memory.asave(state["task"], lessons, store=setup.memory_store(runtime))
        except Exception as exc:  # never lose the run's answer for a lesson
            problem = f"memory save failed: {type(exc).__name__}: {exc}"
    return _selected(settings, state, problem)


# ------------------------------------------------------------------------------------------------- routers


def after_generate(self_refine: bool) -> Callable[[ReflectionState], Literal["critique", "finalize"]]:
    """Route after `generate`: to `critique`, or to `finalize` on a stop (and after Self-Refine's one refine)."""

    def route(state: ReflectionState) -> Literal["critique", "finalize"]:
        if state.get("stop_reason") is not None:
            return "finalize"
        if self_refine and state.get("critique") is not None:
            return "finalize"  # the single refine of Self-Refine is returned without another critique
        return "critique"

    return route


def after_critique(state: ReflectionState) -> Literal["generate", "finalize"]:
    """Route after `critique` (or `review`): `critique` sets `stop_reason` when a rule stops the loop."""
    return "finalize" if state.get("stop_reason") is not None else "generate"


# --------------------------------------------------------------------------------------------------- node


class Node(Runnable[Any, Any]):
    """A node with a sync and an async body, each called as `fn(setup, state, runtime, config)`.

    LangGraph passes `runtime` only to plain functions; a node with both a sync and an async body reads it with
    `get_runtime`. This wrapper also skips the traced child run `RunnableLambda` would open on every call (the
    node already runs inside LangGraph's traced task; see bench/README.md).
    """

    def __init__(
        self,
        name: str,
        setup: Setup,
        func: Callable[[Setup, Any, Runtime[Context], RunnableConfig], dict[str, Any]],
        afunc: Callable[[Setup, Any, Runtime[Context], RunnableConfig], Awaitable[dict[str, Any]]],
    ) -> None:
        self.name = name
        self._setup = setup
        self._func = func
        self._afunc = afunc

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        return self._func(self._setup, input, get_runtime(Context), ensure_config(config))

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        return await self._afunc(self._setup, input, get_runtime(Context), ensure_config(config))
