"""The `resample` strategy: later rounds draw fresh drafts of the task with new seeds; the critic picks, and the
run stops at the first accepted candidate. It is the code focus's default with a `CodeTestCritic`."""

from __future__ import annotations

import asyncio

import pytest

from reflection_graph import Context, create_reflection_graph, max_model_calls
from reflection_graph.critics.code_tests import CodeTestCritic
from tests.critics.test_code_tests_critic import GOOD
from tests.fakes import RecordingChatModel, SeededModel
from tests.test_code_loop import BUGGY, TASK, TESTS, fenced
from tests.test_tree import TableCritic, gemma_on_humaneval_55


def _drafts() -> SeededModel:
    """Every reply names its seed (`d0`, `d1`, ...), whatever the prompt."""
    return SeededModel(reply_of=lambda seed, temperature, prompt: f"d{seed}")


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_later_rounds_draw_fresh_drafts_with_new_seeds_until_one_is_accepted(mode: str) -> None:
    model, critic = _drafts(), TableCritic({"d0": 2.0, "d1": 3.0, "d2": 1.0, "d3": 10.0})
    graph = create_reflection_graph(
        model, critic=critic, strategy="resample", n_revisions=2, max_iterations=4
    )
    run = graph.invoke if mode == "sync" else (lambda x: asyncio.run(graph.ainvoke(x)))
    result = run({"task": "Write a haiku."})
    assert result["stop_reason"] == "accepted" and result["candidate"] == "d3"
    made = [s["candidate"] for r in result["trajectory"] for s in r.get("samples", [r])]
    assert made == ["d0", "d1", "d2", "d3", "d4"]  # round 3 drew seeds 3 and 4; no seed twice
    assert set(model.prompts) == {model.prompts[0]}, (
        "every round sent the first draft's prompt: no critique shown"
    )
    assert result["usage"]["generate"]["calls"] == 5 and result["usage"]["revise"]["calls"] == 0


def test_with_nothing_accepted_it_runs_every_round_and_returns_the_best_draft() -> None:
    model, critic = _drafts(), TableCritic({"d0": 2.0, "d1": 1.0, "d2": 6.0, "d3": 5.0, "d4": 3.0, "d5": 4.0})
    graph = create_reflection_graph(model, critic=critic, strategy="resample", n_drafts=2, max_iterations=4)
    result = graph.invoke({"task": "t"})
    assert result["stop_reason"] == "max_iterations" and result["iterations"] == 4
    made = [s["candidate"] for r in result["trajectory"] for s in r.get("samples", [r])]
    assert made == ["d0", "d1", "d2", "d3", "d4"]  # 2 drafts, then one a round (n_revisions=1) from seed 2 on
    assert result["candidate"] == "d2" and result["critique"]["score"] == 6.0
    calls = result["usage"]["generate"]["calls"]
    assert calls <= max_model_calls(4, n_drafts=2, n_revisions=1, retries=2)


def test_it_forces_the_plateau_stops_off_also_per_run_and_refuses_human_review() -> None:
    model, critic = _drafts(), TableCritic({"d0": 5.0, "d1": 4.0, "d2": 3.0, "d3": 10.0})
    graph = create_reflection_graph(
        model, critic=critic, strategy="resample", n_revisions=1, max_iterations=5
    )
    # patience=1 would stop a loop after round 2 (no progress); a fresh draft owes nothing to the last score
    result = graph.invoke({"task": "t"}, context=Context(patience=1))
    assert result["stop_reason"] == "accepted" and result["candidate"] == "d3"
    with pytest.raises(ValueError, match="human_review"):
        create_reflection_graph(_drafts(), critic=critic, strategy="resample", human_review=True)


def test_the_code_focus_with_tests_resamples_by_default_and_revises_when_asked() -> None:
    """A real sandboxed test critic: by default the second round is the task again, not the failing tests."""
    fresh = RecordingChatModel(replies=[fenced(BUGGY), fenced(BUGGY), fenced(GOOD)])
    result = create_reflection_graph(fresh, critic=CodeTestCritic(TESTS), focus="code").invoke({"task": TASK})
    assert result["stop_reason"] == "accepted" and "return a + b" in result["candidate"]
    assert len(fresh.prompts) == 3 and set(fresh.prompts) == {fresh.prompts[0]}
    assert "test_add failed" not in fresh.prompts[1]

    revising = RecordingChatModel(replies=[fenced(BUGGY), fenced(GOOD), fenced(GOOD)])
    graph = create_reflection_graph(revising, critic=CodeTestCritic(TESTS), focus="code", strategy="loop")
    assert graph.invoke({"task": TASK})["stop_reason"] == "accepted"
    assert "test_add failed" in revising.prompts[1]


@pytest.mark.embedded
def test_resampling_on_the_embedded_model_keeps_the_draft_passing_the_most_visible_tests() -> None:
    """The real model path with the code defaults, on HumanEval/55 (from 40-163 only): the first draft is the
    greedy call, later drafts are fresh samples of the same prompt (no revision call), and the answer is the
    candidate passing the most visible examples."""
    problem, model, critic = gemma_on_humaneval_55()
    result = create_reflection_graph(model, critic=critic, focus="code").invoke({"task": problem["prompt"]})
    assert result["error"] is None and result["stop_reason"] in {"accepted", "max_iterations"}
    assert result["usage"]["revise"]["calls"] == 0
    assert result["usage"]["generate"]["calls"] <= max_model_calls(3, n_drafts=1, n_revisions=2, retries=2)
    made = [s for r in result["trajectory"] for s in r.get("samples", [r])]
    assert result["critique"]["score"] == max(s["score"] for s in made)
    assert result["candidate"].startswith(problem["prompt"].rstrip())
    if result["stop_reason"] == "max_iterations":
        assert len(made) == 5  # 1 greedy draft, then 2 fresh ones in each of 2 rounds


def test_a_strategy_may_draw_fresh_drafts_in_some_rounds_and_revise_in_others() -> None:
    """`Strategy.drafts_afresh` per round: round 2 draws a fresh draft (the next seed after the first draft's),
    round 3 revises the best candidate so far (its seeds start again at 0), round 4 draws afresh again (the seed
    after round 2's)."""
    from reflection_graph import strategies
    from reflection_graph.strategies.base import Strategy

    class FreshEveryOther(Strategy):
        name = "test_fresh_every_other"

        def drafts_afresh(self, iteration: int) -> bool:
            return iteration % 2 == 0

    strategies.register(FreshEveryOther(), replace=True)
    try:
        model = SeededModel(
            reply_of=lambda seed, temperature, prompt: (
                f"r{seed}" if "Previous answer" in prompt or "review" in prompt else f"d{seed}"
            )
        )
        critic = TableCritic({"d0": 2.0, "d1": 3.0, "r0": 4.0, "d2": 5.0})
        graph = create_reflection_graph(
            model,
            critic=critic,
            strategy="test_fresh_every_other",
            n_revisions=1,
            max_iterations=4,
            patience=None,
            stop_on_no_new_issues=False,
        )
        result = graph.invoke({"task": "Write a haiku."})
    finally:
        strategies.unregister("test_fresh_every_other")
    made = [s["candidate"] for r in result["trajectory"] for s in r.get("samples", [r])]
    assert made == ["d0", "d1", "r0", "d2"]
    assert result["usage"]["generate"]["calls"] == 3 and result["usage"]["revise"]["calls"] == 1
    assert result["candidate"] == "d2"
