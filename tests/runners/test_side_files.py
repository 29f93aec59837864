"""Inputs lost through side files (issue 38, fault 2).

A batch or merge run on ``OUT`` writes, truncates or removes more than ``OUT``: its temporary file ``OUT.tmp``,
``OUT.summary.json`` (and its temporary file), the lock ``OUT.lock`` and ``OUT.stale.jsonl``. Only ``OUT`` and
the summary were checked against the input, and only by the CLI: ``batch a.jsonl.lock a.jsonl`` exited 0 and
deleted ``a.jsonl.lock``, an input named ``b.jsonl.stale.jsonl`` was appended to, ``merge ... m.jsonl --input
m.jsonl.lock`` deleted its input, and ``run_batch(graph, IN, IN)`` overwrote ``IN``. Every case runs through the
Python API and the CLI (typer's CliRunner, a fake graph) and must leave every input byte for byte as it was,
with a one-line error naming the written file and the input.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from reflection_graph import cli
from reflection_graph.runners.batch import MergeError, merge_outputs, run_batch
from tests.runners.test_batch import FakeGraph, write_tasks

runner = CliRunner()


def _stale_entry(out_path: Path) -> None:
    """An entry of record r000 written for another input: a run moves it to ``OUT.stale.jsonl``."""
    entry = {"id": "r000", "line": 1, "status": "ok", "task": "an older task", "input_hash": "0" * 64}
    out_path.write_text(json.dumps(entry) + "\n")


def _symlinked_lock(tmp_path: Path, in_path: Path, out_path: Path) -> None:
    Path(str(out_path) + ".lock").symlink_to(in_path)


def _hard_linked_stale(tmp_path: Path, in_path: Path, out_path: Path) -> None:
    os.link(in_path, str(out_path) + ".stale.jsonl")
    _stale_entry(out_path)


# (input name, output name, what else to set up, the written file the error names)
BATCH_CASES: dict[str, tuple[str, str, Any, str]] = {
    "output is the input": ("f.jsonl", "f.jsonl", None, "f.jsonl"),
    "lock": ("a.jsonl.lock", "a.jsonl", None, "a.jsonl.lock"),
    "stale": ("b.jsonl.stale.jsonl", "b.jsonl", lambda tmp, i, o: _stale_entry(o), "b.jsonl.stale.jsonl"),
    "summary": ("c.jsonl.summary.json", "c.jsonl", None, "c.jsonl.summary.json"),
    "output's temporary file": ("d.jsonl.tmp", "d.jsonl", None, "d.jsonl.tmp"),
    "summary's temporary file": ("e.jsonl.summary.json.tmp", "e.jsonl", None, "e.jsonl.summary.json.tmp"),
    "lock is a symlink to the input": ("in.jsonl", "g.jsonl", _symlinked_lock, "g.jsonl.lock"),
    "stale is a hard link to the input": ("in.jsonl", "h.jsonl", _hard_linked_stale, "h.jsonl.stale.jsonl"),
}


def _batch_case(tmp_path: Path, case: str) -> tuple[Path, Path, Path, bytes]:
    in_name, out_name, setup, written = BATCH_CASES[case]
    in_path, out_path = tmp_path / in_name, tmp_path / out_name
    write_tasks(in_path, 3)
    with open(in_path, "a", encoding="utf-8") as fh:
        fh.write('{"id": "last", "task": "a last line with no newline"}')  # a torn tail is cut on append
    if setup is not None:
        setup(tmp_path, in_path, out_path)
    return in_path, out_path, tmp_path / written, in_path.read_bytes()


def _names_both(message: str, written: Path, in_path: Path) -> None:
    message = message.removesuffix("\n")
    assert "\n" not in message, message
    assert f"{written} " in message and f"{in_path} " in message, message
    assert "is the input file " in message or "is the shard output " in message, message


@pytest.mark.parametrize("case", list(BATCH_CASES))
def test_run_batch_refuses_a_written_file_that_is_its_input(tmp_path: Path, case: str) -> None:
    in_path, out_path, written, before = _batch_case(tmp_path, case)
    graph = FakeGraph()
    with pytest.raises(ValueError) as caught:
        run_batch(graph, in_path, out_path, progress=False)
    _names_both(str(caught.value), written, in_path)
    assert in_path.read_bytes() == before and graph.calls == []


@pytest.mark.parametrize("case", list(BATCH_CASES))
def test_cli_batch_refuses_a_written_file_that_is_its_input(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    in_path, out_path, written, before = _batch_case(tmp_path, case)
    graph = FakeGraph()
    monkeypatch.setattr(cli._graph, "build_graph", lambda options, **kw: graph)
    result = runner.invoke(cli.app, ["batch", str(in_path), str(out_path), "--no-progress"])
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1, result.stderr
    _names_both(result.stderr, written, in_path)
    assert in_path.read_bytes() == before and graph.calls == []


# -- merge: the input and every shard output are inputs --------------------------------------------------------
def _shards(tmp_path: Path) -> tuple[Path, list[Path]]:
    in_path = tmp_path / "tasks.jsonl"
    write_tasks(in_path, 12)
    outs = []
    for i in range(2):
        out = tmp_path / f"part_{i}.jsonl"
        run_batch(FakeGraph(), in_path, out, progress=False, shard=(i, 2))
        outs.append(out)
    return in_path, outs


def _move(path: Path, new: Path) -> Path:
    shutil.move(path, new)
    return new


MERGE_CASES = [
    "input is the lock",
    "input is the temporary file",
    "a part is the lock",
    "a part is the summary's temporary file",
]


def _merge_case(tmp_path: Path, case: str) -> tuple[list[Path], Path, Path, Path]:
    """The shard outputs, the input, the merged output, and the input (IN or a part) that a written file is."""
    in_path, parts = _shards(tmp_path)
    merged = tmp_path / "m.jsonl"
    if case == "input is the lock":
        in_path = _move(in_path, tmp_path / "m.jsonl.lock")
        return parts, in_path, merged, in_path
    if case == "input is the temporary file":
        in_path = _move(in_path, tmp_path / "m.jsonl.tmp")
        return parts, in_path, merged, in_path
    suffix = ".lock" if case == "a part is the lock" else ".summary.json.tmp"
    parts[0] = _move(parts[0], tmp_path / f"m.jsonl{suffix}")
    return parts, in_path, merged, parts[0]


@pytest.mark.parametrize("case", MERGE_CASES)
def test_merge_refuses_a_written_file_that_is_an_input(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    parts, in_path, merged, clash = _merge_case(tmp_path, case)
    before = {p: p.read_bytes() for p in [*parts, in_path]}
    with pytest.raises(MergeError) as caught:
        merge_outputs(parts, in_path, merged)
    _names_both(str(caught.value), clash, clash)
    assert {p: p.read_bytes() for p in before} == before and not merged.exists()

    args = ["merge", *map(str, parts), str(merged), "--input", str(in_path)]
    result = runner.invoke(cli.app, args)
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1, result.stderr
    _names_both(result.stderr, clash, clash)
    assert {p: p.read_bytes() for p in before} == before and not merged.exists()
