"""`JudgeCritic` with a fake model: the log-odds and preference arithmetic, the score and acceptance rules, what
each call receives, the written critique's parse failures, and bad input."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable
from typing import Any

import pytest

from reflection_graph.critics import CritiqueRequest, JudgeCritic
from reflection_graph.critics.judge import FIRST, NO_FAULT, WrittenCritique, log_odds, preference
from reflection_graph.critics.pairwise import moved_score
from tests.fakes import LogprobModel, answer_of, answers_of

TASK = "What is the capital of France?"
GOOD, BAD = "The capital of France is Paris.", "The capital of France is Berlin."


_answer, _answers = answer_of, answers_of


def _model(
    yes: Callable[[str], float] = lambda answer: 0.9 if "Paris" in answer else 0.7,
    better: Callable[[str, str], float] = lambda a, b: 0.8 if "Paris" in a else 0.2 if "Paris" in b else 0.5,
    written: Callable[[str], str] | None = None,
    fault: Callable[[str, str], float] = lambda answer, issue: 0.9 if "Berlin" in answer else 0.1,
    **kw: Any,
) -> LogprobModel:
    def faults(prompt: str) -> str:
        if "Berlin" in _answer(prompt):
            return '{"faults": [{"issue": "Berlin is the capital of Germany.", "fix": "Say Paris."}]}'
        return '{"faults": []}'

    return LogprobModel(yes=yes, better=better, written=written or faults, fault=fault, **kw)


def _p_yes(p: float) -> float:
    """The fake's P(Yes) as the judge reads it: "Yes" at 0.8 p and " yes" at 0.1 p add up against "No" at 0.8 (1 - p)."""
    return 0.9 * p / (0.9 * p + 0.8 * (1 - p))


def _request(candidate: str, earlier: str | None = None, score: float = 6.0) -> CritiqueRequest:
    history = ({"candidate": earlier, "score": score, "feedback": ""},) if earlier else ()
    return CritiqueRequest(task=TASK, candidate=candidate, history=history)


# -- arithmetic ------------------------------------------------------------------------------------------------
def test_log_odds_sums_spellings_and_bounds_a_missing_word_by_the_smallest_listed() -> None:
    top = {"Yes": math.log(0.6), " yes": math.log(0.1), "No": math.log(0.2), "The": math.log(0.05)}
    assert log_odds(top, "yes", "no") == pytest.approx(math.log(0.7 / 0.2))
    assert log_odds({"Yes": math.log(0.6), "The": math.log(0.05)}, "yes", "no") == pytest.approx(
        math.log(0.6 / 0.05)
    )
    assert log_odds({"The": -0.1}, "yes", "no") == 0.0  # neither listed: no evidence either way
    with pytest.raises(ValueError, match="must be a number <= 0"):
        log_odds({"Yes": 0.5}, "yes", "no")


def test_preference_cancels_a_position_bias() -> None:
    # A judge that adds +2 to A whatever it sees: the candidate's own log-odds is +1 (as A: 1 + 2; as B: 1 - 2).
    assert preference(1 + 2, 1 - 2) == pytest.approx(1 / (1 + math.exp(-1)))
    # Pure bias, no opinion: an even chance.
    assert preference(2, -2) == pytest.approx(0.5)
    assert preference(-800, -800) == pytest.approx(0.0)  # no overflow at the extremes
    assert preference(800, 800) == pytest.approx(1.0)


def test_moved_score_moves_towards_the_winner_and_stays_on_the_scale() -> None:
    assert moved_score(6.0, 0.5) == 6.0
    assert moved_score(6.0, 1.0) == 10.0 and moved_score(6.0, 0.0) == 0.0
    assert moved_score(6.0, 0.75) == pytest.approx(8.0) and moved_score(6.0, 0.25) == pytest.approx(3.0)
    with pytest.raises(ValueError, match="probability"):
        moved_score(6.0, 1.5)


# -- the critic ------------------------------------------------------------------------------------------------
def test_a_first_candidate_scores_its_p_yes_and_is_never_accepted_alone() -> None:
    model = _model()
    critic = JudgeCritic(
        model, write=True
    )  # a critique written whatever the verdict (the default: when wrong)
    good = critic.critique(_request(GOOD))
    assert good.score == pytest.approx(10 * _p_yes(0.9))
    assert (
        not good.is_acceptable
    )  # this judge compares; alone, its P(Yes) barely moves between right and wrong
    assert good.issues == [] and good.feedback == f"{FIRST} {NO_FAULT}"  # nothing invented to say
    assert model.kinds() == ["verdict", "written"]  # no fault written, none to check
    model.calls.clear()
    bad = critic.critique(_request(BAD))
    assert bad.score == pytest.approx(10 * _p_yes(0.7)) and bad.score < good.score
    assert not bad.is_acceptable
    assert bad.issues == ["Berlin is the capital of Germany."] and bad.suggestions == ["Say Paris."]
    assert "Berlin is the capital of Germany." in bad.feedback
    assert model.kinds() == ["verdict", "written", "has", "free"]  # the written fault, checked both ways


def test_even_a_certain_yes_does_not_accept_a_first_candidate() -> None:
    result = JudgeCritic(_model(yes=lambda answer: 0.999)).critique(_request(GOOD))
    assert not result.is_acceptable and result.score > 9.9


def test_a_revision_not_judged_worse_still_needs_p_yes_above_one_half() -> None:
    critic = JudgeCritic(_model(yes=lambda answer: 0.4))
    result = critic.critique(_request(GOOD, earlier=BAD))
    assert not result.is_acceptable and any("re-check" in issue for issue in result.issues)


def test_comparison_in_both_orders_decides_against_the_earlier_candidate() -> None:
    model = _model(bias=0.8)  # a bias towards A smaller than the judge's preference: both orders agree
    critic = JudgeCritic(model)
    better = critic.critique(_request(GOOD, earlier=BAD, score=6.0))
    pairs = [_answers(p) for p, _ in model.calls if "A or B" in p]
    assert pairs == [(GOOD, BAD), (BAD, GOOD)]  # the candidate as A, then as B
    # the judge's own 0.8 for the better answer, its +0.8 bias towards A cancelled
    assert better.score == pytest.approx(moved_score(6.0, 0.8))
    assert better.is_acceptable
    assert model.kinds() == ["verdict", "A-or-B", "A-or-B"]  # won in both orders: no tie to settle
    model.calls.clear()
    worse = critic.critique(_request(BAD, earlier=GOOD, score=6.0))
    assert worse.score == pytest.approx(moved_score(6.0, 0.2)) and not worse.is_acceptable
    assert any("worse than the best earlier answer" in issue for issue in worse.issues)


def test_a_candidate_judged_worse_is_not_accepted_even_when_correct_and_faultless() -> None:
    critic = JudgeCritic(_model(better=lambda a, b: 0.3 if a == GOOD else 0.7))
    result = critic.critique(_request(GOOD, earlier="Paris."))
    assert not result.is_acceptable and result.score < 6.0


def test_the_comparison_is_with_the_best_earlier_candidate_shown() -> None:
    model = _model()
    history = (
        {"candidate": "Lyon.", "score": 3.0, "feedback": ""},
        {"candidate": "Paris, of course.", "score": 8.0, "feedback": ""},
        {"candidate": "Marseille.", "score": 2.0, "feedback": ""},
    )
    JudgeCritic(model).critique(CritiqueRequest(task=TASK, candidate=GOOD, history=history))
    compared = {b for p, _ in model.calls if "A or B" in p for b in _answers(p)}
    assert compared == {GOOD, "Paris, of course."}


def test_an_unreadable_written_critique_says_so_without_crashing() -> None:
    critic = JudgeCritic(_model(written=lambda prompt: "no JSON here"), write=True)
    result = critic.critique(_request(BAD))
    assert not result.is_acceptable and result.issues == []  # no fault is made up from it
    assert "could not be read" in result.feedback


def test_without_the_written_critique_a_rejection_still_says_why() -> None:
    model = _model(bias=0.0)  # a judge with no position bias: the two orders agree
    result = JudgeCritic(model, write=False).critique(_request(BAD, earlier=GOOD))
    assert not result.is_acceptable and "worse than the best earlier answer" in result.issues[0]
    assert all(kw.get("logprobs") for _, kw in model.calls)


def test_async_twin_gives_the_same_critique() -> None:
    request = _request(GOOD, earlier=BAD)
    sync = JudgeCritic(_model()).critique(request)
    result = asyncio.run(JudgeCritic(_model()).acritique(request))
    assert result == sync


def test_context_reaches_every_question() -> None:
    model = _model()
    history = ({"candidate": GOOD, "score": 6.0, "feedback": ""},)
    JudgeCritic(model, write=True).critique(
        CritiqueRequest(task=TASK, candidate=BAD, context="Answer in one sentence.", history=history)
    )
    # the verdict, both orders (split by the +1.5 bias towards A), the earlier answer's verdict to settle the
    # tie, the written critique, its one fault checked both ways
    assert model.kinds() == ["verdict", "A-or-B", "A-or-B", "verdict", "written", "has", "free"]
    assert all("Answer in one sentence." in prompt for prompt, _ in model.calls)


def test_a_model_without_logprobs_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="needs next-token logprobs"):
        JudgeCritic(_model(with_logprobs=False)).critique(_request(GOOD))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"top_logprobs": 0}, "top_logprobs"),
        ({"max_candidate_chars": 0}, "max_candidate_chars"),
        ({"timeout_s": 0}, "timeout_s"),
    ],
)
def test_bad_settings_are_refused(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        JudgeCritic(_model(), **kwargs)


def test_not_a_chat_model_is_refused() -> None:
    with pytest.raises(TypeError, match="LangChain chat model"):
        JudgeCritic(lambda prompt: "Yes")  # type: ignore[arg-type]


def test_written_critique_schema_has_no_score() -> None:
    assert set(WrittenCritique.model_fields) == {"faults"}
    fault = WrittenCritique.model_json_schema()["$defs"]["Fault"]
    assert set(fault["properties"]) == {"issue", "fix"}  # a fix belongs to its issue


# -- the default critic and the loop ---------------------------------------------------------------------------
def _default(generator: Any, **kw: Any) -> Any:
    from reflection_graph.graph import _as_critic
    from reflection_graph.settings import Settings

    return _as_critic(None, generator, Settings(), base_url=None, **{"guidelines": None, **kw})


def test_the_instruction_tuned_embedded_model_gets_the_judge_by_default(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from reflection_graph.critics import LLMCritic, LogprobCritic
    from reflection_graph.models.embedded import EmbeddedChatModel

    critic = _default(EmbeddedChatModel(model="qwen2.5-coder-1.5b", temperature=0.7))
    assert isinstance(critic, JudgeCritic) and critic.model.temperature == 0
    assert isinstance(_default(EmbeddedChatModel(model="gemma-3-270m")), LogprobCritic)  # a base model
    assert isinstance(
        _default(EmbeddedChatModel(model="qwen2.5-coder-1.5b"), guidelines="Be terse."), LLMCritic
    )
    # a local GGUF: its metadata decides (read here through the property the model exposes)
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF")
    for has_template, kind in ((True, JudgeCritic), (False, LogprobCritic)):
        monkeypatch.setattr(EmbeddedChatModel, "uses_chat_template", property(lambda self, v=has_template: v))
        assert isinstance(_default(EmbeddedChatModel(model_path=str(gguf))), kind)


def test_for_run_swaps_the_model_and_keeps_the_settings() -> None:
    critic = JudgeCritic(_model(), write=False, max_candidate_chars=500, retries=1)
    other = _model(yes=lambda answer: 0.2)
    swapped = critic.for_run(model=other)
    assert isinstance(swapped, JudgeCritic) and swapped.model is other
    assert (swapped.write, swapped.max_candidate_chars, swapped.retries) == (False, 500, 1)
    assert critic.for_run(prompt="Judge {candidate}") is critic


def test_in_the_loop_a_revision_judged_better_and_faultless_is_accepted() -> None:
    from reflection_graph import create_reflection_graph
    from tests.fakes import RecordingChatModel

    generator = RecordingChatModel(replies=[BAD, GOOD])
    graph = create_reflection_graph(generator, critic=JudgeCritic(_model(), write=True), max_iterations=3)
    result = graph.invoke({"task": TASK})
    assert result["candidate"] == GOOD and result["stop_reason"] == "accepted" and result["iterations"] == 2
    first, second = result["trajectory"]
    assert first["critique"]["issues"] == ["Berlin is the capital of Germany."]
    assert second["score"] > first["score"]
    assert "Berlin is the capital of Germany." in generator.prompts[1]  # the reviser saw the named fault


def test_the_readings_one_by_one_match_the_critique() -> None:
    critic = JudgeCritic(_model())
    request = _request(GOOD, earlier=BAD, score=6.0)
    judged = critic.judge(request)
    assert critic.p_yes(request) == pytest.approx(judged.p_yes) == pytest.approx(_p_yes(0.9))
    assert critic.p_better(request, BAD) == pytest.approx(judged.p_better or 0) == pytest.approx(0.8)
    written = critic.faults(_request(BAD))
    assert written is not None and written.issues == ["Berlin is the capital of Germany."]
    [check] = critic.check_faults(_request(BAD), critic.usable_faults(_request(BAD), written))
    assert check.confirmed and check.has > 0 and check.free is not None and check.free < 0
