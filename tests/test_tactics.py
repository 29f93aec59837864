"""No round repeats itself: a revision that returns its input is not judged, and the same sample slot tries the
strategy's next tactic (revise, rule, sampled_revision, fresh_draft) within its `1 + retries` attempts."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatResult
from pydantic import Field

from reflection_graph import Settings, create_reflection_graph, max_model_calls
from tests.fakes import FakeCriticModel, SeededModel, critique

TASK = "Name the capital of Norway in one sentence."
DRAFT = "It is a city in Norway."
NEW = "The capital of Norway is Oslo."
ISSUE = "The answer never names the city."
FIX = f"fix: {ISSUE}"  # the suggestion `tests.fakes.critique` gives
FAULTS = "An earlier answer to this request had these faults"  # prompts.FRESH_DRAFT_PROMPT


class Stubborn(SeededModel):
    """A model that returns its draft to every request but a fresh draft told the faults (`fresh`), and records
    the seed and temperature of each call (shared by the copies the loop samples from it, as `received` is)."""

    calls: list[tuple[int, float]] = Field(default_factory=list)
    fresh: str = NEW

    def _reply_to(self, messages: list[BaseMessage], index: int) -> Any:
        return self.fresh if FAULTS in str(messages[-1].content) else DRAFT

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        self.calls.append((self.seed, self.temperature))
        return super()._generate(messages)

    async def _agenerate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        return self._generate(messages)


def run(graph: Any, mode: str) -> dict[str, Any]:
    return graph.invoke({"task": TASK}) if mode == "sync" else asyncio.run(graph.ainvoke({"task": TASK}))


def texts(messages: list[BaseMessage]) -> str:
    return "\n".join(str(m.content) for m in messages)


def calls_made(gen: BaseChatModel, crit: FakeCriticModel) -> int:
    return len(gen.received) + len(crit.received)  # type: ignore[attr-defined]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_revision_that_repeats_moves_on_to_a_sampled_revision_then_a_fresh_draft_told_the_faults(
    mode: str,
) -> None:
    gen = Stubborn(seed=0)
    crit = FakeCriticModel(critiques=[critique(3.0, issues=[ISSUE]), critique(9.0, ok=True)])
    graph = create_reflection_graph(gen, critic=crit, max_iterations=2)
    result = run(graph, mode)

    first, second = result["trajectory"]
    assert (first["candidate"], second["candidate"]) == (DRAFT, NEW)
    assert "tactic" not in first and "repeated" not in first  # a draft is made by no revision tactic
    # no rule applies (no placeholder, no bare sign-off): the revise, then the sampled revision repeated the draft
    assert second["tactic"] == "fresh_draft" and second["repeated"] == ["revise", "sampled_revision"]
    assert result["stop_reason"] == "accepted" and result["candidate"] == NEW

    # four generator calls: the draft, the revise (the reviser itself), the sampled revision (a seed of its own,
    # warmer), the fresh draft (greedy again)
    draft, revise, resample, fresh = gen.received
    assert gen.calls == [(0, 0.0), (0, 0.0), (2, 0.7), (0, 0.0)]
    assert ISSUE in texts(revise) and DRAFT in texts(revise)  # the revisions saw the critique and the draft
    assert texts(resample) == texts(revise)  # the sampled revision is the same request, drawn again
    assert FAULTS in texts(fresh) and ISSUE in texts(fresh) and FIX in texts(fresh) and TASK in texts(fresh)
    assert DRAFT not in texts(fresh)  # a fresh draft: the task and the faults, not the answer that had them
    assert FAULTS not in texts(draft)

    # the repeats were not judged: one critique a candidate; the calls stay within the bound for these settings
    assert [DRAFT in texts(m) for m in crit.received] == [True, False]
    assert NEW in texts(crit.received[1])
    settings = Settings(max_iterations=2)
    bound = max_model_calls(2, retries=settings.retries, parse_retries=settings.parse_retries)
    assert calls_made(gen, crit) == 4 + 2 <= bound
    assert result["usage"]["revise"]["calls"] == 3 and result["usage"]["generate"]["calls"] == 1


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_when_every_tactic_repeats_the_run_stops_on_a_plateau_without_judging_a_repeat(mode: str) -> None:
    gen = Stubborn(seed=0, fresh=f"  {DRAFT}\n")  # the fresh draft too returns the draft (whitespace folded)
    crit = FakeCriticModel(critiques=[critique(3.0, issues=[ISSUE])])
    graph = create_reflection_graph(gen, critic=crit, max_iterations=3, patience=None)
    result = run(graph, mode)
    assert result["stop_reason"] == "plateau" and result["iterations"] == 1
    assert [r["candidate"] for r in result["trajectory"]] == [DRAFT] and result["candidate"] == DRAFT
    assert len(gen.received) == 1 + 3 and len(crit.received) == 1  # three tactics tried, none judged
    assert result["usage"]["revise"]["calls"] == 3  # the attempts that repeated are counted all the same


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_slot_tries_no_more_tactics_than_its_attempts(mode: str) -> None:
    """With `retries=0` a slot has one attempt: the revise repeats, and no sampled revision or fresh draft
    follows."""
    gen = Stubborn(seed=0)
    crit = FakeCriticModel(critiques=[critique(3.0, issues=[ISSUE])])
    graph = create_reflection_graph(gen, critic=crit, max_iterations=3, patience=None, retries=0)
    result = run(graph, mode)
    assert result["stop_reason"] == "plateau" and len(gen.received) == 2 and len(crit.received) == 1
    assert calls_made(gen, crit) <= max_model_calls(3, retries=0, parse_retries=Settings().parse_retries)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_critique_with_no_issue_or_suggestion_has_no_fresh_draft(mode: str) -> None:
    """A fresh draft is told the faults the critique named: with none, the slot stops after the sampled
    revision, one attempt unspent."""
    gen = Stubborn(seed=0)
    crit = FakeCriticModel(critiques=[critique(3.0, issues=[], feedback="Could be better.")])
    graph = create_reflection_graph(
        gen, critic=crit, max_iterations=3, patience=None, stop_on_no_new_issues=False
    )
    result = run(graph, mode)
    assert result["stop_reason"] == "plateau" and len(crit.received) == 1
    assert gen.calls == [(0, 0.0), (0, 0.0), (2, 0.7)]
