"""A process a bench starts (llama.cpp's server, optillm's proxy) ends with the bench, however the bench ends: the
kernel kills it when its parent is killed outright (SIGKILL), so a stopped bench leaves no model process behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests._bench import bench_import

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")

_server = bench_import("_server")

BENCH = Path(__file__).resolve().parents[1] / "bench"


def _alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie left unreaped by an init that does not reap counts as ended)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    state = next(line for line in status.splitlines() if line.startswith("State:"))
    return "Z" not in state.split()[1]


def _orphan_of_killed_parent(child_code: str, tmp_path: Path) -> int:
    """Start a parent that starts `child_code` the way the benches do, wait until the child runs, SIGKILL the
    parent (no clean-up runs) and return the child's pid."""
    ready = tmp_path / "ready"
    parent_code = (
        "import os, subprocess, sys\n"
        f"sys.path.insert(0, {str(BENCH)!r})\n"
        "from _server import parent_env\n"
        "child = subprocess.Popen([sys.executable, '-c', sys.argv[1]], env=parent_env(dict(os.environ)))\n"
        "print(child.pid, flush=True)\n"
        "child.wait()\n"
    )
    full_child = child_code + f"import pathlib, time\npathlib.Path({str(ready)!r}).touch()\ntime.sleep(600)\n"
    parent = subprocess.Popen(
        [sys.executable, "-c", parent_code, full_child], stdout=subprocess.PIPE, text=True
    )
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    deadline = time.monotonic() + 120
    while not ready.exists():  # the child has run past its first lines
        assert time.monotonic() < deadline, "the child never started"
        assert parent.poll() is None, "the parent exited early"
        time.sleep(0.05)
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    return child


def _gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while _alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_a_bench_child_dies_when_its_bench_is_killed(tmp_path: Path) -> None:
    child = _orphan_of_killed_parent(_server.DIE_WITH_PARENT, tmp_path)
    try:
        assert _gone_within(child, 60), "the child outlived the bench that started it"
    finally:
        if _alive(child):
            os.kill(child, signal.SIGKILL)


def test_without_the_guard_the_child_outlives_its_parent(tmp_path: Path) -> None:
    """The control: the same child without `DIE_WITH_PARENT` is still running after its parent was killed, so the
    test above shows the guard's work, not the harness's."""
    child = _orphan_of_killed_parent("", tmp_path)
    try:
        assert _alive(child)
    finally:
        os.kill(child, signal.SIGKILL)


def test_the_launchers_run_the_guard_first() -> None:
    optillm = bench_import("_optillm")
    assert _server.LAUNCHER.startswith(_server.DIE_WITH_PARENT)
    assert optillm.ENTRY.startswith(_server.DIE_WITH_PARENT)
    assert optillm._environment("x")[_server.PARENT_PID_ENV] == str(os.getpid())
