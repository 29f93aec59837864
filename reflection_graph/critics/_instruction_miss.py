"""What `DETAILS` returns (`Miss`) and the small measures and phrasings its functions share.

The counting rules here are the checkers' own (IFBench's word counter and sentence splitter, their punctuation set).
"""

from __future__ import annotations

import importlib
import string
from typing import Any, NamedTuple

__all__ = [
    "PUNCTUATION",
    "SHOWN",
    "Miss",
    "count_words",
    "listed",
    "more_or_fewer",
    "number",
    "quote",
    "some",
    "split_sentences",
    "times",
    "without_punctuation",
]


class Miss(NamedTuple):
    """How an answer misses one instruction."""

    found: str
    """What the instruction asks and what the answer has instead."""
    change: str = ""
    """The change that meets it, as an imperative sentence ("" when no single change can be named)."""


PUNCTUATION = "".join(string.punctuation)
SHOWN = 60
"""The longest quote of the answer a message holds."""


def number(value: Any) -> str:
    """`value` as the instruction writes it: 5.0 as 5."""
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


def times(count: int) -> str:
    """ "once", or "3 times"."""
    return "once" if count == 1 else f"{count} times"


def quote(text: str, limit: int = SHOWN) -> str:
    """`text` on one line, cut to `limit` characters, quoted."""
    text = " ".join(text.split())
    return repr(text if len(text) <= limit else text[: limit - 3] + "...")


def listed(items: list[str], limit: int = 8) -> str:
    """The first `limit` of `items`, comma-separated, and how many more there are."""
    shown = ", ".join(items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")


def _ifbench_util() -> Any:
    return importlib.import_module("if_verifiable.ifbench.instructions_util")


def count_words(text: str) -> int:
    """The words in `text` as IFBench's checkers count them."""
    return int(_ifbench_util().count_words(text))


def split_sentences(text: str) -> list[str]:
    """The sentences of `text` as IFBench's checkers split them."""
    return list(_ifbench_util().split_into_sentences(text))


def some(count: int, noun: str) -> str:
    """`count` and the noun, plural unless the count is 1 ("1 number", "2 numbers")."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def more_or_fewer(have: int, want: int, noun: str) -> str:
    """ "2 more numbers" or "1 fewer number": the change from `have` to `want`."""
    return some(want - have, f"more {noun}") if have < want else some(have - want, f"fewer {noun}")


def without_punctuation(text: str) -> str:
    """`text` without ASCII punctuation, as the checkers strip it."""
    return text.translate(str.maketrans("", "", string.punctuation))
