"""Forged verdicts (issue 20, item 4): the verdict is decided outside the candidate's process.

Each attack is wrong code (`add` multiplies) that tries to pass anyway: by printing fake results, by writing signed
lines on every descriptor, by finding the runner's signer with `gc.get_objects()` and signing its own results, by
calling the runner's own emit function, or, against the checking process, by answering every call in advance.

For assert-style tests (`verdict_source="outside"`) every attack fails. The controls run the same attacks against
tests that need the candidate's objects (`add.__name__`), which run in the candidate's process: there the gc and
emit attacks do forge a pass, which is what the critique's `verdict_source="in-process"` and the README say, and
what shows that the attacks are real (the assertions on the outside path can fail).
"""

from __future__ import annotations

import textwrap

import pytest

from reflection_graph.critics import CodeTestCritic
from reflection_graph.critics.base import CritiqueRequest
from tests.critics.test_hostile_code import ISOLATED, TESTS, isolation  # noqa: F401  (a fixture)

IN_PROCESS_TESTS = TESTS + "\n\ndef test_name():\n    assert add.__name__ == 'add'\n"

_EVENTS = """
def _events(names):
    events = [{"event": "collected", "tests": names}]
    for name in names:
        events += [{"event": "start", "test": name}, {"event": "pass", "test": name}]
    return events + [{"event": "done"}]
NAMES = ["test_add", "test_add_zero", "test_name"]
"""

WRONG = "\ndef add(a, b):\n    return a * b - 1\n"

PRINTER = textwrap.dedent(
    """
    import json, os
    marker = "@@reflection-graph-runner@@ "
    for e in _events(NAMES):
        print(marker + json.dumps(e))
        os.write(2, (marker + json.dumps(e) + "\\n").encode())
    """
)

EVERY_FD = textwrap.dedent(
    """
    import json, os
    signed = "".join("0" * 64 + " " + json.dumps({"seq": i, **e}) + "\\n" for i, e in enumerate(_events(NAMES)))
    for fd in range(3, 64):  # every descriptor the runner might report on
        try:
            os.write(fd, signed.encode())
        except OSError:
            pass
    """
)

GC_SIGNER = textwrap.dedent(
    """
    import gc, hmac, json, os
    signer = next((o for o in gc.get_objects() if isinstance(o, hmac.HMAC)), None)
    if signer is not None:  # sign our own results with the runner's key, on every descriptor, and leave
        lines = b""
        for seq, event in enumerate(_events(NAMES)):
            body = json.dumps({"seq": seq, **event}).encode()
            tag = signer.copy()
            tag.update(body)
            lines += tag.hexdigest().encode() + b" " + body + b"\\n"
        for fd in range(3, 64):
            try:
                os.write(fd, lines)
            except OSError:
                pass
        os._exit(0)
    """
)

EMIT_CALLER = textwrap.dedent(
    """
    import gc, os
    def _is_emit(obj):
        code = getattr(obj, "__code__", None)
        return getattr(obj, "__name__", None) == "emit" and code is not None and "_reflection_graph_" in code.co_filename
    emit = next((o for o in gc.get_objects() if _is_emit(o)), None)
    if emit is not None:  # the runner's own, already signing, function
        for event in _events(NAMES):
            emit(**event)
        os._exit(0)
    """
)

ANSWERS_IN_ADVANCE = textwrap.dedent(
    """
    import json, os
    lines = json.dumps({"ready": {"names": ["add"]}}) + "\\n" + (json.dumps({"value": 4}) + "\\n") * 50
    for fd in range(3, 64):  # the answers pipe among them: the checker reads these before anything we send
        try:
            os.write(fd, lines.encode())
        except OSError:
            pass
    """
)

ATTACKS = {
    "printed-results": PRINTER,
    "signed-lines-on-every-fd": EVERY_FD,
    "gc-signer": GC_SIGNER,
    "calls-the-emit-function": EMIT_CALLER,
    "answers-in-advance": ANSWERS_IN_ADVANCE,
}


def judge(attack: str, tests: str, isolation: str):  # type: ignore[no-untyped-def]  # noqa: F811
    critic = CodeTestCritic(tests, timeout_s=5, isolation=isolation)  # type: ignore[arg-type]
    return critic.critique(CritiqueRequest(task="add", candidate=_EVENTS + ATTACKS[attack] + WRONG))


@pytest.mark.parametrize("attack", sorted(ATTACKS))
@pytest.mark.parametrize("isolation", ["off", *ISOLATED], indirect=True)
def test_no_attack_passes_wrong_code_when_checked_outside(isolation: str, attack: str) -> None:  # noqa: F811
    critique = judge(attack, TESTS, isolation)
    assert critique.verdict_source == "outside"
    assert critique.is_acceptable is False, critique.issues
    assert critique.score < 10 and critique.issues


def test_answering_in_advance_passes_only_where_the_answer_is_right() -> None:
    """Owning the answers pipe lets the candidate choose values, nothing more: 4 is right for add(2, 2) only."""
    critique = judge("answers-in-advance", TESTS, "required" if _isolated() else "off")
    assert critique.score == 5 and critique.verdict_source == "outside"
    assert any("`add(0, 5)` returned 4" in issue for issue in critique.issues), critique.issues


@pytest.mark.parametrize("attack", ["gc-signer", "calls-the-emit-function"])
@pytest.mark.parametrize("isolation", ["off", "required"], indirect=True)
def test_control_in_process_tests_can_be_forged_and_say_so(isolation: str, attack: str) -> None:  # noqa: F811
    """The documented limit: tests that run in the candidate's process can be forged from its memory."""
    critic = CodeTestCritic(IN_PROCESS_TESTS, timeout_s=5, isolation=isolation)  # type: ignore[arg-type]
    assert critic.verdict_source == "in-process" and "add.__name__" in str(critic.why_in_process)
    critique = judge(attack, IN_PROCESS_TESTS, isolation)
    assert critique.verdict_source == "in-process"
    assert critique.is_acceptable is True and critique.score == 10  # forged: add() is wrong


@pytest.mark.parametrize("isolation", ["off", "required"], indirect=True)
def test_printed_and_fd_results_still_fail_in_process(isolation: str) -> None:  # noqa: F811
    for attack in ("printed-results", "signed-lines-on-every-fd"):
        critique = judge(attack, IN_PROCESS_TESTS, isolation)
        assert critique.verdict_source == "in-process"
        assert critique.is_acceptable is False and critique.score < 10, (attack, critique.issues)


@pytest.mark.parametrize("isolation", ["off", "required"], indirect=True)
def test_a_test_hidden_from_the_runner_is_not_accepted(isolation: str) -> None:  # noqa: F811
    """Code that makes the runner skip a failing test: outside, the runner is out of its reach; in-process, the
    parent notices the missing result (it reads the test names from the tests file itself)."""
    hider = textwrap.dedent(
        """
        import inspect
        _real = inspect.isfunction
        inspect.isfunction = lambda obj: _real(obj) and obj.__name__ != "test_add_zero"
        def add(a, b):
            return a + b if a else -1
        """
    )
    for tests, expected in (
        (TESTS, "test_add_zero failed"),
        (IN_PROCESS_TESTS, "no result for test_add_zero"),
    ):
        critic = CodeTestCritic(tests, timeout_s=5, isolation=isolation)  # type: ignore[arg-type]
        critique = critic.critique(CritiqueRequest(task="add", candidate=hider))
        assert critique.is_acceptable is False
        assert any(expected in i for i in critique.issues), critique.issues


@pytest.mark.parametrize("isolation", ["off", *ISOLATED], indirect=True)
def test_the_candidates_process_never_sees_the_tests(isolation: str) -> None:  # noqa: F811
    """Outside, the expected values stay with the checker: the candidate's run dir holds only its own code."""
    spy = "import os\n\ndef add(a, b):\n    return sorted(os.listdir('.'))\n"
    critic = CodeTestCritic(TESTS, timeout_s=5, isolation=isolation)  # type: ignore[arg-type]
    issues = " ".join(critic.critique(CritiqueRequest(task="add", candidate=spy)).issues)
    assert "'solution.py'" in issues and "'test_solution.py'" not in issues, issues


def _isolated() -> bool:
    from reflection_graph.critics.sandbox import isolation_backend

    return isolation_backend()[0] is not None
