"""The resumable batch engine: isolation of failures, resume, crash safety, bad input lines."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from reflection_graph.runners.batch import arun_batch, read_input, read_output, run_batch, summary_path

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).parents[1] / "data"


class FakeGraph:
    """A stand-in for a compiled reflection graph: deterministic results, injectable failures.

    `behaviour` maps a record id to "raise", "timeout" (sleeps far past any test timeout) or "graph_error"
    (returns stop_reason "error"). It records every call and the peak number of concurrent calls.
    """

    def __init__(self, behaviour: dict[Any, str] | None = None, delay: float = 0.0) -> None:
        self.behaviour = dict(behaviour or {})
        self.delay = delay
        self.calls: list[Any] = []
        self.inputs: list[dict[str, Any]] = []
        self.active = 0
        self.peak = 0

    async def ainvoke(self, input: dict[str, Any], config: dict[str, Any] | None = None) -> dict[str, Any]:
        record_id = (config or {}).get("metadata", {}).get("batch_id")
        self.calls.append(record_id)
        self.inputs.append(input)
        self.active += 1
        self.peak = max(self.peak, self.active)
        try:
            await asyncio.sleep(self.delay)
            mode = self.behaviour.get(record_id)
            if mode == "raise":
                raise RuntimeError(f"injected failure for {record_id}")
            if mode == "timeout":
                await asyncio.sleep(30)
            if mode == "graph_error":
                return {
                    "candidate": "",
                    "stop_reason": "error",
                    "error": "should_refine raised",
                    "trajectory": [],
                }
            draft = input.get("candidate") or f"draft for {input['task']}"
            final = draft + " (revised)"
            return {
                "candidate": final,
                "critique": {"score": 8.0, "is_acceptable": True, "issues": [], "feedback": "good"},
                "trajectory": [
                    {"iteration": 1, "candidate": draft, "score": 5.0, "critique": {"score": 5.0}},
                    {"iteration": 2, "candidate": final, "score": 8.0, "critique": {"score": 8.0}},
                ],
                "iterations": 2,
                "stop_reason": "accepted",
                "error": None,
                "usage": {"total": {"input_tokens": 7, "output_tokens": 3, "total_tokens": 10, "calls": 4}},
            }
        finally:
            self.active -= 1


def write_tasks(path: Path, n: int) -> list[str]:
    ids = [f"r{i:03d}" for i in range(n)]
    with open(path, "w", encoding="utf-8") as fh:
        for i, rid in enumerate(ids):
            fh.write(json.dumps({"id": rid, "task": f"task number {i}", "topic": i % 3}) + "\n")
    return ids


def out_entries(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_fifty_records_failures_then_resume(tmp_path: Path) -> None:
    in_path, out_path = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    ids = write_tasks(in_path, 50)
    failing = {rid: "raise" for rid in ids[0:50:10]}  # 5 exceptions
    failing.update({rid: "timeout" for rid in ids[5:50:10]})  # 5 timeouts
    failing[ids[3]] = "graph_error"  # the graph itself reports an error
    graph = FakeGraph(failing, delay=0.01)

    first = run_batch(graph, in_path, out_path, concurrency=6, timeout_s=0.3, progress=False)

    assert graph.peak <= 6 and graph.peak > 1  # bounded, but really concurrent
    assert sorted(graph.calls) == sorted(ids)
    assert (first.records, first.ok, first.error, first.skipped, first.processed) == (50, 39, 11, 0, 50)
    assert first.errors_by_type == {"exception": 5, "graph": 1, "timeout": 5}
    assert first.error_samples[:2] == [
        "r000: RuntimeError: injected failure for r000",
        "r003: should_refine raised",
    ]
    entries = out_entries(out_path)
    assert [e["id"] for e in entries] == ids  # exactly once each, in input order
    by_id = {e["id"]: e for e in entries}
    assert by_id[ids[0]]["status"] == "error" and "injected failure" in by_id[ids[0]]["error"]
    assert by_id[ids[5]]["error_type"] == "timeout" and "timed out after 0.3s" in by_id[ids[5]]["error"]
    assert by_id[ids[3]]["error"] == "should_refine raised"
    ok = by_id[ids[1]]
    assert ok["status"] == "ok" and ok["candidate"].endswith("(revised)")
    assert (ok["score"], ok["first_score"], ok["stop_reason"], ok["iterations"]) == (8.0, 5.0, "accepted", 2)
    assert ok["metadata"] == {"topic": 1} and ok["task"] == "task number 1"
    assert first.total_tokens == 39 * 10 and first.stop_reasons == {"accepted": 39}
    assert first.mean_score_gain == pytest.approx(3.0)

    # Rerun with the failures gone: only the 11 failed records run again.
    graph.behaviour.clear()
    graph.calls.clear()
    second = run_batch(graph, in_path, out_path, concurrency=6, timeout_s=0.3, progress=False)
    assert sorted(graph.calls) == sorted(set(failing))
    assert (second.ok, second.error, second.skipped, second.processed, second.retried) == (50, 0, 39, 11, 11)
    assert second.run_tokens == 11 * 10 and second.total_tokens == 50 * 10
    entries = out_entries(out_path)
    assert [e["id"] for e in entries] == ids and all(e["status"] == "ok" for e in entries)
    assert json.loads(summary_path(out_path).read_text())["ok"] == 50

    # A third run has nothing to do and does not call (or even build) the graph.
    def factory() -> FakeGraph:
        raise AssertionError("the factory must not be called when nothing is pending")

    third = run_batch(factory, in_path, out_path, progress=False)
    assert (third.ok, third.skipped, third.processed) == (50, 50, 0)


def test_retries_within_one_run(tmp_path: Path) -> None:
    in_path, out_path = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    write_tasks(in_path, 3)

    class Flaky(FakeGraph):
        async def ainvoke(
            self, input: dict[str, Any], config: dict[str, Any] | None = None
        ) -> dict[str, Any]:
            rid = (config or {}).get("metadata", {}).get("batch_id")
            self.behaviour[rid] = "raise" if self.calls.count(rid) == 0 else ""
            return await super().ainvoke(input, config)

    graph = Flaky()
    summary = run_batch(graph, in_path, out_path, retries=1, progress=False)
    assert summary.ok == 3 and len(graph.calls) == 6
    assert {e["attempts"] for e in out_entries(out_path)} == {2}


def test_bad_lines_become_per_line_errors(tmp_path: Path) -> None:
    out_path = tmp_path / "out.jsonl"
    graph = FakeGraph()
    summary = run_batch(graph, DATA / "batch_small.jsonl", out_path, progress=False)
    entries = out_entries(out_path)
    assert len(entries) == 7 and summary.records == 7
    assert (summary.ok, summary.error, summary.input_errors) == (4, 3, 3)
    errors = {e["line"]: e for e in entries if e["status"] == "error"}
    assert set(errors) == {5, 6, 7}
    assert errors[5]["error"].startswith("line 5: not valid JSON:")
    assert errors[6]["error"].startswith("line 6: missing `task`")
    assert errors[7]["error"].startswith('line 7: duplicate id "haiku" (already used on line 2)')
    assert all(e["error_type"] == "input" for e in errors.values())
    assert summary.error_samples == [errors[n]["error"] for n in (5, 6, 7)]
    # Records without an id are identified by their line number; glean inputs are passed through.
    ok_ids = [e["id"] for e in entries if e["status"] == "ok"]
    assert ok_ids == ["decline-offer", "haiku", "glean-summary", 4]
    glean = next(i for i in graph.inputs if "candidate" in i)
    assert glean["candidate"] == "LangGraph is a thing." and glean["context"].startswith(
        "LangGraph is a library"
    )

    # Input errors are not retried: the rerun calls the graph for nothing and keeps one entry per line.
    graph.calls.clear()
    again = run_batch(graph, DATA / "batch_small.jsonl", out_path, progress=False)
    assert graph.calls == [] and again.input_errors == 3 and len(out_entries(out_path)) == 7


def test_fixed_input_line_is_run_on_resume(tmp_path: Path) -> None:
    in_path, out_path = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    in_path.write_text('{"id": "a", "task": "one"}\n{"id": "b", "task": ""}\n[1, 2]\n')
    first = run_batch(FakeGraph(), in_path, out_path, progress=False)
    assert (first.ok, first.input_errors) == (1, 2)
    messages = [e["error"] for e in out_entries(out_path) if e["status"] == "error"]
    assert messages == ["line 2: `task` is empty", "line 3: expected a JSON object with a `task`, got list"]

    in_path.write_text(
        '{"id": "a", "task": "one"}\n{"id": "b", "task": "two"}\n{"id": "c", "task": "three"}\n'
    )
    graph = FakeGraph()
    second = run_batch(graph, in_path, out_path, progress=False)
    assert sorted(graph.calls) == ["b", "c"]
    assert (second.ok, second.error, second.input_errors) == (3, 0, 0)
    assert [e["id"] for e in out_entries(out_path)] == ["a", "b", "c"]


def test_truncated_last_line_is_ignored_and_compacted(tmp_path: Path) -> None:
    in_path, out_path = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    ids = write_tasks(in_path, 4)
    run_batch(FakeGraph({ids[2]: "raise"}), in_path, out_path, progress=False)
    # Simulate a crash mid-write, plus a stale duplicate error entry for an id that is ok.
    with open(out_path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps({"id": ids[0], "status": "error", "error": "stale"}) + "\n")
        fh.write('{"id": "r002", "status": "ok", "candid')
    graph = FakeGraph()
    summary = run_batch(graph, in_path, out_path, progress=False)
    assert graph.calls == [ids[2]] and summary.dropped_lines == 1
    entries = out_entries(out_path)
    assert [e["id"] for e in entries] == ids and all(e["status"] == "ok" for e in entries)


def test_entries_for_ids_no_longer_in_input_are_kept(tmp_path: Path) -> None:
    in_path, out_path = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    in_path.write_text('{"id": "old", "task": "x"}\n')
    run_batch(FakeGraph(), in_path, out_path, progress=False)
    in_path.write_text('{"id": "new", "task": "y"}\n')
    summary = run_batch(FakeGraph(), in_path, out_path, progress=False)
    assert summary.records == 1 and summary.ok == 1
    assert [e["id"] for e in out_entries(out_path)] == ["new", "old"]


def test_sigkill_mid_run_loses_nothing(tmp_path: Path) -> None:
    in_path, out_path = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    ids = write_tasks(in_path, 120)
    script = tmp_path / "runner.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import asyncio, sys
            sys.path.insert(0, {str(ROOT)!r})
            sys.path.insert(0, {str(Path(__file__).parent)!r})
            from test_batch import FakeGraph
            from reflection_graph.runners.batch import run_batch
            run_batch(FakeGraph(delay=0.05), {str(in_path)!r}, {str(out_path)!r}, concurrency=4, progress=False)
            """
        )
    )
    proc = subprocess.Popen([sys.executable, str(script)], cwd=tmp_path)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if out_path.exists() and len(out_path.read_bytes().splitlines()) >= 20:
                break
            if proc.poll() is not None:
                pytest.fail(f"runner exited early with code {proc.returncode}")
            time.sleep(0.02)
        else:
            pytest.fail("the runner wrote nothing in 60s")
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL
    done_before, _ = read_output(out_path)
    ok_before = {e["id"] for e in done_before if e["status"] == "ok"}
    assert 20 <= len(ok_before) < 120

    graph = FakeGraph()
    summary = run_batch(graph, in_path, out_path, concurrency=8, progress=False)
    assert set(graph.calls).isdisjoint(ok_before)  # finished records are not redone
    assert len(graph.calls) == 120 - len(ok_before) and summary.skipped == len(ok_before)
    entries = out_entries(out_path)
    assert [e["id"] for e in entries] == ids and all(e["status"] == "ok" for e in entries)


def test_read_input_ids_and_types(tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl"
    path.write_text(
        "\n".join(
            [
                '{"task": "no id, line 1"}',
                "",
                '{"id": 1, "task": "explicit int id 1 collides with line 1"}',
                '{"id": true, "task": "bool id"}',
                '{"id": "x", "task": "t", "candidate": 5}',
                '{"id": "y", "task": "t", "context": null, "extra": [1]}',
            ]
        )
    )
    records, errors = read_input(path)
    assert [(r.id, r.line) for r in records] == [(1, 1), ("y", 6)]
    assert records[1].metadata == {"extra": [1]} and records[1].context is None
    assert [e.message for e in errors] == [
        "line 3: duplicate id 1 (already used on line 1) (records without an `id` are identified by their line number)",
        "line 4: `id` must be a string or an integer, got bool",
        "line 5: `candidate` must be a string or null, got int",
    ]


def test_invalid_options_and_missing_input(tmp_path: Path) -> None:
    in_path = tmp_path / "in.jsonl"
    write_tasks(in_path, 1)
    with pytest.raises(ValueError, match="concurrency must be an integer >= 1"):
        run_batch(FakeGraph(), in_path, tmp_path / "o.jsonl", concurrency=0)
    with pytest.raises(ValueError, match="timeout_s must be a number > 0"):
        run_batch(FakeGraph(), in_path, tmp_path / "o.jsonl", timeout_s=0)
    with pytest.raises(FileNotFoundError, match="input file not found"):
        run_batch(FakeGraph(), tmp_path / "nope.jsonl", tmp_path / "o.jsonl")
    with pytest.raises(TypeError, match="has no `ainvoke`"):
        run_batch(lambda: object(), in_path, tmp_path / "o.jsonl", progress=False)  # type: ignore[arg-type,return-value]


async def test_arun_batch_inside_event_loop(tmp_path: Path) -> None:
    in_path, out_path = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    write_tasks(in_path, 5)
    summary = await arun_batch(FakeGraph(), in_path, out_path, concurrency=2, progress=False)
    assert summary.ok == 5
    with pytest.raises(RuntimeError, match="use `await arun_batch"):
        run_batch(FakeGraph(), in_path, out_path, progress=False)


async def test_sync_twins_refuse_inside_a_running_loop_and_name_the_async_one(tmp_path: Path) -> None:
    from reflection_graph import evaluate, run_batch

    data = tmp_path / "in.jsonl"
    data.write_text('{"id": "1", "task": "t", "reference": "x"}\n')
    with pytest.raises(RuntimeError, match=r"await arun_batch\(\.\.\.\)"):
        run_batch(object(), data, tmp_path / "out.jsonl")
    with pytest.raises(RuntimeError, match=r"await aevaluate\(\.\.\.\)"):
        evaluate(data, out_dir=tmp_path / "eval", graph=object())
    assert not (tmp_path / "out.jsonl").exists() and not (tmp_path / "eval").exists()
