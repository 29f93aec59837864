"""A critic declares what it needs through the critic protocol (reflection_graph/critics/base.py): a model a run
may swap (`for_run`) and whether its calls are metered by the package's call layer (`metered`). A user's own
critic, defined here and nowhere in the package, gets both without any edit elsewhere."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig

from reflection_graph import CompositeCritic, Context, Critique, create_reflection_graph
from reflection_graph.critics.base import BaseCritic, CritiqueRequest, acall_model, call_model, is_metered
from reflection_graph.critics.rules import LengthCritic
from tests.fakes import RecordingChatModel


class ScoringJudge(BaseCritic):
    """A user's critic: asks its model for a number and scores with it. It calls the model itself (not metered by
    the package: the graph counts it with a callback) and says how it takes another model for a run."""

    name = "scoring_judge"

    def __init__(self, model: Any) -> None:
        self.model = model

    def critique(self, request: CritiqueRequest, config: RunnableConfig | None = None) -> Critique:
        reply = self.model.invoke([HumanMessage(f"Score 0-10: {request.candidate}")], config)
        return Critique(
            score=float(reply.text.split()[0]), is_acceptable=False, issues=["more"], feedback="more"
        )

    def for_run(self, *, model: Any = None, prompt: Any = None) -> ScoringJudge:
        return self if model is None else ScoringJudge(model)


class MeteredJudge(ScoringJudge):
    """The same critic making its calls through the package's call layer: metered, and admitted by the budget."""

    name = "metered_judge"
    metered = True

    def critique(self, request: CritiqueRequest, config: RunnableConfig | None = None) -> Critique:
        reply = call_model(self.model, [HumanMessage(f"Score 0-10: {request.candidate}")], config, retries=0)
        return Critique(
            score=float(reply.text.split()[0]), is_acceptable=False, issues=["more"], feedback="more"
        )

    async def acritique(self, request: CritiqueRequest, config: RunnableConfig | None = None) -> Critique:
        message = [HumanMessage(f"Score 0-10: {request.candidate}")]
        reply = await acall_model(self.model, message, config, retries=0)
        return Critique(
            score=float(reply.text.split()[0]), is_acceptable=False, issues=["more"], feedback="more"
        )

    def for_run(self, *, model: Any = None, prompt: Any = None) -> MeteredJudge:
        return self if model is None else MeteredJudge(model)


def scorer(score: str) -> RecordingChatModel:
    return RecordingChatModel(replies=[f"{score} points"])


@pytest.fixture
def second(monkeypatch: pytest.MonkeyPatch) -> RecordingChatModel:
    """The model a run names as `critic_model="second"`."""
    from reflection_graph.loop import _overrides

    model = scorer("7")
    monkeypatch.setattr(
        _overrides, "resolve_model", lambda spec, **kwargs: model
    )  # where a run resolves specs
    return model


@pytest.mark.parametrize("judge", [ScoringJudge, MeteredJudge])
@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
def test_a_users_critic_takes_a_runs_critic_model(
    judge: type[ScoringJudge], mode: str, second: RecordingChatModel
) -> None:
    first = scorer("3")
    graph = create_reflection_graph(RecordingChatModel(), critic=judge(first), max_iterations=1)
    result = getattr(graph, mode)({"task": "t"}, context=Context(critic_model="second"))
    if mode == "ainvoke":
        result = asyncio.run(result)
    assert (len(first.received), len(second.received)) == (0, 1)
    assert result["critique"]["score"] == 7.0  # the run's model judged, through the user's own critic
    usage = result["usage"]["critique"]
    assert usage["calls"] == 1 and usage["total_tokens"] > 0  # counted, by the meter or by the callback
    built = graph.invoke({"task": "t"})  # the next run without a context is back to the built model
    assert built["critique"]["score"] == 3.0 and len(first.received) == 1


def test_a_composite_swaps_the_model_of_the_critics_that_have_one(second: RecordingChatModel) -> None:
    first = scorer("3")
    critic = CompositeCritic([ScoringJudge(first), LengthCritic(max_words=50)], score="mean")
    assert not is_metered(critic) and is_metered(
        CompositeCritic([MeteredJudge(first), LengthCritic(max_words=5)])
    )
    graph = create_reflection_graph(RecordingChatModel(), critic=critic, max_iterations=1)
    result = graph.invoke({"task": "t"}, context=Context(critic_model="second"))
    assert (len(first.received), len(second.received)) == (0, 1)
    assert result["critique"]["score"] == (7.0 + 10.0) / 2  # the judge on the run's model, the rule as built


def test_a_critic_without_a_model_gives_way_to_an_llm_critic_on_the_named_one(
    second: RecordingChatModel,
) -> None:
    graph = create_reflection_graph(RecordingChatModel(), critic=LengthCritic(max_words=50), max_iterations=1)
    graph.invoke({"task": "t"}, context=Context(critic_model="second"))
    # an LLM critic's prompt; "7 points" is no verdict, so it asks once more (parse_retries=1)
    assert len(second.received) == 2 and "JSON" in second.prompts[0]


def test_a_metered_users_critic_is_admitted_by_the_budget() -> None:
    # A metered critic's call goes through the call layer, so a run budget admits it: with a draft of 2 tokens
    # (reported) and a prompt the budget cannot cover with a useful reply, the critique is refused.
    judge = MeteredJudge(scorer("5"))
    graph = create_reflection_graph(RecordingChatModel(), critic=judge, max_iterations=3, token_budget=20)
    result = graph.invoke({"task": "t"})
    assert result["stop_reason"] == "budget" and judge.model.received == []
    assert result["error"].startswith("token budget of 20 cannot cover the next model call")
