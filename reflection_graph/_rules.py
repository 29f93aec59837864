"""The loop's stop and selection rules as pure functions (property-tested in tests/test_rules.py)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from reflection_graph.settings import Settings
from reflection_graph.state import Round, StopReason

__all__ = ["accepts", "best_index", "no_new_issues", "plateau", "select_round", "stop_reason"]


def accepts(score: float, is_acceptable: bool, threshold: float | None) -> bool:
    """With a threshold the score decides (`score >= threshold`); without one the critic's verdict decides."""
    return score >= threshold if threshold is not None else is_acceptable


def plateau(scores: Sequence[float], patience: int | None, min_improvement: float) -> bool:
    """True when the best of the last `patience` scores beats the best before them by less than `min_improvement`."""
    if patience is None or len(scores) <= patience:
        return False
    before = max(scores[:-patience])
    recent = max(scores[-patience:])
    return recent < before + min_improvement


def _norm(issue: str) -> str:
    return " ".join(issue.casefold().split())


def no_new_issues(earlier: Iterable[str], current: Iterable[str]) -> bool:
    """True when the current round raises issues and every one of them was raised before."""
    now = {_norm(i) for i in current}
    return bool(now) and now <= {_norm(i) for i in earlier}


def stop_reason(
    settings: Settings,
    trajectory: Sequence[Round],
    iteration: int,
    score: float,
    accepted: bool,
    issues: list[str],
) -> StopReason | None:
    """Why the loop stops after critique number `iteration`, or None to revise again.

    Order: `min_iterations` first (nothing stops before it), then accept, then the round limit, then plateau
    (score, then no new issues). `trajectory` holds the earlier rounds.
    """
    if iteration < settings.min_iterations:
        return None
    if accepted:
        return "accepted"
    if settings.strategy == "self_refine":
        return None  # one refine follows the single critique, then finalize
    if iteration >= settings.max_iterations:
        return "max_iterations"
    scores = [float(r["score"]) for r in trajectory if r["score"] is not None] + [score]
    if plateau(scores, settings.patience, settings.min_improvement):
        return "plateau"
    if settings.stop_on_no_new_issues and trajectory:
        earlier = [i for r in trajectory for i in (r["critique"] or {}).get("issues", [])]
        if no_new_issues(earlier, issues):
            return "plateau"
    return None


def best_index(scores: Sequence[float | None]) -> int:
    """The index of the highest score; ties go to the later one; a missing score counts as 0."""
    return max(range(len(scores)), key=lambda i: (scores[i] or 0.0, i))


def select_round(trajectory: Sequence[Round], select: str) -> Round:
    """The round whose candidate the graph returns: the best-scoring (`best`) or the last (`last`)."""
    if select == "best":
        return trajectory[best_index([r["score"] for r in trajectory])]
    return trajectory[-1]


def bounded(items: Sequence[Any], window: int) -> list[Any]:
    """The last `window` items (none for 0): prompts never grow with the round count."""
    return list(items[-window:]) if window > 0 else []
