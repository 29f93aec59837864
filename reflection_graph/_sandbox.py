"""Run untrusted commands (generated code, its tests, linters) in a limited subprocess.

Generated code never runs in the package's own process. `run_sandboxed` (and its async twin
`arun_sandboxed`) writes the given files into a fresh temporary directory, runs `argv` there and always deletes
the directory afterwards, also on timeout, cancellation or error.

Limits, applied to the child before it runs any of the given command:

- `RLIMIT_AS` (address space) = `memory_mb`: an allocation past it fails (`MemoryError` in Python).
- `RLIMIT_CPU` = `cpu_s` (default: the wall-clock timeout rounded up, plus one second).
- `RLIMIT_FSIZE` = `max_file_mb`: no file written by the child grows past it.
- `RLIMIT_CORE` = 0: no core dumps in the temp dir.
- A wall-clock timeout: the child runs in its own session / process group, and the whole group is killed with
  `SIGKILL` on timeout (and after a normal exit too, so background children left behind do not survive).
- A minimal environment: `PATH=/usr/bin:/bin`, `HOME` and `TMPDIR` pointing at the temp dir, a UTF-8 locale, plus
  only what `env` adds. Run Python as `python -I` (isolated mode: no `PYTHON*` variables, no user site, the
  script's directory is not put on `sys.path`).
- stdin is `/dev/null`; stdout and stderr are captured up to `max_output_bytes` each (the rest is read and
  dropped, so a chatty child cannot fill the parent's memory).

The limits are set by a tiny launcher (`python -I -S -c ...` that calls `resource.setrlimit` and then
`os.execv`s the command) rather than by `preexec_fn`, which CPython documents as unsafe when the parent process has
threads (LangGraph runs sync nodes in a thread pool). The effect is the same: the command starts with the limits
already in place. `RLIMIT_NPROC` is not set: it counts every process of the user (and root ignores it), so it
cannot bound one sandbox; the process-group kill is what cleans up forks.

This is resource isolation, not a security boundary: the child can still read the file system and use the network
with the rights of the current user. Run the package in a container when the code may be hostile.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO

__all__ = [
    "DEFAULT_MAX_OUTPUT_BYTES",
    "SandboxResult",
    "arun_sandboxed",
    "run_sandboxed",
]

DEFAULT_MAX_OUTPUT_BYTES = 256 * 1024
"""How many bytes of stdout (and, separately, of stderr) are kept."""

_MIN_MEMORY_MB = 32
_TRUNCATION_NOTE = "\n[... output truncated by the sandbox ...]\n"
_MEMORY_MARKERS = ("MemoryError", "Cannot allocate memory", "std::bad_alloc", "out of memory")

# Sets the limits given on the command line, then replaces itself with the real command.
_LAUNCHER = """\
import os, resource, sys
def _lim(name, value):
    if value < 0 or not hasattr(resource, name):
        return
    kind = getattr(resource, name)
    soft, hard = resource.getrlimit(kind)
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    resource.setrlimit(kind, (value, value))
_lim("RLIMIT_AS", int(sys.argv[1]))
_lim("RLIMIT_CPU", int(sys.argv[2]))
_lim("RLIMIT_FSIZE", int(sys.argv[3]))
_lim("RLIMIT_CORE", 0)
os.execv(sys.argv[4], sys.argv[4:])
"""


@dataclass(frozen=True)
class SandboxResult:
    """What a sandboxed run produced.

    Attributes:
        returncode: the exit status; negative when the process was killed by a signal (`-9` after a timeout).
        stdout: captured standard output (UTF-8, undecodable bytes replaced), at most `max_output_bytes`.
        stderr: captured standard error, same cap.
        timed_out: the wall-clock timeout or the CPU-time limit was hit and the process group was killed.
        memory_exceeded: the memory limit was hit (a `MemoryError` or allocation failure was reported, or the
            process died of `SIGKILL`/`SIGSEGV`/`SIGABRT` without a timeout). A heuristic: a program that catches
            its own `MemoryError` and exits cleanly is not flagged.
        duration_s: wall-clock seconds from start to the end of the process.
        output_truncated: stdout or stderr was longer than the cap.
    """

    returncode: int
    stdout: str
    stderr: str
    timed_out: bool
    memory_exceeded: bool
    duration_s: float
    output_truncated: bool = False

    @property
    def ok(self) -> bool:
        """True when the command exited with status 0 within the limits."""
        return self.returncode == 0 and not self.timed_out and not self.memory_exceeded


@dataclass(frozen=True)
class _Plan:
    files: dict[str, str]
    argv: list[str]
    timeout_s: float
    memory_bytes: int
    cpu_s: int
    fsize_bytes: int
    env: dict[str, str]
    max_output_bytes: int


def _validate(
    files: Mapping[str, str],
    argv: Sequence[str],
    timeout_s: float,
    memory_mb: int | None,
    cpu_s: int | None,
    env: Mapping[str, str] | None,
    max_output_bytes: int,
    max_file_mb: int,
) -> _Plan:
    if isinstance(argv, str) or not argv or not all(isinstance(a, str) for a in argv):
        raise ValueError("argv must be a non-empty list of strings, e.g. [sys.executable, '-I', 'main.py']")
    if not timeout_s or timeout_s <= 0:
        raise ValueError(f"timeout_s must be a positive number of seconds, got {timeout_s!r}")
    if memory_mb is not None and memory_mb < _MIN_MEMORY_MB:
        raise ValueError(
            f"memory_mb must be at least {_MIN_MEMORY_MB} (or None for no limit), got {memory_mb!r}"
        )
    if cpu_s is not None and cpu_s <= 0:
        raise ValueError(f"cpu_s must be a positive number of seconds (or None), got {cpu_s!r}")
    if max_output_bytes <= 0:
        raise ValueError(f"max_output_bytes must be positive, got {max_output_bytes!r}")
    if max_file_mb <= 0:
        raise ValueError(f"max_file_mb must be positive, got {max_file_mb!r}")
    clean_files: dict[str, str] = {}
    for name, content in files.items():
        path = PurePosixPath(name)
        if not name or path.is_absolute() or ".." in path.parts or name.startswith("~"):
            raise ValueError(f"sandbox file names must be relative paths inside the sandbox, got {name!r}")
        if not isinstance(content, str):
            raise ValueError(f"sandbox file {name!r} must have str content, got {type(content).__name__}")
        clean_files[str(path)] = content
    program = argv[0]
    if os.sep not in program:
        found = shutil.which(program, path="/usr/local/bin:/usr/bin:/bin")
        if found is None:
            found = shutil.which(program)
        if found is None:
            raise ValueError(f"cannot find the program {program!r}; pass an absolute path as argv[0]")
        program = found
    child_env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}
    if env:
        child_env.update({str(k): str(v) for k, v in env.items()})
    return _Plan(
        files=clean_files,
        argv=[program, *argv[1:]],
        timeout_s=float(timeout_s),
        memory_bytes=-1 if memory_mb is None else int(memory_mb) * 1024 * 1024,
        cpu_s=int(cpu_s) if cpu_s is not None else int(timeout_s) + 2,
        fsize_bytes=int(max_file_mb) * 1024 * 1024,
        env=child_env,
        max_output_bytes=int(max_output_bytes),
    )


def _prepare(plan: _Plan, workdir: str) -> tuple[list[str], dict[str, str]]:
    for name, content in plan.files.items():
        target = Path(workdir, name)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, encoding="utf-8")
    env = {**plan.env, "HOME": workdir, "TMPDIR": workdir}
    launcher = [
        sys.executable,
        "-I",
        "-S",
        "-c",
        _LAUNCHER,
        str(plan.memory_bytes),
        str(plan.cpu_s),
        str(plan.fsize_bytes),
        *plan.argv,
    ]
    return launcher, env


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError, OSError):
        os.killpg(pid, signal.SIGKILL)


def _remove_tree(path: str) -> None:
    """Delete the sandbox dir even if the child removed permissions from files inside it."""

    def _fix(func: object, target: str, _exc: object) -> None:
        with contextlib.suppress(OSError):
            os.chmod(os.path.dirname(target) or target, 0o700)
            os.chmod(target, 0o700)
        with contextlib.suppress(OSError):
            if os.path.isdir(target) and not os.path.islink(target):
                os.rmdir(target)
            else:
                os.unlink(target)

    if os.path.exists(path):
        if sys.version_info >= (3, 12):
            shutil.rmtree(path, onexc=_fix)
        else:
            shutil.rmtree(path, onerror=_fix)
    if os.path.exists(path):
        shutil.rmtree(path, ignore_errors=True)


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

    def text(self) -> str:
        out = b"".join(self.chunks).decode("utf-8", errors="replace")
        return out + _TRUNCATION_NOTE if self.dropped else out


def _result(returncode: int, out: _Capture, err: _Capture, timed_out: bool, start: float) -> SandboxResult:
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
    )


def _pump(stream: IO[bytes], capture: _Capture) -> None:
    with contextlib.suppress(OSError, ValueError):
        while True:
            data = stream.read1(65536) if hasattr(stream, "read1") else stream.read(65536)
            if not data:
                break
            capture.feed(data)


def run_sandboxed(
    files: Mapping[str, str],
    argv: Sequence[str],
    *,
    timeout_s: float = 10,
    memory_mb: int | None = 512,
    cpu_s: int | None = None,
    env: Mapping[str, str] | None = None,
    max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
    max_file_mb: int = 16,
) -> SandboxResult:
    """Write `files` into a fresh temp dir, run `argv` there under limits, and delete the dir.

    Args:
        files: relative file name -> text content, written (UTF-8) before the run.
        argv: the command; `argv[0]` is looked up on a minimal `PATH` unless it is a path. Use
            `[sys.executable, "-I", "script.py"]` for Python.
        timeout_s: wall-clock limit; on expiry the whole process group is killed and `timed_out` is set.
        memory_mb: address-space limit (`RLIMIT_AS`) in MiB; `None` for no limit.
        cpu_s: CPU-time limit (`RLIMIT_CPU`); default: `int(timeout_s) + 2`.
        env: extra environment variables on top of the minimal environment.
        max_output_bytes: bytes of stdout and of stderr that are kept.
        max_file_mb: largest file the child may write (`RLIMIT_FSIZE`).

    Returns:
        A `SandboxResult`.

    Raises:
        ValueError: bad arguments (file names escaping the sandbox, a program that does not exist, ...).

    Example:
        >>> import sys
        >>> run_sandboxed({"main.py": "print(6 * 7)"}, [sys.executable, "-I", "main.py"]).stdout
        '42\\n'
    """
    plan = _validate(files, argv, timeout_s, memory_mb, cpu_s, env, max_output_bytes, max_file_mb)
    workdir = tempfile.mkdtemp(prefix="reflection-graph-sandbox-")
    try:
        command, child_env = _prepare(plan, workdir)
        out, err = _Capture(plan.max_output_bytes), _Capture(plan.max_output_bytes)
        start = time.monotonic()
        proc = subprocess.Popen(
            command,
            cwd=workdir,
            env=child_env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            close_fds=True,
        )
        assert proc.stdout is not None and proc.stderr is not None
        readers = [
            threading.Thread(target=_pump, args=(proc.stdout, out), daemon=True),
            threading.Thread(target=_pump, args=(proc.stderr, err), daemon=True),
        ]
        for reader in readers:
            reader.start()
        timed_out = False
        try:
            proc.wait(timeout=plan.timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            _kill_group(proc.pid)
            proc.wait()
            for reader in readers:
                reader.join(timeout=2)
            proc.stdout.close()
            proc.stderr.close()
        return _result(proc.returncode, out, err, timed_out, start)
    finally:
        _remove_tree(workdir)


async def _apump(stream: asyncio.StreamReader | None, capture: _Capture) -> None:
    if stream is None:
        return
    with contextlib.suppress(OSError, ValueError):
        while True:
            data = await stream.read(65536)
            if not data:
                break
            capture.feed(data)


async def arun_sandboxed(
    files: Mapping[str, str],
    argv: Sequence[str],
    *,
    timeout_s: float = 10,
    memory_mb: int | None = 512,
    cpu_s: int | None = None,
    env: Mapping[str, str] | None = None,
    max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
    max_file_mb: int = 16,
) -> SandboxResult:
    """Async twin of `run_sandboxed` (same arguments and result); never blocks the event loop.

    Uses `asyncio.create_subprocess_exec`. If the awaiting task is cancelled, the process group is killed and the
    temp dir removed before the cancellation propagates.
    """
    plan = _validate(files, argv, timeout_s, memory_mb, cpu_s, env, max_output_bytes, max_file_mb)
    workdir = await asyncio.to_thread(tempfile.mkdtemp, prefix="reflection-graph-sandbox-")
    try:
        command, child_env = await asyncio.to_thread(_prepare, plan, workdir)
        out, err = _Capture(plan.max_output_bytes), _Capture(plan.max_output_bytes)
        start = time.monotonic()
        proc = await asyncio.create_subprocess_exec(
            *command,
            cwd=workdir,
            env=child_env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            close_fds=True,
        )
        readers = asyncio.gather(_apump(proc.stdout, out), _apump(proc.stderr, err))
        timed_out = False
        try:
            await asyncio.wait_for(proc.wait(), timeout=plan.timeout_s)
        except asyncio.TimeoutError:
            timed_out = True
        finally:
            _kill_group(proc.pid)
            try:
                await asyncio.shield(proc.wait())
            finally:
                try:
                    await asyncio.wait_for(readers, timeout=2)
                except (asyncio.TimeoutError, asyncio.CancelledError):
                    readers.cancel()
        assert proc.returncode is not None
        return _result(proc.returncode, out, err, timed_out, start)
    finally:
        await asyncio.to_thread(_remove_tree, workdir)
