"""The reflection graph: `generate` -> `critique` -> (`generate` | `finalize`), with a real loop bound.

Counting rule
-------------
A *round* is one candidate plus its critique. `iterations` counts critiques, and the router after `critique` stops
as soon as `iterations == max_iterations` (an explicit counter in state, never LangGraph's recursion limit).

With the `loop` strategy and a model critic, a run makes at most
`max_iterations` generator/reviser calls (one draft, then one revision per further round; none for the first round
when an existing `candidate` is gleaned) and at most `max_iterations * (1 + parse_retries)` critic calls, each call
retried at most `retries` times on transient errors. With no retries and no parse failures that is
`2 * max_iterations` model calls at most.

The `self_refine` strategy is one Self-Refine pass: draft, one critique, and (unless accepted) one revision that
is returned without a second critique: at most 3 model calls.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, cast

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from langchain_core.runnables import Runnable, RunnableConfig, ensure_config
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import get_runtime
from langgraph.types import Checkpointer, interrupt
from pydantic import BaseModel

from reflection_graph._calls import ainvoke_guarded, invoke_guarded
from reflection_graph._usage import RoleUsage, add_role_usage, empty_usage, track_usage
from reflection_graph.context import Context
from reflection_graph.critics.base import Critic, CritiqueRequest
from reflection_graph.critics.llm import LLMCritic, ParseErrorPolicy
from reflection_graph.critique import Critique, parse_critique
from reflection_graph.prompts import (
    CRITIQUE_PROMPT,
    FOCUS_CUES,
    FOCUS_PROMPTS,
    GENERATE_PROMPT,
    GENERATE_SYSTEM,
    PRESERVE_CORRECT_RULE,
    REVISE_PROMPT,
    REVISE_SYSTEM,
    PromptTemplate,
    render_prompt,
)
from reflection_graph.state import InputState, OutputState, ReflectionState, Round, StopReason

__all__ = [
    "MAX_TASK_CHARS",
    "ReflectionGraph",
    "ReflectionSettings",
    "build_reflection_graph",
    "create_reflection_graph",
    "max_model_calls",
]

Select = Literal["best", "last"]
Strategy = Literal["loop", "self_refine"]
Focus = Literal["general", "code", "reasoning", "format"]
ModelLike = Any  # BaseChatModel | str | Callable[[str], str] | None; resolved by reflection_graph.models
MAX_TASK_CHARS = 200_000
_HISTORY_CHARS = 600
_PROMPT_KEYS = ("generate", "critique", "revise")


def max_model_calls(max_iterations: int, *, parse_retries: int = 0, glean: bool = False) -> int:
    """The most model calls a `loop` run can make with an LLM critic and no transient-error retries."""
    generations = max_iterations - 1 if glean else max_iterations
    return generations + max_iterations * (1 + parse_retries)


@dataclass(frozen=True)
class ReflectionSettings:
    """The validated settings a graph is built with (runtime `Context` fields override them per run)."""

    max_iterations: int = 3
    min_iterations: int = 1
    score_threshold: float | None = None
    min_improvement: float = 0.5
    patience: int | None = 2
    stop_on_no_new_issues: bool = True
    select: Select = "best"
    strategy: Strategy = "loop"
    preserve_correct: bool = True
    focus: Focus = "general"
    history_window: int = 1
    retries: int = 2
    timeout_s: float | None = None
    prompts: Mapping[str, PromptTemplate] = field(default_factory=dict)

    def validate(self) -> ReflectionSettings:
        if isinstance(self.max_iterations, bool) or not isinstance(self.max_iterations, int):
            raise ValueError(f"max_iterations must be an int >= 1, got {self.max_iterations!r}")
        if self.max_iterations < 1:
            raise ValueError(
                f"max_iterations must be >= 1 (got {self.max_iterations}); use 1 for a single round"
            )
        if self.max_iterations > 1000:
            raise ValueError(f"max_iterations must be <= 1000 (got {self.max_iterations})")
        if isinstance(self.min_iterations, bool) or not isinstance(self.min_iterations, int):
            raise ValueError(f"min_iterations must be an int >= 1, got {self.min_iterations!r}")
        if not 1 <= self.min_iterations <= self.max_iterations:
            raise ValueError(
                f"min_iterations must be between 1 and max_iterations ({self.max_iterations}), "
                f"got {self.min_iterations}"
            )
        if self.score_threshold is not None and not 0 <= self.score_threshold <= 10:
            raise ValueError(
                f"score_threshold must be between 0 and 10 (got {self.score_threshold}); scores are on a 0-10 scale"
            )
        if self.select not in ("best", "last"):
            raise ValueError(f"select must be 'best' or 'last', got {self.select!r}")
        if self.strategy not in ("loop", "self_refine"):
            raise ValueError(f"strategy must be 'loop' or 'self_refine', got {self.strategy!r}")
        if self.focus not in FOCUS_PROMPTS:
            raise ValueError(f"focus must be one of {sorted(FOCUS_PROMPTS)}, got {self.focus!r}")
        if self.min_improvement < 0:
            raise ValueError(f"min_improvement must be >= 0, got {self.min_improvement}")
        if self.patience is not None and self.patience < 1:
            raise ValueError(f"patience must be >= 1 or None (no plateau stop), got {self.patience}")
        if self.history_window < 0:
            raise ValueError(f"history_window must be >= 0, got {self.history_window}")
        if self.retries < 0:
            raise ValueError(f"retries must be >= 0, got {self.retries}")
        if self.timeout_s is not None and self.timeout_s <= 0:
            raise ValueError(f"timeout_s must be > 0 or None, got {self.timeout_s}")
        unknown = set(self.prompts) - set(_PROMPT_KEYS)
        if unknown:
            raise ValueError(f"unknown prompt role(s) {sorted(unknown)}; use {list(_PROMPT_KEYS)}")
        for role, template in self.prompts.items():
            if not (isinstance(template, str) or callable(template)):
                raise ValueError(f"prompt {role!r} must be a template string or a callable")
        return self


def _resolve(spec: ModelLike, role: str, base_url: str | None = None) -> BaseChatModel:
    from reflection_graph.models import resolve_model

    return resolve_model(spec, role=role, base_url=base_url)


def _as_critic(
    critic: ModelLike | Critic,
    generator: BaseChatModel,
    *,
    base_url: str | None,
    settings: ReflectionSettings,
    guidelines: str | None,
    parse_retries: int,
    on_parse_error: ParseErrorPolicy,
) -> Critic:
    if isinstance(critic, Critic):
        return critic
    if critic is None:
        model = generator
    else:
        model = _resolve(critic, "critic", base_url)
    from reflection_graph.models import critic_model

    return LLMCritic(
        critic_model(model),
        prompt=settings.prompts.get("critique", CRITIQUE_PROMPT),
        guidelines=guidelines,
        parse_retries=parse_retries,
        on_parse_error=on_parse_error,
        retries=settings.retries,
        timeout_s=settings.timeout_s,
    )


@dataclass
class _Roles:
    generator: BaseChatModel
    reviser: BaseChatModel
    critic: Critic


def _text(message: Any) -> str:
    """A model reply's text (content blocks joined by `BaseMessage.text`), stripped."""
    return (message.text if isinstance(message, BaseMessage) else str(message)).strip()


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


def _plateau(scores: Sequence[float], patience: int | None, min_improvement: float) -> bool:
    """True when the best score of the last `patience` rounds beats the best before them by < min_improvement."""
    if patience is None or len(scores) <= patience:
        return False
    before = max(scores[:-patience])
    recent = max(scores[-patience:])
    return recent < before + min_improvement


def _norm_issue(issue: str) -> str:
    return " ".join(issue.lower().split())


def _no_new_issues(trajectory: Sequence[Round], critique: Critique) -> bool:
    """True when this round's issues were all raised before (the critic has nothing new to say)."""
    if not trajectory or critique.is_acceptable:
        return False
    seen = {_norm_issue(i) for r in trajectory for i in (r["critique"] or {}).get("issues", [])}
    current = {_norm_issue(i) for i in critique.issues}
    return bool(current) and current <= seen


def _validate_input(state: Mapping[str, Any]) -> None:
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
    candidate = state.get("candidate")
    if candidate is not None and not isinstance(candidate, str):
        raise ValueError(
            f"'candidate' must be a string (the output to glean), got {type(candidate).__name__}; "
            "serialize it first, e.g. json.dumps(value)"
        )
    context = state.get("context")
    if context is not None and not isinstance(context, str):
        raise ValueError(f"'context' must be a string, got {type(context).__name__}")


class _Nodes:
    """The node functions, closed over the validated settings and models."""

    def __init__(
        self,
        settings: ReflectionSettings,
        roles: _Roles,
        *,
        should_refine: Callable[[Mapping[str, Any]], bool] | None,
        memory: Any,
        base_url: str | None,
        critic_kwargs: dict[str, Any],
    ) -> None:
        self.settings = settings
        self.roles = roles
        self.should_refine = should_refine
        self.memory = memory
        self.base_url = base_url
        self.critic_kwargs = critic_kwargs
        self._role_cache: dict[tuple[Any, ...], _Roles] = {}

    # -- settings for this run ---------------------------------------------------------------------------
    def _run_settings(self) -> tuple[ReflectionSettings, _Roles, Any]:
        try:
            runtime = get_runtime(Context)
        except Exception:  # outside a graph run (direct node tests)
            return self.settings, self.roles, None
        ctx = runtime.context
        store = runtime.store
        if not isinstance(ctx, Context):
            return self.settings, self.roles, store
        overrides: dict[str, Any] = {
            name: getattr(ctx, name)
            for name in ("max_iterations", "score_threshold", "select", "min_improvement", "patience")
            if getattr(ctx, name) is not None
        }
        prompts = dict(self.settings.prompts)
        for role in _PROMPT_KEYS:
            value = getattr(ctx, f"{role}_prompt")
            if value:
                prompts[role] = value
        settings = replace(self.settings, **overrides, prompts=prompts).validate()
        critique_prompt = prompts.get("critique")
        key = (ctx.generator_model, ctx.critic_model, ctx.reviser_model, ctx.base_url, critique_prompt)
        if key == (None, None, None, None, self.settings.prompts.get("critique")):
            return settings, self.roles, store
        if key not in self._role_cache:
            self._role_cache[key] = self._roles_for(ctx, settings)
        return settings, self._role_cache[key], store

    def _roles_for(self, ctx: Context, settings: ReflectionSettings) -> _Roles:
        """Models named in the run's context replace the built ones; unnamed roles keep theirs."""
        base_url = ctx.base_url or self.base_url
        generator = _resolve(ctx.generator_model, "generator", base_url) if ctx.generator_model else None
        reviser = _resolve(ctx.reviser_model, "reviser", base_url) if ctx.reviser_model else generator
        critic = self.roles.critic
        if ctx.critic_model or generator is not None:
            critic = _as_critic(
                ctx.critic_model or generator,
                generator or self.roles.generator,
                base_url=base_url,
                settings=settings,
                **self.critic_kwargs,
            )
        elif isinstance(critic, LLMCritic) and settings.prompts.get("critique"):
            critic = _as_critic(
                critic.model, self.roles.generator, base_url=base_url, settings=settings, **self.critic_kwargs
            )
        return _Roles(generator or self.roles.generator, reviser or self.roles.reviser, critic)

    # -- generate ----------------------------------------------------------------------------------------
    def _trigger(self, state: Mapping[str, Any]) -> dict[str, Any] | None:
        if self.should_refine is None:
            return None
        try:
            go = self.should_refine(state)
        except Exception as exc:  # reported, never skipped
            return {
                "stop_reason": "error",
                "error": f"should_refine raised {type(exc).__name__}: {exc}. Fix the predicate; it gets the state.",
            }
        return None if go else {"stop_reason": "not_triggered"}

    def _generate_messages(
        self, state: Mapping[str, Any], settings: ReflectionSettings, lessons: str
    ) -> tuple[str, list[BaseMessage]]:
        context = f"Context:\n{state['context']}\n" if state.get("context") else ""
        critique = state.get("critique")
        if not state.get("candidate") or critique is None:
            values = {"task": state["task"], "context": context, "lessons": lessons}
            template = settings.prompts.get("generate", GENERATE_PROMPT)
            prompt = render_prompt(template, values) + (
                FOCUS_CUES.get(settings.focus, "") if template is GENERATE_PROMPT else ""
            )
            return "generate", [SystemMessage(GENERATE_SYSTEM), HumanMessage(prompt)]
        window = (
            list(state.get("trajectory") or [])[:-1][-settings.history_window :]
            if settings.history_window
            else []
        )
        history = ""
        if window:
            parts = [
                f"Round {r['iteration']} (score {r['score']}): {r['candidate'][:_HISTORY_CHARS]}\n"
                f"Feedback: {((r['critique'] or {}).get('feedback') or '')[:_HISTORY_CHARS]}"
                for r in window
            ]
            history = "\nEarlier rounds:\n" + "\n".join(parts) + "\n"
        values = {
            "task": state["task"],
            "context": context,
            "candidate": state["candidate"],
            "critique": _format_critique(critique),
            "history": history,
            "preserve_rule": PRESERVE_CORRECT_RULE if settings.preserve_correct else "",
            "focus": FOCUS_PROMPTS[settings.focus],
        }
        template = settings.prompts.get("revise", REVISE_PROMPT)
        prompt = render_prompt(template, values) + (
            FOCUS_CUES.get(settings.focus, "") if template is REVISE_PROMPT else ""
        )
        return "revise", [SystemMessage(REVISE_SYSTEM), HumanMessage(prompt)]

    def _pre_generate(
        self, state: Mapping[str, Any]
    ) -> tuple[dict[str, Any] | None, ReflectionSettings, _Roles, Any]:
        _validate_input(state)
        settings, roles, store = self._run_settings()
        base: dict[str, Any] = {"rg_max_iterations": settings.max_iterations}
        if state.get("candidate"):
            stop = self._trigger(state)
            if stop is not None:
                return {**base, **stop}, settings, roles, store
            if state.get("critique") is None:  # glean an existing candidate: critique it first
                return (
                    {**base, "rg_pending": {"candidate": state["candidate"], "usage": {}}},
                    settings,
                    roles,
                    store,
                )
        return None, settings, roles, store

    def _post_generate(
        self, role: str, text: str, usage: RoleUsage, settings: ReflectionSettings
    ) -> dict[str, Any]:
        update: dict[str, Any] = {
            "rg_max_iterations": settings.max_iterations,
            "candidate": text,
            "rg_pending": {"candidate": text, "usage": {role: usage}},
            "usage": {role: usage, "total": usage},
        }
        if role == "revise":
            update["rg_revisions"] = 1
        return update

    def _error(self, role: str, exc: BaseException, usage: RoleUsage | None = None) -> dict[str, Any]:
        update: dict[str, Any] = {
            "stop_reason": "error",
            "error": f"{role} failed: {type(exc).__name__}: {exc}",
        }
        if usage is not None:
            update["usage"] = {role: usage, "total": usage}
        return update

    def _model_for(self, role: str, roles: _Roles) -> Runnable[Any, Any]:
        return roles.generator if role == "generate" else roles.reviser

    def generate(self, state: ReflectionState, config: RunnableConfig) -> dict[str, Any]:
        early, settings, roles, store = self._pre_generate(state)
        if early is not None:
            return early
        lessons = self._lessons(state, store)
        role, messages = self._generate_messages(state, settings, lessons)
        model = self._model_for(role, roles)
        limits: dict[str, Any] = {"retries": settings.retries, "timeout_s": settings.timeout_s}
        with track_usage() as counter:
            error: Exception | None = None
            try:
                text = ""
                for _ in range(settings.retries + 1):
                    text = _text(invoke_guarded(model, messages, _with_counter(config, counter), **limits))
                    if text:
                        break
                if not text:
                    raise ValueError("the model returned an empty reply")
            except Exception as exc:
                error = exc
        if error is not None:
            return {"rg_max_iterations": settings.max_iterations, **self._error(role, error, counter.usage)}
        return self._post_generate(role, text, counter.usage, settings)

    async def agenerate(self, state: ReflectionState, config: RunnableConfig) -> dict[str, Any]:
        early, settings, roles, store = self._pre_generate(state)
        if early is not None:
            return early
        lessons = await self._alessons(state, store)
        role, messages = self._generate_messages(state, settings, lessons)
        model = self._model_for(role, roles)
        limits: dict[str, Any] = {"retries": settings.retries, "timeout_s": settings.timeout_s}
        with track_usage() as counter:
            error: Exception | None = None
            try:
                text = ""
                for _ in range(settings.retries + 1):
                    text = _text(
                        await ainvoke_guarded(model, messages, _with_counter(config, counter), **limits)
                    )
                    if text:
                        break
                if not text:
                    raise ValueError("the model returned an empty reply")
            except Exception as exc:
                error = exc
        if error is not None:
            return {"rg_max_iterations": settings.max_iterations, **self._error(role, error, counter.usage)}
        return self._post_generate(role, text, counter.usage, settings)

    # -- memory -------------------------------------------------------------------------------------------
    def _memory_store(self, store: Any) -> Any:
        return getattr(self.memory, "store", None) or store

    def _lessons(self, state: Mapping[str, Any], store: Any) -> str:
        if self.memory is None or state.get("candidate"):
            return ""
        lessons = self.memory.search(state["task"], store=self._memory_store(store))
        return str(self.memory.format_lessons(lessons)) if lessons else ""

    async def _alessons(self, state: Mapping[str, Any], store: Any) -> str:
        if self.memory is None or state.get("candidate"):
            return ""
        lessons = await self.memory.asearch(state["task"], store=self._memory_store(store))
        return str(self.memory.format_lessons(lessons)) if lessons else ""

    # -- critique -----------------------------------------------------------------------------------------
    def _request(self, state: Mapping[str, Any], settings: ReflectionSettings) -> CritiqueRequest:
        trajectory = list(state.get("trajectory") or [])
        window = trajectory[-settings.history_window :] if settings.history_window else []
        history = tuple(
            {
                "candidate": r["candidate"][:_HISTORY_CHARS],
                "score": r["score"],
                "feedback": ((r["critique"] or {}).get("feedback") or "")[:_HISTORY_CHARS],
            }
            for r in window
        )
        return CritiqueRequest(
            task=state["task"],
            candidate=state.get("candidate") or "",
            context=state.get("context"),
            iteration=int(state.get("iterations") or 0) + 1,
            score_threshold=settings.score_threshold,
            history=history,
        )

    def _post_critique(
        self, state: Mapping[str, Any], critique: Critique, usage: RoleUsage, settings: ReflectionSettings
    ) -> dict[str, Any]:
        trajectory: list[Round] = list(state.get("trajectory") or [])
        iteration = int(state.get("iterations") or 0) + 1
        if settings.score_threshold is not None:
            accepted = critique.score >= settings.score_threshold
        else:
            accepted = critique.is_acceptable
        pending = state.get("rg_pending") or {}
        candidate = state.get("candidate") or ""
        previous = trajectory[-1]["candidate"] if trajectory else None
        round_usage = dict(pending.get("usage") or {})
        round_usage["critique"] = usage
        total = empty_usage()
        for part in round_usage.values():
            total = add_role_usage(total, part)
        round_usage["total"] = total
        record: Round = {
            "iteration": iteration,
            "candidate": candidate,
            "critique": critique.model_dump(),
            "score": critique.score,
            "accepted": accepted,
            "diff": _diff(previous, candidate),
            "usage": round_usage,
        }
        scores = [r["score"] for r in trajectory if r["score"] is not None] + [critique.score]
        stop: StopReason | None = None
        if iteration < settings.min_iterations:
            stop = None  # a fixed minimum of rounds: accept/plateau only count from min_iterations on
        elif accepted:
            stop = "accepted"
        elif settings.strategy == "self_refine":
            stop = None  # Self-Refine: one refine follows the single critique, then finalize
        elif iteration >= int(state.get("rg_max_iterations") or settings.max_iterations):
            stop = "max_iterations"
        elif _plateau(scores, settings.patience, settings.min_improvement):
            stop = "plateau"
        elif settings.stop_on_no_new_issues and _no_new_issues(trajectory, critique):
            stop = "plateau"
        return {
            "critique": critique.model_dump(),
            "iterations": iteration,
            "trajectory": [record],
            "stop_reason": stop,
            "usage": {"critique": usage, "total": usage},
        }

    def critique(self, state: ReflectionState, config: RunnableConfig) -> dict[str, Any]:
        settings, roles, _ = self._run_settings()
        request = self._request(state, settings)
        with track_usage() as counter:
            error: BaseException | None = None
            try:
                critique = _checked(
                    roles.critic, roles.critic.critique(request, _with_counter(config, counter))
                )
            except Exception as exc:
                error = exc
        if error is not None:
            return self._error("critique", error, counter.usage)
        return self._post_critique(state, critique, counter.usage, settings)

    async def acritique(self, state: ReflectionState, config: RunnableConfig) -> dict[str, Any]:
        settings, roles, _ = self._run_settings()
        request = self._request(state, settings)
        with track_usage() as counter:
            error: BaseException | None = None
            try:
                critique = _checked(
                    roles.critic, await roles.critic.acritique(request, _with_counter(config, counter))
                )
            except Exception as exc:
                error = exc
        if error is not None:
            return self._error("critique", error, counter.usage)
        return self._post_critique(state, critique, counter.usage, settings)

    # -- human review -------------------------------------------------------------------------------------
    def review(self, state: ReflectionState) -> dict[str, Any]:
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

    # -- finalize -----------------------------------------------------------------------------------------
    def _lessons_to_save(self, state: Mapping[str, Any]) -> list[str]:
        """This run's lessons for the Reflexion memory (none without memory or rounds)."""
        if self.memory is None or not state.get("trajectory"):
            return []
        critiques = [r["critique"] for r in state.get("trajectory") or [] if r["critique"]]
        return list(self.memory.lessons_from_critiques(state["task"], critiques))

    def finalize(self, state: ReflectionState) -> dict[str, Any]:
        settings, _, store = self._run_settings()
        lessons = self._lessons_to_save(state)
        if lessons:
            self.memory.save(state["task"], lessons, store=self._memory_store(store))
        return self._select(state, settings)

    async def afinalize(self, state: ReflectionState) -> dict[str, Any]:
        settings, _, store = self._run_settings()
        lessons = self._lessons_to_save(state)
        if lessons:
            await self.memory.asave(state["task"], lessons, store=self._memory_store(store))
        return self._select(state, settings)

    def _select(self, state: Mapping[str, Any], settings: ReflectionSettings) -> dict[str, Any]:
        trajectory: list[Round] = list(state.get("trajectory") or [])
        stop = state.get("stop_reason") or "max_iterations"
        update: dict[str, Any] = {
            "stop_reason": stop,
            "error": state.get("error"),
            "iterations": int(state.get("iterations") or 0),
        }
        last_is_unscored = settings.strategy == "self_refine" and int(state.get("rg_revisions") or 0) > 0
        if last_is_unscored or not trajectory:
            update["candidate"] = state.get("candidate") or ""
            update["critique"] = state.get("critique")
        else:
            if settings.select == "best":
                chosen = max(enumerate(trajectory), key=lambda pair: (pair[1]["score"] or 0.0, pair[0]))[1]
            else:
                chosen = trajectory[-1]
            update["candidate"] = chosen["candidate"]
            update["critique"] = chosen["critique"]
        if "trajectory" not in state:
            update["trajectory"] = []
        # every role is reported, with zeros for a role that never ran (e.g. no revision when round 1 accepts)
        update["usage"] = {role: empty_usage() for role in ("generate", "critique", "revise", "total")}
        return update

    # -- routers ------------------------------------------------------------------------------------------
    def route_after_generate(self, state: ReflectionState) -> Literal["critique", "finalize"]:
        if state.get("stop_reason") is not None:
            return "finalize"
        if self.settings.strategy == "self_refine" and state.get("critique") is not None:
            return "finalize"  # the single refine of Self-Refine is returned without another critique
        return "critique"

    def route_after_critique(self, state: ReflectionState) -> Literal["generate", "finalize"]:
        if state.get("stop_reason") is not None:
            return "finalize"
        if self.settings.strategy == "self_refine":
            return "generate"
        if int(state.get("iterations") or 0) >= int(
            state.get("rg_max_iterations") or self.settings.max_iterations
        ):
            return "finalize"
        return "generate"


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


def _format_critique(critique: Mapping[str, Any]) -> str:
    lines = [f"Score: {critique.get('score')}/10. Acceptable: {critique.get('is_acceptable')}."]
    if critique.get("issues"):
        lines.append("Issues:\n" + "\n".join(f"- {i}" for i in critique["issues"]))
    if critique.get("suggestions"):
        lines.append("Suggestions:\n" + "\n".join(f"- {s}" for s in critique["suggestions"]))
    if critique.get("feedback"):
        lines.append(f"Feedback: {critique['feedback']}")
    return "\n".join(lines)


class _Node(Runnable[Any, Any]):
    """A node with a sync and an async body, called directly.

    `RunnableLambda(func, afunc=...)` inspects both signatures and opens a traced child run on every call; the
    node already runs inside LangGraph's traced task, so this wrapper skips that layer (see bench/README.md).
    """

    def __init__(
        self,
        name: str,
        func: Callable[[Any, RunnableConfig], Any],
        afunc: Callable[[Any, RunnableConfig], Any],
    ) -> None:
        self.name = name
        self._func = func
        self._afunc = afunc

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        return self._func(input, ensure_config(config))

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        return await self._afunc(input, ensure_config(config))


class ReflectionGraph(CompiledStateGraph[ReflectionState, Context, InputState, OutputState]):
    """The compiled graph. Its loop bound is `max_iterations` (a counter in state); LangGraph's recursion limit is
    raised per run, when needed, so it never cuts a run short of `max_iterations` rounds, also as a subgraph."""

    rg_steps_per_round: int = 2
    rg_max_iterations: int = 3

    def _rg_config(self, config: RunnableConfig | None, context: Any) -> RunnableConfig | None:
        rounds = self.rg_max_iterations
        if isinstance(context, Context) and context.max_iterations:
            rounds = max(rounds, int(context.max_iterations))
        needed = self.rg_steps_per_round * rounds + 4
        if ensure_config(config).get("recursion_limit", 25) >= needed:
            return config
        return cast(RunnableConfig, {**(config or {}), "recursion_limit": needed})

    def stream(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:  # type: ignore[override]
        return super().stream(input, self._rg_config(config, kwargs.get("context")), **kwargs)

    def astream(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:  # type: ignore[override]
        return super().astream(input, self._rg_config(config, kwargs.get("context")), **kwargs)


def build_reflection_graph(
    generator: ModelLike = None,
    *,
    critic: ModelLike | Critic = None,
    reviser: ModelLike = None,
    max_iterations: int = 3,
    min_iterations: int = 1,
    score_threshold: float | None = None,
    min_improvement: float = 0.5,
    patience: int | None = 2,
    stop_on_no_new_issues: bool = True,
    select: Select = "best",
    strategy: Strategy = "loop",
    should_refine: Callable[[Mapping[str, Any]], bool] | None = None,
    preserve_correct: bool = True,
    focus: Focus = "general",
    history_window: int = 1,
    prompts: Mapping[str, PromptTemplate] | None = None,
    critic_guidelines: str | None = None,
    parse_retries: int = 1,
    on_parse_error: ParseErrorPolicy = "feedback",
    retries: int = 2,
    timeout_s: float | None = None,
    memory: Any = None,
    human_review: bool = False,
    base_url: str | None = None,
) -> StateGraph[ReflectionState, Context, InputState, OutputState]:
    """Build the uncompiled reflection `StateGraph` (see `create_reflection_graph` for the arguments)."""
    settings = ReflectionSettings(
        max_iterations=max_iterations,
        min_iterations=min_iterations,
        score_threshold=score_threshold,
        min_improvement=min_improvement,
        patience=patience,
        stop_on_no_new_issues=stop_on_no_new_issues,
        select=select,
        strategy=strategy,
        preserve_correct=preserve_correct,
        focus=focus,
        history_window=history_window,
        retries=retries,
        timeout_s=timeout_s,
        prompts=dict(prompts or {}),
    ).validate()
    if strategy == "self_refine":
        settings = replace(settings, max_iterations=1, min_iterations=1)
    if should_refine is not None and not callable(should_refine):
        raise ValueError("should_refine must be a callable taking the state and returning a bool")
    if parse_retries < 0:
        raise ValueError(f"parse_retries must be >= 0, got {parse_retries}")
    if on_parse_error not in ("feedback", "raise"):
        raise ValueError(f"on_parse_error must be 'feedback' or 'raise', got {on_parse_error!r}")
    if memory is not None:
        for method in ("search", "asearch", "save", "asave", "lessons_from_critiques", "format_lessons"):
            if not callable(getattr(memory, method, None)):
                raise ValueError(
                    f"memory must be a reflection_graph.memory.ReflexionMemory (missing {method}())"
                )
    gen_model = _resolve(generator, "generator", base_url)
    reviser_model = _resolve(reviser, "reviser", base_url) if reviser is not None else gen_model
    critic_kwargs: dict[str, Any] = {
        "guidelines": critic_guidelines,
        "parse_retries": parse_retries,
        "on_parse_error": on_parse_error,
    }
    critic_obj = _as_critic(critic, gen_model, base_url=base_url, settings=settings, **critic_kwargs)
    nodes = _Nodes(
        settings,
        _Roles(gen_model, reviser_model, critic_obj),
        should_refine=should_refine,
        memory=memory,
        base_url=base_url,
        critic_kwargs=critic_kwargs,
    )
    builder = StateGraph(
        ReflectionState, context_schema=Context, input_schema=InputState, output_schema=OutputState
    )
    builder.add_node("generate", _Node("generate", nodes.generate, nodes.agenerate))
    builder.add_node("critique", _Node("critique", nodes.critique, nodes.acritique))
    builder.add_node(
        "finalize", _Node("finalize", lambda s, c: nodes.finalize(s), lambda s, c: nodes.afinalize(s))
    )
    builder.add_edge(START, "generate")
    builder.add_conditional_edges("generate", nodes.route_after_generate, ["critique", "finalize"])
    if human_review:
        builder.add_node("review", nodes.review)
        builder.add_edge("critique", "review")
        builder.add_conditional_edges("review", nodes.route_after_critique, ["generate", "finalize"])
    else:
        builder.add_conditional_edges("critique", nodes.route_after_critique, ["generate", "finalize"])
    builder.add_edge("finalize", END)
    return builder


def create_reflection_graph(
    generator: ModelLike = None,
    *,
    critic: ModelLike | Critic = None,
    reviser: ModelLike = None,
    max_iterations: int = 3,
    min_iterations: int = 1,
    score_threshold: float | None = None,
    min_improvement: float = 0.5,
    patience: int | None = 2,
    stop_on_no_new_issues: bool = True,
    select: Select = "best",
    strategy: Strategy = "loop",
    should_refine: Callable[[Mapping[str, Any]], bool] | None = None,
    preserve_correct: bool = True,
    focus: Focus = "general",
    history_window: int = 1,
    prompts: Mapping[str, PromptTemplate] | None = None,
    critic_guidelines: str | None = None,
    parse_retries: int = 1,
    on_parse_error: ParseErrorPolicy = "feedback",
    retries: int = 2,
    timeout_s: float | None = None,
    memory: Any = None,
    human_review: bool = False,
    base_url: str | None = None,
    checkpointer: Checkpointer = None,
    store: Any = None,
    name: str = "reflection",
) -> ReflectionGraph:
    """Create a compiled draft -> critique -> revise graph.

    Args:
        generator: the drafting model: a `BaseChatModel`, an `init_chat_model` string (`"openai:gpt-4o-mini"`),
            `"local:/path/model.gguf"`, a plain callable `fn(prompt: str) -> str`, or None for the embedded model.
        critic: a `Critic` (e.g. `CodeTestCritic`, `CompositeCritic`) or a model spec as for `generator`; None
            uses the generator's model at temperature 0.
        reviser: model spec for revisions; None reuses the generator.
        max_iterations: hard limit on critique rounds (>= 1). See the module docs for the counting rule.
        min_iterations: rounds always run before an accept or plateau can stop the loop (1 to
            max_iterations); `min_iterations == max_iterations` gives a fixed number of rounds.
        score_threshold: when set, `score >= score_threshold` accepts whatever the verdict says, and the bar is
            written into the critic prompt; when None, the critic's `is_acceptable` decides.
        min_improvement: score gain that counts as progress for the plateau stop.
        patience: stop with `plateau` when the last `patience` rounds did not beat the earlier best by
            `min_improvement`; None disables it.
        stop_on_no_new_issues: also stop with `plateau` when a round raises no issue that was not raised before.
        select: `"best"` returns the highest-scoring round's candidate (ties go to the later round); `"last"` the
            last round's.
        strategy: `"loop"` (the full loop) or `"self_refine"` (draft, one critique, one refine).
        should_refine: predicate on the state, checked before critiquing a given `candidate` and before each
            revision; False stops with `not_triggered`; an exception stops with `error` and a message.
        preserve_correct: tell the reviser to keep what the critique did not object to.
        focus: targeted revision prompt: `general`, `code`, `reasoning` or `format`.
        history_window: earlier rounds shown to the reviser (bounded, so prompts do not grow with rounds).
        prompts: template overrides keyed by role (`generate`, `critique`, `revise`), strings or callables.
        critic_guidelines: domain guidelines added to the LLM critic's prompt.
        parse_retries: extra critic calls when its reply cannot be parsed.
        on_parse_error: `"feedback"` (round not acceptable, raw text as feedback) or `"raise"` (run ends with
            `stop_reason="error"`).
        retries: retries of transient model errors (rate limits, timeouts, connection errors) with backoff.
        timeout_s: time limit of one model call in seconds.
        memory: a `ReflexionMemory`; lessons from earlier similar tasks go into the draft prompt and this run's
            lessons are saved after `finalize`. Without its own store it uses the graph's `store`.
        human_review: pause after each critique with `interrupt` so a person can accept or add feedback
            (needs a checkpointer).
        base_url: OpenAI-compatible server for string model names.
        checkpointer: passed to `compile` (e.g. `SqliteSaver`, `PostgresSaver`).
        store: passed to `compile` (e.g. `InMemoryStore`, `SqliteStore`, `PostgresStore`).
        name: the compiled graph's name.

    Returns:
        A `CompiledStateGraph` taking `{"task", "candidate"?, "context"?}` and returning `candidate`,
        `critique`, `trajectory`, `iterations`, `stop_reason`, `error` and `usage`.

    Raises:
        ValueError: a setting is out of range or a model spec cannot be resolved; the message names the fix.

    Example:
        ```python
        from reflection_graph import create_reflection_graph

        graph = create_reflection_graph("openai:gpt-4o-mini", max_iterations=3, score_threshold=8)
        result = graph.invoke({"task": "Write a polite email declining a job offer"})
        print(result["candidate"], result["stop_reason"])
        ```
    """
    builder = build_reflection_graph(
        generator,
        critic=critic,
        reviser=reviser,
        max_iterations=max_iterations,
        min_iterations=min_iterations,
        score_threshold=score_threshold,
        min_improvement=min_improvement,
        patience=patience,
        stop_on_no_new_issues=stop_on_no_new_issues,
        select=select,
        strategy=strategy,
        should_refine=should_refine,
        preserve_correct=preserve_correct,
        focus=focus,
        history_window=history_window,
        prompts=prompts,
        critic_guidelines=critic_guidelines,
        parse_retries=parse_retries,
        on_parse_error=on_parse_error,
        retries=retries,
        timeout_s=timeout_s,
        memory=memory,
        human_review=human_review,
        base_url=base_url,
    )
    graph = builder.compile(checkpointer=checkpointer, store=store, name=name)
    graph.__class__ = ReflectionGraph
    reflection = cast(ReflectionGraph, graph)
    reflection.rg_steps_per_round = 3 if human_review else 2
    reflection.rg_max_iterations = 1 if strategy == "self_refine" else max_iterations
    return reflection
