"""The gleaning walkthrough: a polite email declining a job offer, drafted, critiqued and revised (up to 3 rounds).

Input: `{"role": "Data Engineer"}` (optionally `"company": "Acme"`). The `brief` node turns it into the task, the
`reflection` subgraph drafts, critiques (`feedback` plus a `needs_improvement` verdict) and revises, and `report`
returns:

- `email`: the final email;
- `rounds`: one entry per round: `round`, `draft`, `feedback`, `needs_improvement`, `score`;
- `stop_reason`, `iterations`, `error`, `usage` as in the reflection graph.

Configuration (Studio's panel, or a run's `context`): the fields of `reflection_graph.Context`; they reach the
reflection subgraph, e.g. `context={"max_iterations": 1}` for a single round.
"""

from __future__ import annotations

from typing import Any, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from typing_extensions import NotRequired, Required

from graphs import studio_model
from reflection_graph import Context, create_reflection_graph
from reflection_graph.state import Round, StopReason, UsageReport

__all__ = [
    "EMAIL_GUIDELINES",
    "EmailInput",
    "EmailOutput",
    "EmailRound",
    "create_email_graph",
    "email_task",
    "graph",
]

EMAIL_GUIDELINES = (
    "A good reply thanks the hiring team for the offer, clearly declines the role named in the task, stays polite "
    "and short (under 150 words) and ends with a sign-off. It needs improvement when any of these is missing."
)


class EmailInput(TypedDict, total=False):
    """What the email graph takes.

    Attributes:
        role: the job title of the offer being declined, e.g. "Data Engineer".
        company: the company that made the offer (optional).
    """

    role: Required[str]
    company: NotRequired[str]


class EmailRound(TypedDict):
    """One round of the walkthrough: the draft and what the critic said about it."""

    round: int
    draft: str
    feedback: str
    needs_improvement: bool
    score: float | None


class EmailOutput(TypedDict, total=False):
    """What the email graph returns."""

    email: str
    rounds: list[EmailRound]
    stop_reason: StopReason | None
    iterations: int
    error: str | None
    usage: UsageReport


class _EmailState(EmailInput, EmailOutput, total=False):
    # the reflection subgraph's input and output keys (plain channels: each run replaces them)
    task: str
    candidate: str | None
    context: str | None
    critique: dict[str, Any] | None
    trajectory: list[Round]


def email_task(role: str, company: str | None = None) -> str:
    """The task text for declining an offer for `role` (at `company`)."""
    where = f" at {company.strip()}" if company and company.strip() else ""
    return (
        f"Write a short, polite email declining a job offer for the {role.strip()} role{where}. "
        "Thank the hiring team, decline clearly, and close warmly."
    )


def brief(state: _EmailState) -> dict[str, Any]:
    """Turn `role`/`company` into the reflection task; clear the previous run's candidate on this thread."""
    role = state.get("role")
    if not isinstance(role, str) or not role.strip():
        raise ValueError(
            "'role' must be a non-empty string naming the job offered, e.g. {'role': 'Data Engineer'}"
        )
    company = state.get("company")
    if company is not None and not isinstance(company, str):
        raise ValueError(f"'company' must be a string, got {type(company).__name__}")
    return {"task": email_task(role, company), "candidate": None, "context": None}


def report(state: _EmailState) -> dict[str, Any]:
    """Shape the reflection output as the walkthrough prints it: each round's feedback and verdict."""
    rounds: list[EmailRound] = [
        {
            "round": r["iteration"],
            "draft": r["candidate"],
            "feedback": str((r["critique"] or {}).get("feedback") or ""),
            "needs_improvement": not r["accepted"],
            "score": r["score"],
        }
        for r in state.get("trajectory") or []
    ]
    return {"email": state.get("candidate") or "", "rounds": rounds}


def create_email_graph(model: Any, *, max_iterations: int = 3) -> CompiledStateGraph[Any, Context, Any, Any]:
    """Build the walkthrough graph: `brief` -> `reflection` (subgraph) -> `report`.

    Args:
        model: the model for every role (a chat model, a model spec string, or a callable).
        max_iterations: the most critique rounds.

    Returns:
        The compiled graph, taking `EmailInput` and returning `EmailOutput`.
    """
    reflection = create_reflection_graph(
        model, max_iterations=max_iterations, critic_guidelines=EMAIL_GUIDELINES, name="reflection"
    )
    builder = StateGraph(
        _EmailState, context_schema=Context, input_schema=EmailInput, output_schema=EmailOutput
    )
    builder.add_node("brief", brief)
    builder.add_node("reflection", reflection)
    builder.add_node("report", report)
    builder.add_edge(START, "brief")
    builder.add_edge("brief", "reflection")
    builder.add_edge("reflection", "report")
    builder.add_edge("report", END)
    return builder.compile(name="email")


graph = create_email_graph(studio_model())
