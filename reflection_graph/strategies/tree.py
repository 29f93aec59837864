"""The `tree` strategy: a search over candidates (LATS-style), not a line of revisions.

Every candidate judged so far is a node of the tree: the `n_drafts` first drafts are its roots, and each
expansion adds `n_revisions` children, revisions of one node that see its critique (for code: its failing tests
and their output). After each critique, `select` picks the next node to expand from the *frontier*:

- nodes not expanded yet, whose score is above 0 (a candidate with no code or a syntax error is a dead end) and
  not below its parent's (a revision that made things worse is a dead end: it is dropped);
- the highest score first (for a test critic: the share of visible tests passed); ties go to the earlier node;
- a candidate already in the tree (the same text again) is not a new node.

When the frontier is empty, the best node not expanded yet is taken (a dropped one), else the best node again.
The search stops when a candidate is accepted (for tests: all pass) or after `max_iterations` critique rounds.
It runs on the loop's own `generate`, `critique` and `finalize` nodes, so it makes the same calls as the loop
and is counted by the same `max_model_calls` (drafts, `n_revisions` per later round, one critique per candidate).
It forces the plateau stops off (`patience=None`, `stop_on_no_new_issues=False`: a search backs off from a dead
end instead of stopping), also against a run's `Context`, and refuses `human_review`. Its own state keys
(`TreeState`) never leave the graph.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal, TypedDict

from reflection_graph.state import Round, RouteReads, append_rounds
from reflection_graph.strategies.base import Strategy

__all__ = ["Tree", "TreeNode", "TreeState", "after_tree_critique", "frontier", "nodes", "pick", "select"]


class TreeState(TypedDict, total=False):
    """The keys the tree search keeps in the graph's state (internal: `rg_`, never in the output)."""

    trajectory: Annotated[list[Round], append_rounds]
    rg_expanded: list[str]
    """The candidates expanded so far, in order."""
    rg_target: dict[str, Any] | None
    """The candidate (and its critique) the next revision expands."""


@dataclass(frozen=True)
class TreeNode:
    """One candidate of the tree: its text, score and critique, where it was made and its parent's score."""

    candidate: str
    score: float
    critique: Mapping[str, Any] | None
    round: int
    index: int
    parent_score: float | None


def _samples(record: Round) -> list[Mapping[str, Any]]:
    samples: list[Mapping[str, Any]] = list(record.get("samples") or [])
    return samples or [record]


def nodes(trajectory: Sequence[Round], expanded: Sequence[str]) -> list[TreeNode]:
    """Every distinct candidate of the trajectory, in order; round r >= 1 (from 0) holds `expanded[r-1]`'s children."""
    seen: dict[str, float] = {}
    found: list[TreeNode] = []
    for r, record in enumerate(trajectory):
        parent = expanded[r - 1] if 0 < r <= len(expanded) else None
        parent_score = seen.get(parent) if parent is not None else None
        for i, sample in enumerate(_samples(record)):
            text = str(sample.get("candidate") or "")
            if text in seen:
                continue
            score = float(sample.get("score") or 0.0)
            seen[text] = score
            found.append(TreeNode(text, score, sample.get("critique"), r, i, parent_score))
    return found


def frontier(tree: Sequence[TreeNode], expanded: Sequence[str]) -> list[TreeNode]:
    """The nodes worth expanding: not expanded, score above 0 and not below the parent's."""
    done = set(expanded)
    return [
        n
        for n in tree
        if n.candidate not in done and n.score > 0 and (n.parent_score is None or n.score >= n.parent_score)
    ]


def pick(tree: Sequence[TreeNode], expanded: Sequence[str]) -> TreeNode | None:
    """The node to expand next: the best of the frontier (ties: the earlier), else the best unexpanded node,
    else the best node. None for an empty tree."""
    done = set(expanded)
    for pool in (frontier(tree, expanded), [n for n in tree if n.candidate not in done], list(tree)):
        if pool:
            return max(pool, key=lambda n: (n.score, -n.round, -n.index))
    return None


def select(state: TreeState) -> dict[str, Any]:
    """Graph node: the most promising node becomes `rg_target`, the candidate `generate` revises next."""
    expanded = list(state.get("rg_expanded") or [])
    chosen = pick(nodes(list(state.get("trajectory") or []), expanded), expanded)
    if chosen is None:
        return {}
    critique = dict(chosen.critique) if chosen.critique is not None else None
    return {
        "rg_target": {"candidate": chosen.candidate, "critique": critique},
        "rg_expanded": [*expanded, chosen.candidate],
    }


def after_tree_critique(state: RouteReads) -> Literal["select", "finalize"]:
    """Route after `critique` in a tree search: `finalize` on a stop, else `select` the next node."""
    return "finalize" if state.get("stop_reason") is not None else "select"


class Tree(Strategy):
    name = "tree"
    description = (
        "expands the most promising candidate so far and drops dead ends, until accepted or the limit"
    )
    forces = {"patience": None, "stop_on_no_new_issues": False}
    state = TreeState

    def check(self, *, human_review: bool) -> None:
        if human_review:
            raise ValueError(
                "strategy='tree' does not take human_review; use strategy='loop' to review rounds"
            )

    def wire(self, builder: Any, *, human_review: bool) -> None:
        """critique -> select -> generate, or critique -> finalize on a stop."""
        builder.add_node("select", select, input_schema=TreeState)
        builder.add_conditional_edges("critique", after_tree_critique, ["select", "finalize"])
        builder.add_edge("select", "generate")

    def steps_per_round(self, *, human_review: bool) -> int:
        return 3  # generate, critique, select

    def revise_from(self, state: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
        """The node `select` picked (`rg_target`), else the last round's candidate."""
        target = state.get("rg_target")
        if target:
            return target["candidate"], dict(target.get("critique") or {})
        return super().revise_from(state)
