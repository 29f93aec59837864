"""Typed state of the reflection graph: a narrow input, a narrow output, and the internal overall state.

A host graph only ever sees `InputState` going in and `OutputState` coming out. Internal keys are prefixed with
`rg_` so they cannot collide with a host's keys (a host's `messages` or `remaining_steps` never enter this graph).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypedDict

from typing_extensions import NotRequired, Required

from reflection_graph._runtime import RoleUsage

__all__ = [
    "CritiqueReads",
    "GenerateReads",
    "InputState",
    "Job",
    "OutputState",
    "Pending",
    "ReflectionState",
    "Round",
    "RouteReads",
    "StopReason",
    "UsageReport",
    "append_rounds",
]

StopReason = Literal["accepted", "max_iterations", "plateau", "not_triggered", "budget", "error"]
Job = Literal["draft", "revise", "glean"]
"""What `generate` did for a round: drafted, revised the previous round's candidate, or took the given one."""
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
    job: NotRequired[Job]
    echo: NotRequired[bool]
    """The candidate echoes a prompt, a system message or a critique (never selected while another exists)."""
    cut: NotRequired[bool]
    """The candidate's reply did not finish: cut by its reply limit (`max_tokens`), or stopped in a loop (the
    embedded model's `stop_repetition`). Never accepted, never selected over a whole one."""
    placeholder: NotRequired[bool]
    """The candidate brought in a template placeholder (`[Your Name]`) that the task, its context and the answer
    it revised did not hold; it ranks below every candidate without one."""
    samples: NotRequired[list[dict[str, Any]]]
    """With `n_drafts`/`n_revisions` > 1: every candidate sampled this round, with its score and critique."""
    tactic: NotRequired[str]
    """What made a revision round's candidate (`reflection_graph.strategies.Tactic`): `revise`, `rule`,
    `sampled_revision` or `fresh_draft`."""
    repeated: NotRequired[list[str]]
    """The tactics whose reply returned the revised candidate unchanged before `tactic` made this one: those
    replies were not judged and made no round."""


def append_rounds(left: list[Round] | None, right: list[Round] | None) -> list[Round]:
    """Reducer: append this step's rounds to the trajectory."""
    return [*(left or []), *(right or [])]


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
        stop_reason: `accepted | max_iterations | plateau | not_triggered | budget | error`.
        error: what went wrong when `stop_reason == "error"`; with `budget`, why the budget refused a call (and
            any failure of the same step); else None.
        usage: tokens, calls and seconds per role and in total.
    """

    candidate: str
    critique: dict[str, Any] | None
    trajectory: Annotated[list[Round], append_rounds]
    iterations: int
    stop_reason: StopReason | None
    error: str | None
    usage: UsageReport


class Pending(TypedDict):
    """The candidates `generate` made for round `iteration`, waiting for `critique`."""

    iteration: int
    job: Job
    samples: list[dict[str, Any]]
    """Each: `candidate`, `usage` (of the call that made it), `echo` and `placeholder`, `cut` (the reply's
    `finish_reason`: "length" or "repetition") when it did not finish, and for a revision `tactic` and
    `repeated` (see `Round`)."""


class ReflectionState(InputState, OutputState, total=False):
    """The overall state; `rg_*` keys are internal and never leave the graph (a strategy may keep more of them,
    declared in its own module: `Strategy.state`).

    `candidate` is the given candidate going in and the answer coming out; the candidates of a round live in
    `rg_pending` and, once judged, in `trajectory`.
    """

    rg_pending: Pending
    rg_feedback: str | None
    """A reviewer's words (human review), added to the critique the next revision sees."""
    rg_spent: UsageReport
    """Usage of a step that ended the run with an error before any round could record it."""
    rg_elapsed: float
    """Seconds of the run's steps so far (written only under a `time_budget_s`)."""


class GenerateReads(TypedDict, total=False):
    """The keys `generate` reads (LangGraph hands a node only the channels of its input schema), besides the
    strategy's own keys (`Strategy.state`), which the graph adds."""

    task: str
    candidate: str
    context: str
    trajectory: Annotated[list[Round], append_rounds]
    iterations: int
    stop_reason: StopReason | None
    rg_feedback: str | None
    rg_elapsed: float


class CritiqueReads(TypedDict, total=False):
    """The keys `critique` reads."""

    task: str
    context: str
    trajectory: Annotated[list[Round], append_rounds]
    iterations: int
    stop_reason: StopReason | None
    rg_pending: Pending
    rg_elapsed: float


class RouteReads(TypedDict, total=False):
    """The one key the router after `critique` reads."""

    stop_reason: StopReason | None
