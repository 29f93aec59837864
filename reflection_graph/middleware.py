"""`ReflectionMiddleware`: the critique -> revise loop as LangChain v1 agent middleware (`create_agent`).

How a run goes
--------------
1. `before_agent` resets this middleware's private state (so every run starts at round 0, also on a thread with
   a checkpointer) and records the *task*: the state key named by `task_key`, or else the human message that
   started the run (the last human message in the state when the run begins; on a new thread, the first one).
2. The agent runs as usual: the model, tool calls, the model again, until it answers without tool calls.
3. `after_agent` sends the task and that final answer to the critic. This is one *round*.
   - Not acceptable and rounds left: the critique is added as a `HumanMessage` and the hook returns
     `jump_to: "model"`, so the agent answers again and may call tools again.
   - Accepted, out of rounds (`max_iterations`), a plateau (as in the graph: `patience`, `min_improvement`,
     `stop_on_no_new_issues`) or a critic error: the run finishes. With `select="best"` the last message is
     replaced by the best-scoring round's answer (ties go to the later round). The replacement keeps the last
     message's id and `usage_metadata` (so summing usage over the messages still counts each model call once)
     and says `response_metadata["reflection_selected_round"]`.
   The hook never returns `jump_to: "end"`: from `after_agent` that target is the hook's own node, which would
   run again forever.

Counting rule
-------------
A round is one critique, counted in private state (`reflection_iterations`), never left to the recursion limit.
A run has at most `max_iterations` rounds, so at most `max_iterations` agent turns: without tools that is
`max_iterations` agent model calls, and with tools each turn is the agent's usual model/tool loop. An LLM critic
makes one call per round (more only when a reply cannot be parsed, `parse_retries`, or a transient error is
retried, `retries`). A run of `create_agent` with this middleware and no tools runs `1 + 2 * max_iterations`
graph steps (`before_agent`, then `model` and `after_agent` per round), so it fits in a `recursion_limit` of
`2 + 2 * max_iterations` (an agent without middleware needs 2); `create_agent`'s own limit is 9999.

Where the result is
-------------------
Besides `messages`, the agent's output has a `reflection` key shaped like the reflection graph's output:
`candidate`, `critique`, `trajectory` (one entry per round: iteration, candidate, critique, score, accepted, diff,
usage), `iterations`, `stop_reason` (`accepted | max_iterations | plateau | error`, or `not_triggered` when the
run ended without a final answer to judge, e.g. a `return_direct` tool), `error`, `selected` (the round whose
answer is the final message, 0 for none) and `usage` (the critic's model calls, tokens and seconds, under
`critique` and `total`; the agent model's own usage stays on its `AIMessage`s).
"""

from __future__ import annotations

import types
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, cast

from langchain.agents.middleware.types import (
    AgentMiddleware,
    AgentState,
    OmitFromInput,
    PrivateStateAttr,
    hook_config,
)
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.config import get_config
from langgraph.runtime import Runtime
from typing_extensions import NotRequired, TypedDict, Unpack

from reflection_graph._runtime import RoleUsage, add_role_usage, empty_usage
from reflection_graph.critics.base import Critic, CritiqueRequest
from reflection_graph.critique import Critique
from reflection_graph.loop import (
    Judged,
    Overrides,
    Roles,
    accepts,
    ajudge,
    as_critic,
    critic_help,
    critique_history,
    judge,
    select_round,
    stop_reason,
)
from reflection_graph.loop import diff as _diff
from reflection_graph.prompts import (
    PRESERVE_CORRECT_RULE,
    PromptOverride,
    format_critique,
    render_prompt,
)
from reflection_graph.settings import Settings, SettingsKwargs, chosen_settings, setting_fields
from reflection_graph.state import Round, StopReason

try:  # langchain >= 1.3: keep the critic's own model calls out of the agent's message stream
    from langchain.agents.middleware.internal_call_transformer import (
        InternalCallTransformer,
        internal_call_metadata,
    )

    _TRANSFORMERS: tuple[Any, ...] = (InternalCallTransformer,)
except ImportError:  # pragma: no cover - older langchain 1.x
    _TRANSFORMERS = ()

    def internal_call_metadata() -> dict[str, Any]:
        return {}


__all__ = [
    "CRITIQUE_MESSAGE_PREFIX",
    "FEEDBACK_PROMPT",
    "ReflectionMiddleware",
    "ReflectionMiddlewareState",
    "ReflectionReport",
]

FEEDBACK_PROMPT = """A reviewer checked your answer (round {iteration} of {max_iterations}) and it is not acceptable yet.
{critique}

Write a new complete answer to the original request that fixes every issue above. {preserve_rule}
You may use your tools again if that helps."""
"""The critique message sent back to the agent. Placeholders: `critique` (score, verdict, issues, suggestions,
feedback), `iteration`, `max_iterations`, `task`, `candidate`, `preserve_rule`."""

CRITIQUE_MESSAGE_PREFIX = "reflection-critique-"
"""Ids of the critique messages this middleware adds start with this (they are never taken as the task)."""


class ReflectionReport(TypedDict, total=False):
    """The `reflection` output key: the loop's result, shaped like the reflection graph's output."""

    candidate: str
    critique: dict[str, Any] | None
    trajectory: list[dict[str, Any]]  # `Round`s; plain dicts here so the JSON schema builds on Python < 3.12
    iterations: int
    stop_reason: StopReason
    error: str | None
    selected: int
    usage: dict[str, dict[str, Any]]  # `RoleUsage` per role


class ReflectionMiddlewareState(AgentState[Any]):
    """The middleware's state: private working keys, and the `reflection` report in the output only."""

    reflection_task: NotRequired[Annotated[str, PrivateStateAttr]]
    reflection_iterations: NotRequired[Annotated[int, PrivateStateAttr]]
    reflection_rounds: NotRequired[Annotated[list[dict[str, Any]], PrivateStateAttr]]
    reflection: NotRequired[Annotated[ReflectionReport, OmitFromInput]]


@dataclass(frozen=True)
class _Verdict:
    """What one critique round decided."""

    round: dict[str, Any]
    stop: StopReason | None
    error: str | None


class ReflectionMiddleware(AgentMiddleware[ReflectionMiddlewareState, Any, Any]):
    """Critique the agent's final answer and send it back to revise until a critic accepts it.

    Args:
        critic: a `Critic` (`LLMCritic`, `CodeTestCritic`, `CompositeCritic`, `JSONSchemaCritic`, ...), a chat
            model, a model spec string (`"embedded"`, `"openai:gpt-4o-mini"`, a server model name with
            `base_url`), or a callable `fn(prompt: str) -> str` that replies with a JSON verdict. Models get an
            `LLMCritic` at temperature 0, built exactly as `create_reflection_graph` builds its critic.
        task_key: a state key holding the task (a non-empty string, sent in the agent's input with `messages`);
            None takes the human message that started the run.
        feedback_prompt: the critique message template (see `FEEDBACK_PROMPT`) or a callable of its values.
        critic_guidelines: domain guidelines added to an LLM critic's prompt.
        base_url: OpenAI-compatible server for a string critic model name.
        settings: a `reflection_graph.Settings` made ahead, as `create_reflection_graph` takes it (the same
            object can build a graph); it may set only the settings an agent takes (below).
        **values: the fields of `reflection_graph.Settings` that apply to an agent, with the same names,
            defaults and validation as `create_reflection_graph` (over `settings`): `max_iterations` (3: most critique rounds, so
            the agent answers at most this many times), `min_iterations`, `score_threshold` (None: the critic's
            verdict decides; set: `score >= score_threshold` accepts and an LLM critic is told the bar),
            `select` ("best": the best-scoring round's answer becomes the final message, ties to the later),
            `patience`, `min_improvement`, `stop_on_no_new_issues` (the plateau stop), `preserve_correct`,
            `history_window` (earlier rounds shown to the critic), `parse_retries`, `on_parse_error`, `retries`,
            `timeout_s`, `prompts` (only `"critique"`). The drafting settings (`strategy`, `n_drafts`,
            `n_revisions`, `focus`) do not apply: the agent drafts.

    A run's `reflection_graph.Context` (when the agent is built with `context_schema=Context`) overrides
    `max_iterations`, `score_threshold`, `select`, `min_improvement`, `patience` and the critic's model
    (`critic_model`, `base_url`, `critique_prompt`) for that run.

    Raises:
        ValueError: a setting out of range (`max_iterations < 1`, `score_threshold` outside 0-10, ...), an
            unknown `select`, a critic of the wrong type, or an unresolvable critic model spec.

    Example:
        ```python
        from langchain.agents import create_agent
        from reflection_graph.middleware import ReflectionMiddleware

        agent = create_agent(
            "openai:gpt-4o-mini",
            tools=[search],
            middleware=[ReflectionMiddleware("openai:gpt-4o-mini", max_iterations=2, score_threshold=8)],
        )
        result = agent.invoke({"messages": [{"role": "user", "content": "Summarize today's AI news"}]})
        print(result["messages"][-1].content, result["reflection"]["stop_reason"])
        ```
    """

    state_schema = ReflectionMiddlewareState
    transformers = _TRANSFORMERS

    def __init__(
        self,
        critic: Any,
        *,
        task_key: str | None = None,
        feedback_prompt: PromptOverride = FEEDBACK_PROMPT,
        critic_guidelines: str | None = None,
        base_url: str | None = None,
        settings: Settings | None = None,
        **values: Unpack[SettingsKwargs],
    ) -> None:
        super().__init__()
        self.settings = _agent_settings(settings, values)
        if task_key is not None and (not isinstance(task_key, str) or not task_key.isidentifier()):
            raise ValueError(f"task_key must be a state key name such as 'task', got {task_key!r}")
        if task_key in ReflectionMiddlewareState.__annotations__:
            raise ValueError(f"task_key {task_key!r} is a key of the agent's own state; name another key")
        if not (isinstance(feedback_prompt, str) or callable(feedback_prompt)):
            raise ValueError("feedback_prompt must be a template string or a callable of its values")
        if critic is None:  # the graph's default critic is the generator's model; an agent has none to share
            raise ValueError(critic_help(critic))
        self.task_key = task_key
        self.feedback_prompt = feedback_prompt
        built = as_critic(critic, None, self.settings, base_url=base_url, guidelines=critic_guidelines)
        self.overrides = Overrides(
            self.settings, Roles(None, None, built), base_url=base_url, guidelines=critic_guidelines
        )
        if task_key is not None:  # the task travels in the input: declare the key so the agent accepts it
            self.state_schema = _with_task_key(task_key)

    @property
    def critic(self) -> Critic:
        """The critic this middleware was built with (a run's `Context` may name another)."""
        return self.overrides.roles.critic

    # -- per run -------------------------------------------------------------------------------------------
    def _for_run(self, runtime: Runtime[Any]) -> tuple[Settings, Critic]:
        """This run's settings and critic: a `Context` (or context mapping) overrides the built ones."""
        settings, roles = self.overrides.for_run(getattr(runtime, "context", None))
        return settings, roles.critic

    def _task(self, state: Mapping[str, Any]) -> str:
        if self.task_key is not None:
            task = state.get(self.task_key)
            if not isinstance(task, str) or not task.strip():
                raise ValueError(
                    f"ReflectionMiddleware(task_key={self.task_key!r}) needs a non-empty string under "
                    f"{self.task_key!r} in the agent's input, e.g. "
                    f"agent.invoke({{'messages': [...], {self.task_key!r}: 'Write ...'}}); got {task!r}"
                )
            return task
        for message in reversed(state.get("messages") or []):
            if isinstance(message, HumanMessage) and not str(message.id or "").startswith(
                CRITIQUE_MESSAGE_PREFIX
            ):
                text = message.text.strip()
                if text:
                    return text
        raise ValueError(
            "ReflectionMiddleware found no human message to use as the task: send one in 'messages', "
            "or build it with task_key='...' and pass the task under that key"
        )

    # -- hooks ---------------------------------------------------------------------------------------------
    def before_agent(self, state: ReflectionMiddlewareState, runtime: Runtime[Any]) -> dict[str, Any]:
        """Reset the rounds for this run and record the task."""
        return {
            "reflection_task": self._task(state),
            "reflection_iterations": 0,
            "reflection_rounds": [],
        }

    async def abefore_agent(self, state: ReflectionMiddlewareState, runtime: Runtime[Any]) -> dict[str, Any]:
        return self.before_agent(state, runtime)

    @hook_config(can_jump_to=["model"])
    def after_agent(self, state: ReflectionMiddlewareState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Critique the final answer; jump back to the model with the critique, or finish."""
        answer = _final_answer(state)
        if answer is None:
            return _not_triggered(state)
        settings, critic = self._for_run(runtime)
        verdict = judge(critic, self._request(state, settings, answer), _critic_config())
        return self._update(state, settings, answer, verdict)

    @hook_config(can_jump_to=["model"])
    async def aafter_agent(
        self, state: ReflectionMiddlewareState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Async twin of `after_agent`."""
        answer = _final_answer(state)
        if answer is None:
            return _not_triggered(state)
        settings, critic = self._for_run(runtime)
        verdict = await ajudge(critic, self._request(state, settings, answer), _critic_config())
        return self._update(state, settings, answer, verdict)

    # -- shared by the sync and async hooks -------------------------------------------------------------------
    def _request(self, state: Mapping[str, Any], settings: Settings, answer: AIMessage) -> CritiqueRequest:
        history = critique_history(list(state.get("reflection_rounds") or []), settings.history_window)
        task = state.get("reflection_task") or self._task(state)
        return CritiqueRequest(
            task=task,
            candidate=answer.text,
            iteration=int(state.get("reflection_iterations") or 0) + 1,
            score_threshold=settings.score_threshold,
            history=history,
        )

    def _update(
        self,
        state: Mapping[str, Any],
        settings: Settings,
        answer: AIMessage,
        judged: Judged,
    ) -> dict[str, Any]:
        result, usage, error = judged
        outcome: Critique | BaseException = result if result is not None else cast(BaseException, error)
        verdict = _judge(state, settings, answer, outcome, usage)
        rounds = [*(state.get("reflection_rounds") or []), verdict.round]
        update: dict[str, Any] = {
            "reflection_iterations": verdict.round["iteration"],
            "reflection_rounds": rounds,
        }
        if verdict.stop is None:
            update["messages"] = [self._feedback(state, settings, verdict.round)]
            update["jump_to"] = "model"
            return update
        scored = [r for r in rounds if r["critique"] is not None]
        chosen: dict[str, Any] = (
            dict(select_round(cast(list[Round], scored), settings.select)) if scored else verdict.round
        )
        if chosen["message_id"] != answer.id:
            best = _message_by_id(state.get("messages") or [], chosen["message_id"])
            if best is not None:  # the last position keeps its id and the usage of the call that made it
                meta = {**best.response_metadata, "reflection_selected_round": chosen["iteration"]}
                update["messages"] = [
                    best.model_copy(
                        update={
                            "id": answer.id,
                            "usage_metadata": answer.usage_metadata,
                            "response_metadata": meta,
                        }
                    )
                ]
        update["reflection"] = _report(rounds, chosen, verdict)
        return update

    def _feedback(self, state: Mapping[str, Any], settings: Settings, record: dict[str, Any]) -> HumanMessage:
        values = {
            "critique": format_critique(record["critique"] or {}),
            "iteration": record["iteration"],
            "max_iterations": settings.max_iterations,
            "task": state.get("reflection_task") or "",
            "candidate": record["candidate"],
            "preserve_rule": PRESERVE_CORRECT_RULE if settings.preserve_correct else "",
        }
        text = render_prompt(self.feedback_prompt, values).strip()
        return HumanMessage(content=text, id=f"{CRITIQUE_MESSAGE_PREFIX}{uuid.uuid4()}")


def _agent_settings(settings: Settings | None, values: Mapping[str, Any]) -> Settings:
    """The middleware's settings (`chosen_settings`, as every factory's); settings that shape drafting or budget
    the whole run (the agent's own calls, which the middleware does not make) are refused."""
    chosen = chosen_settings(
        settings,
        values,
        taken=[f.name for f in setting_fields(agent=True)],
        refusal="{names} shape drafting or budget a whole run, which the agent does itself; use {taken}",
    )
    other_roles = sorted(set(chosen.prompts) - {"critique"})
    if other_roles:
        raise ValueError(f"prompts {other_roles} do not apply to the middleware; only 'critique' does")
    return chosen


def _final_answer(state: Mapping[str, Any]) -> AIMessage | None:
    """The agent's final answer: the last message, when it is an `AIMessage` without tool calls."""
    messages = state.get("messages") or []
    last = messages[-1] if messages else None
    if isinstance(last, AIMessage) and not last.tool_calls:
        return last
    return None  # e.g. a `return_direct` tool result, or another middleware ended the run early


def _not_triggered(state: Mapping[str, Any]) -> dict[str, Any]:
    """No final answer to judge (a `return_direct` tool, or another middleware ended the run): report it."""
    rounds = list(state.get("reflection_rounds") or [])
    chosen = {"candidate": "", "critique": None, "iteration": 0}  # the last message is no judged answer
    return {"reflection": _report(rounds, chosen, _Verdict({}, "not_triggered", None))}


def _critic_config() -> RunnableConfig:
    """The node's config (tracing callbacks) with the critic's calls marked internal."""
    try:
        config: dict[str, Any] = dict(get_config())
    except RuntimeError:  # called outside a graph run
        config = {}
    config["metadata"] = {
        **(config.get("metadata") or {}),
        "lc_source": "reflection",
        **internal_call_metadata(),
    }
    config["tags"] = [*(config.get("tags") or []), "nostream"]
    return cast(RunnableConfig, config)


def _judge(
    state: Mapping[str, Any],
    settings: Settings,
    answer: AIMessage,
    result: Critique | BaseException,
    usage: RoleUsage,
) -> _Verdict:
    rounds = list(state.get("reflection_rounds") or [])
    iteration = int(state.get("reflection_iterations") or 0) + 1
    candidate = answer.text
    record: dict[str, Any] = {
        "iteration": iteration,
        "candidate": candidate,
        "critique": None,
        "score": None,
        "accepted": False,
        "diff": _diff(rounds[-1]["candidate"] if rounds else None, candidate),
        "usage": {"critique": usage, "total": add_role_usage(None, usage)},
        "message_id": answer.id,
    }
    if isinstance(result, BaseException):
        return _Verdict(record, "error", f"critique failed: {type(result).__name__}: {result}")
    accepted = accepts(result.score, result.is_acceptable, settings.score_threshold)
    record.update(critique=result.model_dump(), score=result.score, accepted=accepted)
    stop = stop_reason(settings, cast(list[Round], rounds), iteration, record["critique"], accepted)
    return _Verdict(record, stop, None)


def _message_by_id(messages: list[AnyMessage], message_id: str | None) -> BaseMessage | None:
    return next((m for m in messages if message_id is not None and m.id == message_id), None)


def _report(rounds: list[dict[str, Any]], chosen: Mapping[str, Any], verdict: _Verdict) -> ReflectionReport:
    total = empty_usage()
    for r in rounds:
        total = add_role_usage(total, r["usage"]["critique"])
    trajectory = [{k: v for k, v in r.items() if k != "message_id"} for r in rounds]
    assert verdict.stop is not None
    return {
        "candidate": chosen["candidate"],
        "critique": chosen["critique"],
        "trajectory": trajectory,
        "iterations": len(rounds),
        "stop_reason": verdict.stop,
        "error": verdict.error,
        "selected": int(chosen["iteration"]),
        "usage": {"critique": dict(total), "total": dict(add_role_usage(None, total))},
    }


def _with_task_key(task_key: str) -> type[ReflectionMiddlewareState]:
    """`ReflectionMiddlewareState` plus the string key `task_key` (so the agent's input schema has it)."""

    def body(namespace: dict[str, Any]) -> None:
        namespace["__annotations__"] = {task_key: NotRequired[str]}

    return cast(
        type[ReflectionMiddlewareState],
        types.new_class("ReflectionTaskState", (ReflectionMiddlewareState,), exec_body=body),
    )
