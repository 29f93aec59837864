"""Durability: a real SIGKILL mid-loop, then a resume in a new process, with SQLite and Postgres checkpointers;
and a 1,000-record batch with 10% failures killed mid-run, then resumed once.

The child process (tests/_durability_child.py) logs every model call to a file before answering, so the
assertions count exactly which calls ran before the kill and which ran after the resume.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from reflection_graph.runners.batch import read_output, run_batch
from tests._postgres import pg_dsn

ROOT = Path(__file__).resolve().parents[1]
CHILD = [sys.executable, "-m", "tests._durability_child"]


def read_calls(markers: Path) -> list[tuple[int, str, int]]:
    log = markers / "calls.log"
    if not log.exists():
        return []
    out = []
    for line in log.read_text().splitlines():
        parts = line.split()
        if len(parts) == 3:
            out.append((int(parts[0]), parts[1], int(parts[2])))
    return out


def wait_for_call(proc: subprocess.Popen[str], markers: Path, role: str, n: int, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(c[1:] == (role, n) for c in read_calls(markers)):
            return
        if proc.poll() is not None:
            _, err = proc.communicate()
            pytest.fail(f"child exited early ({proc.returncode}) before {role} call {n}:\n{err[-3000:]}")
        time.sleep(0.05)
    proc.kill()
    pytest.fail(f"child did not reach {role} call {n} within {timeout}s")


def wait_for_checkpoint(backend: str, conn: str, thread: str, candidate: str, timeout: float = 90) -> None:
    """Poll the checkpointer until the thread's latest checkpoint holds `candidate` (written in the background by
    LangGraph while the next node runs): a deadline, not a guess of how long the write takes. The text is looked
    for in all the checkpoint's values, whichever state key holds a draft not judged yet."""
    if backend == "sqlite":
        from langgraph.checkpoint.sqlite import SqliteSaver

        saver_cm: Any = SqliteSaver.from_conn_string(conn)
    else:
        from langgraph.checkpoint.postgres import PostgresSaver

        saver_cm = PostgresSaver.from_conn_string(conn)
    config = {"configurable": {"thread_id": thread}}
    deadline = time.monotonic() + timeout
    with saver_cm as saver:
        while time.monotonic() < deadline:
            latest = saver.get_tuple(config)  # type: ignore[arg-type]
            if latest is not None and repr(candidate) in repr(latest.checkpoint["channel_values"]):
                return
            time.sleep(0.05)
    pytest.fail(f"no checkpoint with candidate {candidate!r} within {timeout}s")


def kill_mid_loop_then_resume(backend: str, conn: str, markers: Path) -> dict[str, Any]:
    markers.mkdir()
    thread = f"durability-{uuid.uuid4().hex}"
    common = ["--backend", backend, "--conn", conn, "--thread", thread, "--markers", str(markers)]
    proc = subprocess.Popen(
        [*CHILD, "start", *common, "--sleep-at", "critique:2"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for_call(proc, markers, "critique", 2)
        # the round-2 draft's checkpoint is written in the background while the critic runs (and sleeps)
        wait_for_checkpoint(backend, conn, thread, "candidate 2")
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL
    before = read_calls(markers)
    assert [c[1:] for c in before] == [("generate", 1), ("critique", 1), ("generate", 2), ("critique", 2)]
    assert {c[0] for c in before} == {proc.pid}

    resumed = subprocess.run(
        [*CHILD, "resume", *common], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    result: dict[str, Any] = json.loads(resumed.stdout.strip().splitlines()[-1])

    after = [c for c in read_calls(markers) if c[0] != proc.pid]
    # Only the interrupted critique is redone; the drafts of rounds 1 and 2 and the round-1 critique are not.
    assert [c[1:] for c in after] == [("critique", 3), ("generate", 3), ("critique", 4)]
    totals = Counter(role for _, role, _ in read_calls(markers))
    assert totals == {"generate": 3, "critique": 4}

    assert result["stop_reason"] == "max_iterations" and result["error"] is None
    assert result["iterations"] == 3
    trajectory = result["trajectory"]
    assert [r["iteration"] for r in trajectory] == [1, 2, 3]
    assert [r["candidate"] for r in trajectory] == ["candidate 1", "candidate 2", "candidate 3"]
    assert [r["score"] for r in trajectory] == [1.0, 3.0, 4.0]  # round 2 scored by the redone critic call
    assert result["candidate"] == "candidate 3"
    assert result["usage"]["generate"]["calls"] + result["usage"]["revise"]["calls"] == 3
    return result


def test_sigkill_mid_loop_then_resume_with_sqlite(tmp_path: Path) -> None:
    db = tmp_path / "checkpoints.sqlite"
    kill_mid_loop_then_resume("sqlite", str(db), tmp_path / "markers")
    assert db.stat().st_size > 0


@pytest.mark.postgres
def test_sigkill_mid_loop_then_resume_with_postgres(tmp_path: Path) -> None:
    dsn = pg_dsn()
    kill_mid_loop_then_resume("postgres", dsn, tmp_path / "markers")


# ------------------------------------------------------------------------------------------------- batch

N_RECORDS = 1000


def test_batch_of_1000_with_10_percent_failures_and_a_kill_loses_nothing(tmp_path: Path) -> None:
    in_path, out_path = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    ids = [f"r{i:05d}" for i in range(N_RECORDS)]
    with open(in_path, "w", encoding="utf-8") as fh:
        for rid in ids:
            fh.write(json.dumps({"id": rid, "task": f"Decline offer [{rid}]", "team": rid[-1]}) + "\n")
    failing = ids[::10]  # 10%
    fail_file = tmp_path / "fail.json"
    fail_file.write_text(json.dumps(failing))

    # First run in a child process, with injected failures, killed with SIGKILL part-way through.
    proc = subprocess.Popen(
        [*CHILD, "batch", "--in", str(in_path), "--out", str(out_path), "--fail-ids", str(fail_file)]
        + ["--concurrency", "16", "--delay", "0.002"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if out_path.exists() and out_path.read_text().count("\n") >= 300:
                break
            if proc.poll() is not None:
                pytest.fail(
                    f"batch child ended before the kill ({proc.returncode}): {proc.communicate()[1][-3000:]}"
                )
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL
    before, _ = read_output(out_path)
    ok_before = {e["id"] for e in before if e["status"] == "ok"}
    errors_before = {e["id"] for e in before if e["status"] == "error"}
    assert 300 <= len(before) < N_RECORDS  # killed part-way
    assert errors_before and errors_before <= set(failing) and not ok_before & set(failing)

    # One resume, faults cleared: every record ends up ok, exactly once.
    from tests.fakes import FakeCriticModel, RecordingChatModel, critique

    seen_ids: list[str] = []

    def reply(messages: Any) -> str:
        prompt = str(messages[-1].content)
        seen_ids.append(prompt.split("Decline offer [", 1)[1][:6])
        return "a polite decline"

    def factory() -> Any:
        from reflection_graph import create_reflection_graph

        gen = RecordingChatModel(replies=[reply])
        crit = FakeCriticModel(critiques=[critique(8.0, ok=True, issues=[])])
        return create_reflection_graph(gen, critic=crit, max_iterations=1)

    summary = run_batch(factory, in_path, out_path, concurrency=32, progress=False)
    entries, dropped = read_output(out_path)
    assert dropped == 0
    assert summary.ok == N_RECORDS and summary.error == 0
    assert summary.skipped == len(ok_before) and summary.processed == N_RECORDS - len(ok_before)
    assert summary.retried == len(errors_before)
    assert len(entries) == N_RECORDS
    counts = Counter(e["id"] for e in entries)
    assert set(counts) == set(ids) and set(counts.values()) == {1}  # none lost, none duplicated
    assert all(e["status"] == "ok" and e["metadata"] == {"team": e["id"][-1]} for e in entries)
    # records finished before the kill were not run again
    assert len(seen_ids) == N_RECORDS - len(ok_before)
    assert set(seen_ids) == set(ids) - ok_before
