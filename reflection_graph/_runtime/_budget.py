"""A run's token and time budget, checked by the one call layer (reflection_graph/_runtime/_calls.py) before
every call.

A node of a budgeted run (`token_budget` or `time_budget_s` set) opens a `Budget` holding what the run spent
before this step (tokens from the recorded usage, seconds from the earlier steps) and makes it current
(`step_budget`). Before each model call, retries included, the call layer asks `Budget.admit`:
- the call is *refused* (`BudgetExhausted`, never started) when the time budget is spent, or when not even a
  *useful reply* fits: the tokens spent, those reserved by calls under way (parallel samples) and the call's prompt
  plus `USEFUL_REPLY_TOKENS` (or the call's own smaller reply limit, e.g. one token for a log-probability judge)
  exceed `token_budget` (the rule is `budget_refusal`, a pure function);
- otherwise it is *admitted with its reply limit cut* to what is left: the call's reply-limit option
  (`max_tokens`, or the model's own name for it, `ModelFacts.reply_limit_option`) is set to the largest value whose
  bound still fits (never above the model's own limit). The calls of one step share what is left (`split`): a
  `generate` step's samples get half of it between them (the other half is for their critiques, so a round can
  finish), a `critique` step's critiques all of it; a call whose share is too small for a useful reply may take
  what is left;
- an admitted call reserves its bound until it returns; then its tokens are counted instead: those the reply
  reports, or, for a model that reports none, the estimate of reflection_graph/_runtime/_estimate.py (marked
  as `estimated_tokens` in the run's usage);
- its time limit is at most the seconds left (an async call is cancelled there; a sync one is abandoned), and a
  call stopped by that limit is a refusal too.

So `token_budget` holds for every model with a reply limit, by the package's count (what a model can do is
`reflection_graph.models.profile.describe`): the embedded model (its exact `token_bound`), LangChain chat models
with `max_tokens` (with usage reported: off only by the prompt estimate's error; without: counted by the
estimate), and plain callables (`CallableChatModel` cuts a reply at its limit, by
the same estimate). A model with no reply-limit option at all cannot be cut: it is admitted when its prompt and a
useful reply fit, and its one reply may run past the budget (by at most that reply's length).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from langchain_core.runnables import Runnable

from reflection_graph._runtime._estimate import call_bound, chat_model, with_option
from reflection_graph._runtime._usage import run_usage
from reflection_graph.models.profile import REPLY_LIMITS, ModelFacts, describe
from reflection_graph.settings import Settings

__all__ = [
    "USEFUL_REPLY_TOKENS",
    "Budget",
    "BudgetExhausted",
    "affordable_samples",
    "budget_refusal",
    "budgeting",
    "current_budget",
    "for_step",
    "plan_call",
    "step_budget",
    "step_update",
]

USEFUL_REPLY_TOKENS = 16
"""The shortest reply worth a call: about a dozen words, or a bare JSON verdict such as
`{"score": 4, "is_acceptable": false}` (a call whose own reply limit is smaller, such as a one-token
log-probability judge, needs only that). A call whose prompt leaves less than this of the budget is refused."""
_clock = time.perf_counter


def budget_refusal(
    *,
    spent: int,
    reserved: int,
    estimate: int,
    token_budget: int | None,
    elapsed_s: float,
    time_budget_s: float | None,
) -> str | None:
    """Why a model call may not start, or None when the budget covers it.

    The time budget is spent when `elapsed_s >= time_budget_s`. The token budget covers a call when the tokens
    `spent`, those `reserved` by calls under way and the call's `estimate` together stay within `token_budget`.
    """
    if time_budget_s is not None and elapsed_s >= time_budget_s:
        return f"time budget of {time_budget_s:g}s spent ({elapsed_s:.2f}s)"
    if token_budget is not None and spent + reserved + estimate > token_budget:
        under_way = f" + {reserved} reserved by calls under way" if reserved else ""
        return (
            f"token budget of {token_budget} cannot cover the next model call: {spent} used{under_way} "
            f"+ about {estimate} for the call"
        )
    return None


def affordable_samples(count: int, estimate: int, left: int) -> int:
    """How many of `count` samples, each estimated at `estimate` tokens, fit in `left` tokens (0 to `count`)."""
    if estimate <= 0:
        return count
    return max(0, min(count, left // estimate))


def _limit_key(facts: ModelFacts, options: Mapping[str, Any]) -> str | None:
    """The call option that limits a reply of a model with `facts` (bound, or the model's own), or None."""
    return next((name for name in REPLY_LIMITS if name in options or name == facts.reply_limit_option), None)


def _own_limit(facts: ModelFacts, key: str, options: Mapping[str, Any]) -> int | None:
    """The reply limit a model itself puts on a call: a grammar-constrained JSON call of the embedded model has its
    own (`structured_reply_limit`: a JSON critique needs more room than a free-text reply: cut to the text limit,
    it may not close); any other call the model's own reply limit, when `key` is its option."""
    if options.get("json_schema") is not None and facts.structured_reply_limit:
        return facts.structured_reply_limit
    return facts.reply_limit if key == facts.reply_limit_option else None


def plan_call(runnable: Runnable[Any, Any], value: Any, left: int) -> tuple[Runnable[Any, Any], int, int]:
    """How a call of `runnable` on `value` fits in `left` tokens: (the runnable to call, its reply limit cut to
    fit where it has one; the tokens to reserve for it; the least tokens it needs, a prompt and a useful reply).
    The call fits when the least it needs is at most `left`."""
    model, options = chat_model(runnable)
    facts = describe(model)
    key = _limit_key(facts, options)
    if key is None:  # no reply limit to cut: the model's exact bound, else a prompt and a useful reply
        need = call_bound(runnable, value, None if facts.bounds_calls else USEFUL_REPLY_TOKENS)
        return runnable, need, need
    own = options.get(key) or _own_limit(facts, key, options)
    limit = int(own) if own else None
    low = min(USEFUL_REPLY_TOKENS, limit) if limit else USEFUL_REPLY_TOKENS
    need = call_bound(runnable, value, low, key)
    if need > left:
        return runnable, need, need
    high = limit if limit else max(low, left)
    if call_bound(runnable, value, high, key) <= left:  # the whole reply limit fits
        return runnable, call_bound(runnable, value, high, key), need
    while low < high:  # the largest reply limit whose bound fits (bounds grow with the limit)
        mid = (low + high + 1) // 2
        if call_bound(runnable, value, mid, key) <= left:
            low = mid
        else:
            high = mid - 1
    return with_option(runnable, key, low), call_bound(runnable, value, low, key), need


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
        "_share",
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
        self._share: int | None = None
        self._start = _clock()
        self._lock = threading.Lock()

    def elapsed(self) -> float:
        """Seconds of the run so far: the earlier steps and this one."""
        return self.before_s + _clock() - self._start

    def left(self) -> int:
        """Tokens not spent nor reserved (0 without a token budget)."""
        with self._lock:
            return max(0, (self.token_budget or 0) - self._spent - self._reserved)

    def admit(self, runnable: Runnable[Any, Any], value: Any) -> tuple[Runnable[Any, Any], int]:
        """The runnable to call (its reply limit cut to what is left) and the tokens reserved for it; raise
        `BudgetExhausted` (and remember why) when not even a useful reply fits."""
        with self._lock:
            if self.token_budget is None:
                planned, reserve, need = runnable, 0, 0
            else:
                left = self.token_budget - self._spent - self._reserved
                room = left if self._share is None else min(left, self._share)
                planned, reserve, need = plan_call(runnable, value, max(room, 0))
                if (
                    need <= left and need > room
                ):  # its share is too small for a useful reply: take what is left
                    planned, reserve, need = plan_call(runnable, value, left)
            why = budget_refusal(
                spent=self._spent,
                reserved=self._reserved,
                estimate=need,
                token_budget=self.token_budget,
                elapsed_s=self.elapsed(),
                time_budget_s=self.time_budget_s,
            )
            if why is not None:
                self.refused = self.refused or why
                raise BudgetExhausted(why)
            self._reserved += reserve
        return planned, reserve

    def settle(self, reservation: int, tokens: int) -> None:
        """An admitted call ended having used `tokens` (reported, or estimated): they replace its reservation."""
        with self._lock:
            self._reserved -= reservation
            self._spent += int(tokens)

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
        """How many of `count` parallel samples of the same call the token budget covers now, each with at least
        a useful reply (at least 1: a refused first sample is what stops the run)."""
        if self.token_budget is None or count == 1:
            return count
        left = self.left()
        _, _, need = plan_call(runnable, value, left)
        return max(1, affordable_samples(count, need, left))

    def split(self, calls: int) -> None:
        """Share what is left evenly among `calls` parallel calls (each later call of this step gets at most its
        share while the others may still need theirs)."""
        if self.token_budget is not None and calls > 1:
            with self._lock:
                self._share = max(0, self.token_budget - self._spent - self._reserved) // calls


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


@contextmanager
def step_budget(
    settings: Settings, state: Mapping[str, Any]
) -> Iterator[Callable[[dict[str, Any]], dict[str, Any]]]:
    """Run a graph step inside its budget: yields the function that adds the budget's outcome to the step's
    update (`step_update`); without a budget, the update is returned as it is."""
    budget = for_step(settings, state)
    if budget is None:
        yield lambda update: update
        return
    with budgeting(budget):
        yield lambda update: step_update(budget, update)


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
