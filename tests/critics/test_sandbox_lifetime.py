"""How long sandboxed code can live (issue 20, items 3 and 5): a process-count limit, and death with the parent.

The process limit is a pids cgroup where this process can make one (as root, as CI runs), and `RLIMIT_NPROC` in
the sandbox's user namespace (for a user who is not root). Where neither applies, the fork-bomb tests skip (they
would exhaust the machine), except under CI, where that fails.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from reflection_graph.critics.sandbox import _isolation, run_sandboxed
from reflection_graph.critics.sandbox._kill import _PidsCgroup
from tests.critics.test_code_tests_critic import _alive_with
from tests.critics.test_hostile_code import (  # noqa: F401  (isolation: a fixture)
    ISOLATED,
    RETURN_MARGIN_S,
    TESTS,
    _processes_with,
    isolation,
)

ROOT = Path(__file__).resolve().parents[2]
PY = [sys.executable, "-I", "main.py"]


def require_process_limit(isolation: str) -> None:  # noqa: F811
    """Skip where no process limit can be applied here (a fork bomb would take the machine), fail so under CI."""
    cgroup = _PidsCgroup.create(f"reflection-graph-test-{uuid.uuid4().hex}", 8)
    if cgroup is not None:
        cgroup.remove()
        return
    if isolation != "off" and os.geteuid() != 0:
        return  # RLIMIT_NPROC in the sandbox's user namespace
    why = "no pids cgroup can be made here" + (
        "" if isolation == "off" else ", and RLIMIT_NPROC does not bind root"
    )
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"CI must run the process-limit tests (as root, with cgroups): {why}")
    pytest.skip(why)


def _gone_within(check, seconds: float) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + seconds
    while check() and time.monotonic() < deadline:
        time.sleep(0.05)
    return not check()


BOMB = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"


@pytest.mark.parametrize("isolation", ["off", *ISOLATED], indirect=True)
def test_a_fork_bomb_ends_at_the_timeout_and_leaves_no_process(isolation: str) -> None:  # noqa: F811
    require_process_limit(isolation)
    mark = f"RG_BOMB_{uuid.uuid4().hex}"
    start = time.monotonic()
    result = run_sandboxed({"main.py": BOMB}, PY, timeout_s=2, env={mark: "1"}, isolation=isolation)  # type: ignore[arg-type]
    elapsed = time.monotonic() - start
    assert result.timed_out
    assert elapsed < 2 + RETURN_MARGIN_S, f"a fork bomb with timeout_s=2 took {elapsed:.1f}s"
    assert _gone_within(lambda: _alive_with(mark), 30), "processes of the fork bomb survived the run"
    assert len(bytearray(10**6)) == 10**6 and subprocess.run(["true"], check=True).returncode == 0


SPAWNER = textwrap.dedent(
    """
    import os, time
    children = 0
    for _ in range(200):
        try:
            pid = os.fork()
        except OSError:
            break
        if pid == 0:
            time.sleep(30)
            os._exit(0)
        children += 1
    print(children, flush=True)
    """
)


@pytest.mark.parametrize("isolation", ["off", *ISOLATED], indirect=True)
def test_the_number_of_processes_is_bounded_by_max_processes(isolation: str) -> None:  # noqa: F811
    require_process_limit(isolation)
    mark = f"RG_SPAWN_{uuid.uuid4().hex}"
    result = run_sandboxed(
        {"main.py": SPAWNER},
        PY,
        timeout_s=10,
        env={mark: "1"},
        isolation=isolation,
        max_processes=16,  # type: ignore[arg-type]
    )
    children = int(result.stdout.split()[0])
    assert 4 <= children < 16, result.stdout  # the command, its launcher(s) and supervisor count too
    assert _gone_within(lambda: _alive_with(mark), 30)
    with pytest.raises(ValueError, match="max_processes must be an int from 4"):
        run_sandboxed({"main.py": ""}, PY, max_processes=2)


# -- dying with the parent ---------------------------------------------------------------------------------------

DRIVER = """
import os, signal, sys
# Python's own Ctrl-C handling, even when the suite was started with SIGINT ignored (a nohup or background job)
signal.signal(signal.SIGINT, signal.default_int_handler)
from reflection_graph.critics import CodeTestCritic
from reflection_graph.critics.base import CritiqueRequest
critic = CodeTestCritic(sys.argv[1], timeout_s=300, isolation=sys.argv[2])
print("started", flush=True)
critic.critique(CritiqueRequest(task="add", candidate=os.environ["RG_CANDIDATE"]))
"""


def sleeper(needle: str) -> str:
    """A candidate that sleeps forever (never near its CPU limit), with a child that does too."""
    child = f"import time\nwhile True:\n    time.sleep(1)  # {needle}\n"
    return textwrap.dedent(
        f"""
        import subprocess, sys, time
        subprocess.Popen([sys.executable, "-c", {child!r}])
        while True:
            time.sleep(1)
        """
    )


@pytest.mark.parametrize(
    "sig", [signal.SIGKILL, signal.SIGTERM, signal.SIGINT], ids=["SIGKILL", "SIGTERM", "SIGINT"]
)
@pytest.mark.parametrize("isolation", ["off", *ISOLATED], indirect=True)
def test_the_candidate_and_its_run_dirs_die_with_the_parent(isolation: str, sig: int, tmp_path: Path) -> None:  # noqa: F811
    needle = f"rg-orphan-{uuid.uuid4().hex}"
    runs = tmp_path / "runs"  # the driver's TMPDIR: its run dirs are made here and nowhere else
    runs.mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(runs), "RG_CANDIDATE": sleeper(needle)}
    if isolation == "required" and _isolation._BACKEND_ORDER == ("unshare",):
        env["RG_TEST_BACKEND"] = "unshare"
    driver = subprocess.Popen(
        [
            sys.executable,
            "-c",
            _pinned(DRIVER, env.get("RG_TEST_BACKEND")),
            TESTS,
            isolation,
            sleeper(needle),
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert driver.stdout is not None and driver.stdout.readline() == b"started\n"
        deadline = time.monotonic() + 60
        # Both runs started: the candidate's and the checker's run dirs exist and a process runs in each. (A parent
        # killed in the instant between making a run dir and starting its supervisor leaves that dir: the README's
        # sandbox section says so; this test kills it once both supervisors are up.)
        while not (_processes_with(needle) and _supervised(runs) == 2) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _processes_with(needle), "the candidate never started"
        assert _supervised(runs) == 2  # the candidate's run dir and the checker's, each with its process
        driver.send_signal(sig)
        driver.wait(timeout=120)
        assert _gone_within(lambda: _processes_with(needle), 60), "the candidate outlived its parent"
        assert _gone_within(lambda: list(runs.iterdir()), 60), f"run dirs left: {list(runs.iterdir())}"
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
        for pid in _processes_with(needle):  # never leave a sleeper behind, even when the test fails
            os.kill(pid, signal.SIGKILL)


def _supervised(runs: Path) -> int:
    """How many run dirs under `runs` have a process working in them (their supervisor or what it started)."""
    dirs = {str(d) for d in runs.iterdir()}
    working: set[str] = set()
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                working.add(os.readlink(proc / "cwd"))
            except OSError:
                continue
    return len(dirs & working)


def _pinned(driver: str, backend: str | None) -> str:
    """The driver, with the isolation backend pinned to `backend` (as the `isolation` fixture pins it here)."""
    if backend is None:
        return driver
    pin = f"from reflection_graph.critics.sandbox import _isolation\n_isolation._BACKEND_ORDER = ({backend!r},)\n"
    return pin + driver
