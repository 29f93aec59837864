"""`PairwiseCritic` with fake judges: both orders asked, position bias cancelled, scores worked out by hand."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from reflection_graph.critics import CritiqueRequest, PairwiseCritic
from reflection_graph.critique import Critique
from tests.fakes import FakeCriticModel, LogprobModel, critique


def judge_by(chooser: Callable[[str, str], str]) -> LogprobModel:
    """A judge that answers "A" or "B" by `chooser(answer_a, answer_b)`, at temperature 0.7 until the critic
    lowers it; records every prompt and call option."""

    def written(prompt: str) -> str:
        a = prompt.split("Answer A:\n", 1)[1].split("\n\nAnswer B:", 1)[0]
        b = prompt.split("Answer B:\n", 1)[1].split("\n\nWhich answer", 1)[0]
        return chooser(a, b)

    return LogprobModel(written=written, temperature=0.7)


def temperatures(judge: LogprobModel) -> list[Any]:
    return [options.get("temperature") for _, options in judge.calls]


def _request(
    candidate: str, earlier: str = "earlier answer", score: float = 6.0, **kw: Any
) -> CritiqueRequest:
    history = ({"candidate": earlier, "score": score, "feedback": ""},)
    return CritiqueRequest(task="Write a greeting.", candidate=candidate, history=history, **kw)


def test_both_orders_are_asked_and_a_consistent_winner_moves_the_score_towards_ten() -> None:
    judge = judge_by(lambda a, b: "A" if "warm" in a else "B")
    result = PairwiseCritic(judge).critique(_request("a warm hello"))
    # won both orders: p = 1, score = 6 + (1 - 0.5) * 2 * (10 - 6) = 10
    assert result.score == pytest.approx(10.0) and not result.issues
    assert len(judge.prompts) == 2
    assert "Answer A:\na warm hello" in judge.prompts[0] and "Answer B:\nearlier answer" in judge.prompts[0]
    assert "Answer A:\nearlier answer" in judge.prompts[1] and "Answer B:\na warm hello" in judge.prompts[1]
    assert temperatures(judge) == [0.0, 0.0]


def test_a_judge_that_always_says_a_gives_a_tie_not_a_verdict() -> None:
    result = PairwiseCritic(judge_by(lambda a, b: "A")).critique(_request("anything"))
    assert result.score == pytest.approx(6.0)  # p = 0.5: level with the earlier answer (ties go to the later)
    assert not result.is_acceptable


def test_a_consistent_loser_moves_towards_zero_and_gets_an_issue() -> None:
    judge = judge_by(lambda a, b: "B" if "cold" in a else "A")
    result = asyncio.run(PairwiseCritic(judge).acritique(_request("a cold hello", score=4.0)))
    assert result.score == pytest.approx(0.0) and result.issues  # 4 + (0 - 0.5) * 2 * 4 = 0


def test_the_threshold_decides_acceptance_and_the_best_earlier_answer_is_the_reference() -> None:
    judge = judge_by(lambda a, b: "A" if "new" in a else "B")
    history = (
        {"candidate": "best so far", "score": 8.0, "feedback": ""},
        {"candidate": "weaker", "score": 3.0, "feedback": ""},
    )
    request = CritiqueRequest(task="t", candidate="new one", history=history, score_threshold=9.0)
    result = PairwiseCritic(judge).critique(request)
    assert "best so far" in judge.prompts[0]  # compared with the 8.0 answer, not the last one
    assert result.score == pytest.approx(10.0) and result.is_acceptable


def test_the_first_candidate_goes_to_the_first_critic() -> None:
    first_model = FakeCriticModel(critiques=[critique(score=7, ok=True)])
    from reflection_graph.critics import LLMCritic

    judge = judge_by(lambda a, b: "A")
    result = PairwiseCritic(judge, first=LLMCritic(first_model)).critique(
        CritiqueRequest(task="t", candidate="c")
    )
    assert isinstance(result, Critique) and result.score == 7 and not judge.prompts


def test_an_unreadable_reply_counts_as_no_preference_and_bad_arguments_are_refused() -> None:
    result = PairwiseCritic(judge_by(lambda a, b: "hmm")).critique(_request("x", score=5.0))
    assert result.score == pytest.approx(5.0)
    with pytest.raises(TypeError, match="chat model"):
        PairwiseCritic("judge")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="first"):
        PairwiseCritic(judge_by(lambda a, b: "A"), first="llm")  # type: ignore[arg-type]
