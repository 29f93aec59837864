"""Run budgets: `token_budget` and `time_budget_s` (declared once in `Settings`), the `budget` stop, and the
budget check of the one call layer."""

from __future__ import annotations

import pytest
import typer.main
from typer.testing import CliRunner

from reflection_graph import Context, Settings
from reflection_graph.cli import app

# ------------------------------------------------------------------------------------------- the settings


def test_budgets_are_settings_offered_per_run_and_on_the_cli_but_not_to_the_middleware() -> None:
    fields = Settings.__dataclass_fields__
    assert Settings().token_budget is None and Settings().time_budget_s is None
    for name in ("token_budget", "time_budget_s"):
        assert fields[name].metadata["runtime"] and not fields[name].metadata["agent"]
        assert (
            "max-tokens" in fields[name].metadata["description"]
            or "timeout" in fields[name].metadata["description"]
        )  # each says which per-call limit it is not
    assert Context(token_budget=500).settings(Settings()).token_budget == 500
    assert Context(time_budget_s=2.5).settings(Settings(time_budget_s=9)).time_budget_s == 2.5
    with pytest.raises(ValueError, match="token_budget must be >= 1, got 0"):
        Context(token_budget=0).settings(Settings())
    commands = typer.main.get_command(app).commands  # type: ignore[attr-defined]
    for command in ("run", "batch", "eval"):
        opts = {opt for param in commands[command].params for opt in param.opts}
        assert {"--token-budget", "--time-budget"} <= opts, command


def test_a_bad_budget_on_the_cli_is_one_line_naming_the_flag() -> None:
    result = CliRunner().invoke(app, ["run", "write a haiku", "--token-budget", "0"])
    assert result.exit_code != 0
    assert result.output.strip() == "error: --token-budget must be >= 1"


def test_the_middleware_refuses_a_run_budget_it_could_not_keep() -> None:
    from reflection_graph.middleware import ReflectionMiddleware

    with pytest.raises(TypeError, match=r"\['token_budget'\] shape drafting or budget a whole run"):
        ReflectionMiddleware(lambda prompt: '{"score": 9}', token_budget=100)
