"""The LLM critic: a chat model judges the candidate and returns a structured `Critique`.

Parsing, in order:
1. `with_structured_output(CritiqueOutput, include_raw=True)` where the model supports it. With
   `method="auto"` the model's default method is tried first; a non-transient refusal (for example llama.cpp's
   OpenAI-compatible server answers `json_schema` with HTTP 500) falls back to `function_calling`, then to plain
   text. The method that worked is remembered for later rounds.
2. Plain text: the reply is parsed by `parse_critique`, which accepts JSON with alias keys (`needs_improvement`,
   `is_good`, `pass`, `quality_score`, ...).

A reply that still cannot be parsed is retried `parse_retries` times (fewer when the run's budget refuses a retry).
Then `on_parse_error` decides:
- `"feedback"` (default): the round counts as *not acceptable*, score 0, `feedback` = the raw reply text,
  `parsed=False`; the loop goes on, so the reviser still sees what the critic said.
- `"raise"`: a `CritiqueParseError` ends the run with `stop_reason="error"` and the best candidate so far.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Generator
from typing import Any, Literal, cast, get_args

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.runnables import Runnable, RunnableConfig

from reflection_graph._runtime import BudgetExhausted
from reflection_graph.critics.base import CritiqueRequest, ModelCritic, is_refusal
from reflection_graph.critique import (
    Critique,
    CritiqueOutput,
    CritiqueParseError,
    critique_tool_schema,
    parse_critique,
)
from reflection_graph.prompts import (
    CRITIQUE_PROMPT,
    CRITIQUE_SYSTEM,
    THRESHOLD_RULE,
    PromptOverride,
    render_prompt,
)
from reflection_graph.settings import ParseErrorPolicy

__all__ = ["LLMCritic", "ParseErrorPolicy", "StructuredMethod"]

StructuredMethod = Literal["auto", "json_schema", "function_calling", "json_mode", "text"]
_Outcome = tuple[Any, "Exception | None"]
_FALLBACK_ORDER: tuple[StructuredMethod, ...] = ("function_calling", "text")


class LLMCritic(ModelCritic):
    """Judge a candidate with a chat model.

    Args:
        model: the critic model (run at temperature 0 where the model allows it; see `models.critic_model`).
        prompt: template for the user message (placeholders: task, context, candidate, threshold_rule,
            guidelines) or a callable taking those values.
        system: system message text.
        guidelines: optional domain guidelines appended to the prompt (e.g. a style guide).
        method: structured-output method; `"auto"` picks and falls back as described in the module docs.
        parse_retries: extra critic calls when a reply cannot be parsed.
        on_parse_error: `"feedback"` or `"raise"` (see module docs).
        retries: retries of transient model errors (rate limits, timeouts, connection errors), with backoff.
        timeout_s: time limit of one model call, in seconds (None: no limit).
        name: the critic's name in findings.
    """

    def __init__(
        self,
        model: BaseChatModel | Runnable[Any, Any],
        *,
        prompt: PromptOverride = CRITIQUE_PROMPT,
        system: str = CRITIQUE_SYSTEM,
        guidelines: str | None = None,
        method: StructuredMethod = "auto",
        parse_retries: int = 1,
        on_parse_error: ParseErrorPolicy = "feedback",
        retries: int = 2,
        timeout_s: float | None = None,
        name: str = "llm",
    ) -> None:
        if on_parse_error not in get_args(ParseErrorPolicy):
            raise ValueError(
                f"on_parse_error must be one of {get_args(ParseErrorPolicy)}, got {on_parse_error!r}"
            )
        if method not in get_args(StructuredMethod):
            raise ValueError(f"method must be one of {', '.join(get_args(StructuredMethod))}; got {method!r}")
        if parse_retries < 0:
            raise ValueError(f"parse_retries must be >= 0, got {parse_retries}")
        super().__init__(model, retries=retries, timeout_s=timeout_s, name=name)
        self.prompt = prompt
        self.system = system
        self.guidelines = guidelines
        self.method: StructuredMethod = method
        self._lock = threading.Lock()
        self._structured: dict[str, Runnable[Any, Any] | None] = {}
        self._order: tuple[StructuredMethod, ...] = (
            (method,) if method != "auto" else ("auto", *_FALLBACK_ORDER)
        )
        self.parse_retries = parse_retries
        self.on_parse_error: ParseErrorPolicy = on_parse_error

    chat_model_only = False  # any runnable that takes messages
    prompt_argument = "prompt"  # for_run: a run's critique prompt replaces `prompt`

    # -- prompt -------------------------------------------------------------------------------------------
    def messages(self, request: CritiqueRequest) -> list[BaseMessage]:
        """The messages sent to the critic model for `request`."""
        threshold_rule = (
            THRESHOLD_RULE.format(threshold=f"{request.score_threshold:g}") + "\n"
            if request.score_threshold is not None
            else ""
        )
        guidelines = f"Guidelines:\n{self.guidelines}\n" if self.guidelines else ""
        values = {
            "task": request.task,
            "context": f"Context:\n{request.context}\n" if request.context else "",
            "candidate": request.candidate,
            "threshold_rule": threshold_rule,
            "guidelines": guidelines,
            "iteration": request.iteration,
        }
        return [SystemMessage(self.system), HumanMessage(render_prompt(self.prompt, values))]

    # -- calling ------------------------------------------------------------------------------------------
    def _runnable(self, method: StructuredMethod) -> Runnable[Any, Any] | None:
        """The structured-output runnable for `method`, built once per critic (None: plain text)."""
        with self._lock:
            if method not in self._structured:
                self._structured[method] = self._build_runnable(method)
            return self._structured[method]

    def _build_runnable(self, method: StructuredMethod) -> Runnable[Any, Any] | None:
        if method == "text" or not hasattr(self.model, "with_structured_output"):
            return None
        kwargs: dict[str, Any] = {"include_raw": True}
        if method != "auto":
            kwargs["method"] = method
        # Function calling gets the tool whose score is an enum of 0-10 (a grammar that ignores `maximum` still
        # keeps to it); the other methods get the pydantic schema.
        schema: Any = critique_tool_schema() if method == "function_calling" else CritiqueOutput
        try:
            return self.model.with_structured_output(schema, **kwargs)  # type: ignore[union-attr]
        except (NotImplementedError, TypeError, ValueError):
            return None

    def _methods(self) -> tuple[StructuredMethod, ...]:
        return self._order

    def _to_critique(self, result: Any) -> Critique:
        if isinstance(result, dict) and "raw" in result:
            parsed = result.get("parsed")
            if parsed is not None and result.get("parsing_error") is None:
                return parse_critique(parsed)
            raw = result.get("raw")
            return parse_critique(_message_text(raw))
        if isinstance(result, BaseMessage):
            return parse_critique(_message_text(result))
        return parse_critique(result)

    def _fail(self, exc: CritiqueParseError) -> Critique:
        if self.on_parse_error == "raise":
            raise CritiqueParseError(
                f"critic {self.name!r} gave an unparsable critique after {self.parse_retries + 1} attempts: "
                f"{exc}. Use a model with structured output, or on_parse_error='feedback'.",
                exc.raw,
            ) from exc
        return Critique(
            issues=["the critique could not be parsed"],
            suggestions=[],
            is_acceptable=False,
            score=0.0,
            feedback=exc.raw or str(exc),
            parsed=False,
        )

    def _steps(self, request: CritiqueRequest) -> Generator[Runnable[Any, Any], _Outcome, Critique]:
        """The critic's protocol, shared by the sync and async drivers.

        Yields the runnable to call next and receives `(result, None)` or `(None, error)`; returns the critique.
        Each parse attempt tries the structured-output methods in order; a refusal drops that method for good.
        """
        last_error = CritiqueParseError("no attempt made")
        for attempt in range(self.parse_retries + 1):
            for method in self._methods():
                result, error = yield self._target(method)
                if error is not None:
                    if attempt > 0 and isinstance(error, BudgetExhausted):
                        return self._fail(last_error)  # no budget to ask again: the reply we have decides
                    if not is_refusal(error) or len(self._order) == 1:
                        raise error
                    self._drop_method(method)
                    continue
                try:
                    return self._to_critique(result)
                except CritiqueParseError as exc:
                    last_error = exc
                    break
        return self._fail(last_error)

    def critique(self, request: CritiqueRequest, config: RunnableConfig | None = None) -> Critique:
        steps, messages = self._steps(request), self.messages(request)
        finished, target = False, next(steps)
        while not finished:
            try:
                outcome: _Outcome = (self._call(target, messages, config), None)
            except Exception as exc:
                outcome = (None, exc)
            finished, target = _advance(steps, outcome)
        return cast(Critique, target)

    async def acritique(self, request: CritiqueRequest, config: RunnableConfig | None = None) -> Critique:
        steps, messages = self._steps(request), self.messages(request)
        target = next(steps)
        while True:
            try:
                reply = await self._acall(target, messages, config)
            except Exception as exc:
                done, target = _advance(steps, (None, exc))
            else:
                done, target = _advance(steps, (reply, None))
            if done:
                return cast(Critique, target)

    def _target(self, method: StructuredMethod) -> Runnable[Any, Any]:
        runnable = self._runnable(method) if method != "text" else None
        return runnable if runnable is not None else self.model

    def _drop_method(self, method: StructuredMethod) -> None:
        """Remember that the model refused `method`: later calls start with the next one in the order.

        The order is replaced, never mutated, so concurrent runs each iterate over a consistent snapshot.
        """
        with self._lock:
            if method in self._order and len(self._order) > 1:
                self._order = tuple(m for m in self._order if m != method)


def _advance(steps: Generator[Any, _Outcome, Critique], outcome: _Outcome) -> tuple[bool, Any]:
    """Send a call's outcome to the critic's protocol: (False, the next runnable) or (True, the critique)."""
    try:
        return False, steps.send(outcome)
    except StopIteration as stop:
        return True, stop.value


def _message_text(message: Any) -> str:
    """The critique text of a reply: the first tool call's arguments as JSON, else the message text."""
    if message is None:
        return ""
    if isinstance(message, AIMessage) and message.tool_calls:
        return json.dumps(message.tool_calls[0].get("args", {}))
    return message.text if isinstance(message, BaseMessage) else str(message)
