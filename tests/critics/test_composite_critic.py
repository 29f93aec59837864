"""CompositeCritic: all critics must accept, the documented score rule, merged findings named by critic."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from langchain_core.runnables import RunnableConfig

from reflection_graph.critics.base import BaseCritic, Critic, CritiqueRequest
from reflection_graph.critics.composite import CompositeCritic
from reflection_graph.critics.llm import LLMCritic
from reflection_graph.critics.rules import LengthCritic, RequiredTermsCritic
from reflection_graph.critique import Critique, Finding
from tests.fakes import FakeCriticModel, critique

REQUEST = CritiqueRequest(task="Decline the job offer politely", candidate="No thanks.")


class FixedCritic(BaseCritic):
    """An LLM-ish critic: always returns the same verdict, records the requests it saw, can be slow."""

    def __init__(self, name: str, result: Critique, delay_s: float = 0.0) -> None:
        self.name = name
        self.result = result
        self.delay_s = delay_s
        self.seen: list[CritiqueRequest] = []

    def critique(self, request: CritiqueRequest, config: RunnableConfig | None = None) -> Critique:
        self.seen.append(request)
        time.sleep(self.delay_s)
        return self.result

    async def acritique(self, request: CritiqueRequest, config: RunnableConfig | None = None) -> Critique:
        self.seen.append(request)
        await asyncio.sleep(self.delay_s)
        return self.result


def llmish(
    score: float = 9, ok: bool = True, issues: list[str] | None = None, delay_s: float = 0.0
) -> FixedCritic:
    result = Critique(
        issues=issues or [],
        suggestions=[f"fix {i}" for i in issues or []],
        is_acceptable=ok,
        score=score,
        feedback="Polite and clear." if ok else "Needs work.",
    )
    return FixedCritic("judge", result, delay_s)


def test_accepting_llm_critic_plus_rejecting_rule_critic_is_not_accepted() -> None:
    judge = llmish(score=9, ok=True)
    composite = CompositeCritic([judge, RequiredTermsCritic(["thank you"])])
    assert isinstance(composite, Critic)
    result = composite.critique(REQUEST)
    assert judge.seen == [REQUEST], "each critic gets the same request"
    assert not result.is_acceptable
    assert result.score == 7  # min(9, rule score 10 - 3)
    assert result.issues == ["[required_terms] missing required term 'thank you'"]
    assert result.suggestions == [
        "[required_terms] Mention 'thank you' explicitly, where it fits the content."
    ]
    assert result.findings == [
        Finding(message="missing required term 'thank you'", severity="major", source="required_terms")
    ]
    assert result.severity == "major"
    assert result.feedback.splitlines() == [
        "judge: Polite and clear.",
        "required_terms: 1 problem: missing required term 'thank you'",
    ]


def test_all_accept_means_accepted_and_min_score() -> None:
    composite = CompositeCritic([llmish(score=8.5), LengthCritic(max_words=10)])
    result = composite.critique(REQUEST)
    assert result.is_acceptable and result.score == 8.5 and result.issues == []


@pytest.mark.parametrize(
    ("rule", "expected"),
    [("min", 4.0), ("mean", 6.5), ({"judge": 3, "length": 1}, 7.75), ([1, 0], 9.0), ([0, 1], 4.0)],
)
def test_score_rules(rule: Any, expected: float) -> None:
    composite = CompositeCritic([llmish(score=9), LengthCritic(max_words=1, max_chars=5)], score=rule)
    result = composite.critique(REQUEST)  # length: two major findings -> 4
    assert result.score == pytest.approx(expected)
    assert not result.is_acceptable


def test_issues_without_findings_become_findings_with_the_critics_severity() -> None:
    harsh = llmish(score=2, ok=False, issues=["rude tone", "no reason given"])
    silent = FixedCritic("silent", Critique(is_acceptable=False, score=5, feedback="just no"))
    result = CompositeCritic([harsh, silent]).critique(REQUEST)
    assert [(f.source, f.severity, f.message) for f in result.findings] == [
        ("judge", "critical", "rude tone"),
        ("judge", "critical", "no reason given"),
        ("silent", "major", "just no"),
    ]
    assert result.issues == ["[judge] rude tone", "[judge] no reason given", "[silent] just no"]
    assert result.severity == "critical" and result.score == 2


def test_duplicate_names_get_suffixes_and_mapping_names_are_used() -> None:
    composite = CompositeCritic([LengthCritic(max_words=1), LengthCritic(max_chars=3)])
    assert [label for label, _ in composite.critics] == ["length", "length_2"]
    result = composite.critique(REQUEST)
    assert result.issues == [
        "[length] too long: 2 words, the maximum is 1",
        "[length_2] too long: 10 characters, the maximum is 3",
    ]
    named = CompositeCritic({"short": LengthCritic(max_words=1), "judge": llmish()})
    assert [label for label, _ in named.critics] == ["short", "judge"]
    assert named.critique(REQUEST).findings[0].source == "short"


async def test_async_runs_critics_concurrently() -> None:
    """Both slow critics are in flight at once (a count, not a wall-clock reading: 1 if run one after another)."""
    flight = {"now": 0, "peak": 0}

    class Gauged(FixedCritic):
        async def acritique(self, request: CritiqueRequest, config: RunnableConfig | None = None) -> Critique:
            flight["now"] += 1
            flight["peak"] = max(flight["peak"], flight["now"])
            try:
                return await super().acritique(request, config)
            finally:
                flight["now"] -= 1

    verdict = llmish().result
    slow = [Gauged("judge", verdict, delay_s=0.2), Gauged("other", verdict, delay_s=0.2)]
    composite = CompositeCritic([*slow, LengthCritic(max_words=5)])
    result = await composite.acritique(REQUEST)
    assert result.is_acceptable
    assert flight["peak"] == 2 and [len(c.seen) for c in slow] == [1, 1]
    assert result.model_dump() == composite.critique(REQUEST).model_dump()


def test_with_the_llm_critic_on_a_fake_model() -> None:
    model = FakeCriticModel(critiques=[critique(9, ok=True, issues=[], feedback="good email")])
    composite = CompositeCritic([LLMCritic(model), RequiredTermsCritic(["regret"])])
    result = composite.critique(REQUEST)
    assert "No thanks." in model.prompts[0], "the LLM critic saw the candidate"
    assert not result.is_acceptable and result.score == 7
    assert "llm: good email" in result.feedback
    assert result.issues == ["[required_terms] missing required term 'regret'"]


def test_a_failing_critic_propagates() -> None:
    class Broken(BaseCritic):
        name = "broken"

        def critique(self, request: CritiqueRequest, config: RunnableConfig | None = None) -> Critique:
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        CompositeCritic([llmish(), Broken()]).critique(REQUEST)


@pytest.mark.parametrize(
    ("args", "kwargs", "match"),
    [
        (([],), {}, "at least one critic"),
        (("length",), {}, "list of Critic objects"),
        (([object()],), {}, "is not a Critic"),
        (([LengthCritic(max_words=1)],), {"score": "max"}, "'min', 'mean' or weights"),
        (([LengthCritic(max_words=1)],), {"score": [1, 2]}, "2 weights for 1 critics"),
        (([LengthCritic(max_words=1)],), {"score": {"lenght": 1}}, "unknown: \\['lenght'\\]"),
        (([LengthCritic(max_words=1)],), {"score": [-1]}, "non-negative"),
        (([LengthCritic(max_words=1)],), {"score": [0]}, "at least one weight must be positive"),
    ],
)
def test_validation_at_construction(args: tuple[Any, ...], kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        CompositeCritic(*args, **kwargs)
