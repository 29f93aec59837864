"""One `Settings` from every entry point: the CLI's `run` and `batch` build the graph Python builds from the same
choices, for every focus and strategy, with the setup's defaults (the code focus's with tests) under what was set."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from reflection_graph import Settings, create_reflection_graph, strategies
from reflection_graph import graph as graph_module
from reflection_graph.cli import app
from reflection_graph.critics.code_tests import CodeTestCritic
from reflection_graph.loop import setup_of
from reflection_graph.settings import allowed_values
from tests.fakes import RecordingChatModel

runner = CliRunner()
STUB = 'def clamp(x, low, high):\n    """Return x limited to [low, high]."""\n'
TESTS = "from solution import clamp\n\n\ndef test_above():\n    assert clamp(9, 0, 3) == 3\n"
FOCUSES = [None, *allowed_values("focus")]  # None: no --focus given


class Built(Exception):
    """Raised by the recording factory once the CLI's graph is built, so no model runs."""


def built_settings(graph: Any) -> Settings:
    """The settings a compiled reflection graph was built with (its nodes share them)."""
    return setup_of(graph).overrides.settings


@pytest.fixture
def cli_graph(monkeypatch: pytest.MonkeyPatch) -> Any:
    """`cli_graph(*args)`: the graph a CLI command builds (with a fake model), stopped before it runs."""
    import reflection_graph.cli as cli

    monkeypatch.setattr(cli._graph, "_resolve_model", lambda spec, options, role: RecordingChatModel())
    graphs: list[Any] = []
    real = graph_module.create_reflection_graph

    def recording(*args: Any, **kwargs: Any) -> Any:
        graphs.append(real(*args, **kwargs))
        raise Built

    monkeypatch.setattr(cli._graph, "create_reflection_graph", recording)

    def build(*args: str) -> Any:
        result = runner.invoke(app, list(args))
        assert isinstance(result.exception, Built), (result.exit_code, result.stderr, result.exception)
        return graphs.pop()

    return build


def _flags(focus: str | None, strategy: str, extra: dict[str, Any]) -> list[str]:
    flags = ["--strategy", strategy] + (["--focus", focus] if focus else [])
    for name, value in extra.items():
        flags += ["--" + name.replace("_", "-"), str(value)]
    return flags


@pytest.mark.parametrize("strategy", strategies.names())
@pytest.mark.parametrize("focus", FOCUSES)
@pytest.mark.parametrize("extra", [{}, {"n_revisions": 1}, {"max_iterations": 5, "n_drafts": 2}])
def test_run_with_tests_builds_the_settings_python_builds(
    cli_graph: Any, tmp_path: Path, focus: str | None, strategy: str, extra: dict[str, Any]
) -> None:
    tests = tmp_path / "tests.py"
    tests.write_text(TESTS)
    from_cli = built_settings(cli_graph("run", STUB, "--tests", str(tests), *_flags(focus, strategy, extra)))
    # `--tests` is a CodeTestCritic, and the code focus unless --focus says otherwise
    from_python = built_settings(
        create_reflection_graph(
            RecordingChatModel(),
            critic=CodeTestCritic(TESTS),
            focus=focus or "code",
            strategy=strategy,
            **extra,
        )
    )
    assert from_cli == from_python
    forced = strategies.get(strategy).forces
    if (focus or "code") == "code":  # the code defaults fill what was not set (or forced), and only that
        for name, value in {"n_drafts": 1, "n_revisions": 2, "max_iterations": 3}.items():
            assert getattr(from_cli, name) == forced.get(name, extra.get(name, value)), name
    else:
        assert (from_cli.n_drafts, from_cli.n_revisions) == (
            extra.get("n_drafts", 1),
            extra.get("n_revisions", 1),
        )


@pytest.mark.parametrize("command", ["run", "batch"])
@pytest.mark.parametrize("strategy", strategies.names())
@pytest.mark.parametrize("focus", FOCUSES)
def test_run_and_batch_with_a_model_critic_build_the_settings_python_builds(
    cli_graph: Any, tmp_path: Path, command: str, focus: str | None, strategy: str
) -> None:
    extra = {"patience": 1, "n_revisions": 1}  # set to the default: still the caller's own
    if command == "run":
        args = ["run", "Write a haiku"]
    else:
        (tmp_path / "in.jsonl").write_text('{"task": "Write a haiku"}\n')
        args = ["batch", str(tmp_path / "in.jsonl"), str(tmp_path / "out.jsonl"), "--no-progress"]
    from_cli = built_settings(cli_graph(*args, *_flags(focus, strategy, extra)))
    chosen = {"focus": focus} if focus else {}
    from_python = built_settings(
        create_reflection_graph(RecordingChatModel(), strategy=strategy, **chosen, **extra)  # type: ignore[arg-type]
    )
    assert from_cli == from_python


def test_a_cli_default_is_not_a_choice_and_a_given_default_is(cli_graph: Any, tmp_path: Path) -> None:
    """The issue's case: `run --tests` used to get n_revisions=1 (every CLI default counted as set) where Python
    got 2; `--n-revisions 1` given on the command line is the caller's choice and wins over the code default."""
    tests = tmp_path / "tests.py"
    tests.write_text(TESTS)
    plain = cli_graph("run", STUB, "--tests", str(tests))
    assert built_settings(plain).n_revisions == 2
    assert built_settings(plain).given == frozenset()  # focus=code came from --tests, a layer too
    chosen = built_settings(cli_graph("run", STUB, "--tests", str(tests), "--n-revisions", "1"))
    assert chosen.n_revisions == 1 and chosen.given == {"n_revisions"}
    general = built_settings(cli_graph("run", STUB, "--tests", str(tests), "--focus", "general"))
    assert general.focus == "general" and general.n_revisions == 1  # --focus general given: no code focus


def test_python_takes_one_settings_object_as_it_is_with_keywords_over_it() -> None:
    critic = CodeTestCritic(TESTS)
    made = Settings(focus="code", n_revisions=1)
    graph = create_reflection_graph(RecordingChatModel(), critic=critic, settings=made)
    assert built_settings(graph) == Settings(
        focus="code",
        strategy="resample",
        n_drafts=1,
        n_revisions=1,
        max_iterations=3,
        patience=None,
        stop_on_no_new_issues=False,
    )
    over = create_reflection_graph(RecordingChatModel(), critic=critic, settings=made, max_iterations=6)
    assert built_settings(over).max_iterations == 6 and built_settings(over).n_revisions == 1
    with pytest.raises(TypeError, match="settings must be a reflection_graph.Settings"):
        create_reflection_graph(RecordingChatModel(), settings={"focus": "code"})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_iterations must be >= 1"):
        create_reflection_graph(RecordingChatModel(), settings=made, max_iterations=0)


def test_a_layer_or_an_override_validates_what_it_changes_and_keeps_what_was_given() -> None:
    made = Settings(max_iterations=4)
    assert made.given == {"max_iterations"}
    layered = made.with_defaults({"max_iterations": 9, "n_revisions": 3})
    assert (layered.max_iterations, layered.n_revisions, layered.given) == (4, 3, {"max_iterations"})
    run = layered.override(patience=None, select="last")  # None: as built
    assert run.patience == 2 and run.select == "last" and run.given == {"max_iterations", "select"}
    with pytest.raises(ValueError, match="n_revisions must be <= 16"):
        made.with_defaults({"n_revisions": 99})
    with pytest.raises(ValueError, match="min_iterations must be between 1 and max_iterations"):
        made.apply({"min_iterations": 5})
    with pytest.raises(TypeError, match=r"unknown setting\(s\) \['rounds'\]"):
        made.apply({"rounds": 2})
    assert made.apply({}) is made and made == Settings(max_iterations=4)  # equal values: equal settings
