"""Strategies (reflection_graph/strategies/): one module each, one registration line each, and what a strategy forces
holds for every run, whatever the run's `Context` asks."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from langgraph.graph import END, START

from reflection_graph import Context, Settings, create_reflection_graph, max_model_calls, strategies
from reflection_graph.strategies import Strategy
from tests.fakes import FakeCriticModel, RecordingChatModel, critique

ROOT = Path(__file__).resolve().parent.parent


def never_accepting(score: float = 4.0) -> FakeCriticModel:
    """A critic that rejects every candidate with the same score and the same issue (a plateau for the loop)."""
    return FakeCriticModel(critiques=[critique(score, issues=["same issue"])])


def calls(gen: RecordingChatModel, crit: FakeCriticModel) -> tuple[int, int]:
    return len(gen.received), len(crit.received)


# ------------------------------------------------------------------------------- what each strategy forces


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
def test_a_run_cannot_turn_the_trees_plateau_stop_back_on(mode: str) -> None:
    # The issue's case: a never-accepting critic, 6 rounds built; the run asks for patience=1. The tree forces the
    # plateau stops off, so it still runs all 6 rounds and never stops with `plateau`.
    gen, crit = RecordingChatModel(), never_accepting()
    graph = create_reflection_graph(gen, critic=crit, strategy="tree", max_iterations=6)
    run = getattr(graph, mode)
    result = run({"task": "t"}, context=Context(patience=1))
    if mode == "ainvoke":
        import asyncio

        result = asyncio.run(result)
    assert result["stop_reason"] == "max_iterations" and result["iterations"] == 6
    assert calls(gen, crit) == (6, 6)


def test_the_same_context_does_stop_the_loop_on_a_plateau() -> None:
    # The loop forces nothing: the run's patience=1 applies (the contrast that shows the tree's test tests the
    # strategy, not a Context that does nothing).
    gen, crit = RecordingChatModel(), never_accepting()
    graph = create_reflection_graph(gen, critic=crit, max_iterations=6)
    result = graph.invoke({"task": "t"}, context=Context(patience=1))
    assert result["stop_reason"] == "plateau" and result["iterations"] == 2
    assert strategies.get("loop").forces == {}


def test_a_run_cannot_turn_self_refine_into_a_loop() -> None:
    # Self-Refine forces one round: a run's max_iterations=5 still gets draft, one critique, one refine.
    gen, crit = RecordingChatModel(), never_accepting()
    graph = create_reflection_graph(gen, critic=crit, strategy="self_refine")
    result = graph.invoke({"task": "t"}, context=Context(max_iterations=5))
    assert calls(gen, crit) == (2, 1)
    assert result["candidate"] == "draft 2" and result["stop_reason"] == "max_iterations"
    assert result["iterations"] == 1


@pytest.mark.parametrize("name", ["loop", "self_refine", "tree"])
def test_every_forced_setting_survives_every_per_run_override(name: str) -> None:
    """For each strategy and each setting it forces that a run may override, a run asking for another value
    still gets the forced one (and a run's other overrides still apply)."""
    from reflection_graph.critics.rules import LengthCritic
    from reflection_graph.loop._overrides import Overrides, Roles

    strategy = strategies.get(name)
    built = strategy.force(Settings(strategy=name, max_iterations=4 if name != "self_refine" else 1))
    overrides = Overrides(built, Roles(None, None, LengthCritic(max_words=5)), strategy=strategy)
    runtime = {f for f in Context.__dataclass_fields__ if f in Settings.__dataclass_fields__}
    other = {"max_iterations": 7, "patience": 3, "select": "last", "n_drafts": 2, "score_threshold": 5.0}
    for key, forced in strategy.forces.items():
        assert getattr(built, key) == forced
        if key in runtime:
            settings, _ = overrides.for_run(Context(**{key: other[key]}))
            assert getattr(settings, key) == forced, (name, key)
    settings, _ = overrides.for_run(Context(n_drafts=3, score_threshold=6.0))
    assert settings.n_drafts == 3 and settings.score_threshold == 6.0  # the rest of the run's overrides hold


# --------------------------------------------------------------------------- adding a strategy: one module


class BestFirst(Strategy):
    """A strategy written the way a module of reflection_graph/strategies/ is: every revision starts from the
    best-scoring round so far (not the last one), no plateau stop, and it always returns the best candidate."""

    name = "best_first"
    description = "revise the best candidate so far"
    forces = {"select": "best", "patience": None, "stop_on_no_new_issues": False}
    stop_rules = frozenset({"accept", "limit"})

    def revise_from(self, state: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
        rounds = list(state.get("trajectory") or [])
        best = max(rounds, key=lambda r: (float(r["score"] or 0), -r["iteration"]))
        return best["candidate"], dict(best["critique"] or {})


def registered(strategy: Strategy) -> Iterator[Strategy]:
    """`strategy` registered while a test runs (the registry is process-wide), then removed."""
    try:
        yield strategies.register(strategy)  # the one registration line
    finally:
        strategies.unregister(strategy.name)


@pytest.fixture
def best_first() -> Iterator[Strategy]:
    yield from registered(BestFirst())


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
def test_a_strategy_added_from_outside_runs_end_to_end(best_first: Strategy, mode: str) -> None:
    gen = RecordingChatModel()
    crit = FakeCriticModel(
        critiques=[critique(6, issues=["a"]), critique(2, issues=["b"]), critique(3, issues=["c"])]
    )
    graph = create_reflection_graph(gen, critic=crit, strategy="best_first", max_iterations=3)
    run = getattr(graph, mode)
    result = run({"task": "Write a haiku"}, context=Context(select="last"))
    if mode == "ainvoke":
        import asyncio

        result = asyncio.run(result)
    # round 2 revised draft 1 (the only round); round 3 revised draft 1 again (score 6 beats draft 2's 2)
    assert "draft 1" in gen.prompts[1] and "draft 1" in gen.prompts[2] and "draft 2" not in gen.prompts[2]
    assert result["stop_reason"] == "max_iterations" and result["iterations"] == 3
    assert result["candidate"] == "draft 1"  # select="best" is forced: the run's select="last" cannot undo it


def test_an_added_strategy_draws_the_loops_picture_and_an_unknown_one_names_the_registered(
    best_first: Strategy,
) -> None:
    def drawn(**options: Any) -> tuple[set[str], set[tuple[str, str]]]:
        graph = create_reflection_graph(RecordingChatModel(), critic=never_accepting(), **options).get_graph()
        return set(graph.nodes), {(e.source, e.target) for e in graph.edges}

    assert drawn(strategy="best_first") == drawn()
    with pytest.raises(
        ValueError, match=r"strategy must be one of 'loop', 'self_refine', 'resample', 'tree' or 'best_first'"
    ):
        create_reflection_graph(RecordingChatModel(), critic=never_accepting(), strategy="beam")
    with pytest.raises(ValueError, match="registered already"):
        strategies.register(BestFirst())
    with pytest.raises(ValueError, match="Strategy instance"):
        strategies.register(object())  # type: ignore[arg-type]


class ThreeRounds(Strategy):
    """A strategy that forces three rounds, to tell which object a built graph's runs use."""

    name = "three_rounds"
    forces = {"max_iterations": 3, "min_iterations": 3}


class TwoRounds(ThreeRounds):
    forces = {"max_iterations": 2, "min_iterations": 2}


@pytest.fixture
def two_rounds() -> Iterator[Strategy]:
    yield from registered(TwoRounds())


@pytest.mark.parametrize("change", ["replace", "unregister"])
def test_a_built_graph_keeps_the_strategy_it_was_built_with(two_rounds: Strategy, change: str) -> None:
    """A later `register(..., replace=True)` or `unregister` of its name changes nothing for a graph built
    before, also for runs with a `Context` (whose overrides get the forced settings again)."""
    gen, crit = RecordingChatModel(), never_accepting()
    graph = create_reflection_graph(gen, critic=crit, strategy="three_rounds", patience=None)
    if change == "replace":
        strategies.register(ThreeRounds(), replace=True)
    else:
        strategies.unregister("three_rounds")
    for context in (None, Context(score_threshold=9.5), Context(max_iterations=6)):
        result = graph.invoke({"task": "t"}, context=context)
        assert result["stop_reason"] == "max_iterations" and result["iterations"] == 2, (change, context)
    if change == "unregister":
        with pytest.raises(ValueError, match="strategy must be one of"):  # a new graph needs it registered
            create_reflection_graph(gen, critic=crit, strategy="three_rounds")
    else:
        rebuilt = create_reflection_graph(
            RecordingChatModel(), critic=never_accepting(), strategy="three_rounds"
        )
        assert rebuilt.invoke({"task": "t"})["iterations"] == 3  # a graph built now gets the new one


@pytest.mark.parametrize("name", ["loop", "self_refine", "tree", "best_first"])
@pytest.mark.parametrize(
    "settings",
    [
        {"max_iterations": 3},
        {"max_iterations": 2, "n_drafts": 2, "n_revisions": 3},
        {"max_iterations": 4, "retries": 1},
    ],
)
def test_each_strategy_declares_a_true_and_tight_bound_on_model_calls(
    best_first: Strategy, name: str, settings: dict[str, Any]
) -> None:
    """A critic that never accepts and always finds a new issue makes every strategy use all its rounds; with
    `retries`, every call fails once before it answers. The calls made are the strategy's `max_model_calls`."""
    failing = [ConnectionError("transient")] if settings.get("retries") else []
    gen = RecordingChatModel(replies=[x for i in range(99) for x in (*failing, f"candidate {i}")])
    crit = FakeCriticModel(
        critiques=[x for i in range(99) for x in (*failing, critique(4.0, issues=[f"issue {i}"]))]
    )
    chosen = {"strategy": name, "patience": None, "parse_retries": 0, "retries": 0, **settings}
    result = create_reflection_graph(gen, critic=crit, **chosen).invoke({"task": "t"})
    strategy = strategies.get(name)
    bound = strategy.max_model_calls(strategy.force(Settings(**chosen)))
    assert sum(calls(gen, crit)) == bound, (calls(gen, crit), bound, result["stop_reason"])
    if name == "self_refine":  # its refine is made after its one critique: more than the loop's count
        assert bound > max_model_calls(
            1, n_drafts=settings.get("n_drafts", 1), retries=settings.get("retries", 0)
        )


def test_a_strategy_registered_in_user_code_runs_through_the_cli(
    best_first: Strategy, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Registered after the CLI was imported, `best_first` is listed by `run --help` with its description,
    accepted by `--strategy` and run: its revisions start from the best round (the loop's from the last)."""
    import json

    from typer.testing import CliRunner

    import reflection_graph.cli as cli

    gen = RecordingChatModel()
    scores = iter([6.0, 2.0, 3.0])
    crit = FakeCriticModel(
        critiques=[lambda m: critique(next(scores), issues=[f"issue {len(crit.received)}"])]
    )
    monkeypatch.setattr(
        cli._graph, "_resolve_model", lambda spec, options, role: crit if role == "critic" else gen
    )
    runner = CliRunner()
    shown = runner.invoke(cli.app, ["run", "--help"], env={"COLUMNS": "300"})
    assert shown.exit_code == 0
    help_text = " ".join(shown.stdout.replace("│", " ").split())  # rich's box, unwrapped
    assert "<loop|self_refine|resample|tree|best_first>" in help_text
    assert "'best_first' revise the best candidate so far" in help_text
    args = ["run", "Write a haiku", "--critic", "c", "--strategy", "best_first", "-n", "3", "--json"]
    result = runner.invoke(cli.app, args)
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert "draft 1" in gen.prompts[1] and "draft 1" in gen.prompts[2] and "draft 2" not in gen.prompts[2]
    assert data["stop_reason"] == "max_iterations" and data["candidate"] == "draft 1"
    strategies.unregister("best_first")
    gone = runner.invoke(cli.app, ["run", "t", "--strategy", "best_first"])
    assert gone.exit_code == 2
    assert gone.stderr.strip() == (
        "error: --strategy must be one of 'loop', 'self_refine', 'resample' or 'tree', got 'best_first'"
    )
    assert "best_first" not in runner.invoke(cli.app, ["run", "--help"], env={"COLUMNS": "300"}).stdout


USER_CLI = """
from reflection_graph import strategies
from reflection_graph.cli import main
from reflection_graph.strategies import Strategy


class Patient(Strategy):
    name = "patient"
    description = "the loop with no plateau stop"
    forces = {"patience": None, "stop_on_no_new_issues": False}


strategies.register(Patient())
main()
"""


def test_a_users_script_registers_a_strategy_and_runs_the_real_cli_on_it(tmp_path: Path) -> None:
    """The recipe for the shell: a script that registers its strategy, then calls `reflection_graph.cli.main`.
    Run as its own process against an OpenAI-compatible server on loopback (a fake whose critic scores 9 every
    round, never --threshold 10): `patient` runs every round, where `loop` stops at a plateau (patience 2)."""
    import json
    import os
    import subprocess
    import sys

    from tests._fake_openai import fake_openai_server

    script = tmp_path / "my_cli.py"
    script.write_text(USER_CLI, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with fake_openai_server() as (url, fake):

        def run(strategy: str) -> dict[str, Any]:
            args = [
                "run",
                "Write a line",
                "--model",
                "fake",
                "--base-url",
                url,
                "--threshold",
                "10",
                "-n",
                "5",
            ]
            proc = subprocess.run(
                [sys.executable, str(script), *args, "--strategy", strategy, "--json"],
                capture_output=True,
                text=True,
                env=env,
                cwd=tmp_path,
                timeout=300,
            )
            assert proc.returncode == 0, proc.stderr
            return dict(json.loads(proc.stdout))

        patient, loop = run("patient"), run("loop")
    assert (patient["stop_reason"], patient["iterations"]) == ("max_iterations", 5)
    assert (loop["stop_reason"], loop["iterations"]) == ("plateau", 3)
    assert fake.requests["critique"] == 5 + 3


def test_each_strategy_draws_its_own_edges_after_the_critique() -> None:
    for name, after in (("loop", {"generate", "finalize"}), ("self_refine", {"generate", "finalize"})):
        graph = create_reflection_graph(RecordingChatModel(), critic=never_accepting(), strategy=name)
        edges = {(e.source, e.target) for e in graph.get_graph().edges}
        assert {t for s, t in edges if s == "critique"} == after, name
    tree = create_reflection_graph(
        RecordingChatModel(), critic=never_accepting(), strategy="tree"
    ).get_graph()
    edges = {(e.source, e.target): e.conditional for e in tree.edges}
    assert {t for s, t in edges if s == "critique"} == {"select", "finalize"}
    assert edges[("select", "generate")] is False and edges[(START, "generate")] is False
    assert ("finalize", END) in edges
    assert "critique -.-> select;" in tree.draw_mermaid() and "select --> generate;" in tree.draw_mermaid()


def test_no_module_outside_the_strategies_package_tests_a_strategys_name() -> None:
    pattern = re.compile(r"""strategy\s*(==|!=|in)\s*[("'\[]""")
    found = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in (ROOT / "reflection_graph").rglob("*.py")
        if "strategies" not in path.parts
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if pattern.search(line)
    ]
    assert found == []
