"""The stop and selection rules (reflection_graph/_rules.py) as properties, with the boundaries spelled out."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from reflection_graph import _rules
from reflection_graph.settings import Settings
from reflection_graph.state import Round

scores = st.floats(min_value=0, max_value=10, allow_nan=False)
whole = st.integers(min_value=0, max_value=10).map(float)


def round_(score: float, issues: list[str] | None = None) -> Round:
    critique: dict[str, Any] = {"issues": issues or [], "score": score}
    return {
        "iteration": 1,
        "candidate": "c",
        "critique": critique,
        "score": score,
        "accepted": False,
        "diff": "",
        "usage": {},
    }


@given(whole, st.booleans())
def test_a_score_exactly_at_the_threshold_accepts(score: float, verdict: bool) -> None:
    assert _rules.accepts(score, verdict, threshold=score) is True  # >=, the common case with whole scores
    if score > 0:
        assert (
            _rules.accepts(score - 0.5, verdict, threshold=score) is False
        )  # the score decides, not the verdict


@given(scores, st.booleans())
def test_without_threshold_the_verdict_decides(score: float, verdict: bool) -> None:
    assert _rules.accepts(score, verdict, threshold=None) is verdict


@given(st.lists(scores, min_size=1, max_size=8), st.integers(1, 4), st.floats(0, 3))
def test_plateau_means_recent_best_gained_less_than_min_improvement(
    history: list[float], patience: int, gain: float
) -> None:
    result = _rules.plateau(history, patience, gain)
    if len(history) <= patience:
        assert result is False
    else:
        assert result is (max(history[-patience:]) < max(history[:-patience]) + gain)


def test_plateau_boundary_a_gain_of_exactly_min_improvement_is_progress() -> None:
    assert _rules.plateau([5.0, 5.5], patience=1, min_improvement=0.5) is False  # `<`, not `<=`
    assert _rules.plateau([5.0, 5.4], patience=1, min_improvement=0.5) is True
    assert _rules.plateau([5.0, 9.0], patience=None, min_improvement=0.5) is False


@given(
    st.lists(st.sampled_from(["a", "B", " c ", "d"]), max_size=4), st.lists(st.sampled_from(["a", "b", "C"]))
)
def test_no_new_issues_is_a_subset_test_ignoring_case_and_spaces(
    earlier: list[str], current: list[str]
) -> None:
    norm = {" ".join(i.casefold().split()) for i in earlier}
    expected = bool(current) and {" ".join(i.casefold().split()) for i in current} <= norm
    assert _rules.no_new_issues(earlier, current) is expected


@given(st.lists(st.one_of(st.none(), whole), min_size=1, max_size=10))
def test_best_index_takes_the_highest_score_and_the_later_of_ties(values: list[float | None]) -> None:
    index = _rules.best_index(values)
    best = max(v or 0.0 for v in values)
    assert (values[index] or 0.0) == best
    assert all((v or 0.0) < best for v in values[index + 1 :])  # nothing later ties it


@given(st.integers(1, 6), st.integers(1, 6), st.lists(whole, min_size=1, max_size=6), st.booleans())
def test_stop_reason_order(
    max_iterations: int, min_iterations: int, history: list[float], accepted: bool
) -> None:
    min_iterations = min(min_iterations, max_iterations)
    settings = Settings(max_iterations=max_iterations, min_iterations=min_iterations, patience=None)
    trajectory = [round_(s, [f"issue {i}"]) for i, s in enumerate(history[:-1])]
    iteration = len(history)
    stop = _rules.stop_reason(settings, trajectory, iteration, history[-1], accepted, [f"new {iteration}"])
    if iteration < min_iterations:
        assert stop is None
    elif accepted:
        assert stop == "accepted"
    elif iteration >= max_iterations:
        assert stop == "max_iterations"
    else:
        assert stop is None


def test_stop_reason_plateau_and_no_new_issues() -> None:
    settings = Settings(max_iterations=10, patience=2, min_improvement=0.5)
    flat = [round_(5.0, ["x"]), round_(5.2, ["y"])]
    assert _rules.stop_reason(settings, flat, 3, 5.4, False, ["z"]) == "plateau"
    assert _rules.stop_reason(settings, flat, 3, 5.5, False, ["z"]) is None  # gain of exactly 0.5 is progress
    repeat = [round_(1.0, ["same issue"])]
    assert _rules.stop_reason(settings, repeat, 2, 4.0, False, ["Same  issue"]) == "plateau"
    quiet = Settings(max_iterations=10, patience=None, stop_on_no_new_issues=False)
    assert _rules.stop_reason(quiet, repeat, 2, 4.0, False, ["same issue"]) is None


def test_select_round_best_or_last() -> None:
    rounds = [round_(3.0), round_(8.0), round_(8.0), round_(2.0)]
    assert _rules.select_round(rounds, "best") is rounds[2]
    assert _rules.select_round(rounds, "last") is rounds[3]
