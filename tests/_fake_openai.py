"""A fake OpenAI-compatible chat server on loopback, for fast tests of real HTTP model paths.

`fake_openai_server(latency=..., reject_first_draft=...)` serves `POST /v1/chat/completions` (and `GET /v1/models`)
from a thread in the test process and yields its `/v1` base URL. A request that asks for structured output
(`response_format` or `tools`) is a critique: it accepts with score 9, or, with `reject_first_draft`, rejects a
first draft with score 3 (one issue, `REJECTION`) and accepts its revision. Any other request is a draft ("A short
answer to: ...", ending in a digest of its whole prompt, so that a revision, whose prompt holds the earlier answer,
is a new text) or, when its prompt carries that rejection, a revision ("A revised answer to: ..."). Each answer
waits `latency` seconds first. Point a model at it with `REFLECTION_GRAPH_MODEL=openai:fake` and
`OPENAI_BASE_URL=<url>` (plus any `OPENAI_API_KEY`).
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
import zlib
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["REJECTION", "REVISED", "FakeOpenAI", "fake_openai_server"]

CRITIQUE = {
    "issues": [],
    "suggestions": [],
    "is_acceptable": True,
    "score": 9.0,
    "feedback": "Clear and complete.",
}
REJECTION = "It does not thank the reader."
REJECT = {
    "issues": [REJECTION],
    "suggestions": ["Thank the reader in the first line."],
    "is_acceptable": False,
    "score": 3.0,
    "feedback": "Too short: thank the reader.",
}
REVISED = "A revised answer to:"


class FakeOpenAI:
    """What the server saw: `requests` counts chat completions, by kind (``draft`` / ``revise`` / ``critique``),
    and `rejected` the critiques that rejected."""

    def __init__(self, latency: float, reject_first_draft: bool = False) -> None:
        self.latency = latency
        self.reject_first_draft = reject_first_draft
        self.requests = {"draft": 0, "revise": 0, "critique": 0}
        self.rejected = 0
        self._lock = threading.Lock()

    def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        time.sleep(self.latency)
        structured = bool(body.get("response_format") or body.get("tools"))
        prompt = " ".join(str(m.get("content", "")) for m in body.get("messages", []))
        reject = structured and self.reject_first_draft and REVISED not in prompt
        kind = "critique" if structured else "revise" if REJECTION in prompt else "draft"
        with self._lock:
            self.requests[kind] += 1
            self.rejected += reject
        verdict = json.dumps(REJECT if reject else CRITIQUE)
        message: dict[str, Any] = {"role": "assistant", "content": None}
        if body.get("tools"):
            name = body["tools"][0]["function"]["name"]
            message["tool_calls"] = [
                {"id": "call_1", "type": "function", "function": {"name": name, "arguments": verdict}}
            ]
        elif structured:
            message["content"] = verdict
        elif kind == "revise":
            message["content"] = f"{REVISED} {prompt[-60:]} Thank you for reading."
        else:
            message["content"] = f"A short answer to: {prompt[-60:]} (#{zlib.crc32(prompt.encode()):08x})"
        return {
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "fake"),
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "tool_calls" if body.get("tools") else "stop",
                }
            ],
            "usage": {"prompt_tokens": 20, "completion_tokens": 10, "total_tokens": 30},
        }


@contextlib.contextmanager
def fake_openai_server(
    latency: float = 0.0, *, reject_first_draft: bool = False
) -> Iterator[tuple[str, FakeOpenAI]]:
    """Serve the fake on 127.0.0.1 (a free port) and yield ``(base_url, fake)``; ``base_url`` ends in ``/v1``."""
    fake = FakeOpenAI(latency, reject_first_draft)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

        def _send(self, payload: dict[str, Any], status: int = 200) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            self._send({"object": "list", "data": [{"id": "fake", "object": "model"}]})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            if not self.path.endswith("/chat/completions"):
                self._send({"error": {"message": f"no route {self.path}"}}, 404)
                return
            self._send(fake.answer(body))

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", fake
    finally:
        server.shutdown()
        server.server_close()
