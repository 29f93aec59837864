"""The graph's input checks, shared by the `generate` node and the runners (batch, eval): a bad input is refused
before any model call, with one line that says what to pass instead."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["MAX_TASK_CHARS", "validate_input"]

MAX_TASK_CHARS = 200_000


def validate_input(state: Mapping[str, Any]) -> None:
    """Reject a bad input before any model call, saying what to pass instead."""
    task = state.get("task")
    if not isinstance(task, str):
        raise ValueError(f"'task' must be a string describing what to produce, got {type(task).__name__}")
    if not task.strip():
        raise ValueError(
            "'task' is empty: give the graph a task such as {'task': 'Write a haiku about rain'}"
        )
    if len(task) > MAX_TASK_CHARS:
        raise ValueError(
            f"'task' is {len(task):,} characters, over the {MAX_TASK_CHARS:,} limit: put long material in "
            "'context' or shorten it"
        )
    for key, hint in (("candidate", "serialize it first, e.g. json.dumps(value)"), ("context", "")):
        value = state.get(key)
        if value is not None and not isinstance(value, str):
            raise ValueError(
                f"'{key}' must be a string, got {type(value).__name__}{'; ' + hint if hint else ''}"
            )
    for key in ("task", "candidate", "context"):  # text no model or HTTP client can send: a lone surrogate
        try:
            (state.get(key) or "").encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ValueError(
                f"'{key}' has a character with no UTF-8 form at position {exc.start} "
                f"(U+{ord(exc.object[exc.start]):04X}, a lone surrogate); pass valid Unicode text"
            ) from None
