"""A run's token and time budget, checked by the one call layer (reflection_graph/_calls.py) before every call.

A node of a budgeted run (`token_budget` or `time_budget_s` set) opens a `Budget` holding what the run spent
before this step (tokens from the recorded usage, seconds from the earlier steps) and makes it current
(`budgeting`). Before each model call, retries included, the call layer asks `Budget.admit`:
- the call is *refused* (`BudgetExhausted`, never started) when the time budget is spent, or when the tokens
  spent, the tokens reserved by calls under way (parallel samples) and this call's estimate exceed `token_budget`
  (the rule is `reflection_graph._rules.budget_refusal`, a pure function);
- an admitted call reserves its estimate until it returns; then its reply's reported tokens are counted instead;
- its time limit is at most the seconds left (an async call is cancelled there; a sync one is abandoned), and a
  call stopped by that limit is a refusal too.

The estimate of one call (`estimate_tokens`) is its prompt's tokens plus its reply limit. A model may say exactly
how many tokens one call can use with a method `token_bound(messages, **call_options) -> int` (the embedded model
does: it counts the prompt with its own tokenizer and knows its reply limits); for any other model the prompt counts
a quarter of its characters and the reply its `max_tokens` (or `DEFAULT_REPLY_TOKENS` when it has none). With an
exact bound the run never uses more than `token_budget`; with an estimate it may exceed it by the estimate's error.
"""

from __future__ import annotations

import functools
import math
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage
from langchain_core.prompt_values import PromptValue
from langchain_core.runnables import Runnable, RunnableParallel, RunnableSequence, RunnableWithFallbacks
from langchain_core.runnables.base import RunnableBindingBase

from reflection_graph import _rules
from reflection_graph._usage import message_usage, run_usage
from reflection_graph.settings import Settings

__all__ = [
    "DEFAULT_REPLY_TOKENS",
    "Budget",
    "BudgetExhausted",
    "abudgeted",
    "budgeted",
    "budgeting",
    "current_budget",
    "estimate_tokens",
    "for_step",
    "step_update",
]

DEFAULT_REPLY_TOKENS = 1024
"""The reply assumed for a model that names no reply limit (`max_tokens`)."""
CHARS_PER_TOKEN = 4
"""The prompt estimate of a model without `token_bound`: a token per this many characters."""
_clock = time.perf_counter
_REPLY_LIMITS = ("max_tokens", "max_completion_tokens", "max_output_tokens", "num_predict")


class BudgetExhausted(Exception):
    """A model call was not started (or was stopped) because the run's budget cannot cover it."""


class Budget:
    """The budget of one step of a run: what the run spent before it, and what its calls spend and reserve.

    Args:
        token_budget: the run's token budget (None: no token budget).
        time_budget_s: the run's time budget in seconds (None: no time budget).
        spent_tokens: tokens the run used before this step.
        elapsed_s: seconds the run's steps took before this one.
    """

    __slots__ = (
        "_lock",
        "_reserved",
        "_spent",
        "_start",
        "before_s",
        "refused",
        "time_budget_s",
        "token_budget",
    )

    def __init__(
        self,
        token_budget: int | None,
        time_budget_s: float | None,
        *,
        spent_tokens: int = 0,
        elapsed_s: float = 0,
    ) -> None:
        self.token_budget = token_budget
        self.time_budget_s = time_budget_s
        self.before_s = float(elapsed_s)
        self.refused: str | None = None
        """Why a call of this step was refused (the first reason), or None."""
        self._spent = int(spent_tokens)
        self._reserved = 0
        self._start = _clock()
        self._lock = threading.Lock()

    def elapsed(self) -> float:
        """Seconds of the run so far: the earlier steps and this one."""
        return self.before_s + _clock() - self._start

    def admit(self, runnable: Runnable[Any, Any], value: Any) -> int:
        """Reserve the estimate of calling `runnable` on `value` and return it; raise `BudgetExhausted` (and
        remember why) when the budget cannot cover it."""
        estimate = estimate_tokens(runnable, value) if self.token_budget is not None else 0
        with self._lock:
            why = _rules.budget_refusal(
                spent=self._spent,
                reserved=self._reserved,
                estimate=estimate,
                token_budget=self.token_budget,
                elapsed_s=self.elapsed(),
                time_budget_s=self.time_budget_s,
            )
            if why is not None:
                self.refused = self.refused or why
                raise BudgetExhausted(why)
            self._reserved += estimate
        return estimate

    def settle(self, reservation: int, result: Any) -> None:
        """An admitted call ended with `result` (None when it raised): its reported tokens replace its
        reservation."""
        meta = message_usage(result)
        tokens = int(meta.get("total_tokens", 0)) if meta else 0
        with self._lock:
            self._reserved -= reservation
            self._spent += tokens

    def timeout(self, timeout_s: float | None) -> tuple[float | None, bool]:
        """The time limit of the next call: `timeout_s`, or the seconds left when fewer; and whether the budget
        set it."""
        if self.time_budget_s is None:
            return timeout_s, False
        left = max(self.time_budget_s - self.elapsed(), 0.001)
        if timeout_s is None or left < timeout_s:
            return left, True
        return timeout_s, False

    def ran_out(self) -> BudgetExhausted:
        """The refusal of a call that the time budget stopped while it ran."""
        why = f"time budget of {self.time_budget_s:g}s ran out during a model call"
        self.refused = self.refused or why
        return BudgetExhausted(why)

    def affordable(self, runnable: Runnable[Any, Any], value: Any, count: int) -> int:
        """How many of `count` samples of the same call the token budget covers now (at least 1: a refused
        first sample is what stops the run)."""
        if self.token_budget is None or count == 1:
            return count
        estimate = estimate_tokens(runnable, value)
        with self._lock:
            left = self.token_budget - self._spent - self._reserved
        return max(1, _rules.affordable_samples(count, estimate, left))


def for_step(settings: Settings, state: Mapping[str, Any]) -> Budget | None:
    """The budget of a step of a run with these settings and this state (None when the run has no budget)."""
    if settings.token_budget is None and settings.time_budget_s is None:
        return None
    spent = run_usage(state)["total"]["total_tokens"] if settings.token_budget is not None else 0
    elapsed = float(state.get("rg_elapsed") or 0.0)
    return Budget(settings.token_budget, settings.time_budget_s, spent_tokens=spent, elapsed_s=elapsed)


def step_update(budget: Budget, update: Mapping[str, Any]) -> dict[str, Any]:
    """A step's state update with the budget's outcome: a refused call stops the run with `budget` (`error` says
    why, and keeps any failure of the same step); under a time budget, the run's seconds so far."""
    out = dict(update)
    if budget.time_budget_s is not None:
        out["rg_elapsed"] = round(budget.elapsed(), 6)
    if budget.refused is not None:
        out["stop_reason"] = "budget"
        out["error"] = "; ".join(e for e in (budget.refused, out.get("error")) if e)
    return out


Step = Callable[[Any, Any, Any], Any]


def budgeted(step: Step, settings_of: Callable[[Any], Settings]) -> Step:
    """The node `step(state, runtime, config)` run inside its step's budget (as it is when the run has none)."""

    @functools.wraps(step)
    def node(state: Any, runtime: Any, config: Any) -> Any:
        budget = for_step(settings_of(runtime), state)
        if budget is None:
            return step(state, runtime, config)
        with budgeting(budget):
            return step_update(budget, step(state, runtime, config))

    return node


def abudgeted(step: Step, settings_of: Callable[[Any], Settings]) -> Step:
    """Async twin of `budgeted`."""

    @functools.wraps(step)
    async def node(state: Any, runtime: Any, config: Any) -> Any:
        budget = for_step(settings_of(runtime), state)
        if budget is None:
            return await step(state, runtime, config)
        with budgeting(budget):
            return step_update(budget, await step(state, runtime, config))

    return node


_BUDGET: ContextVar[Budget | None] = ContextVar("reflection_graph_budget", default=None)


def current_budget() -> Budget | None:
    """The budget the call layer checks (None outside `budgeting`: no budget)."""
    return _BUDGET.get()


@contextmanager
def budgeting(budget: Budget) -> Iterator[Budget]:
    """Check this block's model calls against `budget`."""
    token = _BUDGET.set(budget)
    try:
        yield budget
    finally:
        _BUDGET.reset(token)


def _chat_model(runnable: Any) -> tuple[BaseChatModel | None, dict[str, Any]]:
    """The chat model inside `runnable` (bindings, structured-output chains, fallbacks) and its bound options."""
    options: dict[str, Any] = {}
    node = runnable
    for _ in range(16):
        if isinstance(node, BaseChatModel):
            return node, options
        if isinstance(node, RunnableBindingBase):
            options = {**node.kwargs, **options}
            node = node.bound
        elif isinstance(node, RunnableSequence):
            node = node.first
        elif isinstance(node, RunnableParallel) and node.steps__:
            node = next(iter(node.steps__.values()))
        elif isinstance(node, RunnableWithFallbacks):
            node = node.runnable
        else:
            break
    return None, options


def _messages(value: Any) -> list[BaseMessage] | None:
    if isinstance(value, PromptValue):
        return value.to_messages()
    if isinstance(value, str):
        return [HumanMessage(value)]
    if isinstance(value, list) and all(isinstance(m, BaseMessage) for m in value):
        return value
    return None


def estimate_tokens(runnable: Runnable[Any, Any], value: Any) -> int:
    """The tokens one call of `runnable` on `value` may use: the model's own `token_bound`, else a quarter of the
    prompt's characters plus the reply limit (`max_tokens`, or `DEFAULT_REPLY_TOKENS`)."""
    model, options = _chat_model(runnable)
    messages = _messages(value)
    bound = getattr(model, "token_bound", None)
    if callable(bound) and messages is not None:
        return int(bound(messages, **options))
    text = "\n".join(m.text for m in messages) if messages is not None else str(value)
    reply = next(
        (limit for name in _REPLY_LIMITS if (limit := options.get(name) or getattr(model, name, None))), None
    )
    return math.ceil(len(text) / CHARS_PER_TOKEN) + int(reply or DEFAULT_REPLY_TOKENS)
