"""Reading a test run back: the runner's signed events, and the critique they add up to.

`parse_events` checks each event line against the run's secret and its sequence number and requires one result
per expected test; `judge_run` turns the run, the sandbox's own report (timeout, memory, exit status) and ruff's
findings into a `Critique`: failing tests are `major`, anything that stops the tests from running is `critical`,
ruff's findings are `minor`; the score is 10 * passed / total (0 when the tests could not run).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from reflection_graph.critics._test_feedback import compared
from reflection_graph.critics._test_plan import VerdictSource
from reflection_graph.critics.sandbox import SandboxResult
from reflection_graph.critique import Critique, Finding

__all__ = ["Limits", "judge_run", "parse_events", "tail"]


def tail(text: str, limit: int = 400) -> str:
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
    gone: str | None = None
    """Why the candidate's process stopped answering (checked outside its process), or None."""


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


def parse_events(channel: bytes, secret: bytes, expected: Sequence[str]) -> _Run:
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
        elif kind == "candidate_gone":
            run.gone = str(event.get("why") or "its process ended")
            run.running = str(event["test"]) if event.get("test") else run.running
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


@dataclass(frozen=True)
class Limits:
    """What the findings name: the code's file, the time limit and the memory limit."""

    entrypoint: str
    timeout_s: float
    memory_mb: int | None

    @property
    def time(self) -> str:
        return f"{self.timeout_s:g}s"

    @property
    def memory(self) -> str:
        return f"{self.memory_mb} MB" if self.memory_mb else "available"


def _load_findings(run: _Run, limits: Limits, suggestions: list[str]) -> list[Finding]:
    """A syntax error or a failed import (of the code, or of the tests with it): critical."""
    if run.syntax_error is not None:
        err = run.syntax_error
        text = f": `{err['text']}`" if err.get("text") else ""
        line = err.get("line")
        suggestions.append(f"Fix the syntax error on line {line} and return the whole corrected code.")
        message = f"{limits.entrypoint} has a syntax error at line {line}: {err.get('message')}{text}"
        return [Finding(message=message, severity="critical", source="tests")]
    if run.import_error is None:
        return []
    err = run.import_error
    if err.get("kind") == "memory":
        message = f"importing the code exceeded the {limits.memory} memory limit: {_failure_text(err)}"
        suggestions.append("Do not allocate large data at module level; compute inside the functions.")
    else:
        message = f"importing the code and tests failed: {_failure_text(err)}"
        suggestions.append(
            "Make the module import cleanly: define every function the tests import at the top level, "
            "with the exact names and signatures the tests use, and no code that fails at import time."
        )
    return [Finding(message=message, severity="critical", source="tests")]


def _test_findings(run: _Run, limits: Limits, suggestions: list[str]) -> list[Finding]:
    """One finding per failing test: `major`, or `critical` when it ran out of memory."""
    found = []
    for event in run.failures or []:
        test = str(event.get("test"))
        if event.get("kind") == "memory":
            message = f"{test} exceeded the {limits.memory} memory limit: {_failure_text(event)}"
            found.append(Finding(message=message, severity="critical", source="tests"))
            suggestions.append(f"Bound the memory {test} needs: avoid unbounded lists, strings or recursion.")
        else:
            said = compared(event)
            text, suggestion = said if said else (_failure_text(event), None)
            found.append(Finding(message=f"{test} failed: {text}", severity="major", source="tests"))
            check = f" (it checks `{event['source']}`)" if event.get("source") else ""
            suggestions.append(suggestion or f"Fix the code so that {test} passes{check}.")
    return found


def _where(run: _Run) -> str:
    if run.running:
        return f" in {run.running}"
    return " while importing the code" if run.collected is None else ""


def _stop_findings(run: _Run, result: SandboxResult, limits: Limits, suggestions: list[str]) -> list[Finding]:
    """Why the run stopped before its end: the time limit, the memory limit, or the code ending it; tests not run."""
    found = []
    loaded = run.syntax_error is None and run.import_error is None
    where = _where(run)
    if result.timed_out:
        message = f"timed out after {limits.time}{where} (infinite loop?)"
        found.append(Finding(message=message, severity="critical", source="sandbox"))
        suggestions.append(
            "Make every loop and recursion terminate (check loop conditions and that loop variables change), "
            "and avoid needlessly slow algorithms."
        )
    elif result.memory_exceeded and loaded and not run.done:
        message = f"the run exceeded the {limits.memory} memory limit{where} and was stopped"
        found.append(Finding(message=message, severity="critical", source="sandbox"))
        suggestions.append(
            "Avoid unbounded allocations (growing lists or strings, huge ranges materialised)."
        )
    elif not run.done and run.tampered is None and loaded:
        detail = tail(result.stderr) or "no error output"
        if run.gone and run.gone != "its process ended":
            detail = f"{run.gone}; {detail}"
        message = f"the test run ended early{where} (exit status {result.returncode}): {detail}"
        found.append(Finding(message=message, severity="critical", source="sandbox"))
        suggestions.append("Do not call sys.exit / os._exit or otherwise end the process from the code.")
    if run.collected is not None and not run.done:
        finished = set(run.passed or ()) | {str(e.get("test")) for e in run.failures or ()}
        not_run = [t for t in run.collected if t not in finished and t != run.running]
        if not_run:
            message = f"not run because the run stopped early: {', '.join(not_run)}"
            found.append(Finding(message=message, severity="major", source="sandbox"))
    return found


def _ruff_findings(result: SandboxResult, suggestions: list[str]) -> list[Finding]:
    try:
        items = json.loads(result.stdout or "[]")
    except json.JSONDecodeError:
        message = f"ruff could not run: {tail(result.stderr) or 'no output'}"
        return [Finding(message=message, severity="minor", source="ruff")]
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


def judge_run(
    run: _Run,
    result: SandboxResult,
    ruff: SandboxResult | None,
    limits: Limits,
    expected: Sequence[str],
    verdict_source: VerdictSource,
) -> Critique:
    """The critique of one test run: findings, score, acceptance and feedback."""
    suggestions: list[str] = []
    findings: list[Finding] = []
    if run.tampered is not None:
        message = f"the test results cannot be trusted: {run.tampered}"
        findings.append(Finding(message=message, severity="critical", source="sandbox"))
        suggestions.append("Do not write to the test runner's result channel or fake test results.")
    findings += _load_findings(run, limits, suggestions)
    findings += _test_findings(run, limits, suggestions)
    findings += _stop_findings(run, result, limits, suggestions)
    if ruff is not None:
        findings += _ruff_findings(ruff, suggestions)
    total = len(set(run.collected or ()) | set(expected))
    passed = len(run.passed or ())
    zero = run.tampered is not None or run.syntax_error is not None or run.import_error is not None
    zero = zero or result.timed_out
    critical = any(f.severity == "critical" for f in findings)
    accepted = total > 0 and passed == total and not critical
    failing = [str(e.get("test")) for e in run.failures or ()]
    if accepted:
        feedback = f"All {total} tests passed."
    elif zero and run.collected is None:
        feedback = f"The tests could not run: {findings[0].message}."
    else:
        feedback = f"{passed} of {total} tests passed."
        if failing:
            feedback += f" Failing: {', '.join(failing)}."
        if result.timed_out:
            feedback += f" The run timed out after {limits.time}{_where(run)}."
    return Critique(
        issues=[f.message for f in findings],
        suggestions=list(dict.fromkeys(suggestions)),
        is_acceptable=accepted,
        score=0.0 if zero else (round(10.0 * passed / total, 2) if total else 0.0),
        feedback=feedback,
        findings=findings,
        verdict_source=verdict_source,
        checks_passed=0 if zero else passed,
        checks_total=max(total, 1),
    )
