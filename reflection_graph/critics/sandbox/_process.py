"""Run untrusted commands (generated code, its tests, linters) in an isolated, limited subprocess.

Generated code never runs in the package's own process. `run_sandboxed` (and its async twin `arun_sandboxed`) writes
the given files into a fresh temporary directory (the *run dir*), runs `argv` there and always deletes the directory
afterwards, also on timeout, cancellation, error or Ctrl-C (the kill and the removal are in a `finally`).

Isolation (`isolation="auto"`, the default; Linux only; see `_isolation`): bubblewrap, else `unshare` with
unprivileged user namespaces, else (macOS, Windows, Linux without either) no isolation, with a one-time
`RuntimeWarning`. `"required"` raises `IsolationUnavailableError` instead; `"off"` never isolates.

When the parent runs as root, the code is root inside its namespaces, still mapped to the real root user: the lack
of capabilities and the read-only mounts are what stop it from changing the host; it can read every file that is
not hidden.

Limits, applied before the command runs (by `_launch.py`, passed as `python -I -S -c`):

- `RLIMIT_AS` (address space) = `memory_mb`; `RLIMIT_CPU` = `cpu_s` (default: the timeout rounded up, plus two
  seconds); `RLIMIT_FSIZE` = `max_file_mb`; `RLIMIT_CORE` = 0.
- The number of processes (and threads) = `max_processes`: a pids cgroup where this process can make one (as root,
  or with a delegated cgroup), and `RLIMIT_NPROC` inside the sandbox's own user namespace. A fork bomb then ends at
  the timeout like any other loop.
- A wall-clock timeout. The parent reads the child's pipes with deadlines, so it never blocks past `timeout_s` plus
  a fraction of a second, even when a grandchild keeps a pipe open.
- The whole process tree is killed when the command ends or times out (`_kill`): the process group (with it the pid
  namespace when isolated), the pids cgroup, and every process that carries this run's random token in its
  environment (found through `/proc` on Linux), which catches children that escaped with `setsid()`.
- It dies with its parent: the supervisor that starts it (`_launch.py`) kills it and removes its run dir when the
  parent dies, even by SIGKILL.
- A minimal environment: `PATH=/usr/local/bin:/usr/bin:/bin`, `HOME` and `TMPDIR` pointing at the run dir, a UTF-8
  locale, the run token, plus only what `env` adds.
- stdin is `/dev/null`; stdout and stderr are captured up to `max_output_bytes` each.

An optional result channel (`channel_secret`): a pipe on which the command can report results that its own children
cannot forge by printing (see `_runner.py`). The secret is written into a second pipe that the command reads and
closes; `argv` items `"{secret_fd}"` and `"{result_fd}"` are replaced by the two descriptor numbers. `pass_fds`
hands the command more descriptors the same way (`"{name}"` in `argv`), e.g. the pipes that connect a candidate's
process with the process that checks its answers.
"""

from __future__ import annotations

import asyncio
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
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from typing_extensions import TypedDict, Unpack

from reflection_graph.critics.sandbox._isolation import Isolation, _wrap, resolve_isolation
from reflection_graph.critics.sandbox._kill import _kill_tree, _PidsCgroup, _remove_tree
from reflection_graph.critics.sandbox._plan import (
    DEFAULT_MAX_OUTPUT_BYTES,
    DEFAULT_MAX_PROCESSES,
    _Plan,
    _validate,
)

__all__ = ["SandboxResult", "arun_sandboxed", "run_sandboxed"]

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


class SandboxOptions(TypedDict, total=False):
    """The keyword options of `run_sandboxed` and `arun_sandboxed` (their meaning is `run_sandboxed`'s)."""

    timeout_s: float
    memory_mb: int | None
    cpu_s: int | None
    env: Mapping[str, str] | None
    max_output_bytes: int
    max_file_mb: int
    isolation: Isolation
    channel_secret: bytes | None
    max_processes: int | None
    pass_fds: Mapping[str, int] | None


def _owned_plan(
    files: Mapping[str, str],
    argv: Sequence[str],
    *,
    timeout_s: float = 10,
    memory_mb: int | None = 512,
    cpu_s: int | None = None,
    env: Mapping[str, str] | None = None,
    max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
    max_file_mb: int = 16,
    isolation: Isolation = "auto",
    channel_secret: bytes | None = None,
    max_processes: int | None = DEFAULT_MAX_PROCESSES,
    pass_fds: Mapping[str, int] | None = None,
) -> _Plan:
    """The checked plan of one run with its backend: the sandbox's options and their defaults, declared here once.

    `pass_fds` are closed when the arguments are refused.
    """
    try:
        plan = _validate(
            files,
            argv,
            timeout_s,
            memory_mb,
            cpu_s,
            env,
            max_output_bytes,
            max_file_mb,
            None,
            channel_secret,
            max_processes,
            pass_fds,
        )
        return dataclasses.replace(plan, backend=resolve_isolation(isolation))
    except BaseException:
        _close((pass_fds or {}).values())
        raise


def _close(fds: Iterable[int]) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)


def run_sandboxed(
    files: Mapping[str, str], argv: Sequence[str], **options: Unpack[SandboxOptions]
) -> SandboxResult:
    """Write `files` into a fresh temp dir, run `argv` there isolated and under limits, and delete the dir.

    Args:
        files: relative file name -> text content, written (UTF-8) before the run.
        argv: the command; `argv[0]` is looked up on a minimal `PATH` unless it is a path. Use
            `[sys.executable, "-I", "script.py"]` for Python.
        **options: `SandboxOptions`, each optional:
            - `timeout_s`: wall-clock limit in seconds (default 10); on expiry the whole process tree is killed
              and `timed_out` is set. The call returns within `timeout_s` plus well under a second.
            - `memory_mb`: address-space limit (`RLIMIT_AS`) in MiB (default 512); `None` for no limit.
            - `cpu_s`: CPU-time limit (`RLIMIT_CPU`); default: `int(timeout_s) + 2`.
            - `env`: extra environment variables on top of the minimal environment.
            - `max_output_bytes`: bytes of stdout and of stderr that are kept (default
              `DEFAULT_MAX_OUTPUT_BYTES`).
            - `max_file_mb`: largest file the child may write (`RLIMIT_FSIZE`; default 16).
            - `isolation`: `"auto"` (the default: isolate when the OS allows it, else warn once), `"required"`
              (raise `IsolationUnavailableError` when it cannot), `"off"`.
            - `channel_secret`: give the command a result channel (see the module docstring); its bytes are in
              `SandboxResult.channel`.
            - `max_processes`: how many processes and threads the command may have at once (a pids cgroup where
              one can be made, and `RLIMIT_NPROC` in the sandbox's user namespace; default
              `DEFAULT_MAX_PROCESSES`); None for no limit.
            - `pass_fds`: descriptors to hand to the command, by name: `"{name}"` in `argv` becomes the number.
              The run owns them: they are closed in this process once the command has started (or when it
              cannot start).

    Returns:
        A `SandboxResult`.

    Raises:
        ValueError: bad arguments (file names escaping the sandbox, a program that does not exist, ...).
        IsolationUnavailableError: `isolation="required"` where the OS cannot isolate.

    Example:
        >>> import sys
        >>> run_sandboxed({"main.py": "print(6 * 7)"}, [sys.executable, "-I", "main.py"]).stdout
        '42\\n'
    """
    return _run_plan(_owned_plan(files, argv, **options))


_pool: concurrent.futures.ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _executor() -> concurrent.futures.ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = concurrent.futures.ThreadPoolExecutor(
                max_workers=4 * (os.cpu_count() or 1), thread_name_prefix="reflection-graph-sandbox"
            )
        return _pool


async def arun_sandboxed(
    files: Mapping[str, str], argv: Sequence[str], **options: Unpack[SandboxOptions]
) -> SandboxResult:
    """Async twin of `run_sandboxed` (same arguments and result); never blocks the event loop.

    The run happens in a thread of a pool of its own (4 per CPU, so that many concurrent runs neither thrash the
    machine nor starve the event loop's default executor); a run's timeout starts when it starts. If the awaiting
    task is cancelled, the process tree is killed and the temp dir removed before the cancellation propagates.
    """
    (result,) = await _arun_plans(lambda: [_owned_plan(files, argv, **options)])
    return result


def _plans(runs: Sequence[Mapping[str, Any]]) -> list[_Plan]:
    """The checked plans of several runs (each given as `run_sandboxed`'s keyword arguments); on an error, every
    run's descriptors are closed."""
    plans: list[_Plan] = []
    try:
        for run in runs:
            unknown = set(run) - {"files", "argv", *SandboxOptions.__optional_keys__}
            if unknown:
                raise ValueError(f"unknown sandbox options: {', '.join(sorted(unknown))}")
            plans.append(_owned_plan(**run))
    except BaseException:
        for run in runs:
            _close((run.get("pass_fds") or {}).values())
        raise
    return plans


def _run_plans(plans: Sequence[_Plan], cancel: threading.Event | None = None) -> list[SandboxResult]:
    """Run the plans at the same time (the first in this thread, each other in a thread of its own), so that runs
    that talk to each other never wait for a free worker; every run has ended before this returns."""
    results: list[SandboxResult | BaseException | None] = [None] * len(plans)

    def one(index: int) -> None:
        try:
            results[index] = _run_plan(plans[index], cancel)
        except BaseException as exc:  # handed to the caller below
            results[index] = exc

    threads = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(1, len(plans))]
    for thread in threads:
        thread.start()
    try:
        one(0)
    finally:
        for thread in threads:
            thread.join()
    for outcome in results:
        if isinstance(outcome, BaseException):
            raise outcome
    return [r for r in results if isinstance(r, SandboxResult)]


def run_together(runs: Sequence[Mapping[str, Any]]) -> list[SandboxResult]:
    """Several `run_sandboxed` runs at the same time (e.g. a candidate and the process that checks it)."""
    return _run_plans(_plans(runs))


async def arun_together(runs: Sequence[Mapping[str, Any]]) -> list[SandboxResult]:
    """Async twin of `run_together`: one worker of the pool for the group, cancelled as one."""
    return await _arun_plans(lambda: _plans(runs))


async def _arun_plans(prepare: Callable[[], list[_Plan]]) -> list[SandboxResult]:
    loop = asyncio.get_running_loop()
    # the first call probes the backends (a subprocess each): keep that off the event loop too
    prepared = loop.run_in_executor(_executor(), prepare)
    try:
        plans = await asyncio.shield(prepared)
    except asyncio.CancelledError:  # not started: the descriptors they own are closed all the same
        with contextlib.suppress(BaseException):
            for plan in await prepared:
                _close(plan.pass_fds.values())
        raise
    cancel = threading.Event()
    task = loop.run_in_executor(_executor(), _run_plans, plans, cancel)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        cancel.set()
        with contextlib.suppress(BaseException):
            await task
        raise
