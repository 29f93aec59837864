"""The HumanEval bench's bookkeeping: records survive a kill, a resumed run redoes nothing, and best-of-N is read
from the visible examples at the token cost it states."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests._bench import bench_module

BENCH = Path(__file__).resolve().parents[1] / "bench"


@pytest.fixture
def he() -> Any:
    with bench_module("_humaneval") as module:
        yield module


def _record(task: str, variant: str, **fields: Any) -> dict[str, Any]:
    return {"run": "r1", "task_id": task, "variant": variant, **fields}


def test_records_are_read_back_and_a_line_cut_by_a_kill_is_skipped(he: Any, tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    results = he.Results(path)
    results.put(_record("HumanEval/40", "raw", solved=True, visible=1.0, tokens=10))
    results.put(_record("HumanEval/40", "loop", solved=False, visible=0.5, tokens=30))
    with path.open("a") as out:
        out.write('{"run": "r1", "task_id": "HumanEval/41", "vari')  # killed mid-write
    again = he.Results(path)
    assert again.get("r1", "HumanEval/40", "raw")["tokens"] == 10
    assert again.get("r1", "HumanEval/40", "loop")["solved"] is False
    assert again.get("r1", "HumanEval/41", "raw") is None
    assert again.get("other run", "HumanEval/40", "raw") is None


def test_a_resumed_run_makes_only_the_records_it_lacks(he: Any, tmp_path: Path, monkeypatch: Any) -> None:
    made: list[str] = []

    def fake(name: str) -> Any:
        def run(*args: Any, **kwargs: Any) -> dict[str, Any]:
            made.append(name)
            return {"solved": True, "visible": 1.0, "tokens": 5}

        return run

    monkeypatch.setattr(he, "raw_record", fake("raw"))
    monkeypatch.setattr(he, "samples_record", fake("samples"))
    monkeypatch.setattr(he, "graph_record", lambda *a, **k: fake(a[4] or "loop")())  # None: the code defaults
    results = he.Results(tmp_path / "r.jsonl")
    results.put(_record("HumanEval/40", "raw", solved=True, visible=1.0, tokens=5))
    problem = {"task_id": "HumanEval/40"}
    he.run_problem(problem, None, None, None, results, "r1", {}, samples=2)
    assert made == ["loop", "samples", "tree"]
    he.run_problem(problem, None, None, None, he.Results(tmp_path / "r.jsonl"), "r1", {}, samples=2)
    assert made == ["loop", "samples", "tree"], "everything was recorded: nothing runs again"


def test_a_run_with_a_baseline_takes_raw_samples_and_tree_from_it_and_makes_only_its_loop(
    he: Any, tmp_path: Path, monkeypatch: Any
) -> None:
    made: list[str] = []
    monkeypatch.setattr(he, "graph_record", lambda *a, **k: made.append(a[4] or "loop") or {"solved": True})
    monkeypatch.setattr(he, "raw_record", lambda *a, **k: made.append("raw") or {})
    monkeypatch.setattr(he, "samples_record", lambda *a, **k: made.append("samples") or {})
    results = he.Results(tmp_path / "r.jsonl")
    for variant in ("raw", "loop", "samples", "tree"):
        results.put(_record("HumanEval/40", variant, tokens=len(variant)))  # run r1: the baseline
    results.baseline = "r1"
    he.run_problem({"task_id": "HumanEval/40"}, None, None, None, results, "r2", {}, samples=2)
    assert made == ["loop"]  # the new settings' loop only
    assert results.get("r2", "HumanEval/40", "raw")["run"] == "r1"
    assert results.get("r2", "HumanEval/40", "loop")["run"] == "r2"
    assert results.get("r2", "HumanEval/40", "revising") == results.get("r1", "HumanEval/40", "loop")
    results.baseline = None
    assert (
        results.get("r2", "HumanEval/40", "raw") is None
        and results.get("r2", "HumanEval/40", "revising") is None
    )


def _row(raw: dict[str, Any], samples: list[dict[str, Any]] | None) -> dict[str, Any]:
    return {
        "raw": {"task_id": "HumanEval/40", **raw},
        "samples": {"drawn": samples is not None, "candidates": samples or []},
    }


def test_best_of_n_picks_by_the_visible_examples_and_states_its_tokens(he: Any) -> None:
    raw = {"solved": False, "visible": 0.5, "tokens": 100}
    samples = [
        {"solved": False, "visible": 0.0, "tokens": 120},
        {"solved": True, "visible": 1.0, "tokens": 90},
        {"solved": False, "visible": 1.0, "tokens": 80},  # passes the examples too, but later: not picked
    ]
    row = _row(raw, samples)
    assert he.best_of(row, 1) == (False, 100.0, False)
    assert he.best_of(row, 2) == (False, 220.0, False)  # 0.5 beats 0.0: raw is kept
    assert he.best_of(row, 3) == (True, 310.0, False)
    assert he.best_of(row, 4) == (True, 390.0, False)
    assert he.best_of(row, 5) == (None, 0.0, False), "samples not drawn are not made up"
    passing = _row({"solved": True, "visible": 1.0, "tokens": 100}, None)
    assert he.best_of(passing, 3) == (True, 300.0, True), "raw passes every example: picked, tokens estimated"


def test_the_summary_counts_gains_losses_and_best_of_n_at_the_loops_tokens(he: Any) -> None:
    def row(task: str, raw: tuple[bool, float], loop: bool, loop_tokens: int) -> dict[str, Any]:
        samples = None if raw[1] == 1.0 else [{"solved": loop, "visible": 1.0, "tokens": 100}]
        out = _row({"solved": raw[0], "visible": raw[1], "tokens": 100}, samples)
        out["raw"]["task_id"] = task
        out["loop"] = {"solved": loop, "tokens": loop_tokens, "first_solved": raw[0]}
        out["tree"] = {"solved": loop, "tokens": loop_tokens}
        return out

    rows = [
        row("HumanEval/40", (True, 1.0), True, 100),
        row("HumanEval/41", (False, 0.0), True, 300),
        row("HumanEval/42", (True, 1.0), False, 100),  # a loss where raw passed its examples
    ]
    s = he.summary(rows, max_n=4)
    assert (s["raw"], s["loop"], s["first"]) == (2, 2, 2)
    assert s["loop_gained"] == ["HumanEval/41"] and s["loop_lost"] == ["HumanEval/42"]
    assert s["loop_tokens"] == pytest.approx(500 / 3)
    assert list(s["best"]) == [1, 2], "only one sample drawn: best-of-3 cannot be read"
    assert s["best"][2] == {"solved": 3, "tokens": 200.0, "estimated": 2}
    assert he.equal_tokens(s["best"], s["loop_tokens"]) == (1, 2)
