"""The options of a batch or eval job: one default in Python and on the command line."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from reflection_graph import cli, run_batch
from tests.runners.test_batch import FakeGraph, write_tasks

runner = CliRunner()


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
    assert on_cli.peak == in_python.peak == 4
