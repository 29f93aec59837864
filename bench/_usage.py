"""Token accounting at the HTTP layer: every reply of an OpenAI-compatible server counted the same way, whoever sent
the request.

`HttpUsage.counting()` wraps `httpx.Client.send` and `httpx.AsyncClient.send` (the one door every httpx request
goes through, whatever its transport) and `aiohttp.ClientResponse.read` while it is active: each response from the
server's `base_url` to a `/completions` or `/chat/completions` request adds the `usage` the server wrote in its body
(prompt and completion tokens) and one call. The OpenAI SDK, and through it langchain-openai and DSPy (litellm),
sends its requests with httpx, its-hub with aiohttp, so one counter serves every variant of bench_peers.py;
nothing is read from a library's own bookkeeping. A completion reply the counter cannot read (a stream, a body without `usage`, a body that is not
JSON) is counted in `unread`, never dropped in silence.
"""

from __future__ import annotations

import contextlib
import json
import threading
import weakref
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["HttpUsage", "Tally"]

COMPLETION_PATHS = ("/chat/completions", "/completions")


@dataclass(frozen=True)
class Tally:
    """Usage counted so far: calls that reached the server, their prompt and completion tokens, replies unread."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    unread: int = 0

    @property
    def tokens(self) -> int:
        """Prompt and completion tokens together."""
        return self.prompt_tokens + self.completion_tokens

    def __sub__(self, other: Tally) -> Tally:
        return Tally(
            self.calls - other.calls,
            self.prompt_tokens - other.prompt_tokens,
            self.completion_tokens - other.completion_tokens,
            self.unread - other.unread,
        )

    def as_record(self) -> dict[str, int]:
        """The fields a bench record holds, with `tokens` (their sum)."""
        return {**asdict(self), "tokens": self.tokens}


class HttpUsage:
    """Counts the usage of every completion reply from `base_url` while `counting()` is active.

    Args:
        base_url: the server's OpenAI-compatible root, e.g. `http://127.0.0.1:8000/v1`; requests elsewhere are
            not counted.
    """

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url.rstrip("/")
        self._lock = threading.Lock()
        self._tally = Tally()

    def now(self) -> Tally:
        """The usage counted so far (subtract two readings for what happened between them)."""
        with self._lock:
            return self._tally

    def observe(self, url: str, body: bytes | None) -> None:
        """Count one response to `url` whose body is `body` (None: not read, as a stream's)."""
        if not url.startswith(self.base_url) or not url.split("?")[0].endswith(COMPLETION_PATHS):
            return
        usage: Any = None
        if body is not None:
            try:
                usage = json.loads(body).get("usage")
            except (ValueError, AttributeError):
                usage = None
        with self._lock:
            t = self._tally
            if not isinstance(usage, dict):
                self._tally = Tally(t.calls + 1, t.prompt_tokens, t.completion_tokens, t.unread + 1)
                return
            self._tally = Tally(
                t.calls + 1,
                t.prompt_tokens + int(usage.get("prompt_tokens") or 0),
                t.completion_tokens + int(usage.get("completion_tokens") or 0),
                t.unread,
            )

    @contextlib.contextmanager
    def counting(self) -> Iterator[HttpUsage]:
        """Count the server's replies to every httpx client of this process until the block ends."""
        import httpx

        sync_send, async_send = httpx.Client.send, httpx.AsyncClient.send
        counter = self

        def send(client: httpx.Client, request: httpx.Request, **kwargs: Any) -> httpx.Response:
            response = sync_send(client, request, **kwargs)
            counter.observe(str(request.url), None if kwargs.get("stream") else response.content)
            return response

        async def asend(client: httpx.AsyncClient, request: httpx.Request, **kwargs: Any) -> httpx.Response:
            response = await async_send(client, request, **kwargs)
            counter.observe(str(request.url), None if kwargs.get("stream") else response.content)
            return response

        httpx.Client.send = send  # type: ignore[method-assign,assignment]
        httpx.AsyncClient.send = asend  # type: ignore[method-assign,assignment]
        try:
            with self._counting_aiohttp():
                yield self
        finally:
            httpx.Client.send = sync_send  # type: ignore[method-assign]
            httpx.AsyncClient.send = async_send  # type: ignore[method-assign]

    @contextlib.contextmanager
    def _counting_aiohttp(self) -> Iterator[None]:
        """aiohttp's door (its-hub's client): a response is counted when its body is first read."""
        try:
            import aiohttp
        except ImportError:
            yield
            return
        read = aiohttp.ClientResponse.read
        counter, seen = self, weakref.WeakSet()  # type: ignore[var-annotated]

        async def counted_read(response: aiohttp.ClientResponse) -> bytes:
            body = await read(response)
            if response not in seen:
                seen.add(response)
                counter.observe(str(response.url), body)
            return body

        aiohttp.ClientResponse.read = counted_read  # type: ignore[method-assign]
        try:
            yield
        finally:
            aiohttp.ClientResponse.read = read  # type: ignore[method-assign]
