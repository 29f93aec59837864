"""A setting's value checked against its `Settings` field, once, when it enters: its type (a flag, an int, a number),
its choices (a `Literal` type's, or a registry's), its bounds, with a hint where a common mistake has one; and the
largest values some settings accept."""

from __future__ import annotations

import math
import typing
from dataclasses import Field
from typing import Any, Literal, get_args

__all__ = ["MAX_DRAFTS", "MAX_ITERATIONS", "MAX_TOKEN_BUDGET", "check_value", "choices"]

MAX_ITERATIONS = 1000
"""The largest `max_iterations` accepted: far above any useful loop, and it keeps the recursion limit finite."""
MAX_DRAFTS = 16
"""The largest `n_drafts` / `n_revisions`: each sample is a full model call plus a critique."""
MAX_TOKEN_BUDGET = 10**12
"""The largest `token_budget`: far above any run, and it keeps the arithmetic exact."""


def choices(annotation: Any) -> tuple[Any, ...]:
    """The allowed values of a `Literal` annotation (also inside `X | None`), else ()."""
    if typing.get_origin(annotation) is Literal:
        return get_args(annotation)
    for arg in get_args(annotation):
        found = choices(arg)
        if found:
            return found
    return ()


def _base_type(annotation: Any) -> Any:
    """`int | None` -> int, `Literal[...]` -> str, else the annotation."""
    if choices(annotation):
        return str
    args = [a for a in get_args(annotation) if a is not type(None)]
    if args and typing.get_origin(annotation) is not Literal:
        return _base_type(args[0])
    return annotation


def check_value(f: Field[Any], value: Any, annotation: Any) -> None:
    """`ValueError` (one line, naming the setting) when `value` does not fit field `f` of type `annotation`."""
    name = f.name
    if value is None:
        if type(None) in get_args(annotation):
            return
        raise ValueError(f"{name} must not be None")
    allowed = tuple(f.metadata["allowed"]()) if f.metadata.get("allowed") else choices(annotation)
    if allowed:
        if not isinstance(value, str) or value not in allowed:
            raise ValueError(f"{name} must be {_one_of(allowed)}, got {value!r}")
        return
    kind = _base_type(annotation)
    if kind is bool:
        if not isinstance(value, bool):
            raise ValueError(f"{name} must be True or False, got {value!r}")
        return
    if kind in (int, float):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        if kind is int:
            ok = ok and float(value).is_integer()
        if not ok or not math.isfinite(float(value)):
            raise ValueError(f"{name} must be a{'n int' if kind is int else ' number'}, got {value!r}")
        low, high = f.metadata.get("min"), f.metadata.get("max")
        hint = {
            "max_iterations": "; use 1 for a single round",
            "score_threshold": "; scores are on a 0-10 scale",
            "patience": "; use None for no plateau stop",
            "n_drafts": f"; at most {MAX_DRAFTS} samples per round",
            "n_revisions": f"; at most {MAX_DRAFTS} samples per round",
            "token_budget": "; use None for no token budget",
            "time_budget_s": "; use None for no time budget",
        }.get(name, "")
        if low is not None and high is not None and name == "score_threshold" and not low <= value <= high:
            raise ValueError(f"{name} must be between {low:g} and {high:g}, got {value!r}{hint}")
        if low is not None and value < low:
            raise ValueError(f"{name} must be >= {low:g}, got {value!r}{hint}")
        if high is not None and value > high:
            raise ValueError(f"{name} must be <= {high:g}, got {value!r}{hint}")


def _one_of(allowed: tuple[Any, ...]) -> str:
    """'a' or 'b'; one of 'a', 'b' or 'c'."""
    quoted = [repr(a) for a in allowed]
    listed = quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"
    return listed if len(quoted) <= 2 else f"one of {listed}"
