"""Calling models robustly: transient errors are retried with exponential backoff and jitter, and each call can
have a time limit.

This is the equivalent of `Runnable.with_retry(retry_if_exception_type=is_transient)` as a plain loop: the
`RunnableRetry` wrapper adds a traced layer and a tenacity object to every call even when nothing fails, which
was most of this package's orchestration overhead (see bench/README.md).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import random
import time
from typing import Any

from langchain_core.runnables import Runnable, RunnableConfig

__all__ = ["TRANSIENT_ERRORS", "ainvoke_guarded", "backoff_seconds", "invoke_guarded", "is_transient"]


def _transient_types() -> tuple[type[BaseException], ...]:
    types: list[type[BaseException]] = [TimeoutError, ConnectionError, asyncio.TimeoutError]
    try:
        import openai

        types += [openai.RateLimitError, openai.APITimeoutError, openai.APIConnectionError]
    except ImportError:  # pragma: no cover - openai is a dependency of langchain-openai
        pass
    try:
        import httpx

        types += [httpx.TimeoutException, httpx.NetworkError]
    except ImportError:  # pragma: no cover
        pass
    return tuple(types)


TRANSIENT_ERRORS: tuple[type[BaseException], ...] = _transient_types()
_BACKOFF_INITIAL_S = 0.5
_BACKOFF_MAX_S = 5.0


def is_transient(exc: BaseException) -> bool:
    """Rate limits, timeouts and connection errors are transient; anything else is permanent."""
    if isinstance(exc, TRANSIENT_ERRORS):
        return True
    status = getattr(exc, "status_code", None)
    return status in (408, 429, 502, 503, 504)


def backoff_seconds(attempt: int) -> float:
    """Wait before retry number `attempt` (1-based): exponential from 0.5 s, capped at 5 s, plus up to 50% jitter."""
    base = min(_BACKOFF_MAX_S, _BACKOFF_INITIAL_S * 2 ** (attempt - 1))
    return base * (1 + random.random() / 2)


def _timeout_error(timeout_s: float) -> TimeoutError:
    return TimeoutError(f"model call timed out after {timeout_s:g}s")


def _invoke_once(
    runnable: Runnable[Any, Any], value: Any, config: RunnableConfig | None, timeout_s: float | None
) -> Any:
    if timeout_s is None:
        return runnable.invoke(value, config)
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
    try:
        return pool.submit(runnable.invoke, value, config).result(timeout=timeout_s)
    except concurrent.futures.TimeoutError as exc:
        raise _timeout_error(timeout_s) from exc
    finally:
        pool.shutdown(wait=False)


def invoke_guarded(
    runnable: Runnable[Any, Any],
    value: Any,
    config: RunnableConfig | None = None,
    *,
    retries: int = 2,
    timeout_s: float | None = None,
) -> Any:
    """`runnable.invoke(value, config)` with a time limit per attempt and `retries` retries of transient errors."""
    for attempt in range(retries + 1):
        try:
            return _invoke_once(runnable, value, config, timeout_s)
        except Exception as exc:
            if attempt >= retries or not is_transient(exc):
                raise
            time.sleep(backoff_seconds(attempt + 1))
    raise AssertionError("unreachable")  # pragma: no cover


async def ainvoke_guarded(
    runnable: Runnable[Any, Any],
    value: Any,
    config: RunnableConfig | None = None,
    *,
    retries: int = 2,
    timeout_s: float | None = None,
) -> Any:
    """Async twin of `invoke_guarded`."""
    for attempt in range(retries + 1):
        try:
            if timeout_s is None:
                return await runnable.ainvoke(value, config)
            try:
                return await asyncio.wait_for(runnable.ainvoke(value, config), timeout_s)
            except asyncio.TimeoutError as exc:
                raise _timeout_error(timeout_s) from exc
        except Exception as exc:
            if attempt >= retries or not is_transient(exc):
                raise
            await asyncio.sleep(backoff_seconds(attempt + 1))
    raise AssertionError("unreachable")  # pragma: no cover
