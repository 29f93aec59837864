"""Locks that a link walked around (issue 38, fault 3), with real files, symlinks and held locks.

Lock names came from the path as spelled: a `run` on a held thread through a symlink to the checkpoint file called
the model on that thread (two lock files side by side), and a `batch` writing to a symlink of a running batch's
OUT ran the same records again and replaced the symlink with a regular file. Lock names now come from the real
path, and a batch or merge writes the symlink's target, never the symlink.

A hard link walked around the real path the same way (issue 48, fault 4): a `run` through a hard link of a held
checkpoint called the model (two lock files side by side), and a `batch` on a hard link of a running batch's OUT
ran its records again. Lock names now come from the file's identity: the checkpoint file's inode, and an `flock` on
the file OUT itself.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from reflection_graph import cli
from reflection_graph.runners import ThreadBusy, ThreadLock
from reflection_graph.runners._lock import OutputLock, thread_lock_path
from reflection_graph.runners.batch import BatchLocked, lock_path, merge_outputs, run_batch, summary_path
from tests._fake_openai import fake_openai_server
from tests.runners.test_batch import FakeGraph, out_entries, write_tasks
from tests.runners.test_batch_faults import _runner, _wait_for_lines
from tests.test_thread_lock import THREAD, _kill, _refused, _run, _Stuck, stuck  # noqa: F401  (a fixture)

runner = CliRunner()


def test_run_through_a_symlink_to_the_checkpoint_is_refused_while_the_thread_is_held(
    tmp_path: Path,
    stuck: _Stuck,  # noqa: F811
) -> None:
    db = tmp_path / "checkpoints.sqlite"
    link = tmp_path / "link.sqlite"
    first = _run(db, stuck.url)
    try:
        stuck.wait_for(1)  # the first run is in its first model call, holding the thread
        link.symlink_to(db)
        with fake_openai_server() as (fast_url, fast):
            _refused(_run(link, fast_url))  # the same thread of the same file, spelled through a symlink
            assert fast.requests == {"draft": 0, "revise": 0, "critique": 0}  # it made no model call
        locks = sorted(p.name for p in tmp_path.iterdir() if p.name.endswith(".lock"))
        assert locks == [thread_lock_path(db, THREAD).name], locks  # one lock, beside the real file
    finally:
        _kill(first)


def test_the_library_thread_lock_is_shared_by_every_spelling_of_the_checkpoint(tmp_path: Path) -> None:
    real_dir = tmp_path / "real"
    real_dir.mkdir()
    db = real_dir / "checkpoints.sqlite"
    db.write_bytes(b"")
    (tmp_path / "link.sqlite").symlink_to(db)
    (tmp_path / "dir-link").symlink_to(real_dir)
    with ThreadLock(db, THREAD):
        for spelling in (tmp_path / "link.sqlite", tmp_path / "dir-link" / "checkpoints.sqlite"):
            assert thread_lock_path(spelling, THREAD) == thread_lock_path(db, THREAD)
            with pytest.raises(ThreadBusy, match=f"thread {THREAD!r} is being run by another process"):
                ThreadLock(spelling, THREAD).acquire()
    with ThreadLock(tmp_path / "link.sqlite", THREAD) as held:  # released: free through the link too
        assert held.path == thread_lock_path(db, THREAD) and held.path.parent == real_dir


def test_a_batch_on_a_symlink_of_a_running_batchs_output_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    in_path, out_path, link = tmp_path / "in.jsonl", tmp_path / "out.jsonl", tmp_path / "link.jsonl"
    ids = write_tasks(in_path, 120)
    proc = _runner(tmp_path, in_path, out_path, delay=0.05)  # another process holds OUT's lock
    try:
        _wait_for_lines(proc, out_path, 4)
        link.symlink_to(out_path)
        graph = FakeGraph()
        with pytest.raises(BatchLocked, match=f"pid {proc.pid} on host"):
            run_batch(graph, in_path, link, progress=False)
        monkeypatch.setattr(cli._graph, "build_graph", lambda options, **kw: graph)
        result = runner.invoke(cli.app, ["batch", str(in_path), str(link), "--no-progress"])
        assert result.exit_code == 2, result.output
        assert "is being written by another batch run" in result.stderr, result.stderr
        assert graph.calls == [] and link.is_symlink()
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert link.is_symlink() and link.resolve() == out_path
    entries = out_entries(out_path)
    assert [e["id"] for e in entries] == ids and all(e["attempts"] == 1 for e in entries)
    assert not lock_path(out_path).exists() and not Path(str(link) + ".lock").exists()


@pytest.mark.parametrize("target_exists", [True, False])
def test_a_symlink_given_as_the_output_stays_a_symlink(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, target_exists: bool
) -> None:
    in_path, real, link = tmp_path / "in.jsonl", tmp_path / "results" / "real.jsonl", tmp_path / "link.jsonl"
    ids = write_tasks(in_path, 4)
    real.parent.mkdir()
    if target_exists:
        real.write_text("")
    link.symlink_to(real)
    summary = run_batch(FakeGraph(), in_path, link, progress=False)
    assert summary.ok == 4 and summary.out_path == str(link)
    assert link.is_symlink() and [e["id"] for e in out_entries(real)] == ids
    assert json.loads(summary_path(real).read_text())["ok"] == 4  # the side files are beside the target
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl", "link.jsonl", "results"]

    graph = FakeGraph()  # the CLI resumes it through the link: nothing runs again, the link stays
    monkeypatch.setattr(cli._graph, "build_graph", lambda options, **kw: graph)
    result = runner.invoke(cli.app, ["batch", str(in_path), str(link), "--no-progress"])
    assert result.exit_code == 0, result.output
    assert graph.calls == [] and link.is_symlink() and len(out_entries(real)) == 4


def test_a_merge_into_a_symlink_writes_its_target(tmp_path: Path) -> None:
    in_path = tmp_path / "in.jsonl"
    write_tasks(in_path, 10)
    parts = [tmp_path / f"part_{i}.jsonl" for i in range(2)]
    for i, part in enumerate(parts):
        run_batch(FakeGraph(), in_path, part, progress=False, shard=(i, 2))
    real, link = tmp_path / "merged.jsonl", tmp_path / "link.jsonl"
    real.write_text("")
    link.symlink_to(real)
    assert merge_outputs(parts, in_path, link).ok == 10
    assert link.is_symlink() and len(out_entries(real)) == 10 and summary_path(real).exists()


def test_run_through_a_hard_link_to_the_checkpoint_is_refused_while_the_thread_is_held(
    tmp_path: Path,
    stuck: _Stuck,  # noqa: F811
) -> None:
    db = tmp_path / "checkpoints.sqlite"
    link = tmp_path / "link.sqlite"
    first = _run(db, stuck.url)
    try:
        stuck.wait_for(1)  # the first run is in its first model call, holding the thread
        os.link(db, link)
        with fake_openai_server() as (fast_url, fast):
            _refused(_run(link, fast_url))  # the same thread of the same file, under another name
            assert fast.requests == {"draft": 0, "revise": 0, "critique": 0}  # it made no model call
        locks = sorted(p.name for p in tmp_path.iterdir() if p.name.endswith(".lock"))
        assert locks == [thread_lock_path(db, THREAD).name], locks  # one lock file, not one per name
    finally:
        _kill(first)


def test_the_library_thread_lock_is_met_through_a_hard_link_of_a_checkpoint_it_made(tmp_path: Path) -> None:
    db, link = tmp_path / "checkpoints.sqlite", tmp_path / "link.sqlite"
    # no checkpoint yet: the lock makes the (empty) file it is named after
    with ThreadLock(db, THREAD) as held:
        assert db.is_file() and db.stat().st_size == 0
        os.link(db, link)
        assert thread_lock_path(link, THREAD) == held.path
        with pytest.raises(ThreadBusy, match=f"thread {THREAD!r} is being run by another process \\(pid "):
            ThreadLock(link, THREAD).acquire()
        with ThreadLock(link, "another thread"):  # other threads of the same file are free
            pass
    with ThreadLock(link, THREAD):  # released: free through the link too
        pass


def test_a_batch_on_a_hard_link_of_a_running_batchs_output_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    in_path, out_path, link = tmp_path / "in.jsonl", tmp_path / "out.jsonl", tmp_path / "link.jsonl"
    ids = write_tasks(in_path, 120)
    proc = _runner(tmp_path, in_path, out_path, delay=0.05)  # another process holds OUT's lock
    try:
        _wait_for_lines(proc, out_path, 4)
        os.link(out_path, link)  # the file the running batch appends to, under a second name
        graph = FakeGraph()
        holder = f"pid {proc.pid} on host .*, writing it as {re.escape(str(out_path))}"
        with pytest.raises(BatchLocked, match=holder):
            run_batch(graph, in_path, link, progress=False)
        monkeypatch.setattr(cli._graph, "build_graph", lambda options, **kw: graph)
        result = runner.invoke(cli.app, ["batch", str(in_path), str(link), "--no-progress"])
        assert result.exit_code == 2, result.output
        assert "is being written by another batch run" in result.stderr, result.stderr
        assert graph.calls == []  # no record ran a second time
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    entries = out_entries(out_path)
    assert [e["id"] for e in entries] == ids and all(e["attempts"] == 1 for e in entries)
    assert not lock_path(out_path).exists() and not lock_path(link).exists()


@pytest.mark.skipif(not hasattr(fcntl, "F_OFD_SETLK"), reason="open-file-description locks are Linux's")
def test_a_hard_link_in_another_directory_meets_the_thread_lock(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    db, link = tmp_path / "a" / "checkpoints.sqlite", tmp_path / "b" / "checkpoints.sqlite"
    with ThreadLock(db, THREAD):
        os.link(db, link)  # its lock file would be in b/: the byte of the file itself is what it meets
        with pytest.raises(ThreadBusy, match="a run reaching the checkpoint file under another name"):
            ThreadLock(link, THREAD).acquire()
        with ThreadLock(link, "another thread"):
            pass
    assert [p.name for p in (tmp_path / "b").iterdir()] == ["checkpoints.sqlite"]  # no lock file left behind
    with ThreadLock(link, THREAD):
        pass


def test_a_hard_link_in_another_directory_meets_the_output_lock(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    in_path, out_path = tmp_path / "in.jsonl", tmp_path / "a" / "out.jsonl"
    link = tmp_path / "b" / "out.jsonl"
    write_tasks(in_path, 2)
    out_path.write_text("")  # an output with no entry yet: both records would run
    held = OutputLock(out_path)
    held.acquire()
    try:
        os.link(out_path, link)
        graph = FakeGraph()
        with pytest.raises(BatchLocked, match="a run writing the same file under another name"):
            run_batch(graph, in_path, link, progress=False)
        assert graph.calls == [] and not lock_path(link).exists()
    finally:
        held.release()


def test_the_output_lock_follows_the_file_a_compaction_puts_in_place(tmp_path: Path) -> None:
    out, temporary, link = tmp_path / "out.jsonl", tmp_path / "out.jsonl.tmp", tmp_path / "link.jsonl"
    out.write_text("")
    held = OutputLock(out)
    held.acquire()
    try:
        held.cover()  # OUT not replaced since: its own lock does not refuse it
        temporary.write_text("{}\n")
        os.replace(temporary, out)  # what a compaction does
        held.cover()
        os.link(out, link)
        with pytest.raises(BatchLocked, match=f"writing it as {re.escape(str(out))}"):
            OutputLock(link).acquire()
    finally:
        held.release()
    with OutputLock(link):  # released: free through the link too
        pass
