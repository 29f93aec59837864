"""Batch faults found by a probe (issue 13): lone surrogates, line-number ids that move, two runs on one OUT."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from reflection_graph.runners.batch import BatchLocked, lock_path, read_output, run_batch
from tests.runners.test_batch import FakeGraph, out_entries, write_tasks

ROOT = Path(__file__).resolve().parents[2]


# -- fault 4: a lone surrogate must not abort its group commit -------------------------------------------------
def test_lone_surrogate_metadata_does_not_lose_its_group(tmp_path: Path) -> None:
    in_path, out_path = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    lines = [json.dumps({"id": f"r{i}", "task": f"task {i}"}) for i in range(12)]
    lines[5] = (
        '{"id": "bad", "task": "task 5", "note": "caf\\u00e9 \\ud800 lone"}'  # valid JSON, not valid UTF-8
    )
    lines[6] = json.dumps({"id": "r6", "task": "café"}, ensure_ascii=False)
    in_path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    graph = FakeGraph(delay=0.01)  # all 12 finish together, so their entries share one group commit

    summary = run_batch(graph, in_path, out_path, concurrency=12, progress=False)

    assert (summary.ok, summary.error, summary.processed) == (12, 0, 12)
    entries = out_entries(out_path)
    assert [e["id"] for e in entries] == [f"r{i}" if i != 5 else "bad" for i in range(12)]
    assert entries[5]["metadata"] == {"note": "café \ud800 lone"}  # read back exactly, surrogate included
    assert entries[6]["task"] == "café"
    raw = out_path.read_text(encoding="utf-8").splitlines()
    assert "\\ud800" in raw[5] and "é" not in raw[5] and "é" in raw[6]  # only that entry is escaped

    graph.calls.clear()  # the rerun reads the file back and has nothing to redo
    again = run_batch(graph, in_path, out_path, progress=False)
    assert graph.calls == [] and (again.ok, again.skipped) == (12, 12)


# -- issue 20, fault 9: a task no model can be sent is refused when the input is read --------------------------
@pytest.mark.parametrize("field", ["task", "candidate", "context"])
def test_lone_surrogate_in_a_graph_field_is_an_input_error_naming_field_and_position(
    tmp_path: Path, field: str
) -> None:
    in_path, out_path = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    bad = {"id": "bad", "task": "Write a poem.", field: "caf\u00e9 \ud800 rain"}  # "café " is 5 characters
    in_path.write_text(
        json.dumps({"id": "a", "task": "one"})
        + "\n"
        + json.dumps(bad)
        + "\n"
        + json.dumps({"id": "b", "task": "two"})
        + "\n",
        encoding="utf-8",
    )
    graph = FakeGraph()
    summary = run_batch(graph, in_path, out_path, progress=False)
    assert (summary.ok, summary.error, summary.errors_by_type) == (2, 1, {"input": 1})
    assert sorted(graph.calls) == ["a", "b"]  # the bad record never reached the graph
    entry = out_entries(out_path)[1]
    assert entry["error_type"] == "input" and entry["line"] == 2
    assert entry["error"] == (
        f"line 2: '{field}' has a character with no UTF-8 form at position 5 (U+D800, a lone surrogate); "
        "pass valid Unicode text"
    )


def test_lone_surrogate_in_an_error_message_is_written(tmp_path: Path) -> None:
    in_path, out_path = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    in_path.write_text('{"id": "\\udcff", "task": "x"}\n{"id": "ok", "task": "y"}\n', encoding="utf-8")
    summary = run_batch(FakeGraph({"\udcff": "raise"}), in_path, out_path, progress=False)
    assert (summary.ok, summary.error) == (1, 1)
    entries = out_entries(out_path)
    assert entries[0]["id"] == "\udcff" and "injected failure for \udcff" in entries[0]["error"]
    assert json.loads(Path(str(out_path) + ".summary.json").read_text())["error_samples"][0].startswith(
        "\udcff"
    )


# -- fault 5: a line-number id whose input changed is redone, and reported -------------------------------------
def test_line_inserted_at_top_redoes_moved_records_and_says_which(tmp_path: Path) -> None:
    in_path, out_path = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    in_path.write_text('{"task": "alpha"}\n{"task": "beta"}\n')
    run_batch(FakeGraph(), in_path, out_path, progress=False)
    assert [(e["id"], e["task"]) for e in out_entries(out_path)] == [(1, "alpha"), (2, "beta")]

    in_path.write_text('{"task": "new first"}\n{"task": "alpha"}\n{"task": "beta"}\n')
    graph = FakeGraph()
    summary = run_batch(graph, in_path, out_path, progress=False)

    assert sorted(graph.calls) == [1, 2, 3]  # nothing is mapped onto another task, the new one is run
    assert summary.changed == 2 and summary.skipped == 0
    assert summary.changed_samples == [
        "line 1 (id 1): input changed since its result was written; run again",
        "line 2 (id 2): input changed since its result was written; run again",
    ]
    entries = out_entries(out_path)
    assert [(e["id"], e["task"]) for e in entries] == [(1, "new first"), (2, "alpha"), (3, "beta")]
    assert all(e["candidate"] == f"draft for {e['task']} (revised)" for e in entries)
    moved = [json.loads(x) for x in Path(str(out_path) + ".stale.jsonl").read_text().splitlines()]
    assert [(e["id"], e["task"]) for e in moved] == [(1, "alpha"), (2, "beta")]  # old results kept aside


def test_changed_input_whose_rerun_fails_keeps_no_stale_result(tmp_path: Path) -> None:
    in_path, out_path = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    in_path.write_text('{"id": "a", "task": "one"}\n{"id": "b", "task": "two"}\n')
    run_batch(FakeGraph(), in_path, out_path, progress=False)
    in_path.write_text('{"id": "a", "task": "one, edited"}\n{"id": "b", "task": "two"}\n')
    summary = run_batch(FakeGraph({"a": "raise"}), in_path, out_path, progress=False)
    assert summary.changed == 1 and summary.changed_samples[0].startswith("line 1 (id a): input changed")
    entry = out_entries(out_path)[0]
    assert entry["status"] == "error" and entry["task"] == "one, edited"  # the old "ok" does not win
    assert (summary.ok, summary.error, summary.skipped) == (1, 1, 1)


def test_candidate_change_counts_as_an_input_change(tmp_path: Path) -> None:
    in_path, out_path = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    in_path.write_text('{"id": "a", "task": "t", "candidate": "v1"}\n')
    run_batch(FakeGraph(), in_path, out_path, progress=False)
    in_path.write_text('{"id": "a", "task": "t", "candidate": "v2", "note": "metadata is not input"}\n')
    graph = FakeGraph()
    assert run_batch(graph, in_path, out_path, progress=False).changed == 1 and graph.calls == ["a"]
    in_path.write_text('{"id": "a", "task": "t", "candidate": "v2", "note": "changed metadata"}\n')
    graph = FakeGraph()
    assert run_batch(graph, in_path, out_path, progress=False).changed == 0 and graph.calls == []


# -- fault 12: one run per output file ---------------------------------------------------------------------------
def _runner(tmp_path: Path, in_path: Path, out_path: Path, delay: float) -> subprocess.Popen[bytes]:
    script = tmp_path / "runner.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import sys
            sys.path.insert(0, {str(ROOT)!r})
            from tests.runners.test_batch import FakeGraph
            from reflection_graph.runners.batch import run_batch
            run_batch(FakeGraph(delay={delay}), {str(in_path)!r}, {str(out_path)!r}, concurrency=2, progress=False)
            """
        )
    )
    return subprocess.Popen([sys.executable, str(script)], cwd=tmp_path)


def _wait_for_lines(proc: subprocess.Popen[bytes], path: Path, n: int) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if path.exists() and len(path.read_bytes().splitlines()) >= n:
            return
        if proc.poll() is not None:
            pytest.fail(f"runner exited early with code {proc.returncode}")
        time.sleep(0.02)
    pytest.fail("the runner wrote nothing in 60s")


def test_second_run_on_the_same_output_refuses_and_names_the_first(tmp_path: Path) -> None:
    in_path, out_path = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    ids = write_tasks(in_path, 120)
    proc = _runner(tmp_path, in_path, out_path, delay=0.05)
    try:
        _wait_for_lines(proc, out_path, 4)
        graph = FakeGraph()
        with pytest.raises(BatchLocked) as caught:
            run_batch(graph, in_path, out_path, progress=False)
        message = str(caught.value)
        assert "\n" not in message and "is being written by another batch run" in message
        assert f"pid {proc.pid} on host {socket.gethostname()}, started 20" in message
        assert graph.calls == []  # refused before touching anything
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    entries = out_entries(out_path)
    assert [e["id"] for e in entries] == ids and all(e["status"] == "ok" for e in entries)
    assert not lock_path(out_path).exists()  # released at the end


def test_lock_of_a_killed_run_is_taken_over(tmp_path: Path) -> None:
    in_path, out_path = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    ids = write_tasks(in_path, 200)
    proc = _runner(tmp_path, in_path, out_path, delay=0.05)
    try:
        _wait_for_lines(proc, out_path, 3)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert lock_path(out_path).exists()  # left behind by the killed run
    done, _ = read_output(out_path)
    graph = FakeGraph()
    summary = run_batch(graph, in_path, out_path, concurrency=16, progress=False)
    assert summary.stale_lock is not None and f"pid {proc.pid} on host" in summary.stale_lock
    assert len(graph.calls) == 200 - len({e["id"] for e in done if e["status"] == "ok"})
    assert [e["id"] for e in out_entries(out_path)] == ids and not lock_path(out_path).exists()


def test_lock_file_without_a_holder_is_taken_over(tmp_path: Path) -> None:
    in_path, out_path = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    write_tasks(in_path, 2)
    lock_path(out_path).write_text(json.dumps({"pid": 999999, "host": "elsewhere", "started": "2020-01-01"}))
    summary = run_batch(FakeGraph(), in_path, out_path, progress=False)
    assert summary.ok == 2 and summary.stale_lock == "pid 999999 on host elsewhere, started 2020-01-01"


# -- issue 20, fault 2: an append never glues onto a line a killed writer left torn --------------------------------
def test_append_after_a_torn_tail_cuts_it_and_starts_a_whole_line(tmp_path: Path) -> None:
    from reflection_graph.runners._jsonl import append_lines, read_objects

    path = tmp_path / "scores.jsonl"
    path.write_bytes(b'{"k": "a", "score": 1.0}\n{"k": "b", "sco')  # a kill in the middle of the second line
    append_lines(path, ['{"k": "c", "score": 0.5}'])
    assert path.read_bytes() == b'{"k": "a", "score": 1.0}\n{"k": "c", "score": 0.5}\n'
    assert read_objects(path) == ([{"k": "a", "score": 1.0}, {"k": "c", "score": 0.5}], 0)


# -- issue 20, fault 7: a line that is not UTF-8 is an error row naming it, never U+FFFD -------------------------
BAD_UTF8 = b'{"id": "bad", "task": "caf\xe9 au lait"}\n'  # Latin-1 e-acute: byte 0xe9 is the 27th byte


def test_invalid_utf8_line_is_an_input_error_and_the_others_run(tmp_path: Path) -> None:
    in_path, out_path = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    in_path.write_bytes(b'{"id": "a", "task": "one"}\n' + BAD_UTF8 + b'{"id": "b", "task": "two"}\n')
    graph = FakeGraph()
    summary = run_batch(graph, in_path, out_path, progress=False)
    assert (summary.ok, summary.error, summary.errors_by_type) == (2, 1, {"input": 1})
    assert sorted(graph.calls) == ["a", "b"]
    entries = out_entries(out_path)
    assert [(e["id"], e["status"]) for e in entries] == [("a", "ok"), (2, "error"), ("b", "ok")]
    assert entries[1]["error"] == "line 2: not valid UTF-8 (byte 0xe9 at column 27); save the file as UTF-8"
    assert "\ufffd" not in out_path.read_text(encoding="utf-8")


def test_invalid_utf8_line_in_eval_data_is_an_error_row_on_its_line(tmp_path: Path) -> None:
    from reflection_graph.runners.eval import evaluate

    data = tmp_path / "data.jsonl"
    data.write_bytes(b'{"id": "a", "prompt": "one", "reference": "one"}\n' + BAD_UTF8)
    report = evaluate(
        data, out_dir=tmp_path / "o", graph=FakeGraph(), fields={"task": "prompt"}, progress=False, plot=False
    )
    assert (report.records, report.scored, report.errors_by_type) == (2, 1, {"input": 1})
    rows = [json.loads(line) for line in (tmp_path / "o" / "rounds.jsonl").read_text().splitlines()]
    assert rows[-1]["line"] == 2 and rows[-1]["error"].startswith(
        "line 2: not valid UTF-8 (byte 0xe9 at column 27)"
    )
    assert (tmp_path / "o" / "input.jsonl").read_bytes().splitlines()[1] == BAD_UTF8.rstrip(
        b"\n"
    )  # kept as is


def test_a_task_over_the_graphs_limit_is_an_input_error_not_a_run(tmp_path: Path) -> None:
    """Batch refuses what the graph's own input check refuses, by the same rule, before any record runs."""
    from reflection_graph.loop._input import MAX_TASK_CHARS

    in_path, out_path = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    long_task = "x" * (MAX_TASK_CHARS + 1)
    in_path.write_text(
        json.dumps({"id": "long", "task": long_task}) + "\n" + json.dumps({"id": "ok", "task": "y"}) + "\n"
    )
    graph = FakeGraph()
    summary = run_batch(graph, in_path, out_path, progress=False)
    assert (summary.ok, summary.error, graph.calls) == (1, 1, ["ok"])
    error = out_entries(out_path)[0]["error"]
    assert error.startswith(
        f"line 1: 'task' is {MAX_TASK_CHARS + 1:,} characters, over the {MAX_TASK_CHARS:,} limit"
    )
