"""A total token budget for a batch or an eval, and the eval report capped at a per-record budget."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import typer.main
from langchain_core.messages import BaseMessage
from typer.testing import CliRunner

from reflection_graph import cli, create_reflection_graph, evaluate, run_batch
from reflection_graph.cli import app
from reflection_graph.models import resolve_model
from tests.fakes import critique
from tests.runners.test_eval import (
    QUIZ,
    RECORDS,
    CliQuiz,
    QuizCritic,
    write_quiz,
)
from tests.test_budgets import Metered, MeteredCritic

PIL = pytest.importorskip("PIL.Image", reason='needs pip install "reflection-graph[eval]"')


def write_records(path: Path, n: int) -> None:
    path.write_text("".join(json.dumps({"id": f"r{i}", "task": f"task {i}"}) + "\n" for i in range(1, n + 1)))


def test_records_not_started_once_the_total_is_spent_are_resumable_budget_entries(tmp_path: Path) -> None:
    # every record: one draft and one accepting critique at 100 tokens each = 200 tokens. With 450 for the
    # whole run and one record at a time: r1 (0 used), r2 (200), r3 (400 < 450) run; r4 and r5 find 600 used.
    in_path, out_path = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    write_records(in_path, 5)
    gen, crit = Metered(), MeteredCritic(critiques=[critique(9, ok=True)])
    graph = create_reflection_graph(gen, critic=crit)
    summary = run_batch(graph, in_path, out_path, concurrency=1, progress=False, token_budget=450)
    entries = {e["id"]: e for e in map(json.loads, out_path.read_text().splitlines())}
    assert [entries[f"r{i}"]["status"] for i in range(1, 6)] == ["ok", "ok", "ok", "error", "error"]
    assert entries["r4"]["error_type"] == "budget" and entries["r4"]["error"].startswith("skipped: budget")
    assert "600 tokens reached its token budget of 450" in entries["r5"]["error"]
    assert summary.ok == 3 and summary.errors_by_type == {"budget": 2} and summary.run_tokens == 600
    assert len(gen.received) == 3

    again = run_batch(graph, in_path, out_path, concurrency=1, progress=False, token_budget=1000)
    assert again.ok == 5 and again.processed == 2 and again.run_tokens == 400  # only the two skipped ran
    assert len(gen.received) == 5


def test_a_bad_total_is_refused_before_anything_runs(tmp_path: Path) -> None:
    in_path = tmp_path / "in.jsonl"
    write_records(in_path, 1)
    with pytest.raises(ValueError, match=r"token_budget must be an integer >= 1 or None \(no total\), got 0"):
        run_batch(lambda: None, in_path, tmp_path / "out.jsonl", progress=False, token_budget=0)
    assert not (tmp_path / "out.jsonl").exists()


# the quiz of tests/runners/test_eval.py (three rounds a question), with each round's draft at 100 tokens
def quiz_graph() -> Any:
    calls: dict[str, int] = {}

    def reply(messages: list[BaseMessage]) -> str:
        q = re.search(r"\[(Q\d)\]", "\n".join(str(m.content) for m in messages)).group(1)  # type: ignore[union-attr]
        calls[q] = calls.get(q, 0) + 1
        return QUIZ[q][1][calls[q] - 1]

    return create_reflection_graph(
        Metered(replies=[reply]), critic=QuizCritic(), max_iterations=3, min_iterations=3
    )


def test_the_eval_report_caps_the_rounds_at_a_budget_and_names_the_records_it_stopped(tmp_path: Path) -> None:
    full = evaluate(RECORDS, out_dir=tmp_path / "full", graph=quiz_graph(), progress=False, plot=False)
    assert [r.hit_budget for r in full.rounds] == [0, 0, 0] and full.budget_hits == []

    # 250 tokens a record: rounds 1 (100) and 2 (200) fit, round 3 (300) does not, for every question.
    capped = evaluate(
        RECORDS, out_dir=tmp_path / "capped", graph=quiz_graph(), progress=False, plot=False, budget=250
    )
    assert [r.round for r in capped.rounds] == [1, 2]
    assert [r.hit_budget for r in capped.rounds] == [0, 4] and capped.budget_hits == ["Q1", "Q2", "Q3", "Q4"]
    # selected with two rounds (best critic score): Paris, Rome, Madrid right; Porto (6) beats Lisbon (3)
    assert [r.mean_selected for r in capped.rounds] == [0.5, 0.75]
    assert [r.cum_tokens for r in capped.rounds] == [100.0, 200.0]
    rows = [json.loads(line) for line in (tmp_path / "capped" / "rounds.jsonl").read_text().splitlines()]
    assert [(r["id"], r["round"]) for r in rows if r["over_budget"]] == [(q, 3) for q in QUIZ]
    assert all(r["hit_budget"] for r in rows)
    with pytest.raises(ValueError, match="budget must be an integer >= 1"):
        evaluate(RECORDS, out_dir=tmp_path / "bad", graph=quiz_graph(), progress=False, plot=False, budget=0)


def test_batch_and_eval_take_a_total_and_eval_a_cap_on_the_cli() -> None:
    commands = typer.main.get_command(app).commands  # type: ignore[attr-defined]
    opts = {name: {o for p in commands[name].params for o in p.opts} for name in ("batch", "eval")}
    assert "--token-budget-total" in opts["batch"] and {"--token-budget-total", "--budget"} <= opts["eval"]


def test_eval_on_the_cli_passes_the_run_budget_and_names_the_records_it_stopped(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # a plain-callable model names no reply limit: each call is estimated at 1,024 tokens and more, so a
    # one-token budget refuses every first draft and every record stops with `budget`
    model = CliQuiz()
    monkeypatch.setattr(
        cli._graph, "_resolve_model", lambda spec, options, role: resolve_model(model, role=role)
    )
    data = write_quiz(tmp_path / "quiz.jsonl")
    args = ["eval", str(data), "--out", str(tmp_path / "out"), "--no-progress", "--token-budget", "1"]
    result = CliRunner().invoke(cli.app, [*args, "--budget", "5"])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())  # the console wraps long lines
    assert "budget: capped at 5 tokens per record; records a token budget stopped: Q1, Q2, Q3, Q4" in text
    runs = [json.loads(line) for line in (tmp_path / "out" / "runs.jsonl").read_text().splitlines()]
    assert {r["stop_reason"] for r in runs} == {"budget"} and model.generate.received == []
