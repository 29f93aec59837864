"""Typed state of the reflection graph: a narrow input, a narrow output, and the internal overall state.

A host graph only ever sees `InputState` going in and `OutputState` coming out. Internal keys are prefixed with
`rg_` so they cannot collide with a host's keys (a host's `messages` or `remaining_steps` never enter this graph).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypedDict

from typing_extensions import NotRequired, Required

from reflection_graph._usage import RoleUsage, add_role_usage

__all__ = [
    "InputState",
    "OutputState",
    "ReflectionState",
    "Round",
    "StopReason",
    "UsageReport",
]

StopReason = Literal["accepted", "max_iterations", "plateau", "not_triggered", "error"]
UsageReport = dict[str, RoleUsage]
"""Usage keyed by role: `generate`, `critique`, `revise` and `total`."""


class Round(TypedDict):
    """One trajectory entry: a candidate and its critique."""

    iteration: int
    candidate: str
    critique: dict[str, Any] | None
    score: float | None
    accepted: bool
    diff: str
    usage: UsageReport
    samples: NotRequired[list[dict[str, Any]]]
    """With `n_drafts`/`n_revisions` > 1: every candidate sampled this round, with its score and critique."""


def _append_rounds(left: list[Round] | None, right: list[Round] | None) -> list[Round]:
    """Reducer: append this step's rounds to the trajectory."""
    return [*(left or []), *(right or [])]


def _add_usage(left: UsageReport | None, right: UsageReport | None) -> UsageReport:
    """Reducer: sum usage per role (and the `total`)."""
    merged: UsageReport = dict(left or {})
    for role, usage in (right or {}).items():
        merged[role] = add_role_usage(merged.get(role), usage)
    return merged


class InputState(TypedDict, total=False):
    """What the graph takes.

    Attributes:
        task: what to produce (required, non-empty).
        candidate: an existing output to glean (critique and improve) instead of drafting one.
        context: extra material for every role (source text, constraints).
    """

    task: Required[str]
    candidate: NotRequired[str]
    context: NotRequired[str]


class OutputState(TypedDict, total=False):
    """What the graph returns.

    Attributes:
        candidate: the final answer (best-scoring or last round, per `select`).
        critique: the critique of that answer, as a dict (`Critique.model_dump()`).
        trajectory: one entry per round.
        iterations: number of critique rounds run.
        stop_reason: `accepted | max_iterations | plateau | not_triggered | error`.
        error: what went wrong when `stop_reason == "error"`, else None.
        usage: tokens, calls and seconds per role and in total.
    """

    candidate: str
    critique: dict[str, Any] | None
    trajectory: Annotated[list[Round], _append_rounds]
    iterations: int
    stop_reason: StopReason | None
    error: str | None
    usage: Annotated[UsageReport, _add_usage]


class ReflectionState(InputState, OutputState, total=False):
    """The overall state; `rg_*` keys are internal and never leave the graph."""

    rg_pending: list[dict[str, Any]]
    rg_revisions: int
    rg_expanded: list[str]
    """The `tree` strategy: the candidates expanded so far, in order (reflection_graph/_tree.py)."""
