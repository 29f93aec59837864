"""Reading a benchmark's data file without ever parsing its held-out lines (`kept_records`), for the open parts
of HumanEval (`_humaneval_set`) and IFBench (`_ifbench_set`)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any

__all__ = ["kept_records"]


def kept_records(
    lines: Iterable[bytes],
    where: object,
    leading: re.Pattern[bytes],
    keep: Callable[[bytes], bool],
    expected: str,
) -> Iterator[dict[str, Any]]:
    """The parsed JSON Lines in `lines` whose leading key (group 1 of `leading`, read from the raw bytes) `keep`
    keeps; the other lines are never parsed, so held-out data stays unread. Blank lines are skipped.

    Raises:
        ValueError: a line `leading` does not match: `{where}, line N: does not start with {expected}`.
    """
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        match = leading.match(line)
        if match is None:
            raise ValueError(f"{where}, line {number}: does not start with {expected}")
        if keep(match.group(1)):
            yield json.loads(line)
