"""Token accounting at the HTTP layer: every reply of an OpenAI-compatible server counted the same way, whoever sent
the request.

`counting_proxy(upstream)` starts a small forwarder on 127.0.0.1 in front of the server; every variant of
bench_peers.py is given the forwarder's URL, and `HttpUsage` adds, for each reply to a `/completions` or
`/chat/completions` request, the `usage` the server wrote in its body (prompt and completion tokens) and one call.
The clients send with different HTTP stacks (the OpenAI SDK with httpx2, langchain-openai through it, its-hub with
aiohttp, DSPy 3.4 with a socket transport of its own), so a hook in one client library would miss some: the wire is
the one place they all pass. Nothing is read from a library's own bookkeeping. A completion reply the counter
cannot read (a stream, a body without `usage`, a body that is not JSON, an error) is counted in `unread`, never
dropped in silence. A request for `n` > 1 choices, which llama.cpp's server ignores, is sent as `n` requests
(optillm's `bon` and `moa` ask for their samples so), so each sample is a call counted like any other.
"""

from __future__ import annotations

import contextlib
import http.client
import http.server
import json
import threading
import urllib.parse
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["HttpUsage", "Tally", "counting_proxy", "joined", "split_n", "with_max_tokens"]

COMPLETION_PATHS = ("/chat/completions", "/completions")
HOP_HEADERS = frozenset(
    {"connection", "keep-alive", "transfer-encoding", "upgrade", "proxy-connection", "te"}
)
PROXY_TIMEOUT_S = 3600.0
"""How long the forwarder waits for the server's reply (a long generation on a loaded machine)."""


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
def counting_proxy(upstream: str) -> Iterator[tuple[str, HttpUsage]]:
    """A forwarder on 127.0.0.1 in front of the OpenAI-compatible server at `upstream` (its `/v1` URL): yields the
    forwarder's `/v1` URL, which every client is given, and the `HttpUsage` that counts each reply passing through.

    A request that gives `max_completion_tokens` and no `max_tokens` gets `max_tokens` of the same value:
    OpenAI's current name for the reply limit, which llama.cpp's server does not read (it would write until its
    context is full). A completion request asking for `n` > 1 choices, which llama.cpp's server ignores (it returns
    one), is sent as `n` requests for one (`split_n`), each counted as a call, and answered with their choices and
    their usage added up (`joined`), as a server honouring `n` would. Nothing else in a request or a reply is
    changed; a reply is passed on whole once the server has finished it.
    """
    target = urllib.parse.urlsplit(upstream)
    prefix = target.path.rstrip("/")
    usage = HttpUsage(f"http://127.0.0.1{prefix}")  # counted by path: the forwarder's port is not known yet
    host, port = target.hostname or "127.0.0.1", target.port or 80

    class Forwarder(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _forward(self) -> None:
            body = with_max_tokens(self._body())
            parts = split_n(body) if self.path.split("?")[0].endswith(COMPLETION_PATHS) else [body]
            replies = [self._send(part) for part in parts]
            failed = [reply for reply in replies if reply[0] != 200]
            status, reason, reply_headers, data = (failed or replies)[0]
            if len(replies) > 1 and not failed:
                data = joined([reply[3] for reply in replies])
            self.send_response(status, reason)
            for key, value in reply_headers:
                if key.lower() not in HOP_HEADERS and key.lower() != "content-length":
                    self.send_header(key, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _send(self, body: bytes) -> tuple[int, str, list[tuple[str, str]], bytes]:
            """One request to the server, counted: its status, reason, headers and body."""
            headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_HEADERS}
            headers["Content-Length"] = str(len(body))
            connection = http.client.HTTPConnection(host, port, timeout=PROXY_TIMEOUT_S)
            try:
                connection.request(self.command, self.path, body=body or None, headers=headers)
                reply = connection.getresponse()
                data = reply.read()
                status, reason, reply_headers = reply.status, reply.reason, reply.getheaders()
            finally:
                connection.close()
            streamed = b'"stream": true' in body or b'"stream":true' in body
            usage.observe(f"http://127.0.0.1{self.path}", None if streamed else data)
            return status, reason, reply_headers, data

        def _body(self) -> bytes:
            if "chunked" not in (self.headers.get("Transfer-Encoding") or "").lower():
                length = int(self.headers.get("Content-Length") or 0)
                return self.rfile.read(length) if length else b""
            chunks = []
            while size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16):
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            while self.rfile.readline().strip():  # trailers, up to the blank line
                pass
            return b"".join(chunks)

        do_GET = do_POST = _forward

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Forwarder)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, name="counting-proxy", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}{prefix}", usage
    finally:
        server.shutdown()
        server.server_close()


def with_max_tokens(body: bytes) -> bytes:
    """A JSON request body with `max_tokens` set from `max_completion_tokens` where only that is given; any other
    body unchanged."""
    try:
        data = json.loads(body) if body else None
    except ValueError:
        return body
    if not isinstance(data, dict) or "max_completion_tokens" not in data or "max_tokens" in data:
        return body
    return json.dumps({**data, "max_tokens": data["max_completion_tokens"]}).encode()


def split_n(body: bytes) -> list[bytes]:
    """A JSON completion request asking for `n` > 1 choices, not streamed, as `n` requests without `n`; any other
    body as itself alone."""
    try:
        data = json.loads(body) if body else None
    except ValueError:
        return [body]
    if (
        not isinstance(data, dict)
        or data.get("stream")
        or not isinstance(data.get("n"), int)
        or data["n"] <= 1
    ):
        return [body]
    one = json.dumps({k: v for k, v in data.items() if k != "n"}).encode()
    return [one] * data["n"]


def joined(bodies: list[bytes]) -> bytes:
    """The completion replies of `split_n`'s requests as one: the first's fields, every reply's choices (numbered
    in order) and their usage added up. Replies that are not JSON objects leave the first unchanged."""
    try:
        replies = [json.loads(body) for body in bodies]
    except ValueError:
        return bodies[0]
    if not all(isinstance(reply, dict) for reply in replies):
        return bodies[0]
    choices = [choice for reply in replies for choice in reply.get("choices") or []]
    for index, choice in enumerate(choices):
        if isinstance(choice, dict):
            choice["index"] = index
    totals: dict[str, int] = {}
    for reply in replies:
        for name, value in (reply.get("usage") or {}).items():
            if isinstance(value, int):
                totals[name] = totals.get(name, 0) + value
    merged = {**replies[0], "choices": choices}
    if totals:
        merged["usage"] = totals
    return json.dumps(merged).encode()
