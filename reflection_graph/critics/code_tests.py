"""Tool critics: run the candidate's code against tests (and optionally ruff) in a limited subprocess.

`CodeTestCritic` judges code by running it. The candidate's code is taken out of its ```python fence (or used as is)
and run in `reflection_graph.critics.sandbox` (isolated where the OS allows it, see `isolation`; fresh temp dir,
deleted afterwards; time, CPU, memory, process-count and file-size limits; the whole process tree killed on
timeout). Nothing of the candidate ever runs in this process.

Tests are plain-assert functions, as for pytest, but no pytest is needed in the sandbox: a small stdlib runner
(`sandbox/_runner.py`) runs every top-level `test*` function in file order (or HumanEval's `check(candidate)` with
`entry_point`) and reports each failing test by name with the call it checks, the value that call returned and the
one the test expects (``test_add failed: `add(2, 2)` returned 5, expected 4``), or the exception it raised and
where; each suggestion names the change (``Make `add(2, 2)` return 4 (it returns 5).``).

**Where the verdict is decided.** For assert-style tests (they call the candidate's functions and check what comes
back: docstring examples, HumanEval's `check`, `assert f(x) == y`) the candidate's code runs in one sandboxed
process that only answers calls with plain values (JSON), and the tests run in a second sandboxed process that
never runs candidate code and compares those values with its own (`verdict_source="outside"`): code that reads or
rewrites every byte of its own process still cannot pass a wrong solution. Tests that need the candidate's objects
themselves (an attribute of its function, a class, `import solution`) run in the candidate's process
(`verdict_source="in-process"`); there results come over a pipe signed with a per-run secret, so printing fake
results or exiting early fails, but code that searches its own memory for the signer could forge a verdict.

Severities and score (`CodeTestCritic`): a failing test -> `major`; the code does not compile, or importing it /
the tests fails -> `critical`; the time or memory limit -> `critical`; ruff findings (`run_ruff=True`) -> `minor`
(they never block acceptance); score = 10 * passed / total, and 0 on a syntax error, an import failure or a
timeout; accepted only when every test passes and there is no critical finding.

`CommandCritic` is the generic form: write the candidate to a file, run any command on it in the sandbox, and
accept on exit status 0.
"""

from __future__ import annotations

import ast
import asyncio
import dataclasses
import json
import os
import secrets
import shutil
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from langchain_core.runnables import RunnableConfig

from reflection_graph._text import extract_code
from reflection_graph.critics._test_plan import VerdictSource, plan_tests
from reflection_graph.critics._test_report import Limits, judge_run, parse_events, tail
from reflection_graph.critics.base import BaseCritic, CritiqueRequest
from reflection_graph.critics.sandbox import (
    Isolation,
    IsolationUnavailableError,
    SandboxResult,
    arun_sandboxed,
    arun_together,
    check_isolation,
    run_sandboxed,
    run_together,
)
from reflection_graph.critique import Critique, Finding

__all__ = ["CodeTestCritic", "CommandCritic", "IsolationUnavailableError", "extract_code"]

_SANDBOX = Path(__file__).parent / "sandbox"
_RUNNER_FILE = "_reflection_graph_runner.py"
_SERVE_FILE = "_reflection_graph_serve.py"
_WIRE_FILE = "_reflection_graph_wire.py"
_EXPLAIN_FILE = "_reflection_graph_explain.py"
_CHANNEL_FILE = "_reflection_graph_channel.py"
_SCRIPTS = {
    name: (_SANDBOX / source).read_text(encoding="utf-8")
    for name, source in (
        (_RUNNER_FILE, "_runner.py"),
        (_SERVE_FILE, "_serve.py"),
        (_WIRE_FILE, "_wire.py"),
        (_EXPLAIN_FILE, "_explain.py"),
        (_CHANNEL_FILE, "_channel.py"),
    )
}
_CHECKER_EXTRA_S = 2.0
"""The checking process may run this much longer than the candidate's, so that it can report the candidate's end."""


def _check_timeout(value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise ValueError(f"timeout_s must be a positive number of seconds, got {value!r}")
    return float(value)


def _check_memory(value: int | None) -> int | None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 64):
        raise ValueError(
            f"memory_mb must be an int >= 64 (Python needs ~30 MB to start) or None, got {value!r}"
        )
    return value


def _check_python(python: str) -> str:
    found = shutil.which(python) if os.sep not in python else (python if os.access(python, os.X_OK) else None)
    if not found:
        raise ValueError(
            f"python interpreter {python!r} not found or not executable; pass python=sys.executable"
        )
    return found


def _parse_tests(tests: str) -> None:
    if not isinstance(tests, str) or not tests.strip():
        raise ValueError(
            "tests must be non-empty Python source with test functions, e.g. 'def test_x(): ...'"
        )
    try:
        ast.parse(tests)
    except SyntaxError as exc:
        raise ValueError(
            f"tests do not parse (line {exc.lineno}: {exc.msg}); pass valid Python test code"
        ) from exc


@dataclasses.dataclass(frozen=True)
class _Job:
    """The sandboxed runs of one critique: the tests (one or two processes) and ruff."""

    tests: dict[str, Any]
    candidate: dict[str, Any] | None
    secret: bytes


class CodeTestCritic(BaseCritic):
    """Judge Python code by running tests against it in sandboxed subprocesses.

    The candidate's code becomes `entrypoint` (default `solution.py`); `tests` is written as `test_<entrypoint>`
    and imports from that module (`from solution import add`), or, with `entry_point`, calls the function by name
    (`assert add(2, 2) == 4`) or is HumanEval's `def check(candidate): ...`. See the module docstring for where the
    verdict is decided, severities, the score and acceptance.

    Args:
        tests: Python source with plain-assert test functions (`def test_add(): assert add(2, 2) == 4`), or a
            `check(candidate)` function with `entry_point`; checked for syntax and for a test now.
        entrypoint: the file name the code is written to; the tests import its stem.
        entry_point: the name of the function under test (HumanEval's `entry_point`): names the tests use without
            importing them are taken from the code, and `check(<that function>)` runs when there is no `test*`.
        timeout_s: wall-clock limit for the whole test run (the process tree is killed when it expires).
        memory_mb: address-space limit for the run, in MiB (`None` for none).
        run_ruff: also lint the code with ruff (in the sandbox too) and report its findings as `minor`.
        ruff_select: ruff rule codes to select; default `("E4", "E7", "E9", "F")` (pyflakes and the
            pycodestyle errors, independent of the installed ruff version's defaults).
        python: interpreter that runs the tests (in isolated mode, `-I`).
        name: the critic's name (shown as the source of its findings in a composite critic).
        isolation: `"auto"` (default: isolate the code where the OS allows it, else warn once, when code first
            runs, and run it unisolated), `"required"` (raise `IsolationUnavailableError` now where it cannot be
            isolated) or `"off"`. See `reflection_graph.critics.sandbox` for what is isolated.

    Attributes:
        verdict_source: `"outside"` (the verdict is decided in a process that never runs the candidate's code) or
            `"in-process"`; `why_in_process` says why, read from the tests.

    Raises:
        ValueError: on bad arguments; the message says what to change.
        IsolationUnavailableError: `isolation="required"` where this OS cannot isolate generated code.

    Example:
        >>> critic = CodeTestCritic("def check(candidate):\\n    assert candidate(2, 2) == 4\\n", entry_point="add")
        >>> from reflection_graph.critics.base import CritiqueRequest
        >>> verdict = critic.critique(CritiqueRequest(task="add", candidate="def add(a, b):\\n    return a + b"))
        >>> verdict.is_acceptable, verdict.verdict_source
        (True, 'outside')
    """

    metered = True  # no model calls
    verifier = True  # the tests decide: fresh drafts by default, under the code focus
    focus = "code"

    def __init__(
        self,
        tests: str,
        *,
        entrypoint: str = "solution.py",
        entry_point: str | None = None,
        timeout_s: float = 10,
        memory_mb: int | None = 512,
        run_ruff: bool = False,
        ruff_select: Sequence[str] = ("E4", "E7", "E9", "F"),
        python: str = sys.executable,
        name: str = "code_tests",
        isolation: Isolation = "auto",
    ) -> None:
        _parse_tests(tests)
        path = PurePosixPath(entrypoint)
        if path.suffix != ".py" or len(path.parts) != 1 or not path.stem.isidentifier():
            raise ValueError(
                f"entrypoint must be a plain module file name such as 'solution.py', got {entrypoint!r}"
            )
        if entry_point is not None and not (isinstance(entry_point, str) and entry_point.isidentifier()):
            raise ValueError(f"entry_point must be a Python function name such as 'add', got {entry_point!r}")
        if isinstance(ruff_select, str) or not ruff_select or not all(ruff_select):
            raise ValueError("ruff_select must be a non-empty list of rule codes such as ['E', 'F']")
        if not isinstance(name, str) or not name:
            raise ValueError("name must be a non-empty string")
        self._plan = plan_tests(tests, path.stem, entry_point)
        self.tests = tests
        self.test_names = self._plan.names
        self.entrypoint = str(path)
        self.entry_point = entry_point
        self.tests_file = f"test_{path.stem}.py"
        self.timeout_s = _check_timeout(timeout_s)
        self.memory_mb = _check_memory(memory_mb)
        self.python = _check_python(python)
        self.run_ruff = bool(run_ruff)
        self.ruff_select = tuple(ruff_select)
        self.ruff: str | None = None
        if self.run_ruff:
            self.ruff = shutil.which("ruff") or shutil.which("ruff", path=os.path.dirname(self.python))
            if self.ruff is None:
                raise ValueError(
                    "run_ruff=True but the ruff executable was not found; `pip install ruff` or pass run_ruff=False"
                )
        self.name = name
        check_isolation(isolation)
        self.isolation: Isolation = isolation

    @property
    def verdict_source(self) -> VerdictSource:
        return self._plan.verdict_source

    @property
    def why_in_process(self) -> str | None:
        return self._plan.why_in_process

    # -- building the runs ---------------------------------------------------------------------------------
    def _job(self, code: str) -> _Job:
        """The sandboxed runs for `code`; outside mode connects them with two pipes (owned by the runs)."""
        secret = secrets.token_bytes(32)
        limits: dict[str, Any] = {
            "timeout_s": self.timeout_s,
            "memory_mb": self.memory_mb,
            "isolation": self.isolation,
        }
        config = {
            "mode": self.verdict_source,
            "solution": self.entrypoint,
            "tests": self.tests_file,
            "entry_point": self.entry_point,
            "bind": list(self._plan.bind),
        }
        runner = [self.python, "-I", "-B", _RUNNER_FILE, json.dumps(config), "{secret_fd}", "{result_fd}"]
        files = {
            self.tests_file: self.tests,
            _RUNNER_FILE: _SCRIPTS[_RUNNER_FILE],
            _WIRE_FILE: _SCRIPTS[_WIRE_FILE],
            _EXPLAIN_FILE: _SCRIPTS[_EXPLAIN_FILE],
            _CHANNEL_FILE: _SCRIPTS[_CHANNEL_FILE],
        }
        if self.verdict_source == "in-process":
            alone = {
                "files": {**files, self.entrypoint: code},
                "argv": runner,
                **limits,
                "channel_secret": secret,
            }
            return _Job(tests=alone, candidate=None, secret=secret)
        requests_read, requests_write = os.pipe()
        answers_read, answers_write = os.pipe()
        tests: dict[str, Any] = {
            "files": files,
            "argv": [*runner, "{requests}", "{answers}"],
            **limits,
            "timeout_s": self.timeout_s + _CHECKER_EXTRA_S,
            "channel_secret": secret,
            "pass_fds": {"requests": requests_write, "answers": answers_read},
        }
        candidate = {
            "files": {
                self.entrypoint: code,
                _SERVE_FILE: _SCRIPTS[_SERVE_FILE],
                _WIRE_FILE: _SCRIPTS[_WIRE_FILE],
            },
            "argv": [self.python, "-I", "-B", _SERVE_FILE, self.entrypoint, "{requests}", "{answers}"],
            **limits,
            "pass_fds": {"requests": requests_read, "answers": answers_write},
        }
        return _Job(tests=tests, candidate=candidate, secret=secret)

    def _ruff_job(self, code: str) -> dict[str, Any] | None:
        if self.ruff is None:
            return None
        argv = [self.ruff, "check", "--isolated", "--no-cache", "--output-format", "json", "--exit-zero"]
        argv += ["--select", ",".join(self.ruff_select), self.entrypoint]
        return {
            "files": {self.entrypoint: code},
            "argv": argv,
            "timeout_s": max(self.timeout_s, 30.0),
            "memory_mb": None,
            "isolation": self.isolation,
        }

    # -- interpreting ---------------------------------------------------------------------------------------
    def _no_code(self) -> Critique:
        finding = Finding(message="no code found in the candidate", severity="critical", source="tests")
        return Critique(
            issues=[finding.message],
            suggestions=["Answer with the complete Python code in one ```python fenced block."],
            is_acceptable=False,
            score=0,
            feedback="The candidate contains no code to test.",
            findings=[finding],
            checks_passed=0,
            checks_total=max(1, len(self.test_names)),
        )

    def _interpret(
        self, tests: SandboxResult, candidate: SandboxResult | None, ruff: SandboxResult | None, secret: bytes
    ) -> Critique:
        run = parse_events(tests.channel, secret, self.test_names)
        result = tests
        if candidate is not None:  # how the candidate's process ended is what the findings report
            result = dataclasses.replace(candidate, timed_out=candidate.timed_out or tests.timed_out)
        limits = Limits(self.entrypoint, self.timeout_s, self.memory_mb)
        return judge_run(run, result, ruff, limits, self.test_names, self.verdict_source)

    # -- the Critic protocol --------------------------------------------------------------------------------
    def critique(self, request: CritiqueRequest, config: RunnableConfig | None = None) -> Critique:
        """Run the tests (and ruff) on the candidate's code in the sandbox and judge the result."""
        code = extract_code(request.candidate)
        if not code.strip():
            return self._no_code()
        job = self._job(code)
        runs = [job.tests] if job.candidate is None else [job.candidate, job.tests]
        results = run_together(runs)
        ruff_job = self._ruff_job(code)
        ruff = run_together([ruff_job])[0] if ruff_job is not None else None
        return self._interpret(results[-1], results[0] if job.candidate else None, ruff, job.secret)

    async def acritique(self, request: CritiqueRequest, config: RunnableConfig | None = None) -> Critique:
        """Async twin of `critique`: the subprocesses run without blocking the event loop (ruff concurrently)."""
        code = extract_code(request.candidate)
        if not code.strip():
            return self._no_code()
        job = self._job(code)
        runs = [job.tests] if job.candidate is None else [job.candidate, job.tests]
        ruff_job = self._ruff_job(code)
        groups = [runs] + ([[ruff_job]] if ruff_job is not None else [])
        # return_exceptions: on cancellation, wait until every run has killed its processes and removed its dir
        outcomes = await asyncio.gather(*(arun_together(g) for g in groups), return_exceptions=True)
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                raise outcome
        results, *rest = [o for o in outcomes if isinstance(o, list)]
        ruff = rest[0][0] if rest else None
        return self._interpret(results[-1], results[0] if job.candidate else None, ruff, job.secret)


class CommandCritic(BaseCritic):
    """Run a command on the candidate in the sandbox and accept it when the command exits with status 0.

    The candidate (after `extract`, e.g. `extract_code`) is written to `filename` in a fresh sandbox dir together
    with `files`; then `argv` runs there (an `argv` item equal to `"{file}"` is replaced by the file name). Exit
    status 0 -> accepted, score 10. Non-zero -> one `major` finding carrying the tail of the command's output,
    score 0. Timeout or memory limit -> `critical`, score 0.

    Args:
        argv: the command, e.g. `[sys.executable, "-I", "check.py", "{file}"]` or `["ruff", "check", "{file}"]`.
        filename: the file the candidate is written to.
        files: extra files to write into the sandbox (file name -> content).
        extract: a function applied to the candidate text first (e.g. `extract_code`); identity when None.
        timeout_s: wall-clock limit.
        memory_mb: address-space limit in MiB (`None` for none).
        name: the critic's name.
        isolation: `"auto"`, `"required"` or `"off"`, as for `CodeTestCritic`.

    Raises:
        ValueError: on bad arguments (an empty command, a program that cannot be found, ...).
        IsolationUnavailableError: `isolation="required"` where this OS cannot isolate generated code.
    """

    metered = True  # no model calls

    def __init__(
        self,
        argv: Sequence[str],
        *,
        filename: str = "candidate.txt",
        files: Mapping[str, str] | None = None,
        extract: Any = None,
        timeout_s: float = 10,
        memory_mb: int | None = 512,
        name: str = "command",
        isolation: Isolation = "auto",
    ) -> None:
        if isinstance(argv, str) or not argv or not all(isinstance(a, str) and a for a in argv):
            raise ValueError(
                "argv must be a non-empty list of strings, e.g. ['python', '-I', 'check.py', '{file}']"
            )
        program = argv[0]
        if not (shutil.which(program) or (os.sep in program and os.access(program, os.X_OK))):
            raise ValueError(f"cannot find the program {program!r}; install it or pass its absolute path")
        path = PurePosixPath(filename)
        if len(path.parts) != 1 or filename in {".", ".."}:
            raise ValueError(f"filename must be a plain file name such as 'candidate.txt', got {filename!r}")
        if extract is not None and not callable(extract):
            raise ValueError("extract must be a callable str -> str (e.g. extract_code) or None")
        if not isinstance(name, str) or not name:
            raise ValueError("name must be a non-empty string")
        self.argv = [filename if a == "{file}" else a for a in argv]
        self.filename = filename
        self.files = dict(files or {})
        self.extract = extract
        self.timeout_s = _check_timeout(timeout_s)
        self.memory_mb = _check_memory(memory_mb)
        self.name = name
        check_isolation(isolation)
        self.isolation: Isolation = isolation

    def _files(self, request: CritiqueRequest) -> dict[str, str]:
        text = self.extract(request.candidate) if self.extract is not None else request.candidate
        return {**self.files, self.filename: str(text)}

    def _interpret(self, result: SandboxResult) -> Critique:
        limit = f"{self.timeout_s:g}s"
        if result.timed_out:
            finding = Finding(
                message=f"`{self.argv[0]}` timed out after {limit}", severity="critical", source=self.name
            )
            suggestion = "Make the candidate cheaper to check (it made the command run past the time limit)."
        elif result.memory_exceeded:
            finding = Finding(
                message=f"`{self.argv[0]}` exceeded the {self.memory_mb} MB memory limit",
                severity="critical",
                source=self.name,
            )
            suggestion = "Make the candidate need less memory to check."
        elif result.returncode == 0:
            return Critique(
                issues=[],
                suggestions=[],
                is_acceptable=True,
                score=10,
                feedback="The check passed.",
                checks_passed=1,
                checks_total=1,
            )
        else:
            output = tail(result.stdout + "\n" + result.stderr) or "no output"
            finding = Finding(
                message=f"the check failed (exit status {result.returncode}): {output}",
                severity="major",
                source=self.name,
            )
            suggestion = "Fix what the check's output reports."
        return Critique(
            issues=[finding.message],
            suggestions=[suggestion],
            is_acceptable=False,
            score=0,
            feedback=finding.message,
            findings=[finding],
            checks_passed=0,
            checks_total=1,
        )

    def critique(self, request: CritiqueRequest, config: RunnableConfig | None = None) -> Critique:
        """Run the command on the candidate in the sandbox."""
        return self._interpret(run_sandboxed(self._files(request), self.argv, **self._sandbox_limits()))

    async def acritique(self, request: CritiqueRequest, config: RunnableConfig | None = None) -> Critique:
        """Async twin of `critique` (does not block the event loop)."""
        return self._interpret(
            await arun_sandboxed(self._files(request), self.argv, **self._sandbox_limits())
        )

    def _sandbox_limits(self) -> dict[str, Any]:
        return {"timeout_s": self.timeout_s, "memory_mb": self.memory_mb, "isolation": self.isolation}
