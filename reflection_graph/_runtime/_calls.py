"""The one retry/timeout layer for model calls, and the bound on how many calls a run can make.

Every model call of the package (drafts, revisions, LLM critiques) goes through `call` / `acall`:
- a transient error (rate limit, timeout, connection error, HTTP 408/429/502/503/504) or a reply that `ok`
  rejects (an empty draft) is retried, at most `retries` times, with exponential backoff and jitter (tenacity);
- `timeout_s` limits each attempt. The async path cancels the call (`asyncio.wait_for`). The sync path cannot
  cancel a running Python call: the attempt runs in a daemon thread that is abandoned on timeout (it never keeps
  the process alive at exit), and a timed-out sync attempt is *not* retried, so at most one abandoned call is left
  per timeout. Give the client its own timeout (e.g. `ChatOpenAI(timeout=...)`) to stop the request itself.

- a reply `ok` rejects is asked again from a resampled model (`sampled`: the next seed, temperature at least
  `SAMPLE_TEMPERATURE`), so a model that returned nothing at temperature 0 does not return the same nothing; the
  embedded model no longer retries below this layer;
- every attempt, failed or not, is recorded in the current `Meter`
  (`reflection_graph._runtime._usage.metering`) with its reply's `usage_metadata`, or an estimate when the
  model reports none (reflection_graph/_runtime/_estimate.py): this is where the package counts its calls and
  tokens.

- under a run budget (`token_budget`, `time_budget_s`), every attempt is first admitted by the current
  `Budget` (reflection_graph/_runtime/_budget.py): an attempt without room for a useful reply is not started
  (`BudgetExhausted`, never retried); an admitted one has its reply limit cut to what is left, and its time
  limit is at most the seconds left.

So one logical call makes at most `1 + retries` model calls, and `max_model_calls` is a true upper bound (a budget
only ever removes calls).
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections.abc import Callable
from typing import Any, NoReturn

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import Runnable, RunnableConfig
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    Retrying,
    retry_if_exception,
    retry_if_result,
    stop_after_attempt,
    wait_exponential_jitter,
)

from reflection_graph._runtime._budget import current_budget
from reflection_graph._runtime._errors import CallTimeout, EmptyReply, is_transient
from reflection_graph._runtime._usage import call_usage, current_meter
from reflection_graph.models import at_temperature_zero

__all__ = ["acall", "call", "max_model_calls", "sampled"]

BACKOFF_INITIAL_S = 0.5
BACKOFF_MAX_S = 5.0
SAMPLE_TEMPERATURE = 0.7
"""The least temperature of a resampled call (several drafts, or a retry of a rejected reply)."""


def sampled(runnable: Runnable[Any, Any], index: int, *, greedy: bool = False) -> Runnable[Any, Any]:
    """Sample `index`: a chat model copied with seed + `index` and a temperature of at least
    `SAMPLE_TEMPERATURE`, where it has those fields (anything else unchanged).

    Index 0 is the model itself, or with `greedy` (a first round's drafts) the plain greedy call a user would make
    without the loop: `at_temperature_zero(model)`, its own stop rules, seed and budget kept (a model without a
    temperature field, such as a plain callable, is itself). So the
    loop's first draft is never worse than no loop, whatever temperature the model samples its others at.
    """
    if not isinstance(runnable, BaseChatModel):
        return runnable
    if index == 0:
        return at_temperature_zero(runnable) if greedy else runnable
    fields = type(runnable).model_fields
    update: dict[str, Any] = {}
    if "seed" in fields:
        update["seed"] = int(getattr(runnable, "seed", None) or 0) + index
    if "temperature" in fields:
        update["temperature"] = max(float(getattr(runnable, "temperature", None) or 0.0), SAMPLE_TEMPERATURE)
    return runnable.model_copy(update=update) if update else runnable


def _policy(retries: int, ok: Callable[[Any], bool] | None) -> dict[str, Any]:
    """Tenacity's settings for the `retries` attempts after a first one that failed or was rejected."""
    retry: Any = retry_if_exception(is_transient)
    if ok is not None:
        retry = retry | retry_if_result(lambda result: not ok(result))
    return {
        "stop": stop_after_attempt(retries),
        # before retry k (1-based): BACKOFF_INITIAL_S * 2**(k-1), capped at BACKOFF_MAX_S, plus jitter
        "wait": wait_exponential_jitter(
            multiplier=BACKOFF_INITIAL_S, max=BACKOFF_MAX_S, jitter=BACKOFF_INITIAL_S
        ),
        "retry": retry,
        "reraise": True,
        "retry_error_callback": _last_result,
    }


def _last_result(state: RetryCallState) -> Any:
    """All attempts returned an unusable reply: say so (an exception is re-raised as it is)."""
    outcome = state.outcome
    if outcome is not None and outcome.failed:
        raise outcome.exception()  # type: ignore[misc]
    raise EmptyReply(f"the model returned an empty reply ({state.attempt_number + 1} attempt(s))")


def _first_wait() -> float:
    """The wait after the first (fast-path) attempt; tenacity waits between the later ones."""
    return min(BACKOFF_MAX_S, BACKOFF_INITIAL_S) * (1 + random.random() / 2)


def _first(result: Any, error: Exception | None, retries: int, ok: Callable[[Any], bool] | None) -> bool:
    """After the first attempt: True to return `result`; raises when no retry is allowed; False to retry."""
    if error is not None:
        if retries == 0 or not is_transient(error):
            raise error
        return False
    if ok is None or ok(result):
        return True
    if retries == 0:
        raise EmptyReply("the model returned an empty reply (1 attempt(s))")
    return False


class _Target:
    """What one logical call asks next (resampled after a rejected reply), the run budget's check before each
    attempt, and the recording of each attempt."""

    __slots__ = (
        "_base",
        "_budget",
        "_called",
        "_capped",
        "_meter",
        "_ok",
        "_rejected",
        "_reserved",
        "_value",
    )

    def __init__(self, runnable: Runnable[Any, Any], ok: Callable[[Any], bool] | None) -> None:
        self._base = runnable
        self._ok = ok
        self._rejected = 0
        self._meter = current_meter()
        self._budget = current_budget()
        self._reserved = 0
        self._capped = False
        self._called: Runnable[Any, Any] = runnable
        self._value: Any = None

    def begin(self, value: Any, timeout_s: float | None) -> tuple[Runnable[Any, Any], float | None]:
        """The runnable of the next attempt (its reply limit cut to what the budget has left) and its time limit;
        `BudgetExhausted` when the budget refuses it."""
        runnable = sampled(self._base, self._rejected)
        self._called, self._value = runnable, value
        if self._budget is None:
            return runnable, timeout_s
        runnable, self._reserved = self._budget.admit(runnable, value)
        timeout_s, self._capped = self._budget.timeout(timeout_s)
        return runnable, timeout_s

    def record(self, result: Any) -> None:
        """Count an attempt that returned `result` (None when it raised): the tokens its reply reports, else
        the estimate (reflection_graph/_runtime/_estimate.py); a failed attempt counts as a call with no
        tokens."""
        usage = call_usage(self._called, self._value, result)
        if self._meter is not None:
            self._meter.record(usage)
        if self._budget is not None:
            self._budget.settle(self._reserved, usage["total_tokens"])
            self._reserved = 0
        if result is not None and self._ok is not None and not self._ok(result):
            self._rejected += 1

    def failed(self, exc: BaseException) -> NoReturn:
        """Record a failed attempt and raise its error (a time-out the time budget set is a budget refusal)."""
        self.record(None)
        if self._capped and self._budget is not None and isinstance(exc, TimeoutError):
            raise self._budget.ran_out() from exc
        raise exc


def _outcome(attempt: Callable[[], Any]) -> tuple[Any, Exception | None]:
    """The first attempt's (result, None) or (None, error)."""
    try:
        return attempt(), None
    except Exception as exc:
        return None, exc


def _settle(retry: Any, result: Any) -> None:
    """Hand an attempt's result to tenacity, which decides (with `ok`) whether to retry it."""
    if not retry.retry_state.outcome or not retry.retry_state.outcome.failed:
        retry.retry_state.set_result(result)


def _invoke_in_thread(
    runnable: Runnable[Any, Any], value: Any, config: RunnableConfig | None, timeout_s: float
) -> Any:
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["result"] = runnable.invoke(value, config)
        except BaseException as exc:  # handed to the caller
            box["error"] = exc

    thread = threading.Thread(target=target, name="reflection-graph-call", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        raise CallTimeout(timeout_s, cancelled=False)
    if "error" in box:
        raise box["error"]
    return box["result"]


def call(
    runnable: Runnable[Any, Any],
    value: Any,
    config: RunnableConfig | None = None,
    *,
    retries: int = 2,
    timeout_s: float | None = None,
    ok: Callable[[Any], bool] | None = None,
) -> Any:
    """`runnable.invoke(value, config)`, retried on transient errors and on replies `ok` rejects.

    The first attempt runs directly (no retry machinery when nothing fails); tenacity runs the retries.
    """

    target = _Target(runnable, ok)

    def attempt() -> Any:
        model, limit = target.begin(value, timeout_s)
        try:
            result = (
                model.invoke(value, config)
                if limit is None
                else _invoke_in_thread(model, value, config, limit)
            )
        except BaseException as exc:
            target.failed(exc)
        target.record(result)
        return result

    result, error = _outcome(attempt)
    if _first(result, error, retries, ok):
        return result
    time.sleep(_first_wait())
    for retry in Retrying(**_policy(retries, ok)):
        with retry:
            result = attempt()
        _settle(retry, result)
    return result


async def acall(
    runnable: Runnable[Any, Any],
    value: Any,
    config: RunnableConfig | None = None,
    *,
    retries: int = 2,
    timeout_s: float | None = None,
    ok: Callable[[Any], bool] | None = None,
) -> Any:
    """Async twin of `call`; a timed-out attempt is cancelled."""

    target = _Target(runnable, ok)

    async def attempt() -> Any:
        model, limit = target.begin(value, timeout_s)
        try:
            if limit is None:
                result = await model.ainvoke(value, config)
            else:
                result = await asyncio.wait_for(model.ainvoke(value, config), limit)
        except asyncio.TimeoutError:
            target.failed(CallTimeout(limit or 0.0, cancelled=True))
        except BaseException as exc:
            target.failed(exc)
        target.record(result)
        return result

    try:
        result, error = await attempt(), None
    except Exception as exc:
        result, error = None, exc
    if _first(result, error, retries, ok):
        return result
    await asyncio.sleep(_first_wait())
    async for retry in AsyncRetrying(**_policy(retries, ok)):
        with retry:
            result = await attempt()
        _settle(retry, result)
    return result


def max_model_calls(
    max_iterations: int,
    *,
    retries: int = 0,
    parse_retries: int = 0,
    n_drafts: int = 1,
    n_revisions: int = 1,
    glean: bool = False,
    method_fallbacks: int = 0,
) -> int:
    """The most model calls one `loop` run with an LLM critic can make.

    Rounds: the first round has `n_drafts` drafts (none when an existing candidate is gleaned); each later round
    has `n_revisions` revisions. Every candidate gets one critique, which may be re-asked `parse_retries` times
    when it cannot be parsed. Every one of those calls may be retried `retries` times (transient errors, empty
    replies). `method_fallbacks` adds the structured-output refusals an LLM critic may meet before it settles on a
    method (at most 2 with `method="auto"`, once per critic, see `LLMCritic`).
    """
    drafts = 0 if glean else n_drafts
    candidates = (1 if glean else n_drafts) + (max_iterations - 1) * n_revisions
    generations = drafts + (max_iterations - 1) * n_revisions
    attempts = 1 + retries
    return generations * attempts + candidates * (1 + parse_retries) * attempts + method_fallbacks
