"""Tool critics: run the candidate's code against tests (and optionally ruff) in a limited subprocess.

`CodeTestCritic` judges code by running it. The candidate's code is taken out of its ```python fence (or used as is),
written as `solution.py` next to your tests, and the tests run in `reflection_graph.critics.sandbox` (isolated where the
OS allows it, see `isolation`; fresh temp dir, deleted afterwards; time, CPU, memory and file-size limits; the whole
process tree killed on timeout). Nothing of the candidate ever runs in this process.

Tests are plain-assert functions, as for pytest, but no pytest is needed in the sandbox: a small stdlib runner
(`reflection_graph/critics/sandbox/_runner.py`, copied into the sandbox next to the code) imports the tests module, runs every
top-level `test*` function in file order and reports each failing test by name with its assertion, including the
values involved (`assert add(2, 2) == 4 failed (add(2, 2) was 5)`), or with its exception and the line that raised
it. Results come over a pipe, each signed with a per-run secret that the runner reads and closes before the
candidate is imported; this process requires exactly one result per test function that it finds in the tests file
itself. Printed or unsigned results, a run that exits early, or a test with no result fail the candidate
(`critical`, score 0).

Severities and score (`CodeTestCritic`):

- a failing test -> `major`; the code does not compile, or importing it / the tests fails -> `critical`;
- the run hit the time limit -> `critical` ("timed out after Xs (infinite loop?)"); the memory limit -> `critical`;
- ruff findings (`run_ruff=True`) -> `minor` (they never block acceptance);
- score = 10 * passed / total, and 0 on a syntax error, an import failure or a timeout;
- accepted only when every test passes and there is no critical finding.

`CommandCritic` is the generic form: write the candidate to a file, run any command on it in the sandbox, and
accept on exit status 0.
"""

from __future__ import annotations

import ast
import asyncio
import hashlib
import hmac
import json
import os
import re
import secrets
import shutil
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from langchain_core.runnables import RunnableConfig

from reflection_graph._extract import extract_code
from reflection_graph.critics.base import BaseCritic, CritiqueRequest
from reflection_graph.critics.sandbox import (
    Isolation,
    IsolationUnavailableError,
    SandboxResult,
    arun_sandboxed,
    check_isolation,
    run_sandboxed,
)
from reflection_graph.critique import Critique, Finding

__all__ = ["CodeTestCritic", "CommandCritic", "IsolationUnavailableError", "extract_code"]

_RUNNER_FILE = "_reflection_graph_runner.py"
_RUNNER_SOURCE = (Path(__file__).parent / "sandbox" / "_runner.py").read_text(encoding="utf-8")


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


def _score_from(passed: int, total: int) -> float:
    return round(10.0 * passed / total, 2) if total else 0.0


def _tail(text: str, limit: int = 400) -> str:
    text = text.strip()
    return text if len(text) <= limit else "..." + text[-limit:]


@dataclass
class _Run:
    collected: list[str] | None = None
    passed: list[str] | None = None
    failures: list[dict[str, Any]] | None = None
    running: str | None = None
    done: bool = False
    syntax_error: dict[str, Any] | None = None
    import_error: dict[str, Any] | None = None
    tampered: str | None = None


def _verified_events(channel: bytes, secret: bytes) -> tuple[list[dict[str, Any]], str | None]:
    """The runner's events from the result channel, each checked against its HMAC and sequence number.

    Returns the events up to the first bad line, and why that line was rejected (None when all were good).
    """
    events: list[dict[str, Any]] = []
    lines = channel.split(b"\n")
    lines.pop()  # empty, or a line cut off when the run was killed: it proves nothing either way
    for line in lines:
        tag, _, body = line.partition(b" ")
        expected = hmac.new(secret, body, hashlib.sha256).hexdigest().encode("ascii")
        if not hmac.compare_digest(tag, expected):
            return events, "a result line that the test runner did not sign"
        try:
            event = json.loads(body)
        except ValueError:
            return events, "a signed result line that is not JSON"
        if not isinstance(event, dict) or event.get("seq") != len(events):
            return events, "a result out of sequence"
        events.append(event)
    return events, None


def _parse_events(channel: bytes, secret: bytes, expected: Sequence[str]) -> _Run:
    """Rebuild the run from the signed events; require exactly one result per test function in `expected`."""
    run = _Run(passed=[], failures=[])
    assert run.passed is not None and run.failures is not None
    events, run.tampered = _verified_events(channel, secret)
    for event in events:
        kind = event.get("event")
        if kind == "collected":
            run.collected = [str(name) for name in event.get("tests", [])]
        elif kind == "start":
            run.running = str(event.get("test"))
        elif kind == "pass":
            run.passed.append(str(event.get("test")))
            run.running = None
        elif kind == "fail":
            run.failures.append(event)
            run.running = None
        elif kind == "syntax_error":
            run.syntax_error = event
        elif kind == "import_error":
            run.import_error = event
        elif kind == "done":
            run.done = True
    results = run.passed + [str(e.get("test")) for e in run.failures]
    counts = {name: results.count(name) for name in set(results)}
    if run.tampered is None and any(n > 1 for n in counts.values()):
        run.tampered = "more than one result for " + ", ".join(sorted(t for t, n in counts.items() if n > 1))
    if run.tampered is None and run.done:
        missing = [name for name in expected if name not in counts]
        if run.collected is None or missing:
            run.tampered = "no result for " + ", ".join(missing or expected) + " (did the code interfere?)"
    if run.tampered is not None:
        run.done = False
    return run


def _failure_text(event: dict[str, Any]) -> str:
    kind = str(event.get("type", "Error"))
    message = str(event.get("message", "")).strip()
    text = f"{kind}: {message}" if message else kind
    if kind == "AssertionError" and message.startswith("assert "):
        text = message
    where = []
    if event.get("file") and event.get("line"):
        source = event.get("source") or ""
        where.append(
            f"at {event['file']}:{event['line']}" + (f" `{source}`" if source and source not in text else "")
        )
    if event.get("raised_at"):
        raised = event.get("raised_source") or ""
        where.append(f"raised in {event['raised_at']}" + (f" `{raised}`" if raised else ""))
    return text + (f" ({'; '.join(where)})" if where else "")


class CodeTestCritic(BaseCritic):
    """Judge Python code by running tests against it in a sandboxed subprocess.

    The candidate's code becomes `entrypoint` (default `solution.py`); `tests` is written next to it as
    `test_<entrypoint>` and must import from that module (`from solution import add`). See the module docstring
    for severities, the score and acceptance.

    Args:
        tests: Python source with plain-assert test functions (`def test_add(): assert add(2, 2) == 4`),
            checked for syntax and for at least one top-level `test*` function now.
        entrypoint: the file name the code is written to; the tests import its stem.
        timeout_s: wall-clock limit for the whole test run (the process group is killed when it expires).
        memory_mb: address-space limit for the run, in MiB (`None` for none).
        run_ruff: also lint the code with ruff (in the sandbox too) and report its findings as `minor`.
        ruff_select: ruff rule codes to select; default `("E4", "E7", "E9", "F")` (pyflakes and the
            pycodestyle errors, independent of the installed ruff version's defaults).
        python: interpreter that runs the tests (in isolated mode, `-I`).
        name: the critic's name (shown as the source of its findings in a composite critic).
        isolation: `"auto"` (default: isolate the code where the OS allows it, else warn once, when code first
            runs, and run it unisolated), `"required"` (raise `IsolationUnavailableError` now where it cannot be
            isolated) or `"off"`. See `reflection_graph.critics.sandbox` for what is isolated.

    Raises:
        ValueError: on bad arguments; the message says what to change.
        IsolationUnavailableError: `isolation="required"` where this OS cannot isolate generated code.

    Example:
        >>> critic = CodeTestCritic("from solution import add\\n\\ndef test_add():\\n    assert add(2, 2) == 4\\n")
        >>> from reflection_graph.critics.base import CritiqueRequest
        >>> critic.critique(CritiqueRequest(task="add", candidate="def add(a, b):\\n    return a + b")).is_acceptable
        True
    """

    def __init__(
        self,
        tests: str,
        *,
        entrypoint: str = "solution.py",
        timeout_s: float = 10,
        memory_mb: int | None = 512,
        run_ruff: bool = False,
        ruff_select: Sequence[str] = ("E4", "E7", "E9", "F"),
        python: str = sys.executable,
        name: str = "code_tests",
        isolation: Isolation = "auto",
    ) -> None:
        if not isinstance(tests, str) or not tests.strip():
            raise ValueError(
                "tests must be non-empty Python source with test functions, e.g. 'def test_x(): ...'"
            )
        try:
            tree = ast.parse(tests)
        except SyntaxError as exc:
            raise ValueError(
                f"tests do not parse (line {exc.lineno}: {exc.msg}); pass valid Python test code"
            ) from exc
        test_names = [
            node.name
            for node in tree.body
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test")
        ]
        if not test_names:
            raise ValueError(
                "tests define no top-level test function; write plain-assert functions such as "
                "'def test_add():\\n    assert add(2, 2) == 4'"
            )
        path = PurePosixPath(entrypoint)
        if path.suffix != ".py" or len(path.parts) != 1 or not path.stem.isidentifier():
            raise ValueError(
                f"entrypoint must be a plain module file name such as 'solution.py', got {entrypoint!r}"
            )
        if isinstance(ruff_select, str) or not ruff_select or not all(ruff_select):
            raise ValueError("ruff_select must be a non-empty list of rule codes such as ['E', 'F']")
        if not isinstance(name, str) or not name:
            raise ValueError("name must be a non-empty string")
        self.tests = tests
        self.test_names = tuple(test_names)
        self.entrypoint = str(path)
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
    def _limits(self) -> dict[str, Any]:
        return {"timeout_s": self.timeout_s, "memory_mb": self.memory_mb, "isolation": self.isolation}

    @property
    def _ruff_limits(self) -> dict[str, Any]:
        return {"timeout_s": max(self.timeout_s, 30.0), "memory_mb": None, "isolation": self.isolation}

    # -- building the runs ---------------------------------------------------------------------------------
    def _test_job(self, code: str) -> tuple[dict[str, str], list[str]]:
        files = {self.entrypoint: code, self.tests_file: self.tests, _RUNNER_FILE: _RUNNER_SOURCE}
        argv = [
            self.python,
            "-I",
            "-B",
            _RUNNER_FILE,
            self.entrypoint,
            self.tests_file,
            "{secret_fd}",
            "{result_fd}",
        ]
        return files, argv

    def _ruff_job(self, code: str) -> tuple[dict[str, str], list[str]] | None:
        if self.ruff is None:
            return None
        argv = [self.ruff, "check", "--isolated", "--no-cache", "--output-format", "json", "--exit-zero"]
        argv += ["--select", ",".join(self.ruff_select)]
        return {self.entrypoint: code}, [*argv, self.entrypoint]

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

    def _interpret(self, result: SandboxResult, ruff: SandboxResult | None, secret: bytes) -> Critique:
        run = _parse_events(result.channel, secret, self.test_names)
        assert run.passed is not None and run.failures is not None
        findings: list[Finding] = []
        suggestions: list[str] = []
        total = len(set(run.collected or ()) | set(self.test_names))
        if run.tampered is not None:
            findings.append(
                Finding(
                    message=f"the test results cannot be trusted: {run.tampered}",
                    severity="critical",
                    source="sandbox",
                )
            )
            suggestions.append("Do not write to the test runner's result channel or fake test results.")
        passed = len(run.passed)
        zero_score = run.tampered is not None
        limit = f"{self.timeout_s:g}s"
        memory = f"{self.memory_mb} MB" if self.memory_mb else "available"

        if run.syntax_error is not None:
            err = run.syntax_error
            text = f": `{err['text']}`" if err.get("text") else ""
            findings.append(
                Finding(
                    message=f"{self.entrypoint} has a syntax error at line {err.get('line')}: {err.get('message')}{text}",
                    severity="critical",
                    source="tests",
                )
            )
            suggestions.append(
                f"Fix the syntax error on line {err.get('line')} and return the whole corrected code."
            )
            zero_score = True
        elif run.import_error is not None:
            err = run.import_error
            if err.get("kind") == "memory":
                message = f"importing the code exceeded the {memory} memory limit: {_failure_text(err)}"
                suggestions.append(
                    "Do not allocate large data at module level; compute inside the functions."
                )
            else:
                message = f"importing the code and tests failed: {_failure_text(err)}"
                suggestions.append(
                    "Make the module import cleanly: define every function the tests import at the top level, "
                    "with the exact names and signatures the tests use, and no code that fails at import time."
                )
            findings.append(Finding(message=message, severity="critical", source="tests"))
            zero_score = True

        for event in run.failures:
            test = str(event.get("test"))
            if event.get("kind") == "memory":
                findings.append(
                    Finding(
                        message=f"{test} exceeded the {memory} memory limit: {_failure_text(event)}",
                        severity="critical",
                        source="tests",
                    )
                )
                suggestions.append(
                    f"Bound the memory {test} needs: avoid unbounded lists, strings or recursion."
                )
            else:
                findings.append(
                    Finding(
                        message=f"{test} failed: {_failure_text(event)}", severity="major", source="tests"
                    )
                )
                check = f" (it checks `{event['source']}`)" if event.get("source") else ""
                suggestions.append(f"Fix the code so that {test} passes{check}.")

        not_run: list[str] = []
        if run.collected is not None and not run.done:
            finished = set(run.passed) | {str(e.get("test")) for e in run.failures}
            not_run = [t for t in run.collected if t not in finished and t != run.running]
        where = (
            f" in {run.running}"
            if run.running
            else (" while importing the code" if run.collected is None else "")
        )
        if result.timed_out:
            findings.append(
                Finding(
                    message=f"timed out after {limit}{where} (infinite loop?)",
                    severity="critical",
                    source="sandbox",
                )
            )
            suggestions.append(
                "Make every loop and recursion terminate (check loop conditions and that loop variables change), "
                "and avoid needlessly slow algorithms."
            )
            zero_score = True
        elif (
            result.memory_exceeded and run.syntax_error is None and run.import_error is None and not run.done
        ):
            findings.append(
                Finding(
                    message=f"the run exceeded the {memory} memory limit{where} and was stopped",
                    severity="critical",
                    source="sandbox",
                )
            )
            suggestions.append(
                "Avoid unbounded allocations (growing lists or strings, huge ranges materialised)."
            )
        elif (
            not run.done
            and run.tampered is None
            and run.syntax_error is None
            and run.import_error is None
            and not result.memory_exceeded
        ):
            detail = _tail(result.stderr) or "no error output"
            findings.append(
                Finding(
                    message=f"the test run ended early{where} (exit status {result.returncode}): {detail}",
                    severity="critical",
                    source="sandbox",
                )
            )
            suggestions.append("Do not call sys.exit / os._exit or otherwise end the process from the code.")
        if not_run:
            findings.append(
                Finding(
                    message=f"not run because the run stopped early: {', '.join(not_run)}",
                    severity="major",
                    source="sandbox",
                )
            )

        if ruff is not None:
            findings.extend(self._ruff_findings(ruff, suggestions))

        score = 0.0 if zero_score else _score_from(passed, total)
        critical = any(f.severity == "critical" for f in findings)
        accepted = total > 0 and passed == total and not critical
        failing = [str(e.get("test")) for e in run.failures]
        if accepted:
            feedback = f"All {total} tests passed."
        elif zero_score and run.collected is None:
            feedback = f"The tests could not run: {findings[0].message}."
        else:
            feedback = f"{passed} of {total} tests passed."
            if failing:
                feedback += f" Failing: {', '.join(failing)}."
            if result.timed_out:
                feedback += f" The run timed out after {limit}{where}."
        return Critique(
            issues=[f.message for f in findings],
            suggestions=list(dict.fromkeys(suggestions)),
            is_acceptable=accepted,
            score=score,
            feedback=feedback,
            findings=findings,
            checks_passed=0 if zero_score else passed,
            checks_total=max(total, 1),
        )

    def _ruff_findings(self, result: SandboxResult, suggestions: list[str]) -> list[Finding]:
        try:
            items = json.loads(result.stdout or "[]")
        except json.JSONDecodeError:
            return [
                Finding(
                    message=f"ruff could not run: {_tail(result.stderr) or 'no output'}",
                    severity="minor",
                    source="ruff",
                )
            ]
        found: list[Finding] = []
        for item in items if isinstance(items, list) else []:
            code = item.get("code")
            if not code or not re.fullmatch(r"[A-Z]+[0-9]+", str(code)):
                # `invalid-syntax`: the test run reports syntax errors already, with more context
                continue
            row = (item.get("location") or {}).get("row")
            message = str(item.get("message", "")).strip()
            found.append(
                Finding(message=f"ruff {code} at line {row}: {message}", severity="minor", source="ruff")
            )
            fix = (item.get("fix") or {}).get("message")
            suggestions.append(f"Line {row}: {fix or message} (ruff {code}).")
        return found

    # -- the Critic protocol --------------------------------------------------------------------------------
    def critique(self, request: CritiqueRequest, config: RunnableConfig | None = None) -> Critique:
        """Run the tests (and ruff) on the candidate's code in the sandbox and judge the result."""
        code = extract_code(request.candidate)
        if not code.strip():
            return self._no_code()
        files, argv = self._test_job(code)
        secret = secrets.token_bytes(32)
        result = run_sandboxed(files, argv, **self._limits, channel_secret=secret)
        ruff_job = self._ruff_job(code)
        ruff = None
        if ruff_job is not None:
            ruff = run_sandboxed(*ruff_job, **self._ruff_limits)
        return self._interpret(result, ruff, secret)

    async def acritique(self, request: CritiqueRequest, config: RunnableConfig | None = None) -> Critique:
        """Async twin of `critique`: the subprocesses run without blocking the event loop (ruff concurrently)."""
        code = extract_code(request.candidate)
        if not code.strip():
            return self._no_code()
        files, argv = self._test_job(code)
        secret = secrets.token_bytes(32)
        tests = arun_sandboxed(files, argv, **self._limits, channel_secret=secret)
        ruff_job = self._ruff_job(code)
        if ruff_job is None:
            return self._interpret(await tests, None, secret)
        result, ruff = await asyncio.gather(tests, arun_sandboxed(*ruff_job, **self._ruff_limits))
        return self._interpret(result, ruff, secret)


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
            output = _tail(result.stdout + "\n" + result.stderr) or "no output"
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
        result = run_sandboxed(
            self._files(request),
            self.argv,
            timeout_s=self.timeout_s,
            memory_mb=self.memory_mb,
            isolation=self.isolation,
        )
        return self._interpret(result)

    async def acritique(self, request: CritiqueRequest, config: RunnableConfig | None = None) -> Critique:
        """Async twin of `critique` (does not block the event loop)."""
        result = await arun_sandboxed(
            self._files(request),
            self.argv,
            timeout_s=self.timeout_s,
            memory_mb=self.memory_mb,
            isolation=self.isolation,
        )
        return self._interpret(result)
