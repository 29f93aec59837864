"""Ending a sandboxed run: kill its whole process tree, then remove what it left (its pids cgroup, its run dir).

The kill comes first, the bookkeeping after: the command's process group (and, when isolated, the pid namespace
whose init is the command's first process) gets SIGKILL at once; then the pids cgroup, where one was made, is
emptied; only then is `/proc` searched for stragglers that carry the run's token in their environment (children
that escaped with `setsid()` when not isolated).

`_PidsCgroup` is the process-count limit where the OS lets this process make a pids cgroup (cgroup v1's `pids`
hierarchy, or a cgroup v2 whose `cgroup.subtree_control` holds `pids`; typically when running as root). The
command joins it before it starts (`_launch.py`), so every process it makes is counted and can be found.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

_CGROUP_ROOT = "/sys/fs/cgroup"
_cgroup_lock = threading.Lock()
_cgroup_parent: list[str | None] = []  # probed once: the dir new pids cgroups are made in, or None


def _kill(pid: int, group: bool = False) -> None:
    if pid <= 1 or pid == os.getpid():  # never 0 or -1 (our own group, or every process there is)
        return
    with contextlib.suppress(ProcessLookupError, PermissionError, OSError):
        (os.killpg if group else os.kill)(pid, signal.SIGKILL)


def _tagged(token: bytes) -> set[int]:
    """Processes whose environment carries this run's token (forks and `setsid()` escapes inherit it)."""
    found: set[int] = set()
    with contextlib.suppress(OSError):
        for entry in os.scandir("/proc"):
            if entry.name.isdigit():
                with contextlib.suppress(OSError):
                    if token in Path(entry.path, "environ").read_bytes():
                        found.add(int(entry.name))
    found.discard(os.getpid())
    return found


def _own_cgroup_dirs() -> list[str]:
    """Where a pids cgroup could be made: under this process's own pids cgroup (v1), or its v2 cgroup."""
    dirs = []
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            number, controllers, path = line.split(":", 2)
            if "pids" in controllers.split(","):
                dirs.append(os.path.join(_CGROUP_ROOT, "pids", path.lstrip("/")))
            elif number == "0" and not controllers:
                v2 = os.path.join(_CGROUP_ROOT, path.lstrip("/"))
                with contextlib.suppress(OSError):
                    if "pids" in Path(v2, "cgroup.subtree_control").read_text().split():
                        dirs.append(v2)
    return dirs


class _PidsCgroup:
    """A pids cgroup for one run: `pids.max` bounds its processes; `kill` empties it; `remove` deletes it."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.procs = os.path.join(path, "cgroup.procs")

    @classmethod
    def create(cls, name: str, limit: int | None) -> _PidsCgroup | None:
        """A new pids cgroup limited to `limit` processes, or None where this process cannot make one."""
        if limit is None or not sys.platform.startswith("linux"):
            return None
        with _cgroup_lock:
            if not _cgroup_parent:
                _cgroup_parent.append(next((d for d in _own_cgroup_dirs() if cls._usable(d)), None))
        parent = _cgroup_parent[0]
        if parent is None:
            return None
        cgroup = cls(os.path.join(parent, name))
        try:
            os.mkdir(cgroup.path)
            Path(cgroup.path, "pids.max").write_text(str(limit))
        except OSError:
            cgroup.remove()
            return None
        return cgroup

    @staticmethod
    def _usable(parent: str) -> bool:
        probe = os.path.join(parent, f"reflection-graph-probe-{os.getpid()}")
        try:
            os.mkdir(probe)
        except OSError:
            return False
        try:
            return os.path.exists(os.path.join(probe, "pids.max"))
        finally:
            with contextlib.suppress(OSError):
                os.rmdir(probe)

    def members(self) -> set[int]:
        with contextlib.suppress(OSError, ValueError):
            return {int(p) for p in Path(self.procs).read_text().split()}
        return set()

    def kill(self, within_s: float = 2.0) -> None:
        """SIGKILL every member until none is left (they cannot fork past `pids.max` meanwhile)."""
        deadline = time.monotonic() + within_s
        while (members := self.members() - {os.getpid()}) and time.monotonic() < deadline:
            for pid in members:
                _kill(pid)
            time.sleep(0.002)

    def remove(self) -> None:
        """Delete the cgroup; while killed processes are still being reaped, it is retried later (and at exit)."""
        deadline = time.monotonic() + 0.5
        while not _rmdir(self.path):
            if time.monotonic() > deadline:
                with _cgroup_lock:
                    _stale.append(self.path)
                return
            time.sleep(0.005)
        _sweep()


def _rmdir(path: str) -> bool:
    try:
        os.rmdir(path)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return True


_stale: list[str] = []
"""This process's cgroups whose removal must be retried (their last processes were not reaped yet)."""


def _sweep() -> None:
    with _cgroup_lock:
        _stale[:] = [path for path in _stale if not _rmdir(path)]


atexit.register(_sweep)


def _kill_tree(proc: subprocess.Popen[bytes], token: bytes, cgroup: _PidsCgroup | None) -> None:
    """SIGKILL the command, its process group, its pids cgroup and every process tagged with the run token.

    The pid and the group id are used only while the command is not reaped yet (so they cannot have been reused);
    after that, the cgroup and the token find whatever it left behind.
    """
    if proc.returncode is None:
        _kill(proc.pid, group=True)
        _kill(proc.pid)
    if cgroup is not None:
        cgroup.kill()
    if not os.path.isdir("/proc/self"):
        return
    for _ in range(20):  # forks made meanwhile carry the token too; repeat until none is left
        victims = _tagged(token)
        if not victims:
            break
        for victim in victims:
            _kill(victim)
        time.sleep(0.005)


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
