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
and is counted by the same `max_model_calls` (drafts, `n_revisions` per later round, one critique per candidate);
the plateau stops do not apply (a search backs off from a dead end instead of stopping).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from reflection_graph.state import ReflectionState, Round

__all__ = ["TreeNode", "after_tree_critique", "frontier", "nodes", "pick", "select"]


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


def select(state: ReflectionState) -> dict[str, Any]:
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


def after_tree_critique(state: ReflectionState) -> Literal["select", "finalize"]:
    """Route after `critique` in a tree search: `finalize` on a stop, else `select` the next node."""
    return "finalize" if state.get("stop_reason") is not None else "select"
