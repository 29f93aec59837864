"""Calling models robustly: transient errors are retried with backoff, each call has a time limit."""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Callable
from typing import Any, TypeVar

from langchain_core.runnables import Runnable, RunnableConfig

__all__ = ["ModelCallError", "TRANSIENT_ERRORS", "ainvoke_with_policy", "invoke_with_policy", "is_transient"]

T = TypeVar("T")


class ModelCallError(RuntimeError):
    """A model call failed for good (after retries); the message names the role and the cause."""


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


def is_transient(exc: BaseException) -> bool:
    """Rate limits, timeouts and connection errors are transient; anything else is permanent."""
    if isinstance(exc, TRANSIENT_ERRORS):
        return True
    status = getattr(exc, "status_code", None)
    return status in (408, 429, 502, 503, 504)


def _with_timeout(runnable: Runnable[Any, Any], timeout_s: float | None) -> Runnable[Any, Any]:
    if timeout_s is None:
        return runnable
    from langchain_core.runnables import RunnableLambda

    def _call(value: Any, config: RunnableConfig) -> Any:
        pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
        future = pool.submit(runnable.invoke, value, config)
        try:
            return future.result(timeout=timeout_s)
        except concurrent.futures.TimeoutError as exc:
            raise TimeoutError(f"model call timed out after {timeout_s:g}s") from exc
        finally:
            pool.shutdown(wait=False)

    async def _acall(value: Any, config: RunnableConfig) -> Any:
        try:
            return await asyncio.wait_for(runnable.ainvoke(value, config), timeout_s)
        except asyncio.TimeoutError as exc:
            raise TimeoutError(f"model call timed out after {timeout_s:g}s") from exc

    return RunnableLambda(_call, afunc=_acall, name=getattr(runnable, "name", None) or "model")


def guarded(runnable: Runnable[Any, Any], *, retries: int, timeout_s: float | None) -> Runnable[Any, Any]:
    """Wrap a model runnable with a per-call time limit and `with_retry` on transient errors."""
    bounded = _with_timeout(runnable, timeout_s)
    if retries <= 0:
        return bounded
    return bounded.with_retry(
        retry_if_exception_type=is_transient,
        stop_after_attempt=retries + 1,
        wait_exponential_jitter=True,
        exponential_jitter_params={"max": 5.0, "jitter": 0.5},
    )


def invoke_with_policy(fn: Callable[[], T], role: str) -> T:
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001 - reported as a ModelCallError naming the role
        raise ModelCallError(f"{role} failed: {type(exc).__name__}: {exc}") from exc


async def ainvoke_with_policy(fn: Callable[[], Any], role: str) -> Any:
    try:
        return await fn()
    except Exception as exc:  # noqa: BLE001
        raise ModelCallError(f"{role} failed: {type(exc).__name__}: {exc}") from exc
