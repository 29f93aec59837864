"""What a failed model call is to the call layer (`_calls`): a transient error (a rate limit, a timeout, a
connection error, HTTP 408/429/502/503/504), retried; a time-out of one attempt (`CallTimeout`); a reply the caller
kept rejecting (`EmptyReply`); anything else, permanent."""

from __future__ import annotations

import asyncio

__all__ = ["TRANSIENT_ERRORS", "CallTimeout", "EmptyReply", "is_transient"]


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


class CallTimeout(TimeoutError):
    """One model call took longer than `timeout_s`."""

    def __init__(self, timeout_s: float, *, cancelled: bool) -> None:
        super().__init__(f"model call timed out after {timeout_s:g}s")
        self.cancelled = cancelled


class EmptyReply(ValueError):
    """The model kept returning a reply the caller cannot use (an empty draft)."""


def is_transient(exc: BaseException) -> bool:
    """Rate limits, timeouts and connection errors are transient; anything else is permanent.

    A sync timeout is not: its call could not be cancelled, and a retry would start a second one beside it.
    """
    if isinstance(exc, CallTimeout):
        return exc.cancelled
    if isinstance(exc, TRANSIENT_ERRORS):
        return True
    return getattr(exc, "status_code", None) in (408, 429, 502, 503, 504)
