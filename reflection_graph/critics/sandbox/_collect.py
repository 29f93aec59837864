"""One checked run of the sandbox, from start to clean-up: write the plan's files into a fresh run dir, start the
supervisor (`_launch.py`) with the run's descriptors and token, read its pipes until it exits or its deadline passes,
then kill the whole process tree and remove the run dir (always, in a `finally`), and say what it produced
(`SandboxResult`). What a run is asked to do is checked before (`_plan.py`); the entry points are in `_process.py`.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import os
import secrets
import selectors
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from reflection_graph.critics.sandbox._isolation import _wrap
from reflection_graph.critics.sandbox._kill import _kill_tree, _PidsCgroup, _remove_tree
from reflection_graph.critics.sandbox._plan import _Plan

__all__ = ["SandboxResult"]

_TRUNCATION_NOTE = "\n[... output truncated by the sandbox ...]\n"
_MEMORY_MARKERS = ("MemoryError", "Cannot allocate memory", "std::bad_alloc", "out of memory")
_TOKEN_VAR = "REFLECTION_GRAPH_SANDBOX_RUN"
_CHANNEL_BYTES = 16 * 1024 * 1024
"""How many bytes of the result channel are kept (a test runner reports about 2 KB per test at most)."""
_EXIT_GRACE_S = 0.2
"""After the command exits, how long its pipes are still read (children holding them are then killed)."""


@dataclass(frozen=True)
class SandboxResult:
    """What a sandboxed run produced.

    Attributes:
        returncode: the exit status; negative when the process was killed by a signal (`-9` after a timeout).
        stdout: captured standard output (UTF-8, undecodable bytes replaced), at most `max_output_bytes`.
        stderr: captured standard error, same cap.
        timed_out: the wall-clock timeout or the CPU-time limit was hit and the process tree was killed.
        memory_exceeded: the memory limit was hit (a `MemoryError` or allocation failure was reported, or the
            process died of `SIGKILL`/`SIGSEGV`/`SIGABRT` without a timeout). A heuristic: a program that catches
            its own `MemoryError` and exits cleanly is not flagged.
        duration_s: wall-clock seconds from start to the end of the process.
        output_truncated: stdout or stderr was longer than the cap.
        channel: raw bytes read from the result channel (empty unless `channel_secret` was given).
        isolation: the isolation backend used (`"bwrap"` or `"unshare"`), or None when not isolated.
    """

    returncode: int
    stdout: str
    stderr: str
    timed_out: bool
    memory_exceeded: bool
    duration_s: float
    output_truncated: bool = False
    channel: bytes = b""
    isolation: str | None = None

    @property
    def ok(self) -> bool:
        """True when the command exited with status 0 within the limits."""
        return self.returncode == 0 and not self.timed_out and not self.memory_exceeded


class _Capture:
    """Collects up to `limit` bytes from a stream and counts (drops) the rest."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.chunks: list[bytes] = []
        self.kept = 0
        self.dropped = 0

    def feed(self, data: bytes) -> None:
        room = self.limit - self.kept
        if room > 0:
            piece = data[:room]
            self.chunks.append(piece)
            self.kept += len(piece)
        self.dropped += max(0, len(data) - max(room, 0))

    def raw(self) -> bytes:
        return b"".join(self.chunks)

    def text(self) -> str:
        out = self.raw().decode("utf-8", errors="replace")
        return out + _TRUNCATION_NOTE if self.dropped else out


def _write_files(plan: _Plan, workdir: str) -> None:
    for name, content in plan.files.items():
        target = Path(workdir, name)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, encoding="utf-8")


def _descriptors(plan: _Plan, opened: list[int]) -> tuple[list[str], list[int], int]:
    """The argv with `{name}` placeholders replaced, the fds to pass, and the read end of the result channel."""
    names = {f"{{{name}}}": str(fd) for name, fd in plan.pass_fds.items()}
    pass_fds = list(plan.pass_fds.values())
    channel_read = -1
    if plan.channel_secret is not None:
        secret_read, secret_write = os.pipe()
        channel_read, channel_write = os.pipe()
        opened += [secret_read, channel_read, channel_write]
        os.write(secret_write, plan.channel_secret)
        os.close(secret_write)
        pass_fds += [secret_read, channel_write]
        names.update({"{secret_fd}": str(secret_read), "{result_fd}": str(channel_write)})
    return [names.get(a, a) for a in plan.argv], pass_fds, channel_read


def _run_plan(plan: _Plan, cancel: threading.Event | None = None) -> SandboxResult:
    """Run one plan: write the files, start the supervisor, read its pipes, then kill and clean up (always)."""
    opened: list[int] = list(plan.pass_fds.values())  # the run owns them: closed once the child holds them
    workdir: str | None = None
    proc: subprocess.Popen[bytes] | None = None
    token = secrets.token_hex(16)
    cgroup: _PidsCgroup | None = None
    killed = False
    try:
        if cancel is not None and cancel.is_set():  # cancelled while waiting for a thread: do not start
            raise concurrent.futures.CancelledError()
        workdir = tempfile.mkdtemp(prefix="reflection-graph-sandbox-")
        _write_files(plan, workdir)
        cgroup = _PidsCgroup.create(f"reflection-graph-{token}", plan.max_processes)
        argv, pass_fds, channel_read = _descriptors(plan, opened)
        guard = {"parent": os.getpid(), "workdir": workdir, "token": token}
        guard["cgroup"] = cgroup.procs if cgroup is not None else None
        out, err, chan = (
            _Capture(plan.max_output_bytes),
            _Capture(plan.max_output_bytes),
            _Capture(_CHANNEL_BYTES),
        )
        start = time.monotonic()
        proc = subprocess.Popen(
            _wrap(plan.backend, workdir, dataclasses.replace(plan, argv=argv), guard),
            cwd=workdir,
            env={**plan.env, "HOME": workdir, "TMPDIR": workdir, _TOKEN_VAR: token},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            close_fds=True,
            pass_fds=pass_fds,
        )
        for fd in pass_fds:  # the child holds them now
            os.close(fd)
            opened.remove(fd)
        assert proc.stdout is not None and proc.stderr is not None
        streams = {proc.stdout.fileno(): out, proc.stderr.fileno(): err}
        if channel_read >= 0:
            streams[channel_read] = chan
        timed_out = _pump(proc, streams, start + plan.timeout_s, cancel)
        _kill_tree(proc, f"{_TOKEN_VAR}={token}".encode(), cgroup)
        killed = True
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=0.5)
        _drain(streams)
        returncode = proc.returncode if proc.returncode is not None else -signal.SIGKILL
        if plan.backend is not None and 128 < returncode <= 128 + 64:
            returncode = 128 - returncode  # the backend's init reports a signal as 128 + signal
        return _result(returncode, out, err, chan, timed_out, start, plan.backend)
    finally:
        if proc is not None and not killed:  # Ctrl-C or an error while reading: the kill first, then the rest
            _kill_tree(proc, f"{_TOKEN_VAR}={token}".encode(), cgroup)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=0.5)
        if proc is not None:
            for stream in (proc.stdout, proc.stderr):
                if stream is not None:
                    stream.close()
        _close(opened)
        if cgroup is not None:
            cgroup.remove()
        if workdir is not None:
            _remove_tree(workdir)


def _exited(proc: subprocess.Popen[bytes]) -> bool:
    """Has the command exited? Without reaping it where the OS allows, so that its pid and process group id stay
    reserved (as a zombie) until the tree has been killed."""
    if proc.returncode is not None:
        return True
    if hasattr(os, "waitid"):
        try:
            return os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
        except ChildProcessError:
            pass
    return proc.poll() is not None


def _pump(
    proc: subprocess.Popen[bytes],
    streams: dict[int, _Capture],
    deadline: float,
    cancel: threading.Event | None,
) -> bool:
    """Read the pipes until the command exits (plus a short grace) or the deadline; True on timeout."""
    selector = selectors.DefaultSelector()
    for fd in streams:
        os.set_blocking(fd, False)
        selector.register(fd, selectors.EVENT_READ)
    exited_at: float | None = None
    try:
        while True:
            now = time.monotonic()
            if exited_at is None and _exited(proc):
                exited_at = now
            if exited_at is not None and (now >= exited_at + _EXIT_GRACE_S or not selector.get_map()):
                return False
            if now >= deadline:
                return exited_at is None
            if cancel is not None and cancel.is_set():
                return False
            wait = min(deadline - now, 0.05 if exited_at is None else exited_at + _EXIT_GRACE_S - now)
            if not selector.get_map():
                time.sleep(max(0.0, min(wait, 0.02)))
                continue
            for key, _ in selector.select(max(0.0, wait)):
                fd = int(key.fd)
                try:
                    data = os.read(fd, 65536)
                except BlockingIOError:
                    continue
                except OSError:
                    data = b""
                if data:
                    streams[fd].feed(data)
                else:
                    selector.unregister(fd)
    finally:
        selector.close()


def _drain(streams: dict[int, _Capture]) -> None:
    """Take what is still buffered in the pipes, without waiting."""
    for fd, capture in streams.items():
        with contextlib.suppress(OSError):
            for _ in range(64):
                data = os.read(fd, 65536)
                if not data:
                    break
                capture.feed(data)


def _result(
    returncode: int,
    out: _Capture,
    err: _Capture,
    chan: _Capture,
    timed_out: bool,
    start: float,
    backend: str | None,
) -> SandboxResult:
    stderr = err.text()
    if returncode == -signal.SIGXCPU:
        timed_out = True
    died = returncode in (-signal.SIGKILL, -signal.SIGSEGV, -signal.SIGABRT)
    memory = not timed_out and (
        (returncode != 0 and any(marker in stderr for marker in _MEMORY_MARKERS)) or died
    )
    return SandboxResult(
        returncode=returncode,
        stdout=out.text(),
        stderr=stderr,
        timed_out=timed_out,
        memory_exceeded=memory,
        duration_s=time.monotonic() - start,
        output_truncated=bool(out.dropped or err.dropped),
        channel=chan.raw(),
        isolation=backend,
    )


def _close(fds: Iterable[int]) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)
