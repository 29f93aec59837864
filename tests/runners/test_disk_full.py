"""A full disk never tears an output (issue 20, fault 2), tried on a REAL 64 KiB tmpfs.

An append to ``out.jsonl`` / ``runs.jsonl`` that fails part-way is cut back to the last whole line, the temporary
file of a failed compaction is removed, and the one-line error names the file and the space needed. After the
space is freed, a rerun completes with nothing lost or doubled.

Mounting a tmpfs needs root: the tests skip with that reason elsewhere, and under ``CI=true`` (where ``.ci/run``
runs as root) they never skip.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from reflection_graph import cli
from reflection_graph.runners.batch import WriteError, run_batch
from reflection_graph.runners.eval import evaluate
from tests.runners.test_batch import FakeGraph

TASK_CHARS = 400  # an entry holds the task once and its draft and answer twice: about 2.2 KB a line


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A 64 KiB tmpfs mounted for the test (and unmounted after it, whatever happens)."""
    if os.geteuid() != 0:
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true: the disk-full tests must run, and mounting a tmpfs needs root")
        pytest.skip("mounting a 64 KiB tmpfs needs root (CI runs these as root)")
    mount = tmp_path / "small"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)], capture_output=True, text=True
    )
    if done.returncode != 0:
        message = f"cannot mount a tmpfs as root: {done.stderr.strip()}"
        pytest.fail(message) if os.environ.get("CI") == "true" else pytest.skip(message)
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=True)


def _grow(mount: Path) -> None:
    """Free space: the same tmpfs, remounted at 4 MiB (its files stay)."""
    subprocess.run(["mount", "-o", "remount,size=4m", str(mount)], check=True)


def _write_tasks(path: Path, n: int) -> list[str]:
    ids = [f"r{i:03d}" for i in range(n)]
    lines = [json.dumps({"id": rid, "task": f"{rid} " + "x" * TASK_CHARS, "reference": rid}) for rid in ids]
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return ids


def _whole_lines(path: Path) -> list[dict[str, Any]]:
    """The entries of a JSONL file, asserting it ends with a newline and every line is whole JSON."""
    data = path.read_bytes()
    assert data == b"" or data.endswith(b"\n"), data[-80:]
    return [json.loads(line) for line in data.decode("utf-8").splitlines()]


def _leftovers(mount: Path) -> list[str]:
    return sorted(p.name for p in mount.rglob("*.tmp"))


def test_an_append_that_fills_the_disk_is_cut_back_to_whole_lines(tmp_path: Path, small_fs: Path) -> None:
    in_path, out_path = tmp_path / "in.jsonl", small_fs / "out.jsonl"
    ids = _write_tasks(in_path, 80)  # about 176 KB of entries for 64 KiB
    graph = FakeGraph(delay=0.005)  # small group commits: the disk fills in the middle of one

    with pytest.raises(WriteError) as caught:
        run_batch(graph, in_path, out_path, concurrency=4, progress=False)

    message = str(caught.value)
    assert message.startswith(f"cannot write {out_path}: no space left on its device (")
    assert "bytes needed" in message and "\n" not in message
    written = _whole_lines(out_path)
    assert 0 < len(written) < 80 and len({e["id"] for e in written}) == len(written)
    assert _leftovers(small_fs) == []

    _grow(small_fs)
    graph.calls.clear()
    summary = run_batch(graph, in_path, out_path, concurrency=4, progress=False)
    assert (summary.ok, summary.error, summary.skipped) == (80, 0, len(written))
    assert sorted(graph.calls) == sorted(set(ids) - {e["id"] for e in written})  # nothing run twice
    assert [e["id"] for e in _whole_lines(out_path)] == ids  # every record once, in input order


def test_a_compaction_that_fills_the_disk_leaves_no_temporary_file(tmp_path: Path, small_fs: Path) -> None:
    in_path, out_path = tmp_path / "in.jsonl", small_fs / "out.jsonl"
    ids = _write_tasks(in_path, 20)  # about 44 KB: the entries fit, a second copy for the compaction does not
    graph = FakeGraph()

    with pytest.raises(WriteError) as caught:
        run_batch(graph, in_path, out_path, concurrency=4, progress=False)

    needed = len(_whole_lines(out_path)) and out_path.stat().st_size
    assert str(caught.value).startswith(
        f"cannot write {out_path}: no space left on its device ({needed:,} bytes"
    )
    assert sorted(e["id"] for e in _whole_lines(out_path)) == ids  # every appended entry is kept whole
    assert _leftovers(small_fs) == []  # the failed out.jsonl.tmp is gone

    _grow(small_fs)
    graph.calls.clear()
    summary = run_batch(graph, in_path, out_path, progress=False)
    assert graph.calls == [] and (summary.ok, summary.skipped) == (20, 20)
    assert [e["id"] for e in _whole_lines(out_path)] == ids


def test_cli_batch_on_a_full_disk_is_one_line_naming_the_file(
    tmp_path: Path, small_fs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    in_path, out_path = tmp_path / "in.jsonl", small_fs / "out.jsonl"
    _write_tasks(in_path, 80)
    monkeypatch.setattr(cli._graph, "build_graph", lambda options, **kw: FakeGraph())

    result = CliRunner().invoke(cli.app, ["batch", str(in_path), str(out_path), "--no-progress"])

    assert result.exit_code == 1, result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: cannot write {out_path}: no space left"), lines
    assert "bytes needed" in lines[0] and "Traceback" not in result.output
    _whole_lines(out_path)
    assert _leftovers(small_fs) == []


def test_eval_runs_file_on_a_full_disk_keeps_whole_lines(tmp_path: Path, small_fs: Path) -> None:
    in_path, out_dir = tmp_path / "data.jsonl", small_fs / "eval"
    _write_tasks(in_path, 80)

    with pytest.raises(WriteError, match=r"cannot write .*runs\.jsonl: no space left on its device \("):
        evaluate(in_path, out_dir=out_dir, graph=FakeGraph(), scorer="contains", progress=False, plot=False)

    assert 0 < len(_whole_lines(out_dir / "runs.jsonl")) < 80
    assert _leftovers(small_fs) == []
    _grow(small_fs)
    report = evaluate(
        in_path, out_dir=out_dir, graph=FakeGraph(), scorer="contains", progress=False, plot=False
    )
    assert (report.records, report.scored, report.errors) == (80, 80, 0)


def test_a_full_disk_before_the_run_starts_is_one_error_naming_the_file(
    tmp_path: Path, small_fs: Path
) -> None:
    in_path, out_path = tmp_path / "in.jsonl", small_fs / "out.jsonl"
    _write_tasks(in_path, 3)
    filler = small_fs / "filler"
    with pytest.raises(OSError):  # fill every byte of the 64 KiB
        with open(filler, "wb") as fh:
            for _ in range(100):
                fh.write(b"x" * 4096)
                fh.flush()

    with pytest.raises(WriteError, match=r"^cannot write .*out\.jsonl\.lock: no space left on its device \("):
        run_batch(FakeGraph(), in_path, out_path, progress=False)
    assert not out_path.exists() and _leftovers(small_fs) == []

    filler.unlink()
    summary = run_batch(FakeGraph(), in_path, out_path, progress=False)
    assert (summary.ok, summary.error) == (3, 0)
