"""The feedback for a failing check the test runner described: the call, what it returned or raised, and the change.

The runner's `fail` event carries `compare` (the call's source, the value it returned or the exception it raised,
the expected value and the comparison); `compared` turns it into a finding's message ("`f(3)` returned 8, expected
9") and a suggestion that names the change ("Make `f(3)` return 9 (it returns 8)."). Every value in the event comes
from the candidate's run: each is quoted cut to `_SHOWN` characters.
"""

from __future__ import annotations

from typing import Any

__all__ = ["compared"]


_SHOWN = 200
"""The longest call source, value or exception line a finding quotes."""

_EXPECTED = {
    "==": "{e}",
    "!=": "anything but {e}",
    "<": "a value less than {e}",
    "<=": "a value of at most {e}",
    ">": "a value greater than {e}",
    ">=": "a value of at least {e}",
    "in": "one of {e}",
    "not in": "a value not in {e}",
    "contains": "a value that contains {e}",
    "not contains": "a value that does not contain {e}",
    "is": "{e}",
    "is not": "anything but {e}",
    "true": "a true value",
    "false": "a false value",
}
"""What the value under test must be, by the comparison the test makes (read from the value's side)."""


def _quoted(value: object) -> str:
    text = " ".join(str(value).split()) if value is not None else ""
    return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."


def compared(event: dict[str, Any]) -> tuple[str, str] | None:
    """The finding and the suggestion for a failing check whose call and values the runner reported, or None.

    The finding names the call, what it returned (or raised) and what the test expected; the suggestion names the
    change, e.g. "Make `f(3)` return 9 (it returns 8)."
    """
    compare = event.get("compare")
    if not isinstance(compare, dict) or not compare.get("call"):
        return None
    call, returned = _quoted(compare["call"]), bool(compare.get("returned"))
    wanted = _EXPECTED.get(str(compare.get("op") or ""), "")
    if "{e}" in wanted:
        wanted = wanted.format(e=_quoted(compare["expected"])) if "expected" in compare else ""
    names = compare.get("with") if isinstance(compare.get("with"), list) else []
    subject = f"`{call}`" + (f" (with {', '.join(_quoted(n) for n in names[:4])})" if names else "")
    expected = f", expected {wanted}" if wanted else ""
    if compare.get("raised"):
        line = next(
            (ln.strip() for ln in reversed(str(event.get("message", "")).splitlines()) if ln.strip()), ""
        )
        error = _quoted(f"{event.get('type', 'Error')}: {line}" if line else event.get("type", "Error"))
        where = ""
        if event.get("raised_at"):
            raised = _quoted(event.get("raised_source") or "")
            where = f" (raised in {_quoted(event['raised_at'])}" + (f" `{raised}`" if raised else "") + ")"
        if not wanted:
            fix = f"Make {subject} run without raising {error}."
        elif returned:
            fix = f"Make {subject} return {wanted} instead of raising {error}."
        else:
            fix = f"Change the code so that {subject} is {wanted} instead of raising {error}."
        return f"{subject} raised {error}{expected}{where}", fix
    if "actual" not in compare or not wanted:
        return None
    actual = _quoted(compare["actual"])
    own = str(event.get("message", "")).strip()
    note = f" (the test says: {_quoted(own)})" if own and not own.startswith("assert ") else ""
    if returned:
        return (
            f"{subject} returned {actual}{expected}{note}",
            f"Make {subject} return {wanted} (it returns {actual}).",
        )
    return (
        f"{subject} was {actual}{expected}{note}",
        f"Change the code so that {subject} is {wanted} (it is {actual}).",
    )
