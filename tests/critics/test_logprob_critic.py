"""`LogprobCritic` with fake logprobs: the verdict and score math, the fallback path, bad input, the default wiring."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable
from typing import Any

import pytest
from langchain_core.language_models import BaseChatModel

from reflection_graph.critics import CritiqueRequest, LLMCritic, LogprobCritic
from reflection_graph.graph import _as_critic
from reflection_graph.models._replies import check_logprobs
from reflection_graph.models.embedded import EmbeddedChatModel
from reflection_graph.settings import Settings
from tests.fakes import EmbeddedLogprobs, FakeCriticModel, LogprobModel, RecordingChatModel, critique


class Refused(Exception):
    status_code = 400


class Flaky(ConnectionError):
    """A transient fault: the critic must not treat it as 'no logprobs'."""


def yes_no(yes: Callable[[str], float] | None = None, **kw: Any) -> LogprobModel:
    """A judge whose P(" Yes") is `yes(prompt)` (0.5 without) against P(" No"); explanations get `PROBLEM`."""
    top = (lambda prompt: {" Yes": yes(prompt), " No": 1 - yes(prompt)}) if yes is not None else None
    return LogprobModel(top=top, written=PROBLEM, **kw)


PROBLEM = "The answer names the wrong city."


def _request(candidate: str = "The capital of France is Paris.") -> CritiqueRequest:
    return CritiqueRequest(task="What is the capital of France?", candidate=candidate)


def embedded(**kw: Any) -> EmbeddedLogprobs:
    """The embedded model's surface with the candidate's token logprobs given; problem lines get "Too rude."."""
    return EmbeddedLogprobs(written="Too rude.", **kw)


# -- the verdict and score math (worked out by hand: nothing is fitted) -----------------------------------------


def test_the_verdict_score_is_ten_times_p_yes_and_accepts_from_one_half() -> None:
    critic = LogprobCritic(yes_no())
    high = critic.verdict({" Yes": math.log(0.8), " No": math.log(0.2)})
    assert (high.signal, high.score, high.accepted) == ("verdict", pytest.approx(8.0), True)
    assert high.p_yes == pytest.approx(0.8) and high.answer_logprob is None
    low = critic.verdict({" Yes": math.log(0.3), " No": math.log(0.6)})  # renormalized: 0.3 / 0.9
    assert (low.score, low.accepted) == (pytest.approx(10 / 3), False)
    even = critic.verdict({" Yes": math.log(0.4), " No": math.log(0.4)})
    assert (even.score, even.accepted) == (pytest.approx(5.0), True)


def test_the_likelihood_score_is_ten_times_the_geometric_mean_token_probability() -> None:
    critic = LogprobCritic(embedded())
    likely = critic.likelihood([math.log(0.5), math.log(0.8)])  # sqrt(0.5 * 0.8) = 0.632...
    assert likely.score == pytest.approx(10 * math.sqrt(0.4)) and likely.accepted
    assert likely.answer_logprob == pytest.approx((math.log(0.5) + math.log(0.8)) / 2)
    unlikely = critic.likelihood([math.log(0.1), math.log(0.1), math.log(0.1)])
    assert unlikely.score == pytest.approx(1.0) and not unlikely.accepted
    half = critic.likelihood([math.log(0.5)])
    assert half.score == pytest.approx(5.0) and half.accepted
    with pytest.raises(ValueError, match="no scored tokens"):
        critic.likelihood([])
    with pytest.raises(ValueError, match="finite"):
        critic.likelihood([0.5])


def test_the_embedded_model_is_judged_by_likelihood_after_a_plain_task_prompt() -> None:
    model = embedded(token_logprobs=[math.log(0.2), math.log(0.05)])  # sqrt(0.01) = 0.1 -> score 1
    critic = LogprobCritic(model)
    assert critic.signal == "likelihood"
    result = critic.critique(_request("The capital of France is Berlin."))
    assert result.score == pytest.approx(1.0) and not result.is_acceptable
    assert (
        model.prompts[0] == "Task: What is the capital of France?\nAnswer: The capital of France is Berlin."
    )
    assert model.prompts[1].endswith("Berlin.\nCorrect: No\nProblem:")  # the problem line for the reviser
    assert result.issues == ["Too rude."]


def test_likelihood_needs_the_embedded_model() -> None:
    with pytest.raises(ValueError, match="signal='verdict'"):
        LogprobCritic(yes_no(), signal="likelihood")
    assert LogprobCritic(yes_no()).signal == "verdict"
    assert LogprobCritic(embedded(), signal="verdict").signal == "verdict"


def test_spellings_of_yes_add_up_and_a_missing_no_gets_the_smallest_listed_probability() -> None:
    critic = LogprobCritic(yes_no())
    verdict = critic.verdict(
        {" Yes": math.log(0.3), "yes": math.log(0.2), "YES.": math.log(0.1), " the": -5.0}
    )
    p_no = math.exp(-5.0)
    assert verdict.p_yes == pytest.approx(0.6 / (0.6 + p_no))


@pytest.mark.parametrize(
    "top",
    [{" the": -0.1, " a": -2.0}, {" Yes": float("nan")}, {" Yes": 0.5, " No": -1.0}, {}],
    ids=["no-yes-or-no", "nan", "positive", "empty"],
)
def test_bad_logprobs_raise_a_clear_error(top: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="yes|logprob"):
        LogprobCritic(yes_no()).verdict(top)


# -- the critic over a model ------------------------------------------------------------------------------------


def test_an_accepted_answer_costs_one_call_with_the_logprob_options() -> None:
    model = yes_no(yes=lambda prompt: 0.95 if prompt.endswith("Paris.\nCorrect:") else 0.05)
    result = LogprobCritic(model).critique(_request())
    assert result.is_acceptable and result.score > 5 and not result.issues
    assert len(model.calls) == 1
    prompt, options = model.calls[0]
    assert "Task: What is the capital of France?\nAnswer: The capital of France is Paris.\nCorrect:" in prompt
    assert options["logprobs"] is True and options["top_logprobs"] == 20 and options["max_tokens"] == 1


def test_a_rejected_answer_gets_the_problem_line_from_a_second_call() -> None:
    model = yes_no(yes=lambda prompt: 0.05)
    result = LogprobCritic(model).critique(_request("The capital of France is Berlin."))
    assert not result.is_acceptable and result.score < 5
    assert result.issues == ["The answer names the wrong city."]
    assert "The answer names the wrong city." in result.feedback
    assert len(model.calls) == 2
    explain_prompt, options = model.calls[1]
    assert explain_prompt.endswith("Berlin.\nCorrect: No\nProblem:")
    assert options["stop"] == ["\n"] and not options.get("logprobs")


def test_explain_false_makes_no_second_call() -> None:
    model = yes_no(yes=lambda prompt: 0.05)
    result = LogprobCritic(model, explain=False).critique(_request("Berlin."))
    assert not result.is_acceptable and result.issues and len(model.calls) == 1


def test_the_better_answer_scores_higher_sync_and_async() -> None:
    model = yes_no(yes=lambda prompt: 0.9 if "Paris" in prompt.rsplit("Task:", 1)[-1] else 0.2)
    critic = LogprobCritic(model, explain=False)
    good, bad = _request(), _request("The capital of France is Berlin.")
    assert critic.critique(good).score > critic.critique(bad).score
    a_good, a_bad = asyncio.run(_both(critic, good, bad))
    assert a_good.score > a_bad.score
    assert a_good.score == pytest.approx(critic.critique(good).score)


async def _both(critic: LogprobCritic, *requests: CritiqueRequest) -> list[Any]:
    return list(await asyncio.gather(*(critic.acritique(r) for r in requests)))


def test_64_concurrent_critiques_each_get_their_own_verdict() -> None:
    model = yes_no(yes=lambda prompt: 0.9 if "good" in prompt.rsplit("Task:", 1)[-1] else 0.1)
    critic = LogprobCritic(model, explain=False)
    requests = [_request(f"answer {i} {'good' if i % 2 else 'bad'}") for i in range(64)]
    results = asyncio.run(_both(critic, *requests))
    assert [r.is_acceptable for r in results] == [i % 2 == 1 for i in range(64)]


def test_context_goes_into_the_prompt_and_long_candidates_are_cut() -> None:
    critic = LogprobCritic(yes_no(), max_candidate_chars=10)
    prompt = critic.prompt(CritiqueRequest(task="Sum it.", candidate="x" * 50, context="Use base 10."))
    assert "Task: Sum it.\nContext: Use base 10.\nAnswer: xxxxxxxxxx …\nCorrect:" in prompt


# -- falling back where the model gives no logprobs --------------------------------------------------------------


def test_a_model_without_logprobs_hands_over_to_the_fallback_for_good() -> None:
    model = yes_no(with_logprobs=False)
    fallback = LLMCritic(FakeCriticModel(critiques=[critique(score=3), critique(score=9, ok=True)]))
    critic = LogprobCritic(model, fallback=fallback)
    first, second = critic.critique(_request()), asyncio.run(critic.acritique(_request()))
    assert (first.score, second.score) == (3, 9) and second.is_acceptable
    assert len(model.calls) == 1  # the second request went straight to the fallback


def test_the_default_fallback_is_an_llm_critic_on_the_same_model() -> None:
    model = RecordingChatModel(replies=['{"is_acceptable": false, "score": 2, "issues": ["wrong city"]}'])
    critic = LogprobCritic(model, retries=0)
    assert isinstance(critic.fallback, LLMCritic) and critic.fallback.model is model
    result = critic.critique(_request("Berlin."))
    assert result.score == 2 and result.issues == ["wrong city"]


def test_a_refused_option_falls_back_but_a_transient_error_is_raised() -> None:
    fallback = LLMCritic(FakeCriticModel(critiques=[critique(score=4)]))
    refused = LogprobCritic(yes_no(error=Refused("logprobs not supported")), fallback=fallback)
    assert refused.critique(_request()).score == 4
    flaky = LogprobCritic(yes_no(error=Flaky("connection reset")), fallback=fallback, retries=0)
    with pytest.raises(Flaky):
        flaky.critique(_request())


# -- bad input ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"top_logprobs": 0}, "top_logprobs"),
        ({"top_logprobs": 21}, "top_logprobs"),
        ({"signal": "vibes"}, "signal"),
        ({"max_candidate_chars": 0}, "max_candidate_chars"),
        ({"timeout_s": 0}, "timeout_s"),
    ],
)
def test_bad_settings_raise_when_the_critic_is_built(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        LogprobCritic(yes_no(), **kwargs)


def test_a_non_model_or_a_non_critic_fallback_is_refused() -> None:
    with pytest.raises(TypeError, match="chat model"):
        LogprobCritic(lambda prompt: "yes")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="fallback"):
        LogprobCritic(yes_no(), fallback="llm")  # type: ignore[arg-type]


# -- the default critic -----------------------------------------------------------------------------------------


def _default(generator: BaseChatModel, **settings: Any) -> Any:
    guidelines = settings.pop("guidelines", None)
    return _as_critic(None, generator, Settings(**settings), base_url=None, guidelines=guidelines)


def test_the_embedded_model_gets_the_logprob_critic_by_default() -> None:
    critic = _default(EmbeddedChatModel(temperature=0.7))
    assert isinstance(critic, LogprobCritic) and critic.signal == "likelihood"
    assert critic.model.temperature == 0  # type: ignore[attr-defined]


def test_guidelines_a_critique_prompt_or_another_model_keep_the_llm_critic() -> None:
    assert isinstance(_default(EmbeddedChatModel(), guidelines="Be terse."), LLMCritic)
    assert isinstance(_default(EmbeddedChatModel(), prompts={"critique": "Judge {candidate}"}), LLMCritic)
    assert isinstance(_default(RecordingChatModel()), LLMCritic)


def test_the_embedded_model_accepts_the_logprob_call_options_and_rejects_others() -> None:
    model = EmbeddedChatModel()
    assert (
        model._sampling(None, {"logprobs": True, "top_logprobs": 5, "score_text": " x"})["max_tokens"] == 200
    )
    with pytest.raises(TypeError, match="frobnicate"):
        model._sampling(None, {"frobnicate": 1})


def test_the_embedded_logprob_options_are_checked_before_the_model_loads() -> None:
    model = EmbeddedChatModel()
    with pytest.raises(ValueError, match="top_logprobs"):
        check_logprobs("Correct:", 0, None)
    with pytest.raises(ValueError, match="score_text"):
        check_logprobs("Task: x\nAnswer: y\nCorrect:", 5, " not in the prompt")
    with pytest.raises(ValueError, match="continuation"):
        model.continuation_logprobs("Task:", "")
    with pytest.raises(ValueError, match="top"):
        model.next_token_logprobs("Task:", top=-1)
