"""One run per checkpointed thread (issue 29, fault 5), with real processes.

Two `run --checkpoint DB --thread-id T` at once both ran the thread (twice the model calls, two answers). Now the
run that holds a thread keeps a lock beside the checkpoint (`DB.thread-<hash>.lock`); a second runner is refused with
a one-line error naming the thread; the lock goes when its holder exits and is taken over when its holder was killed.

The models are ChatOpenAI (real HTTP) against loopback servers in this process: a "stuck" one that accepts requests
and never answers (so a run holds its thread for as long as the test wants) and the fast fake
(tests/_fake_openai.py) that lets a run finish. Every wait is on an event with a generous bound, never a fixed sleep.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from reflection_graph.runners import ThreadBusy, ThreadLock
from reflection_graph.runners._lock import thread_lock_path
from tests._fake_openai import fake_openai_server

ROOT = Path(__file__).resolve().parents[1]
TASK = "Write a haiku about rain"
THREAD = "thread one"


class _Stuck:
    """An HTTP server that accepts connections, reads nothing and never answers; `requests` counts connections."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}/v1"
        self.connections: list[socket.socket] = []
        self.arrived = threading.Condition()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            with self.arrived:
                self.connections.append(conn)
                self.arrived.notify_all()

    def wait_for(self, count: int, timeout: float = 120) -> None:
        with self.arrived:
            if not self.arrived.wait_for(lambda: len(self.connections) >= count, timeout):
                pytest.fail(
                    f"{count} model request(s) expected within {timeout}s, got {len(self.connections)}"
                )

    def close(self) -> None:
        self.listener.close()
        for conn in self.connections:
            conn.close()


@pytest.fixture
def stuck() -> Iterator[_Stuck]:
    server = _Stuck()
    try:
        yield server
    finally:
        server.close()


def _run(db: Path, model_url: str) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        "REFLECTION_GRAPH_MODEL": "openai:fake",
        "OPENAI_BASE_URL": model_url,
        "OPENAI_API_KEY": "not-needed",
        "PYTHONPATH": str(ROOT),
    }
    command = [sys.executable, "-m", "reflection_graph.cli", "run", TASK, "-n", "2", "--json"]
    command += ["--checkpoint", str(db), "--thread-id", THREAD]
    return subprocess.Popen(
        command, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _refused(proc: subprocess.Popen[str], *, holder_may_be_starting: bool = False) -> None:
    """`proc` ended at once with the one-line error that names the thread and the holder's pid (or, for a holder
    that took the lock a moment before and has not written its pid yet, says it is just starting)."""
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 2, (proc.returncode, out, err)
    assert err.startswith("error: ") and err.count("\n") == 1, err
    holders = ["(pid "] + (["(a run that is just starting)"] if holder_may_be_starting else [])
    assert any(f"thread {THREAD!r} is being run by another process {h}" in err for h in holders), err


def _kill(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)


def test_a_thread_a_run_holds_refuses_a_second_runner(tmp_path: Path, stuck: _Stuck) -> None:
    db = tmp_path / "checkpoints.sqlite"
    lock = thread_lock_path(db, THREAD)
    first = _run(db, stuck.url)
    try:
        stuck.wait_for(1)  # the first run is in its first model call, holding the thread
        with fake_openai_server() as (fast_url, fast):
            _refused(_run(db, fast_url))  # a second runner, with a model that would answer at once
            assert fast.requests == {"draft": 0, "revise": 0, "critique": 0}  # it made no model call
    finally:
        _kill(first)
    assert lock.exists()  # a killed holder cannot remove its lock file: the next run takes it over

    # two resumers of the killed run started at once: one holds the thread, the other is refused
    both = [_run(db, stuck.url), _run(db, stuck.url)]
    try:
        stuck.wait_for(2)  # the first run's request and the holder's
        ended = _first_to_end(both)
        _refused(
            ended, holder_may_be_starting=True
        )  # started at once: the holder may not have written its pid
        holder = both[1 - both.index(ended)]
        assert holder.poll() is None
    finally:
        for proc in both:
            if proc.poll() is None:
                _kill(proc)

    with fake_openai_server() as (fast_url, fast):  # taken over from the killed holder; finishes the thread
        last = _run(db, fast_url)
        out, err = last.communicate(timeout=300)
    assert last.returncode == 0, err
    assert '"stop_reason"' in out and fast.requests["draft"] == 1
    assert not lock.exists()  # released when its run ended


def _first_to_end(procs: list[subprocess.Popen[str]], timeout: float = 120) -> subprocess.Popen[str]:
    """The process of `procs` that exits first (polled every 50 ms, up to `timeout` s)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for proc in procs:
            if proc.poll() is not None:
                return proc
        time.sleep(0.05)
    pytest.fail(f"neither run ended within {timeout}s: the second runner was not refused")


def test_the_library_lock_refuses_a_second_holder_and_is_released_on_exit(tmp_path: Path) -> None:
    db = tmp_path / "checkpoints.sqlite"
    with ThreadLock(db, THREAD) as held:
        assert held.path == thread_lock_path(db, THREAD) and held.path.exists()
        with pytest.raises(
            ThreadBusy, match=f"thread {THREAD!r} is being run by another process \\(pid {os.getpid()}"
        ):
            ThreadLock(db, THREAD).acquire()
        with ThreadLock(db, "another thread"):  # other threads of the same checkpoint are free
            pass
    assert not thread_lock_path(db, THREAD).exists()
    with pytest.raises(RuntimeError), ThreadLock(db, THREAD):  # released when the block raises, too
        raise RuntimeError("boom")
    with ThreadLock(db, THREAD):  # free again
        pass
