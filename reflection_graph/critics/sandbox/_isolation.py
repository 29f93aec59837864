"""Isolation backends: which one works here, and the command line that runs a command inside it.

- bubblewrap (`bwrap`): new user, pid, network, IPC and UTS namespaces; no capabilities; the whole file system
  read-only except the run dir; fresh empty `/tmp`, `/var/tmp` and `/run`; `/home` and `/root` hidden (except the
  Python installation that runs the command); a minimal `/dev` (no disks); a fresh `/proc` that shows only the
  sandbox's processes, with the host-wide knobs (`/proc/sys`, ...) read-only; `--die-with-parent`.
- `unshare` (util-linux) with unprivileged user namespaces: new user, pid, network and mount namespaces; no
  capabilities (bounding set dropped, `no_new_privs`); every mount remounted read-only except the run dir; `/tmp`,
  `/var/tmp`, `/run`, `/home` and `/root` covered by empty (read-only) tmpfs, except the Python installation; a
  minimal `/dev`; a fresh, read-only `/proc`; `--kill-child` (the namespace dies with `unshare`).

In both, the dir that holds the run dir is hidden too, so one run cannot read another's files, and a seccomp
filter lets `socket()` make only `AF_INET` and `AF_INET6` sockets (`_confine.py`): a network namespace does not
cover Unix sockets (a read-only mount does not stop `connect()` on a socket file the sandbox can see), vsock (the
host's, or a VM host's, services), netlink or the other families. Every command is started
by `_launch.py`'s supervisor, which dies with the parent (see there).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import warnings
from pathlib import Path
from typing import Literal, get_args

from reflection_graph.critics.sandbox._kill import _remove_tree
from reflection_graph.critics.sandbox._plan import _Plan, _validate

Isolation = Literal["auto", "required", "off"]
"""How generated code is isolated: `auto` when the OS allows it, `required` or fail, `off` never."""

_LAUNCHER_PARTS = ("_confine.py", "_launch.py")  # in this order: `_launch.py` calls `_confine.py`'s functions
_LAUNCHER_SOURCE = "\n".join(
    Path(__file__).with_name(name).read_text(encoding="utf-8") for name in _LAUNCHER_PARTS
)
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


_probe_lock = threading.Lock()
_probed: dict[str, str | None] = {}  # backend -> None when it works, else why not
_warned = False


def _hidden_dirs(workdir: str) -> list[str]:
    """The dirs covered by an empty tmpfs: the usual ones, and the one holding the run dir (other runs' dirs)."""
    hidden = list(_HIDDEN_DIRS)
    parent = os.path.dirname(workdir.rstrip("/"))
    if parent not in ("", "/") and not any(parent == h or parent.startswith(h + "/") for h in hidden):
        hidden.append(parent)
    return hidden


def _exposed_paths(program: str, hidden: list[str]) -> list[str]:
    """Paths under the hidden dirs that the command needs: the Python installations and the program's prefix."""
    candidates = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    for path in (os.path.abspath(program), os.path.realpath(program)):
        candidates.add(os.path.dirname(os.path.dirname(path)))
    inside = tuple(d.rstrip("/") + os.sep for d in hidden)
    keep = {os.path.realpath(c) for c in candidates if c} | {c for c in candidates if c}
    return sorted(p for p in keep if p.startswith(inside) and os.path.isdir(p))


def _bwrap_prefix(bwrap: str, workdir: str, program: str) -> list[str]:
    args = [bwrap, "--die-with-parent", "--new-session", "--unshare-all", "--cap-drop", "ALL"]
    args += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    for writable in _PROC_KNOBS:  # host-wide kernel settings: root in the sandbox must not write them
        if os.path.exists(writable):
            args += ["--ro-bind", writable, writable]
    hidden = _hidden_dirs(workdir)
    for directory in hidden:
        if os.path.isdir(directory) and not os.path.islink(directory):
            args += ["--tmpfs", directory]
    for path in _exposed_paths(program, hidden):
        args += ["--ro-bind", path, path]
    return [*args, "--bind", workdir, workdir, "--chdir", workdir, "--"]


def _wrap(backend: str | None, workdir: str, plan: _Plan, guard: dict[str, object]) -> list[str]:
    """The command line of a run: the supervisor, then the backend, then the launcher inside it, then `argv`."""
    limits = {"as": plan.memory_bytes, "cpu": plan.cpu_s, "fsize": plan.fsize_bytes}
    launcher = [sys.executable, "-I", "-S", "-c", _LAUNCHER_SOURCE]
    if backend is None:
        return [*launcher, json.dumps({"supervise": guard, "limits": limits}), *plan.argv]
    if plan.max_processes is not None:
        limits["nproc"] = plan.max_processes  # counted in the sandbox's own user namespace
    supervisor = [*launcher, json.dumps({"supervise": guard})]
    if backend == "bwrap":
        bwrap = shutil.which("bwrap")
        assert bwrap is not None
        inner = json.dumps({"limits": limits, "restrict_sockets": True})
        return [*supervisor, *_bwrap_prefix(bwrap, workdir, plan.argv[0]), *launcher, inner, *plan.argv]
    unshare = shutil.which("unshare")
    assert unshare is not None
    flags = [
        "--user",
        "--map-root-user",
        "--net",
        "--pid",
        "--fork",
        "--mount",
        "--mount-proc",
        "--kill-child",
    ]
    hidden = _hidden_dirs(workdir)
    hide = {"workdir": workdir, "hidden": hidden, "keep": _exposed_paths(plan.argv[0], hidden)}
    inner = json.dumps({"unshare": hide, "limits": limits, "restrict_sockets": True})
    return [*supervisor, unshare, *flags, "--", *launcher, inner, *plan.argv]


def _probe(backend: str) -> str | None:
    """Run `python -c pass` through `backend`; None when it works, else the reason it does not."""
    if shutil.which(backend) is None:
        return f"{backend} is not installed"
    plan = _validate({}, [sys.executable, "-I", "-S", "-c", "pass"], 20, None, None, None, 4096, 1, backend)
    workdir = tempfile.mkdtemp(prefix="reflection-graph-probe-")
    try:
        proc = subprocess.run(
            _wrap(backend, workdir, plan, {"parent": os.getpid(), "workdir": workdir, "token": "probe"}),
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
