"""Unix sockets out of the sandbox (issue 29, fault 1).

A service listening on a socket file in a directory the sandbox can see (here: the repository, mounted read-only
in the sandbox) got `hello from the sandbox` from generated code and its reply read back: a read-only mount does
not stop `connect()` on a socket file, and a network namespace does not cover path sockets. The sandbox now denies
Unix sockets with a seccomp filter. Each isolated run has a control with `isolation="off"`, where the same code
reaches the same listener, so the isolated assertion can fail.
"""

from __future__ import annotations

import shutil
import socket
import sys
import textwrap
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from reflection_graph.critics.sandbox._isolation import _HIDDEN_DIRS
from tests.critics.test_hostile_code import ISOLATED, REPORT_TESTS, ROOT, isolation, judge  # noqa: F401  (a fixture)


class _Listener:
    """A real service on a socket file that records what it heard: a stream service answers `hello back`; a
    datagram one is read after the run (a datagram that was sent is queued on it by then)."""

    def __init__(self, path: Path, kind: int) -> None:
        self.heard: list[bytes] = []
        self.kind = kind
        self.sock = socket.socket(socket.AF_UNIX, kind)
        self.sock.bind(str(path))
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        if kind == socket.SOCK_STREAM:
            self.sock.listen()
            self.sock.settimeout(0.2)
            self.thread.start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:  # the accept timed out (checks `stop` again) or the socket was closed
                continue
            with conn:
                conn.settimeout(5)
                try:
                    self.heard.append(conn.recv(100))
                    conn.sendall(b"hello back")
                except OSError:
                    pass

    def close(self) -> None:
        self.stop.set()
        if self.thread.is_alive():
            self.thread.join(10)
        if self.kind == socket.SOCK_DGRAM:
            self.sock.setblocking(False)
            while True:
                try:
                    self.heard.append(self.sock.recv(100))
                except BlockingIOError:
                    break
        self.sock.close()


@pytest.fixture
def socket_dir() -> Iterator[Path]:
    """A directory outside the run dir that the sandbox sees (read-only): in the repository, or, when the
    repository is in a dir the sandbox hides (a clone under /tmp), in the Python installation, which it keeps."""
    hidden = tuple(d + "/" for d in _HIDDEN_DIRS)
    base = ROOT if not str(ROOT.resolve()).startswith(hidden) else Path(sys.prefix)
    path = base / f".rg-sock-{uuid.uuid4().hex[:8]}"
    path.mkdir()
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _caller(path: Path) -> str:
    return textwrap.dedent(
        f"""
        import os, socket
        def add(a, b):
            return a + b
        def report():
            out = [] if os.path.exists({str(path / "stream")!r}) else ["the socket file is not visible"]
            try:
                with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                    s.settimeout(5)
                    s.connect({str(path / "stream")!r})
                    s.sendall(b"hello from the sandbox")
                    out.append("connected, read " + s.recv(100).decode())
            except OSError as exc:
                out.append("stream blocked " + type(exc).__name__)
            try:
                a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
                a.sendto(b"hello from the sandbox", {str(path / "dgram")!r})
                out.append("sent a datagram")
            except OSError as exc:
                out.append("datagram blocked " + type(exc).__name__)
            a, b = socket.socketpair()  # a connected pair (asyncio's and multiprocessing's pipes) still works
            a.sendall(b"x")
            if b.recv(1) != b"x":
                out.append("socketpair broken")
            return out
        """
    )


@pytest.mark.parametrize("isolation", ["off", *ISOLATED], indirect=True)
def test_a_socket_file_outside_the_run_dir_cannot_be_reached(isolation: str, socket_dir: Path) -> None:  # noqa: F811
    stream = _Listener(socket_dir / "stream", socket.SOCK_STREAM)
    dgram = _Listener(socket_dir / "dgram", socket.SOCK_DGRAM)
    try:
        critique = judge(_caller(socket_dir), isolation, tests=REPORT_TESTS, timeout_s=20)
    finally:
        stream.close()
        dgram.close()
    said = " ".join(critique.issues)
    if isolation == "off":  # the control: without isolation the service is reached both ways
        assert stream.heard == [b"hello from the sandbox"] and "connected, read hello back" in said, said
        assert dgram.heard == [b"hello from the sandbox"] and "sent a datagram" in said, said
    else:
        assert stream.heard == [] and dgram.heard == [], (stream.heard, dgram.heard)
        assert "stream blocked PermissionError" in said and "datagram blocked PermissionError" in said, said
        assert "socketpair broken" not in said and "not visible" not in said, said
