"""The loop's way out of `critique`: the router back to `generate` or on to `finalize`, and the `review` node
that puts a person between the critique and that route (`human_review`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from langgraph.types import interrupt

from reflection_graph.state import ReflectionState, RouteReads

__all__ = ["after_critique", "loop_edges", "review"]


def after_critique(state: RouteReads) -> Literal["generate", "finalize"]:
    """Route after `critique` (or `review`): a set `stop_reason` ends the loop (it reads only that key)."""
    return "finalize" if state.get("stop_reason") is not None else "generate"


def review(state: ReflectionState) -> dict[str, Any]:
    """Pause for a person: resume with `Command(resume={"accept": True})`, `{"feedback": "..."}` or `{}`."""
    if state.get("stop_reason") is not None:
        return {}
    rounds = state.get("trajectory") or []
    decision = interrupt(
        {
            "iteration": state.get("iterations"),
            "candidate": rounds[-1]["candidate"] if rounds else None,
            "critique": rounds[-1]["critique"] if rounds else None,
            "resume_with": {"accept": "bool", "feedback": "str"},
        }
    )
    if not isinstance(decision, Mapping):
        return {}
    if decision.get("accept"):
        return {"stop_reason": "accepted"}
    feedback = decision.get("feedback")
    return {"rg_feedback": str(feedback)} if feedback else {}


def loop_edges(builder: Any, *, human_review: bool) -> None:
    """critique -> (review ->) generate | finalize."""
    if human_review:
        builder.add_node("review", review)
        builder.add_edge("critique", "review")
        builder.add_conditional_edges("review", after_critique, ["generate", "finalize"])
    else:
        builder.add_conditional_edges("critique", after_critique, ["generate", "finalize"])
