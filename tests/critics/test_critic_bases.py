"""The critics' shared bases: `ModelCritic` (the model, its call limits, `for_run`), `InlineCritic`, the one
log-probability reading, and no private imports between critic modules."""

from __future__ import annotations

import ast
import asyncio
import math
import threading
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig

import reflection_graph.critics as critics_package
from reflection_graph.critics import (
    CritiqueRequest,
    InlineCritic,
    JudgeCritic,
    LLMCritic,
    LogprobCritic,
    ModelCritic,
    PairwiseCritic,
    RequiredTermsCritic,
)
from reflection_graph.critics._logprob_reading import log_odds, word_probabilities
from reflection_graph.critique import Critique
from tests.fakes import LogprobModel, RecordingChatModel

CRITICS = Path(critics_package.__file__).parent
REQUEST = CritiqueRequest(task="Say a number.", candidate="7")


class NumberCritic(ModelCritic):
    """A user's own model critic: the model replies with a score; `bar` is its acceptance bar."""

    def __init__(
        self,
        model: Any,
        *,
        bar: float = 5.0,
        retries: int = 2,
        timeout_s: float | None = None,
        name: str = "n",
    ) -> None:
        super().__init__(model, retries=retries, timeout_s=timeout_s, name=name)
        self.bar = bar
        self._judge = self._at_temperature_zero()

    def critique(self, request: CritiqueRequest, config: RunnableConfig | None = None) -> Critique:
        score = float(self._call(self._judge, [HumanMessage(request.candidate)], config).text)
        return Critique(is_acceptable=score >= self.bar, score=score)


def test_a_users_model_critic_is_rebuilt_for_a_run_from_its_own_arguments() -> None:
    critic = NumberCritic(RecordingChatModel(replies=["6"]), bar=8.0, retries=0, name="mine")
    other = RecordingChatModel(replies=["9"])
    swapped = critic.for_run(model=other)
    assert type(swapped) is NumberCritic and swapped is not critic and swapped.model is other
    assert (swapped.bar, swapped.retries, swapped.name) == (8.0, 0, "mine")
    assert critic.for_run() is critic
    assert critic.for_run(prompt="Judge {candidate}") is critic  # it takes no critique prompt
    assert critic.metered
    assert not critic.critique(REQUEST).is_acceptable
    assert swapped.critique(REQUEST).is_acceptable and other.prompts == ["7"]


def test_a_model_critics_call_is_retried_through_the_call_layer() -> None:
    flaky = RecordingChatModel(replies=[ConnectionError("reset"), "9"])
    assert NumberCritic(flaky, retries=1).critique(REQUEST).score == 9.0
    with pytest.raises(ConnectionError):
        NumberCritic(RecordingChatModel(replies=[ConnectionError("reset"), "9"]), retries=0).critique(REQUEST)


def test_the_shared_checks_name_the_critic_and_the_argument() -> None:
    with pytest.raises(TypeError, match="^PairwiseCritic needs a LangChain chat model, got object$"):
        PairwiseCritic(object())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="timeout_s must be > 0"):
        PairwiseCritic(LogprobModel(), timeout_s=0)
    with pytest.raises(TypeError, match="^first must be a Critic, got str$"):
        PairwiseCritic(LogprobModel(), first="llm")  # type: ignore[arg-type]
    for critic in (JudgeCritic, LogprobCritic):
        with pytest.raises(ValueError, match="top_logprobs must be between 1 and 20"):
            critic(LogprobModel(), top_logprobs=21)
        with pytest.raises(ValueError, match="max_candidate_chars must be >= 1"):
            critic(LogprobModel(), max_candidate_chars=0)


def test_for_run_gives_the_stand_in_critic_the_runs_model_and_prompt() -> None:
    model, other = LogprobModel(), LogprobModel()
    logprob = LogprobCritic(model, signal="verdict", top_logprobs=5, explain=False, retries=1)
    swapped = logprob.for_run(model=other)
    assert (swapped.model, swapped.signal, swapped.top_logprobs, swapped.explain) == (
        other,
        "verdict",
        5,
        False,
    )
    assert isinstance(swapped.fallback, LLMCritic) and swapped.fallback.model is other
    assert swapped.fallback.retries == 1
    prompted = logprob.for_run(prompt="Judge {candidate}")
    assert prompted.model is model and isinstance(prompted.fallback, LLMCritic)
    assert prompted.fallback.prompt == "Judge {candidate}" and logprob.fallback.prompt != "Judge {candidate}"

    pairwise = PairwiseCritic(model, first=RequiredTermsCritic(["x"]))
    moved = pairwise.for_run(model=other)
    assert moved.model is other and isinstance(moved.first, LLMCritic) and moved.first.model is other
    assert pairwise.for_run(prompt="p").first is pairwise.first  # a rule critic keeps for a prompt

    llm = LLMCritic(model, guidelines="Be brief.", parse_retries=0)
    reprompted = llm.for_run(prompt="Judge {candidate}")
    assert (reprompted.prompt, reprompted.guidelines, reprompted.parse_retries) == (
        "Judge {candidate}",
        "Be brief.",
        0,
    )
    assert reprompted.model is model


def test_an_inline_critic_runs_in_the_callers_thread() -> None:
    class Seen(InlineCritic):
        def critique(self, request: CritiqueRequest, config: RunnableConfig | None = None) -> Critique:
            self.thread = threading.get_ident()
            return Critique(is_acceptable=True, score=10)

    critic = Seen()
    assert asyncio.run(critic.acritique(REQUEST)).is_acceptable
    assert critic.thread == threading.get_ident() and critic.metered
    assert isinstance(RequiredTermsCritic(["x"]), InlineCritic)


def test_both_logprob_critics_read_yes_and_no_the_same_way() -> None:
    top = {" Yes": math.log(0.5), "yes": math.log(0.1), " No.": math.log(0.2), "The": math.log(0.05)}
    assert word_probabilities(top, "yes", "no") == pytest.approx((0.6, 0.2, 0.05))
    odds = log_odds(top, "yes", "no")
    assert odds == pytest.approx(math.log(3))
    verdict = LogprobCritic(LogprobModel()).verdict(top)
    assert verdict.p_yes == pytest.approx(1 / (1 + math.exp(-odds)))
    assert log_odds({" Yes": math.log(0.4)}, "yes", "no") == 0.0  # "no" gets the smallest listed: even


def _private_names_imported_from_critic_modules(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("reflection_graph.critics"):
            found += [f"{node.module}.{a.name}" for a in node.names if a.name.startswith("_")]
    return found


def test_no_critic_module_imports_a_private_name_from_another() -> None:
    modules = sorted(CRITICS.glob("*.py"))
    assert len(modules) > 10
    for path in modules:
        assert not _private_names_imported_from_critic_modules(path), path.name
