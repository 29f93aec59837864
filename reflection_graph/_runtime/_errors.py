"""What a failed model call is to the call layer (`_calls`): a transient error (a rate limit, a timeout, a
connection error, HTTP 408/429/502/503/504), retried; a time-out of one attempt (`CallTimeout`); a reply the caller
kept rejecting (`EmptyReply`); anything else, permanent."""

from __future__ import annotations

import asyncio
import sys

__all__ = ["CallTimeout", "EmptyReply", "is_transient", "transient_types"]


def transient_types() -> tuple[type[BaseException], ...]:
    """The exception types retried as transient: the built-in time-outs and connection errors, and openai's and
    httpx's own once they are imported (an error of theirs cannot exist before; importing openai here would add
    most of a second to every process that imports the package)."""
    types: list[type[BaseException]] = [TimeoutError, ConnectionError, asyncio.TimeoutError]
    openai = sys.modules.get("openai")
    if openai is not None:
        types += [openai.RateLimitError, openai.APITimeoutError, openai.APIConnectionError]
    httpx = sys.modules.get("httpx")
    if httpx is not None:
        types += [httpx.TimeoutException, httpx.NetworkError]
    return tuple(types)


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
    if isinstance(exc, transient_types()):
        return True
    return getattr(exc, "status_code", None) in (408, 429, 502, 503, 504)
