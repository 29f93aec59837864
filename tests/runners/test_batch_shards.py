"""`batch --shard I/N` and `merge`: every record in exactly one shard, merged back with nothing missing or doubled."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from reflection_graph import cli
from reflection_graph.runners.batch import MergeError, merge_outputs, parse_shard, run_batch, shard_of
from tests.runners.test_batch import FakeGraph, out_entries, write_tasks

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()


def test_shard_of_is_stable_across_processes_and_spreads_ids() -> None:
    ids: list[str | int] = [f"r{i}" for i in range(1000)] + list(range(1, 50))
    here = [shard_of(i, 7) for i in ids]
    code = (
        "import json, sys; from reflection_graph.runners.batch import shard_of; "
        f"print(json.dumps([shard_of(i, 7) for i in {ids!r}]))"
    )
    for seed in ("1", "12345"):  # str hashes differ with PYTHONHASHSEED; the shard must not
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(ROOT)}
        out = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        )
        assert json.loads(out.stdout) == here
    counts = Counter(here[:1000])
    assert set(counts) == set(range(7)) and min(counts.values()) > 100  # ~143 each
    assert shard_of("7", 7) != shard_of(7, 7) or shard_of("8", 7) != shard_of(8, 7)  # "7" and 7 are two ids


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("3/2", "the index must be 0..1"),
        ("2/2", "the index must be 0..1"),
        ("0/0", "the shard count N must be >= 1"),
        ("1", "not of the form I/N"),
        ("-1/4", "not of the form I/N"),
        ("a/b", "not of the form I/N"),
    ],
)
def test_parse_shard_rejects_bad_values(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_shard(text)


def _shard_runs(tmp_path: Path, in_path: Path, n: int, failing: dict[Any, str] | None = None) -> list[Path]:
    outs = []
    for i in range(n):
        out = tmp_path / f"out_{i}.jsonl"
        run_batch(FakeGraph(failing), in_path, out, concurrency=4, progress=False, shard=(i, n))
        outs.append(out)
    return outs


def test_shard_and_merge_round_trip(tmp_path: Path) -> None:
    in_path = tmp_path / "in.jsonl"
    ids = write_tasks(in_path, 90)
    with open(in_path, "a") as fh:
        fh.write("not json\n")
        fh.write('{"task": "no id: keyed by its line number"}\n')
    outs = _shard_runs(tmp_path, in_path, 3, {ids[4]: "raise"})

    per_shard = [[e for e in out_entries(p) if e.get("error_type") != "input"] for p in outs]
    seen = [e["id"] for entries in per_shard for e in entries]
    assert sorted(map(str, seen)) == sorted(ids + ["92"])  # every record in exactly one shard
    assert all(len(entries) > 15 for entries in per_shard)  # and each shard has a fair share
    for i, entries in enumerate(per_shard):
        assert {e["shard"] for e in entries} == {f"{i}/3"}
        assert all(shard_of(e["id"], 3) == i for e in entries)
    assert sum(e.get("error_type") == "input" for p in outs for e in out_entries(p)) == 1  # shard 0 has it

    merged = tmp_path / "merged.jsonl"
    summary = merge_outputs(list(reversed(outs)), in_path, merged)
    whole = tmp_path / "whole.jsonl"
    expected = run_batch(FakeGraph({ids[4]: "raise"}), in_path, whole, progress=False)
    got, want = out_entries(merged), out_entries(whole)
    assert [(e["id"], e["status"]) for e in got] == [(e["id"], e["status"]) for e in want]
    assert all("shard" not in e for e in got)
    assert (summary.records, summary.ok, summary.error, summary.input_errors) == (92, 90, 2, 1)
    assert (summary.ok, summary.error, summary.errors_by_type) == (
        expected.ok,
        expected.error,
        expected.errors_by_type,
    )
    assert json.loads(Path(str(merged) + ".summary.json").read_text())["ok"] == 90

    graph = FakeGraph()  # a plain batch resumes the merged output: only the failed record runs again
    again = run_batch(graph, in_path, merged, progress=False)
    assert graph.calls == [ids[4]] and (again.ok, again.error, again.skipped) == (91, 1, 90)


def test_merge_reports_a_missing_shard_and_writes_nothing(tmp_path: Path) -> None:
    in_path = tmp_path / "in.jsonl"
    ids = write_tasks(in_path, 60)
    outs = _shard_runs(tmp_path, in_path, 3)
    in_shard_1 = sum(shard_of(i, 3) == 1 for i in ids)
    merged = tmp_path / "merged.jsonl"
    with pytest.raises(MergeError) as caught:
        merge_outputs([outs[0], outs[2]], in_path, merged)
    assert str(caught.value) == f"shard 1/3 is missing: no output given for it ({in_shard_1} records)"
    assert not merged.exists()


def test_merge_reports_records_missing_from_a_shard(tmp_path: Path) -> None:
    in_path = tmp_path / "in.jsonl"
    write_tasks(in_path, 30)
    outs = _shard_runs(tmp_path, in_path, 2)
    lines = outs[1].read_text().splitlines()
    outs[1].write_text("\n".join(lines[1:]) + "\n")  # lose one record of shard 1
    lost = json.loads(lines[0])["id"]
    with pytest.raises(
        MergeError, match=rf"shard 1/2 \({outs[1]}\) lacks 1 records \(\"{lost}\"\); rerun it"
    ):
        merge_outputs(outs, in_path, tmp_path / "merged.jsonl")
    run_batch(FakeGraph(), in_path, outs[1], progress=False, shard=(1, 2))  # rerunning the shard fixes it
    assert merge_outputs(outs, in_path, tmp_path / "merged.jsonl").ok == 30


def test_merge_rejects_doubled_files_shards_and_records(tmp_path: Path) -> None:
    in_path = tmp_path / "in.jsonl"
    write_tasks(in_path, 20)
    outs = _shard_runs(tmp_path, in_path, 2)
    merged = tmp_path / "merged.jsonl"
    with pytest.raises(MergeError, match="the same output file is given twice"):
        merge_outputs([outs[0], outs[1], outs[0]], in_path, merged)
    copy = tmp_path / "copy.jsonl"
    shutil.copy(outs[1], copy)
    with pytest.raises(MergeError, match=f"{outs[1]} and {copy} are both shard 1/2"):
        merge_outputs([outs[0], outs[1], copy], in_path, merged)
    # a record of shard 0 also present (relabelled) in shard 1's output
    entry = out_entries(outs[0])[0] | {"shard": "1/2"}
    with open(outs[1], "a") as fh:
        fh.write(json.dumps(entry) + "\n")
    with pytest.raises(MergeError, match=f'record "{entry["id"]}" is in both {outs[0]} and {outs[1]}'):
        merge_outputs(outs, in_path, merged)
    with pytest.raises(MergeError, match="is the shard output"):
        merge_outputs(outs, in_path, outs[0])
    assert not merged.exists()


def _alias(tmp_path: Path, in_path: Path, link: str) -> Path:
    """A name for `in_path`: the same path, a symlink to it or a hard link to it."""
    out = {"same path": in_path, "symlink": tmp_path / "link.jsonl", "hard link": tmp_path / "hard.jsonl"}[
        link
    ]
    if link == "symlink":
        out.symlink_to(in_path)
    elif link == "hard link":
        os.link(in_path, out)
    return out


@pytest.mark.parametrize("link", ["same path", "symlink", "hard link"])
def test_merge_refuses_an_output_that_is_its_input_and_writes_nothing(tmp_path: Path, link: str) -> None:
    """Issue 29, fault 4: `merge o0 o1 in.jsonl --input in.jsonl` replaced the input with merged rows."""
    in_path = tmp_path / "in.jsonl"
    write_tasks(in_path, 20)
    outs = _shard_runs(tmp_path, in_path, 2)
    out = _alias(tmp_path, in_path, link)
    before = in_path.read_bytes()
    with pytest.raises(MergeError, match="is the input file"):
        merge_outputs(outs, in_path, out)
    _one_line_error(_cli("merge", *map(str, outs), str(out), "--input", str(in_path)), "is the input file")
    assert in_path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir() if "summary" in p.name or p.suffix == ".lock") == sorted(
        f"out_{i}.jsonl.summary.json" for i in range(2)
    )  # no OUT.summary.json, no lock file left


@pytest.mark.parametrize("link", ["same path", "symlink", "hard link"])
def test_cli_batch_refuses_an_output_that_is_its_input(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, link: str
) -> None:
    in_path = tmp_path / "in.jsonl"
    write_tasks(in_path, 3)
    graph = FakeGraph()
    monkeypatch.setattr(cli._graph, "build_graph", lambda options, **kw: graph)
    out = _alias(tmp_path, in_path, link)
    before = in_path.read_bytes()
    _one_line_error(_cli("batch", str(in_path), str(out), "--no-progress"), "is the input file")
    assert graph.calls == [] and in_path.read_bytes() == before


def test_one_output_file_for_two_shards_is_refused(tmp_path: Path) -> None:
    in_path, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    write_tasks(in_path, 20)
    run_batch(FakeGraph(), in_path, out, progress=False, shard=(0, 2))
    before = out.read_bytes()
    graph = FakeGraph()
    with pytest.raises(
        ValueError, match="holds results of shard 0/2, not of shard 1/2; give each shard its own"
    ):
        run_batch(graph, in_path, out, progress=False, shard=(1, 2))
    with pytest.raises(ValueError, match="holds results of shard 0/2, not of an unsharded run"):
        run_batch(graph, in_path, out, progress=False)
    assert graph.calls == [] and out.read_bytes() == before


# -- the CLI ------------------------------------------------------------------------------------------------------
def _cli(*args: str) -> Any:
    return runner.invoke(cli.app, list(args))


def _one_line_error(result: Any, message: str) -> None:
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1, result.stderr
    assert message in result.stderr, result.stderr


def test_cli_shard_and_merge(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    in_path = tmp_path / "in.jsonl"
    write_tasks(in_path, 24)
    monkeypatch.setattr(cli._graph, "build_graph", lambda options, **kw: FakeGraph())
    outs = [tmp_path / f"o{i}.jsonl" for i in range(2)]
    for i, out in enumerate(outs):
        result = _cli("batch", str(in_path), str(out), "--shard", f"{i}/2", "--no-progress")
        assert result.exit_code == 0, result.output
        assert "shard" in result.stdout and f"{i}/2" in result.stdout
    merged = tmp_path / "merged.jsonl"

    _one_line_error(
        _cli("batch", str(in_path), str(outs[0]), "--shard", "3/2"), "--shard '3/2': the index must be 0..1"
    )
    _one_line_error(_cli("batch", str(in_path), str(outs[0]), "--shard", "x"), "not of the form I/N")
    _one_line_error(
        _cli("merge", str(outs[0]), str(outs[0]), str(merged), "--input", str(in_path)),
        "the same output file is given twice",
    )
    _one_line_error(_cli("merge", str(outs[1]), str(merged), "--input", str(in_path)), "shard 0/2 is missing")
    assert not merged.exists()

    result = _cli("merge", str(outs[0]), str(outs[1]), str(merged), "--input", str(in_path), "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["ok"] == 24 and len(out_entries(merged)) == 24


def test_shards_and_merge_through_chat_openai_on_a_fake_server_whose_critic_rejects(tmp_path: Path) -> None:
    """The CLI with ChatOpenAI (the real client, real HTTP) against the in-process FAKE OpenAI-compatible server
    (tests/_fake_openai.py; not marked `server`: no real model runs): 2 shards, a lone surrogate, merge, rerun.
    The fake's critic rejects every first draft, so each record is revised once and its revision accepted.

    Several commands in one process: the batch's event loop outlives each call, so langchain-openai's cached async
    client keeps working (with `asyncio.run` the second command failed with "Event loop is closed").
    """
    from tests._fake_openai import REVISED, fake_openai_server

    in_path = tmp_path / "in.jsonl"
    ids = write_tasks(in_path, 30)
    with open(in_path, "a", encoding="utf-8") as fh:
        fh.write('{"id": "surrogate", "task": "Describe \\ud800 politely."}\n')
    outs = [tmp_path / f"o{i}.jsonl" for i in range(2)]
    merged = tmp_path / "merged.jsonl"
    with fake_openai_server(reject_first_draft=True) as (url, fake):
        model = ["--model", "fake", "--base-url", url, "--max-iterations", "2", "--no-progress", "-c", "8"]
        codes = [
            _cli("batch", str(in_path), str(out), "--shard", f"{i}/2", *model).exit_code
            for i, out in enumerate(outs)
        ]
        assert codes == [1, 0]  # shard 0 holds the input errors: it reports the surrogate line
        result = _cli("merge", str(outs[0]), str(outs[1]), str(merged), "--input", str(in_path), "--json")
        assert result.exit_code == 1 and (
            json.loads(result.stdout)["ok"],
            json.loads(result.stdout)["error"],
        ) == (30, 1)
        # per record: a draft, its critique (rejected), one revision, its critique (accepted)
        served = {"draft": 30, "revise": 30, "critique": 60}
        assert fake.requests == served and fake.rejected == 30
        again = _cli("batch", str(in_path), str(merged), *model)  # only the failed record is tried again
        assert again.exit_code == 1 and fake.requests == served
    entries = out_entries(merged)
    assert [e["id"] for e in entries] == ids + ["surrogate"]
    for entry in entries[:-1]:
        assert entry["status"] == "ok" and entry["candidate"].startswith(REVISED), entry
        assert (entry["iterations"], entry["stop_reason"]) == (2, "accepted"), entry
    # a lone surrogate cannot be sent as UTF-8: refused when the input is read (issue 20, fault 9), never sent
    bad = entries[-1]
    assert (bad["status"], bad["error_type"], bad["line"]) == ("error", "input", 31)
    assert bad["error"] == (
        "line 31: 'task' has a character with no UTF-8 form at position 9 (U+D800, a lone surrogate); "
        "pass valid Unicode text"
    )
