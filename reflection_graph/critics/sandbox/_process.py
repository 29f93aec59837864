"""Run untrusted commands (generated code, its tests, linters) in an isolated, limited subprocess.

Generated code never runs in the package's own process. `run_sandboxed` (and its async twin `arun_sandboxed`) writes
the given files into a fresh temporary directory (the *run dir*), runs `argv` there and always deletes the directory
afterwards, also on timeout, cancellation or error.

Isolation (`isolation="auto"`, the default; Linux only):

- with bubblewrap (`bwrap`) installed and working: new user, pid, network, IPC and UTS namespaces; no capabilities;
  the whole file system read-only except the run dir; fresh empty `/tmp`, `/var/tmp` and `/run`; `/home` and
  `/root` hidden (except the Python installation that runs the command); a minimal `/dev` (no disks); a fresh
  `/proc` that shows only the sandbox's processes, with the host-wide knobs (`/proc/sys`, ...) read-only.
- else with `unshare` (util-linux) and unprivileged user namespaces: new user, pid, network and mount namespaces;
  no capabilities (bounding set dropped, `no_new_privs`); every mount remounted read-only except the run dir;
  `/tmp`, `/var/tmp`, `/run`, `/home` and `/root` covered by empty (read-only) tmpfs, except the Python
  installation; a minimal `/dev`; a fresh, read-only `/proc`.

When the parent runs as root, the code is root inside its namespaces, still mapped to the real root user: the lack
of capabilities and the read-only mounts are what stop it from changing the host; it can read every file that is
not hidden.
- else (macOS, Windows, Linux without either): no isolation, with a one-time `RuntimeWarning`. `"required"` raises
  `IsolationUnavailableError` instead; `"off"` never isolates.

Limits, applied in the sandbox before the command runs (by `_launch.py`, passed as `python -I -S -c`):

- `RLIMIT_AS` (address space) = `memory_mb`; `RLIMIT_CPU` = `cpu_s` (default: the timeout rounded up, plus two
  seconds); `RLIMIT_FSIZE` = `max_file_mb`; `RLIMIT_CORE` = 0.
- A wall-clock timeout. The parent reads the child's pipes with deadlines, so it never blocks past `timeout_s` plus
  a fraction of a second, even when a grandchild keeps a pipe open.
- The whole process tree is killed when the command ends or times out: the pid namespace when isolated (its init
  dies and the kernel kills the rest); in every mode also the process group, every descendant, and every process
  that carries this run's random token in its environment (found through `/proc` on Linux), which catches children
  that escaped with `setsid()` or a double fork.
- A minimal environment: `PATH=/usr/local/bin:/usr/bin:/bin`, `HOME` and `TMPDIR` pointing at the run dir, a UTF-8
  locale, the run token, plus only what `env` adds.
- stdin is `/dev/null`; stdout and stderr are captured up to `max_output_bytes` each.

An optional result channel (`channel_secret`): a pipe on which the command can report results that its own children
cannot forge by printing (see `_runner.py`). The secret is written into a second pipe that the command reads and
closes; `argv` items `"{secret_fd}"` and `"{result_fd}"` are replaced by the two descriptor numbers.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import json
import os
import secrets
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Literal, get_args

__all__ = [
    "DEFAULT_MAX_OUTPUT_BYTES",
    "Isolation",
    "IsolationUnavailableError",
    "SandboxResult",
    "arun_sandboxed",
    "check_isolation",
    "isolation_backend",
    "resolve_isolation",
    "run_sandboxed",
]

DEFAULT_MAX_OUTPUT_BYTES = 256 * 1024
"""How many bytes of stdout (and, separately, of stderr and of the result channel) are kept."""

Isolation = Literal["auto", "required", "off"]
"""How generated code is isolated: `auto` when the OS allows it, `required` or fail, `off` never."""

_MIN_MEMORY_MB = 32
_TRUNCATION_NOTE = "\n[... output truncated by the sandbox ...]\n"
_MEMORY_MARKERS = ("MemoryError", "Cannot allocate memory", "std::bad_alloc", "out of memory")
_TOKEN_VAR = "REFLECTION_GRAPH_SANDBOX_RUN"
_CHANNEL_BYTES = 16 * 1024 * 1024
"""How many bytes of the result channel are kept (a test runner reports about 2 KB per test at most)."""
_EXIT_GRACE_S = 0.2
"""After the command exits, how long its pipes are still read (children holding them are then killed)."""
_LAUNCHER = Path(__file__).with_name("_launch.py").read_text(encoding="utf-8")
_HIDDEN_DIRS = ("/tmp", "/var/tmp", "/run", "/home", "/root")
_PROC_KNOBS = ("/proc/sys", "/proc/sysrq-trigger", "/proc/fs", "/proc/acpi", "/proc/irq", "/proc/bus")
_BACKEND_ORDER: tuple[str, ...] = ("bwrap", "unshare")
_HOW_TO_ISOLATE = (
    "install bubblewrap (Debian/Ubuntu: `apt-get install bubblewrap`; Fedora: `dnf install bubblewrap`) or enable "
    "unprivileged user namespaces (`sysctl -w kernel.unprivileged_userns_clone=1`; on Ubuntu 24.04+ also "
    "`sysctl -w kernel.apparmor_restrict_unprivileged_userns=0`); in a container, allow user namespaces (e.g. "
    "Docker's `--security-opt seccomp=unconfined`)"
)


class IsolationUnavailableError(RuntimeError):
    """`isolation="required"` was asked for, but this OS cannot isolate generated code; the message says how to fix."""


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


# -- isolation ---------------------------------------------------------------------------------------------------

_probe_lock = threading.Lock()
_probed: dict[str, str | None] = {}  # backend -> None when it works, else why not
_warned = False


def _exposed_paths(program: str) -> list[str]:
    """Paths under the hidden dirs that the command needs: the Python installations and the program's prefix."""
    candidates = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    for path in (os.path.abspath(program), os.path.realpath(program)):
        candidates.add(os.path.dirname(os.path.dirname(path)))
    hidden = tuple(d + os.sep for d in _HIDDEN_DIRS)
    keep = {os.path.realpath(c) for c in candidates if c} | {c for c in candidates if c}
    return sorted(p for p in keep if p.startswith(hidden) and os.path.isdir(p))


def _bwrap_prefix(bwrap: str, workdir: str, program: str) -> list[str]:
    args = [bwrap, "--die-with-parent", "--new-session", "--unshare-all", "--cap-drop", "ALL"]
    args += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    for writable in _PROC_KNOBS:  # host-wide kernel settings: root in the sandbox must not write them
        if os.path.exists(writable):
            args += ["--ro-bind", writable, writable]
    for hidden in _HIDDEN_DIRS:
        if os.path.isdir(hidden) and not os.path.islink(hidden):
            args += ["--tmpfs", hidden]
    for path in _exposed_paths(program):
        args += ["--ro-bind", path, path]
    return [*args, "--bind", workdir, workdir, "--chdir", workdir, "--"]


def _wrap(backend: str | None, workdir: str, plan: _Plan) -> list[str]:
    limits = [str(plan.memory_bytes), str(plan.cpu_s), str(plan.fsize_bytes)]
    launcher = [sys.executable, "-I", "-S", "-c", _LAUNCHER]
    if backend == "bwrap":
        bwrap = shutil.which("bwrap")
        assert bwrap is not None
        prefix = _bwrap_prefix(bwrap, workdir, plan.argv[0])
        return [*prefix, *launcher, "plain", workdir, "[]", *limits, *plan.argv]
    if backend == "unshare":
        unshare = shutil.which("unshare")
        assert unshare is not None
        flags = ["--user", "--map-root-user", "--net", "--pid", "--fork", "--mount", "--mount-proc"]
        hide = json.dumps([list(_HIDDEN_DIRS), _exposed_paths(plan.argv[0])])
        return [
            unshare,
            *flags,
            "--kill-child",
            "--",
            *launcher,
            "unshare",
            workdir,
            hide,
            *limits,
            *plan.argv,
        ]
    return [*launcher, "plain", workdir, "[]", *limits, *plan.argv]


def _probe(backend: str) -> str | None:
    """Run `python -c pass` through `backend`; None when it works, else the reason it does not."""
    if shutil.which(backend) is None:
        return f"{backend} is not installed"
    plan = _validate({}, [sys.executable, "-I", "-S", "-c", "pass"], 20, None, None, None, 4096, 1, backend)
    workdir = tempfile.mkdtemp(prefix="reflection-graph-sandbox-")
    try:
        proc = subprocess.run(
            _wrap(backend, workdir, plan),
            cwd=workdir,
            env={**plan.env, "HOME": workdir, "TMPDIR": workdir},
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=20,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return f"{backend} failed: {exc}"
    finally:
        _remove_tree(workdir)
    if proc.returncode != 0:
        detail = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        return f"{backend} failed ({detail[-1] if detail else f'exit status {proc.returncode}'})"
    return None


def isolation_backend() -> tuple[str | None, str]:
    """The isolation backend that works here (`"bwrap"`, `"unshare"` or None) and, when None, why not.

    Probed once per process by running a no-op through each backend in `_BACKEND_ORDER`.
    """
    if not sys.platform.startswith("linux"):
        return None, f"isolation needs Linux namespaces; this is {sys.platform}"
    reasons = []
    with _probe_lock:
        for backend in _BACKEND_ORDER:
            if backend not in _probed:
                _probed[backend] = _probe(backend)
            reason = _probed[backend]
            if reason is None:
                return backend, ""
            reasons.append(reason)
    return None, "; ".join(reasons) or "no isolation backend is configured"


def check_isolation(isolation: str) -> None:
    """Validate an `isolation` setting when a critic is built: probe (and raise) only for "required".

    "auto" is resolved when code first runs, so that building a critic costs nothing and the one-time warning
    appears only when code really runs without isolation.

    Raises:
        ValueError: `isolation` is not one of "auto", "required", "off".
        IsolationUnavailableError: "required" where the OS cannot isolate; the message says how to fix it.
    """
    if isolation not in get_args(Isolation):
        raise ValueError(f"isolation must be one of 'auto', 'required', 'off', got {isolation!r}")
    if isolation == "required":
        resolve_isolation(isolation)


def resolve_isolation(isolation: str) -> str | None:
    """Check an `isolation` setting and return the backend to use (None: not isolated).

    Raises:
        ValueError: `isolation` is not one of "auto", "required", "off".
        IsolationUnavailableError: "required" where the OS cannot isolate; the message says how to fix it.
    """
    global _warned
    if isolation not in get_args(Isolation):
        raise ValueError(f"isolation must be one of 'auto', 'required', 'off', got {isolation!r}")
    if isolation == "off":
        return None
    backend, why = isolation_backend()
    if backend is not None:
        return backend
    if isolation == "required":
        raise IsolationUnavailableError(
            f"isolation='required' but generated code cannot be isolated here ({why}). To fix: {_HOW_TO_ISOLATE}; "
            "or pass isolation='auto' (run unisolated with a warning) or 'off'."
        )
    if not _warned:
        _warned = True
        warnings.warn(
            f"generated code runs without isolation (network, file system and other processes reachable): {why}. "
            f"To isolate it: {_HOW_TO_ISOLATE}. To silence this warning, pass isolation='off'.",
            RuntimeWarning,
            stacklevel=3,
        )
    return None


# -- running -----------------------------------------------------------------------------------------------------


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
    backend: str | None
    channel_secret: bytes | None = None


def _validate(
    files: Mapping[str, str],
    argv: Sequence[str],
    timeout_s: float,
    memory_mb: int | None,
    cpu_s: int | None,
    env: Mapping[str, str] | None,
    max_output_bytes: int,
    max_file_mb: int,
    backend: str | None,
    channel_secret: bytes | None = None,
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
    if channel_secret is not None and (
        not isinstance(channel_secret, bytes) or not 16 <= len(channel_secret) <= 4096
    ):
        raise ValueError("channel_secret must be 16 to 4096 random bytes, e.g. secrets.token_bytes(32)")
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
        backend=backend,
        channel_secret=channel_secret,
    )


def _write_files(plan: _Plan, workdir: str) -> None:
    for name, content in plan.files.items():
        target = Path(workdir, name)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, encoding="utf-8")


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

    def raw(self) -> bytes:
        return b"".join(self.chunks)

    def text(self) -> str:
        out = self.raw().decode("utf-8", errors="replace")
        return out + _TRUNCATION_NOTE if self.dropped else out


# -- killing the whole tree --------------------------------------------------------------------------------------


def _parents() -> dict[int, int]:
    table: dict[int, int] = {}
    with contextlib.suppress(OSError):
        for entry in os.scandir("/proc"):
            if entry.name.isdigit():
                with contextlib.suppress(OSError, ValueError, IndexError):
                    stat = Path(entry.path, "stat").read_bytes()
                    table[int(entry.name)] = int(stat[stat.rindex(b")") + 2 :].split()[1])
    return table


def _descendants(root: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for pid, parent in _parents().items():
        children.setdefault(parent, []).append(pid)
    found: set[int] = set()
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _tagged(token: bytes) -> set[int]:
    """Processes whose environment carries this run's token (forks and `setsid()` escapes inherit it)."""
    found: set[int] = set()
    with contextlib.suppress(OSError):
        for entry in os.scandir("/proc"):
            if entry.name.isdigit():
                with contextlib.suppress(OSError):
                    if token in Path(entry.path, "environ").read_bytes():
                        found.add(int(entry.name))
    return found


def _kill(pid: int, group: bool = False) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError, OSError):
        (os.killpg if group else os.kill)(pid, signal.SIGKILL)


def _kill_tree(proc: subprocess.Popen[bytes], token: bytes) -> None:
    """SIGKILL the command, its process group, its descendants and every process tagged with the run token.

    The pid and the group id are used only while the command is not reaped yet (so they cannot have been reused);
    after that, the token finds whatever it left behind.
    """
    linux = os.path.isdir("/proc/self")
    ours = proc.returncode is None
    victims = _tagged(token) if linux else set()
    if ours:
        if linux:
            victims |= _descendants(proc.pid)
        _kill(proc.pid, group=True)
        _kill(proc.pid)
    for _ in range(20):  # forks made meanwhile carry the token too; repeat until none is left
        victims.discard(os.getpid())
        for victim in victims:
            _kill(victim)
        if not linux:
            break
        victims = _tagged(token)
        if not victims:
            break
        time.sleep(0.005)


# -- the core loop -----------------------------------------------------------------------------------------------


def _run_plan(plan: _Plan, cancel: threading.Event | None = None) -> SandboxResult:
    if cancel is not None and cancel.is_set():  # cancelled while waiting for a thread: do not start
        raise concurrent.futures.CancelledError()
    workdir = tempfile.mkdtemp(prefix="reflection-graph-sandbox-")
    opened: list[int] = []
    try:
        _write_files(plan, workdir)
        token = secrets.token_hex(16)
        env = {**plan.env, "HOME": workdir, "TMPDIR": workdir, _TOKEN_VAR: token}
        argv = list(plan.argv)
        pass_fds: list[int] = []
        channel_read = -1
        if plan.channel_secret is not None:
            secret_read, secret_write = os.pipe()
            channel_read, channel_write = os.pipe()
            opened += [secret_read, channel_read, channel_write]
            os.write(secret_write, plan.channel_secret)
            os.close(secret_write)
            pass_fds = [secret_read, channel_write]
            names = {"{secret_fd}": str(secret_read), "{result_fd}": str(channel_write)}
            argv = [names.get(a, a) for a in argv]
        command = _wrap(plan.backend, workdir, dataclasses.replace(plan, argv=argv))
        out, err = _Capture(plan.max_output_bytes), _Capture(plan.max_output_bytes)
        chan = _Capture(_CHANNEL_BYTES)
        start = time.monotonic()
        proc = subprocess.Popen(
            command,
            cwd=workdir,
            env=env,
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
        _kill_tree(proc, f"{_TOKEN_VAR}={token}".encode())
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=0.5)
        _drain(streams)
        proc.stdout.close()
        proc.stderr.close()
        returncode = proc.returncode if proc.returncode is not None else -signal.SIGKILL
        if plan.backend is not None and 128 < returncode <= 128 + 64:
            returncode = 128 - returncode  # the backend's init reports a signal as 128 + signal
        return _result(returncode, out, err, chan, timed_out, start, plan.backend)
    finally:
        for fd in opened:
            with contextlib.suppress(OSError):
                os.close(fd)
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
    isolation: Isolation = "auto",
    channel_secret: bytes | None = None,
) -> SandboxResult:
    """Write `files` into a fresh temp dir, run `argv` there isolated and under limits, and delete the dir.

    Args:
        files: relative file name -> text content, written (UTF-8) before the run.
        argv: the command; `argv[0]` is looked up on a minimal `PATH` unless it is a path. Use
            `[sys.executable, "-I", "script.py"]` for Python.
        timeout_s: wall-clock limit; on expiry the whole process tree is killed and `timed_out` is set. The call
            returns within `timeout_s` plus well under a second.
        memory_mb: address-space limit (`RLIMIT_AS`) in MiB; `None` for no limit.
        cpu_s: CPU-time limit (`RLIMIT_CPU`); default: `int(timeout_s) + 2`.
        env: extra environment variables on top of the minimal environment.
        max_output_bytes: bytes of stdout and of stderr that are kept.
        max_file_mb: largest file the child may write (`RLIMIT_FSIZE`).
        isolation: `"auto"` (isolate when the OS allows it, else warn once), `"required"` (raise
            `IsolationUnavailableError` when it cannot), `"off"`.
        channel_secret: give the command a result channel (see the module docstring); its bytes are in
            `SandboxResult.channel`.

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
    plan = _validate(
        files, argv, timeout_s, memory_mb, cpu_s, env, max_output_bytes, max_file_mb, None, channel_secret
    )
    return _run_plan(dataclasses.replace(plan, backend=resolve_isolation(isolation)))


_pool: concurrent.futures.ThreadPoolExecutor | None = None


def _executor() -> concurrent.futures.ThreadPoolExecutor:
    global _pool
    with _probe_lock:
        if _pool is None:
            _pool = concurrent.futures.ThreadPoolExecutor(
                max_workers=4 * (os.cpu_count() or 1), thread_name_prefix="reflection-graph-sandbox"
            )
        return _pool


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
    isolation: Isolation = "auto",
    channel_secret: bytes | None = None,
) -> SandboxResult:
    """Async twin of `run_sandboxed` (same arguments and result); never blocks the event loop.

    The run happens in a thread of a pool of its own (4 per CPU, so that many concurrent runs neither thrash the
    machine nor starve the event loop's default executor); a run's timeout starts when it starts. If the awaiting
    task is cancelled, the process tree is killed and the temp dir removed before the cancellation propagates.
    """
    plan = _validate(
        files, argv, timeout_s, memory_mb, cpu_s, env, max_output_bytes, max_file_mb, None, channel_secret
    )
    loop = asyncio.get_running_loop()
    # the first call probes the backends (a subprocess each): keep that off the event loop too
    backend = await loop.run_in_executor(_executor(), resolve_isolation, isolation)
    plan = dataclasses.replace(plan, backend=backend)
    cancel = threading.Event()
    task = loop.run_in_executor(_executor(), _run_plan, plan, cancel)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        cancel.set()
        with contextlib.suppress(BaseException):
            await task
        raise
