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

Limits, applied before the command runs (by the launcher, `_confine.py` and `_launch.py` passed together as
`python -I -S -c`):

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
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from typing_extensions import TypedDict, Unpack

from reflection_graph.critics.sandbox._collect import SandboxResult, _close, _run_plan
from reflection_graph.critics.sandbox._isolation import Isolation, resolve_isolation
from reflection_graph.critics.sandbox._plan import (
    DEFAULT_MAX_OUTPUT_BYTES,
    DEFAULT_MAX_PROCESSES,
    _Plan,
    _validate,
)

__all__ = ["SandboxResult", "arun_sandboxed", "run_sandboxed"]


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
