"""Launcher that runs the sandboxed command (stdlib only, passed as `python -I -S -c <source>`).

    python -I -S -c <the text of _confine.py, then of this file> CONFIG_JSON COMMAND...

It runs twice for an isolated run (first outside the sandbox, then inside it) and once otherwise. CONFIG keys:

- `supervise` (first stage): `{"parent": pid, "cgroup": cgroup.procs path or null, "workdir": the run dir,
  "token": the run token}`. Join the run's pids cgroup (so every process the command makes is counted and bounded
  by its `pids.max`), ask the kernel for SIGTERM when the parent dies (`PR_SET_PDEATHSIG`), then run COMMAND as a
  child and wait for it, ending the same way it ended (its exit status, or the same signal). If the parent dies
  first (Ctrl-C, SIGTERM, SIGKILL of the process running the critique): SIGKILL the command (bubblewrap's
  `--die-with-parent` and unshare's `--kill-child` take the namespace down with it), everything left in the
  cgroup and every process carrying the run token, remove the run dir, and exit.
- `unshare`, `limits` and `restrict_sockets`: the setup inside the sandbox, just before the command runs; see
  `_confine.py`, whose text comes first in the launcher's source (so this file calls its functions by name).

`_isolation` reads both files and `_collect` passes their text with `-c`, so the limits are in place before the
command runs (instead of `preexec_fn`, which CPython documents as unsafe in a threaded parent).
"""

import ctypes
import json
import os
import shutil
import signal
import sys
import time

TYPE_CHECKING = False  # not `typing`'s: the launcher imports nothing it does not need
if TYPE_CHECKING:  # at run time these are defined by `_confine.py`'s text, which comes first
    from reflection_graph.critics.sandbox._confine import _exec, _init, _limit, _read_only_except

_PR_SET_PDEATHSIG = 1


class _ParentGone(Exception):
    pass


def _exit_like(code: int) -> None:
    """End this process the way the command ended: its exit status, or the same signal."""
    if code < 0:
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    os._exit(code if code >= 0 else 128 - code)


def _members(procs: str | None, token: bytes) -> set[int]:
    """The run's processes: the cgroup's members, and every process whose environment carries the token."""
    found = set()
    if procs:
        try:
            with open(procs, encoding="ascii") as handle:
                found = {int(p) for p in handle.read().split()}
        except (OSError, ValueError):
            pass
    for name in os.listdir("/proc") if os.path.isdir("/proc/self") else ():
        if name.isdigit():
            try:
                with open(f"/proc/{name}/environ", "rb") as handle:
                    if token in handle.read():
                        found.add(int(name))
            except OSError:
                pass
    return {pid for pid in found if pid > 1 and pid != os.getpid()}


def _clean_up(child: int, guard: dict) -> None:
    """The parent is gone: kill the command and everything of the run, then remove the run dir."""
    if child > 0:  # never 0 or -1 (the group, or every process there is)
        try:
            os.kill(child, signal.SIGKILL)
        except OSError:
            pass
    token = ("REFLECTION_GRAPH_SANDBOX_RUN=" + guard["token"]).encode()
    for attempt in range(100):
        victims = _members(guard.get("cgroup"), token)
        for pid in victims:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        while True:  # reap our own (a zombie child still counts as a member)
            try:
                if os.waitpid(-1, os.WNOHANG)[0] == 0:
                    break
            except ChildProcessError:
                break
        shutil.rmtree(guard["workdir"], ignore_errors=True)
        if not victims and not os.path.exists(guard["workdir"]):
            break
        time.sleep(0.01 * min(attempt, 10))
    if guard.get("cgroup"):
        _leave_cgroup(os.path.dirname(guard["cgroup"]))


def _leave_cgroup(cgroup: str) -> None:
    """Move to the parent cgroup and remove the run's (empty by now, but for stragglers being reaped)."""
    try:
        with open(os.path.join(os.path.dirname(cgroup), "cgroup.procs"), "w", encoding="ascii") as handle:
            handle.write(str(os.getpid()))
    except OSError:
        return
    for _ in range(50):
        try:
            os.rmdir(cgroup)
            return
        except OSError:
            time.sleep(0.02)


def _supervise(argv: list[str], guard: dict, limits: dict) -> None:
    if guard.get("cgroup"):
        try:
            with open(guard["cgroup"], "w", encoding="ascii") as handle:
                handle.write(str(os.getpid()))
        except OSError as exc:
            os.write(2, f"sandbox launcher: cannot join the pids cgroup: {exc}\n".encode())
    _limit("RLIMIT_CORE", 0)

    def parent_gone(_signum: int, _frame: object) -> None:
        raise _ParentGone()

    signal.signal(signal.SIGTERM, parent_gone)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C reaches the parent, which ends the run itself
    if sys.platform.startswith("linux"):  # elsewhere only the parent's own clean-up ends the run
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    child = -1
    try:
        if os.getppid() != guard["parent"]:  # the parent died before the request above
            raise _ParentGone()
        child = os.fork()
        if child == 0:
            try:
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                signal.signal(signal.SIGINT, signal.SIG_DFL)
                _exec(argv, limits)
            except BaseException as exc:
                os.write(2, f"sandbox launcher: {exc}\n".encode())
            finally:
                os._exit(127)
        _pid, status = os.waitpid(child, 0)
    except _ParentGone:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        _clean_up(child, guard)
        os._exit(128 + signal.SIGTERM)
    _exit_like(os.waitstatus_to_exitcode(status))


def main() -> None:
    config = json.loads(sys.argv[1])
    command = sys.argv[2:]
    limits = config.get("limits", {})
    restrict_sockets = bool(config.get("restrict_sockets"))
    if "supervise" in config:
        _supervise(command, config["supervise"], limits)
    elif "unshare" in config:
        hide = config["unshare"]
        _read_only_except(hide["workdir"], hide["hidden"], hide["keep"])
        sys.stdout.flush()
        os._exit(_init(command, limits, restrict_sockets))
    _exec(command, limits, restrict_sockets)


if __name__ == "__main__":
    main()
