"""The options of a batch or eval job: one `JobOptions`, checked once, the same from Python and the CLI."""

from __future__ import annotations

import dataclasses
import typing
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from reflection_graph import cli, evaluate, run_batch
from reflection_graph.models import resolve_model
from reflection_graph.runners import JobOptions
from reflection_graph.runners import batch as batch_module
from reflection_graph.runners import eval as eval_module
from reflection_graph.runners._job import JobKwargs, chosen_job
from tests.runners.test_batch import FakeGraph, write_tasks
from tests.runners.test_eval import CliQuiz, write_quiz

runner = CliRunner()

# a field, a bad value, the one-line message
BAD = [
    ("concurrency", 0, "concurrency must be an integer >= 1, got 0"),
    ("concurrency", 2.5, "concurrency must be an integer >= 1, got 2.5"),
    ("timeout_s", 0, "timeout_s must be a number > 0 or None (no timeout), got 0"),
    ("timeout_s", True, "timeout_s must be a number > 0 or None (no timeout), got True"),
    ("timeout_s", "5", "timeout_s must be a number > 0 or None (no timeout), got '5'"),
    ("timeout_s", float("nan"), "timeout_s must be a number > 0 or None (no timeout), got nan"),
    ("retries", -1, "retries must be an integer >= 0, got -1"),
    ("retries", None, "retries must be an integer >= 0, got None"),
    ("token_budget", 0, "token_budget must be an integer >= 1 or None (no total), got 0"),
    ("token_budget", 1.5, "token_budget must be an integer >= 1 or None (no total), got 1.5"),
    ("progress", "no", "progress must be True or False, got 'no'"),
]
# the flags, the one-line error
BAD_FLAGS = [
    (["-c", "0"], "--concurrency must be an integer >= 1, got 0"),
    (["--timeout", "0"], "--timeout must be a number > 0 or None (no timeout), got 0.0"),
    (["--retries", "-1"], "--retries must be an integer >= 0, got -1"),
    (["--token-budget-total", "0"], "--token-budget-total must be an integer >= 1 or None (no total), got 0"),
]


@pytest.mark.parametrize(("field", "value", "message"), BAD)
def test_every_bad_field_is_refused_in_one_line_by_the_object_and_both_runners(
    tmp_path: Path, field: str, value: Any, message: str
) -> None:
    with pytest.raises(ValueError) as made:
        JobOptions(**{field: value})
    assert str(made.value) == message
    in_path, out_path = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    write_tasks(in_path, 2)
    graph = FakeGraph()
    options: Any = {"progress": False, field: value}
    with pytest.raises(ValueError) as batched:
        run_batch(graph, in_path, out_path, **options)
    with pytest.raises(ValueError) as evaluated:
        evaluate(in_path, out_dir=tmp_path / "eval", graph=graph, plot=False, **options)
    assert str(batched.value) == str(evaluated.value) == message
    assert graph.calls == [] and not out_path.exists() and not (tmp_path / "eval").exists()


@pytest.mark.parametrize("command", ["batch", "eval"])
@pytest.mark.parametrize(("flags", "message"), BAD_FLAGS)
def test_every_bad_flag_is_refused_in_one_line_naming_the_flag(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: str, flags: list[str], message: str
) -> None:
    graph = FakeGraph()
    monkeypatch.setattr(cli._graph, "build_graph", lambda options, **kw: graph)
    in_path, out = tmp_path / "in.jsonl", tmp_path / "out"
    write_tasks(in_path, 2)
    args = [str(in_path), str(out)] if command == "batch" else [str(in_path), "--out", str(out)]
    result = runner.invoke(cli.app, [command, *args, *flags])
    assert result.exit_code == 2, result.output
    assert result.stderr == f"error: {message}\n"
    assert graph.calls == [] and not out.exists()


def _recorded(target: Any, seen: list[Any]) -> Any:
    """`target` (a runner), recording the `job` each call receives."""

    def call(*args: Any, **kwargs: Any) -> Any:
        seen.append(kwargs["job"])
        return target(*args, **kwargs)

    return call


def test_the_batch_runner_runs_with_the_job_options_the_cli_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    in_path = tmp_path / "in.jsonl"
    write_tasks(in_path, 3)
    monkeypatch.setattr(cli._graph, "build_graph", lambda options, **kw: FakeGraph())
    built: list[Any] = []
    received: list[Any] = []
    monkeypatch.setattr(cli._batch, "run_batch", _recorded(run_batch, built))
    monkeypatch.setattr(batch_module, "arun_batch", _recorded(batch_module.arun_batch, received))
    flags = ["-c", "3", "--timeout", "5", "--retries", "1", "--token-budget-total", "1000", "--no-progress"]
    result = runner.invoke(cli.app, ["batch", str(in_path), str(tmp_path / "out.jsonl"), *flags])
    assert result.exit_code == 0, result.output
    expected = JobOptions(concurrency=3, timeout_s=5.0, retries=1, token_budget=1000, progress=False)
    assert built == [expected] and received[0] is built[0]


def test_the_eval_runs_its_batch_with_the_job_options_the_cli_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = CliQuiz()
    monkeypatch.setattr(
        cli._graph, "_resolve_model", lambda spec, options, role: resolve_model(model, role=role)
    )
    data = write_quiz(tmp_path / "quiz.jsonl")
    built: list[Any] = []
    received: list[Any] = []
    monkeypatch.setattr(cli._eval, "evaluate", _recorded(evaluate, built))
    monkeypatch.setattr(eval_module, "arun_batch", _recorded(eval_module.arun_batch, received))
    flags = ["-c", "2", "--retries", "2", "--no-progress"]
    result = runner.invoke(cli.app, ["eval", str(data), "--out", str(tmp_path / "out"), *flags])
    assert result.exit_code == 0, result.output
    assert built == [JobOptions(concurrency=2, retries=2, progress=False)] and received[0] is built[0]


def test_keyword_options_go_over_a_job_and_a_job_alone_is_used_as_it_is() -> None:
    job = JobOptions(concurrency=2, retries=3)
    assert chosen_job(job, {}) is job
    assert chosen_job(job, {"concurrency": 5}) == JobOptions(concurrency=5, retries=3)
    assert chosen_job(None, {"timeout_s": 9}) == JobOptions(timeout_s=9)
    with pytest.raises(ValueError, match="concurrency must be an integer >= 1, got 0"):
        chosen_job(job, {"concurrency": 0})
    with pytest.raises(TypeError, match="job must be a JobOptions, got dict"):
        chosen_job({"concurrency": 2}, {})  # type: ignore[arg-type]
    with pytest.raises(dataclasses.FrozenInstanceError):
        job.concurrency = 8  # type: ignore[misc]


def test_the_keyword_options_are_the_fields_of_job_options() -> None:
    assert typing.get_type_hints(JobKwargs) == typing.get_type_hints(JobOptions)
    assert JobKwargs.__required_keys__ == frozenset()


def test_run_batch_runs_as_many_records_at_once_by_default_as_the_cli(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    in_path = tmp_path / "in.jsonl"
    write_tasks(in_path, 12)
    on_cli = FakeGraph()
    monkeypatch.setattr(cli._graph, "build_graph", lambda options, **kw: on_cli)
    result = runner.invoke(cli.app, ["batch", str(in_path), str(tmp_path / "cli.jsonl"), "--no-progress"])
    assert result.exit_code == 0, result.output
    in_python = FakeGraph()
    run_batch(in_python, in_path, tmp_path / "python.jsonl", progress=False)
    assert on_cli.peak == in_python.peak == JobOptions().concurrency == 4
