"""The stop and selection rules (reflection_graph/loop/_rules.py) as properties, with the boundaries spelled
out."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reflection_graph.loop import _rules
from reflection_graph.settings import Settings
from reflection_graph.state import Round

scores = st.floats(min_value=0, max_value=10, allow_nan=False)
whole = st.integers(min_value=0, max_value=10).map(float)


def verdict(
    score: float, issues: list[str] | None = None, passed: int | None = None, total: int | None = None
):
    return {"issues": issues or [], "score": score, "checks_passed": passed, "checks_total": total}


def round_(
    score: float,
    issues: list[str] | None = None,
    *,
    passed: int | None = None,
    total: int | None = None,
    echo: bool = False,
) -> Round:
    critique: dict[str, Any] = verdict(score, issues, passed, total)
    return {
        "echo": echo,
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


@given(st.lists(whole, min_size=1, max_size=10))
def test_best_index_takes_the_highest_key_and_the_later_of_ties(values: list[float]) -> None:
    index = _rules.best_index(values)
    best = max(values)
    assert values[index] == best
    assert all(v < best for v in values[index + 1 :])  # nothing later ties it


@given(st.integers(1, 6), st.integers(1, 6), st.lists(whole, min_size=1, max_size=6), st.booleans())
def test_stop_reason_order(
    max_iterations: int, min_iterations: int, history: list[float], accepted: bool
) -> None:
    min_iterations = min(min_iterations, max_iterations)
    settings = Settings(max_iterations=max_iterations, min_iterations=min_iterations, patience=None)
    trajectory = [round_(s, [f"issue {i}"]) for i, s in enumerate(history[:-1])]
    iteration = len(history)
    stop = _rules.stop_reason(
        settings, trajectory, iteration, verdict(history[-1], [f"new {iteration}"]), accepted
    )
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
    assert _rules.stop_reason(settings, flat, 3, verdict(5.4, ["z"]), False) == "plateau"
    assert (
        _rules.stop_reason(settings, flat, 3, verdict(5.5, ["z"]), False) is None
    )  # a gain of 0.5 is progress
    repeat = [round_(1.0, ["same issue"])]
    assert _rules.stop_reason(settings, repeat, 2, verdict(4.0, ["Same  issue"]), False) == "plateau"
    quiet = Settings(max_iterations=10, patience=None, stop_on_no_new_issues=False)
    assert _rules.stop_reason(quiet, repeat, 2, verdict(4.0, ["same issue"]), False) is None


def test_select_round_best_or_last() -> None:
    rounds = [round_(3.0), round_(8.0), round_(8.0), round_(2.0)]
    assert _rules.select_round(rounds, "best") is rounds[2]
    assert _rules.select_round(rounds, "last") is rounds[3]


# ------------------------------------------------------------------ never worse than no loop (issue 24, item 3)


@given(
    st.integers(2, 8),
    st.lists(whole, min_size=1, max_size=6),
    st.integers(1, 5),
    st.integers(0, 4),
    st.integers(1, 3),
    st.booleans(),
)
def test_a_verifier_reporting_failures_never_stops_on_a_plateau_while_rounds_are_left(
    max_iterations: int, history: list[float], total: int, passed: int, patience: int, repeat: bool
) -> None:
    passed = min(passed, total - 1)  # at least one check still fails
    settings = Settings(max_iterations=max_iterations, patience=patience, min_improvement=5.0)
    issues = ["the same failing test"] if repeat else [f"fails {len(history)}"]
    trajectory = [round_(s, ["the same failing test"], passed=passed, total=total) for s in history[:-1]]
    iteration = len(history)
    stop = _rules.stop_reason(
        settings, trajectory, iteration, verdict(history[-1], issues, passed, total), False
    )
    if iteration < max_iterations:
        assert stop is None  # neither "plateau" (flat scores) nor "no new issues" (the same failures)
    else:
        assert stop == "max_iterations"


def test_the_same_flat_scores_from_a_judge_do_stop_on_a_plateau() -> None:
    settings = Settings(max_iterations=10, patience=1, min_improvement=0.5)
    judged = [round_(4.0, ["x"])]
    assert _rules.stop_reason(settings, judged, 2, verdict(4.0, ["y"]), False) == "plateau"
    passing = [round_(4.0, ["x"], passed=3, total=3)]  # a verifier whose checks all pass: judged by its score
    assert _rules.stop_reason(settings, passing, 2, verdict(4.0, ["y"], 3, 3), False) == "plateau"


candidates = st.lists(
    st.tuples(whole, st.integers(0, 5), st.booleans()),  # judge's score, tests passed (of 5), echo
    min_size=1,
    max_size=8,
)


@given(candidates)
def test_selection_never_returns_fewer_passed_tests_than_another_candidate(
    rows: list[tuple[float, int, bool]],
) -> None:
    rounds = [round_(score, passed=passed, total=5, echo=False) for score, passed, _ in rows]
    chosen = _rules.select_round(rounds, "best")
    most = max(passed for _, passed, _ in rows)
    assert chosen["critique"]["checks_passed"] == most  # a verifier's verdict outranks the judge's score
    tied = [r for r in rounds if r["critique"]["checks_passed"] == most]
    assert chosen["score"] == max(r["score"] for r in tied)  # then the score
    later = rounds[next(i for i, r in enumerate(rounds) if r is chosen) + 1 :]
    assert not any(r["critique"]["checks_passed"] == most and r["score"] == chosen["score"] for r in later)


@given(candidates)
def test_an_echo_is_never_selected_while_another_candidate_exists(
    rows: list[tuple[float, int, bool]],
) -> None:
    rounds = [round_(score, passed=passed, total=5, echo=echo) for score, passed, echo in rows]
    for select in ("best", "last"):
        chosen = _rules.select_round(rounds, select)
        if not all(echo for _, _, echo in rows):
            assert chosen["echo"] is False


TASK = "Write a polite email to the Data Engineer at Acme declining their job offer."
SYSTEM = "You are an experienced writer. Produce exactly what the task asks for, nothing else."


@pytest.mark.parametrize(
    "candidate",
    [
        SYSTEM,  # the system prompt
        TASK + " The following is your task: write the email below.",  # starts with the instruction
        "write a polite email to the data engineer at acme declining their job offer",  # mostly the task
        "Score: 0.485/10. Acceptable: False. Issues: too short",  # a critique
        'Here is my verdict: {"score": 3, "is_acceptable": false}',  # a JSON verdict
    ],
)
def test_echoes_of_a_prompt_a_system_message_or_a_critique(candidate: str) -> None:
    assert _rules.echoes(candidate, [TASK, SYSTEM]) is True


@pytest.mark.parametrize(
    "candidate",
    [
        "Dear Hiring Team at Acme,\n\nThank you for offering me the Data Engineer role. After careful thought I "
        "have decided to decline. I am grateful for your time.\n\nBest regards,\nSam",
        "Hello,\nI must decline the offer; my score on fit: not the issue.",
        "",
    ],
)
def test_real_answers_are_not_echoes(candidate: str) -> None:
    assert _rules.echoes(candidate, [TASK, SYSTEM]) is False


QUOTES = (
    "Include quotes within quotes within quotes, at least 3 levels deep, alternating between double quotes and "
    "single quotes."
)


def test_a_review_copied_back_with_its_punctuation_changed_is_an_echo() -> None:
    """The revising loop's answer to IFBench key 122 (Qwen2.5-Coder-1.5B, bench/results/tactics-ifbench-*.jsonl):
    the review it was given, its "format:quotes" written "format: quotes", the revise prompt's closing line, then
    the review again in a LaTeX box. Its opening is the request's opening word for word but for one space."""
    from reflection_graph.prompts import revise_messages

    critique = {
        "issues": [f"format:quotes: not followed: {QUOTES}"],
        "suggestions": [f"Follow this instruction exactly: {QUOTES}"],
        "feedback": f"1 of 1 instructions not followed: format:quotes: not followed: {QUOTES}",
    }
    task = f"What is the female equivalent of chivalry? {QUOTES}"
    request = revise_messages(
        task, None, "Respect.", critique, [], focus="general", preserve_correct=True, template=None, chat=True
    )[-1].content
    assert isinstance(request, str) and request.startswith("A review of your answer:\n- format:quotes:")
    reply = (
        f"A review of your answer:\n- format: quotes: not followed: {QUOTES}\n"
        f"- Follow this instruction exactly: {QUOTES}\n"
        f"- 1 of 1 instructions not followed: format:quotes: not followed: {QUOTES}\n\n"
        "Keep every part of the previous answer that the critique did not object to unchanged.\n"
        f"\\[\n\\boxed{{\\text{{A review of your answer: format: quotes: not followed: {QUOTES}}}}}\n\\]"
    )
    assert _rules.echoes(reply, [task, request]) is True
    # the same words in an answer that does not open on them are no echo
    answer = f'She said: "He told me, \'They wrote "a review of your answer" on it.\'" {reply[25:120]}'
    assert _rules.echoes(answer, [task, request]) is False


@pytest.mark.parametrize(
    ("candidate", "prompt"),
    [
        # the opening's whole words differ ("report" is not "reports"), though the characters nearly match
        (
            "Write a short report, then stop here and wait.",
            "Write a short reports summary of the meeting notes.",
        ),
        # an opening of fewer than 5 whole words is matched by its characters only
        (
            "https://example.com/a/b, and more",
            "https://example.com/a/b/c/d/e/f/g/h/i/j/k means what, in five words?",
        ),
    ],
)
def test_openings_that_differ_in_whole_words_are_not_echoes(candidate: str, prompt: str) -> None:
    assert _rules.echoes(candidate, [prompt]) is False


def test_an_answer_restating_a_short_question_is_not_an_echo() -> None:
    assert _rules.echoes("What is 2+2? 4", ["What is 2+2?"]) is False
    assert _rules.echoes("What is the capital of France? Paris.", ["What is the capital of France?"]) is False


@given(st.lists(st.tuples(st.integers(0, 3), whole), min_size=1, max_size=8))
def test_best_sample_takes_the_best_rank_and_the_earlier_of_ties(keys: list[tuple[int, float]]) -> None:
    """Within a round, ties go to the earlier sample (sample 0 is the greedy call), across rounds to the later."""
    samples = [{"score": score, "critique": verdict(score, passed=passed, total=3)} for passed, score in keys]
    index = _rules.best_sample(samples)
    best = _rules.rank(samples[index])
    assert all(_rules.rank(s) <= best for s in samples)
    assert all(_rules.rank(s) < best for s in samples[:index])  # nothing earlier ties it
