"""`LogprobCritic` with fake logprobs: the verdict and score math, the fallback path, bad input, the default wiring."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field

from reflection_graph.critics import CritiqueRequest, LLMCritic, LogprobCritic
from reflection_graph.graph import _as_critic
from reflection_graph.models.embedded import EmbeddedChatModel
from reflection_graph.settings import Settings
from tests.fakes import FakeCriticModel, RecordingChatModel, critique


class Refused(Exception):
    status_code = 400


class Flaky(ConnectionError):
    """A transient fault: the critic must not treat it as 'no logprobs'."""


class LogprobModel(BaseChatModel):
    """Replies with OpenAI-style next-token logprobs: `yes(prompt)` gives P(Yes); explanations get `problem`.

    Records every call's prompt and call options.
    """

    yes: Any = None
    problem: str = "The answer names the wrong city."
    with_logprobs: bool = True
    error: Any = None
    calls: list[tuple[str, dict[str, Any]]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "fake-logprobs"

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        prompt = str(messages[-1].content)
        self.calls.append((prompt, {**kw, "stop": stop}))
        if self.error is not None:
            raise self.error
        if not kw.get("logprobs"):
            return ChatResult(generations=[ChatGeneration(message=AIMessage(content=self.problem))])
        meta: dict[str, Any] = {}
        if self.with_logprobs:
            p = float(self.yes(prompt)) if callable(self.yes) else 0.5
            top = [
                {"token": " Yes", "logprob": math.log(p)},
                {"token": " No", "logprob": math.log(1 - p)},
            ]
            meta["logprobs"] = {
                "content": [{"token": " Yes", "logprob": top[0]["logprob"], "top_logprobs": top}]
            }
        return ChatResult(
            generations=[ChatGeneration(message=AIMessage(content=" Yes", response_metadata=meta))]
        )


def _request(candidate: str = "The capital of France is Paris.") -> CritiqueRequest:
    return CritiqueRequest(task="What is the capital of France?", candidate=candidate)


# -- the verdict and score math ---------------------------------------------------------------------------------


# Expected values worked out by hand from the figures the module documents (datasets/pairs.jsonl's spread:
# verdict mid 0.38 and scale 0.51, answer mid -1.70 and scale 1.33, bar 0.55), and the score through a second
# formula, 10 * sigmoid(2x) = 5 * (1 + tanh(x)); nothing is read from the implementation's constants, so a changed
# constant or formula fails here.


def test_score_is_a_sigmoid_of_the_standardized_verdict_logit() -> None:
    critic = LogprobCritic(LogprobModel(), accept_at=0.5)
    # P(Yes) = 0.8: v = ln(0.8 / 0.2) = ln 4 = 1.386294; z = (1.386294 - 0.38) / 0.51 = 1.973126;
    # score = 5 * (1 + tanh(1.973126 - 0.5)) = 5 * (1 + 0.900172) = 9.50086
    verdict = critic.verdict({" Yes": math.log(0.8), " No": math.log(0.2)})
    assert verdict.p_yes == pytest.approx(0.8)
    assert verdict.z == pytest.approx(1.973126, abs=1e-6)
    assert verdict.score == pytest.approx(9.50086, abs=1e-4) and verdict.accepted is True
    # P(Yes) = 0.5: v = 0; z = -0.38 / 0.51 = -0.745098; score = 5 * (1 + tanh(-1.245098)) = 0.76548
    even = critic.verdict({" Yes": math.log(0.5), " No": math.log(0.5)})
    assert even.z == pytest.approx(-0.745098, abs=1e-6)
    assert even.score == pytest.approx(0.76548, abs=1e-4) and even.accepted is False


def test_the_answer_likelihood_is_averaged_in_after_standardizing() -> None:
    critic = LogprobCritic(LogprobModel())  # the default bar, 0.55
    top = {" Yes": math.log(0.6), " No": math.log(0.4)}
    # verdict: (ln 1.5 - 0.38) / 0.51 = (0.405465 - 0.38) / 0.51 = 0.049932
    # answer -0.5: (-0.5 + 1.70) / 1.33 = 0.902256; z = (0.049932 + 0.902256) / 2 = 0.476094 (< 0.55: rejected)
    # answer -4.0: (-4.0 + 1.70) / 1.33 = -1.729323; z = (0.049932 - 1.729323) / 2 = -0.839696
    likely, unlikely = critic.verdict(top, -0.5), critic.verdict(top, -4.0)
    assert likely.z == pytest.approx(0.476094, abs=1e-6) and likely.accepted is False
    assert likely.score == pytest.approx(5 * (1 + math.tanh(0.476094 - 0.55)), abs=1e-5)  # 4.63114
    assert unlikely.z == pytest.approx(-0.839696, abs=1e-6)
    assert unlikely.score == pytest.approx(0.58448, abs=1e-4)
    assert likely.answer_logprob == -0.5


def test_accepted_exactly_when_the_score_reaches_five() -> None:
    critic = LogprobCritic(LogprobModel(), accept_at=0.0)
    for p in (0.05, 0.3, 0.5, 0.51, 0.7, 0.99):
        verdict = critic.verdict({"yes": math.log(p), "no": math.log(1 - p)})
        assert verdict.accepted == (verdict.score >= 5), p
    # a higher bar accepts less
    strict = LogprobCritic(LogprobModel(), accept_at=3.0)
    assert not strict.verdict({"yes": math.log(0.7), "no": math.log(0.3)}).accepted


def test_spellings_of_yes_add_up_and_a_missing_no_gets_the_smallest_listed_probability() -> None:
    critic = LogprobCritic(LogprobModel())
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
        LogprobCritic(LogprobModel()).verdict(top)


# -- the critic over a model ------------------------------------------------------------------------------------


def test_an_accepted_answer_costs_one_call_with_the_logprob_options() -> None:
    model = LogprobModel(yes=lambda prompt: 0.95 if prompt.endswith("Paris.\nCorrect:") else 0.05)
    result = LogprobCritic(model).critique(_request())
    assert result.is_acceptable and result.score > 5 and not result.issues
    assert len(model.calls) == 1
    prompt, options = model.calls[0]
    assert "Task: What is the capital of France?\nAnswer: The capital of France is Paris.\nCorrect:" in prompt
    assert options["logprobs"] is True and options["top_logprobs"] == 20 and options["max_tokens"] == 1


def test_a_rejected_answer_gets_the_problem_line_from_a_second_call() -> None:
    model = LogprobModel(yes=lambda prompt: 0.05)
    result = LogprobCritic(model).critique(_request("The capital of France is Berlin."))
    assert not result.is_acceptable and result.score < 5
    assert result.issues == ["The answer names the wrong city."]
    assert "The answer names the wrong city." in result.feedback
    assert len(model.calls) == 2
    explain_prompt, options = model.calls[1]
    assert explain_prompt.endswith("Berlin.\nCorrect: No\nProblem:")
    assert options["stop"] == ["\n"] and not options.get("logprobs")


def test_explain_false_makes_no_second_call() -> None:
    model = LogprobModel(yes=lambda prompt: 0.05)
    result = LogprobCritic(model, explain=False).critique(_request("Berlin."))
    assert not result.is_acceptable and result.issues and len(model.calls) == 1


def test_the_better_answer_scores_higher_sync_and_async() -> None:
    model = LogprobModel(yes=lambda prompt: 0.9 if "Paris" in prompt.rsplit("Task:", 1)[-1] else 0.2)
    critic = LogprobCritic(model, explain=False)
    good, bad = _request(), _request("The capital of France is Berlin.")
    assert critic.critique(good).score > critic.critique(bad).score
    a_good, a_bad = asyncio.run(_both(critic, good, bad))
    assert a_good.score > a_bad.score
    assert a_good.score == pytest.approx(critic.critique(good).score)


async def _both(critic: LogprobCritic, *requests: CritiqueRequest) -> list[Any]:
    return list(await asyncio.gather(*(critic.acritique(r) for r in requests)))


def test_64_concurrent_critiques_each_get_their_own_verdict() -> None:
    model = LogprobModel(yes=lambda prompt: 0.9 if "good" in prompt.rsplit("Task:", 1)[-1] else 0.1)
    critic = LogprobCritic(model, explain=False)
    requests = [_request(f"answer {i} {'good' if i % 2 else 'bad'}") for i in range(64)]
    results = asyncio.run(_both(critic, *requests))
    assert [r.is_acceptable for r in results] == [i % 2 == 1 for i in range(64)]


def test_context_goes_into_the_prompt_and_long_candidates_are_cut() -> None:
    critic = LogprobCritic(LogprobModel(), max_candidate_chars=10)
    prompt = critic.prompt(CritiqueRequest(task="Sum it.", candidate="x" * 50, context="Use base 10."))
    assert "Task: Sum it.\nContext: Use base 10.\nAnswer: xxxxxxxxxx …\nCorrect:" in prompt


# -- falling back where the model gives no logprobs --------------------------------------------------------------


def test_a_model_without_logprobs_hands_over_to_the_fallback_for_good() -> None:
    model = LogprobModel(with_logprobs=False)
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
    refused = LogprobCritic(LogprobModel(error=Refused("logprobs not supported")), fallback=fallback)
    assert refused.critique(_request()).score == 4
    flaky = LogprobCritic(LogprobModel(error=Flaky("connection reset")), fallback=fallback, retries=0)
    with pytest.raises(Flaky):
        flaky.critique(_request())


# -- bad input ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"top_logprobs": 0}, "top_logprobs"),
        ({"top_logprobs": 21}, "top_logprobs"),
        ({"accept_at": float("nan")}, "accept_at"),
        ({"max_candidate_chars": 0}, "max_candidate_chars"),
        ({"timeout_s": 0}, "timeout_s"),
    ],
)
def test_bad_settings_raise_when_the_critic_is_built(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        LogprobCritic(LogprobModel(), **kwargs)


def test_a_non_model_or_a_non_critic_fallback_is_refused() -> None:
    with pytest.raises(TypeError, match="chat model"):
        LogprobCritic(lambda prompt: "yes")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="fallback"):
        LogprobCritic(LogprobModel(), fallback="llm")  # type: ignore[arg-type]


# -- the default critic -----------------------------------------------------------------------------------------


def _default(generator: BaseChatModel, **settings: Any) -> Any:
    guidelines = settings.pop("guidelines", None)
    return _as_critic(None, generator, Settings(**settings), base_url=None, guidelines=guidelines)


def test_the_embedded_model_gets_the_logprob_critic_by_default() -> None:
    critic = _default(EmbeddedChatModel(temperature=0.7))
    assert isinstance(critic, LogprobCritic)
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
        model._generate_logprobs("Correct:", 0, None)
    with pytest.raises(ValueError, match="score_text"):
        model._generate_logprobs("Task: x\nAnswer: y\nCorrect:", 5, " not in the prompt")
    with pytest.raises(ValueError, match="continuation"):
        model.continuation_logprobs("Task:", "")
    with pytest.raises(ValueError, match="top"):
        model.next_token_logprobs("Task:", top=-1)
