"""IFBench's prompts: only the development part is ever loaded, fixed by a hash of each key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests._bench import bench_import

ifbench = bench_import("_ifbench_set")


def test_the_development_part_is_the_hashed_half_of_the_installed_file() -> None:
    rows = ifbench.prompts()
    keys = [r["key"] for r in rows]
    assert len(rows) == 140 and len(set(keys)) == 140 and all(ifbench.is_development(k) for k in keys)
    total = sum(1 for line in ifbench.data_path().read_bytes().splitlines() if line.strip())
    assert total == 294  # the other 154 are reserved
    assert {"key", "prompt", "instruction_id_list", "kwargs"} <= set(rows[0])
    assert all(len(r["instruction_id_list"]) == len(r["kwargs"]) for r in rows)


def test_the_split_rule_is_fixed() -> None:
    assert [k for k in map(str, range(12)) if ifbench.is_development(k)] == [
        "0",
        "1",
        "2",
        "3",
        "5",
        "6",
        "7",
        "9",
    ]


def test_asking_for_a_reserved_or_unknown_key_is_refused() -> None:
    assert [r["key"] for r in ifbench.prompts(["5", "0"])] == ["5", "0"]
    with pytest.raises(ValueError, match=r"\['4'\] are reserved"):
        ifbench.prompts(["0", "4"])
    with pytest.raises(ValueError, match="no development prompt with key"):
        ifbench.prompts([next(k for k in (f"missing-{i}" for i in range(100)) if ifbench.is_development(k))])


def test_reserved_lines_are_skipped_by_their_key_and_never_parsed(tmp_path: Path) -> None:
    dev = {"key": "0", "prompt": "p", "instruction_id_list": ["punctuation:no_comma"], "kwargs": [{}]}
    path = tmp_path / "IFBench_test.jsonl"
    path.write_text(json.dumps(dev) + '\n{"key": "4", this reserved line is not JSON past its key\n')
    assert ifbench.prompts(path=path) == [dev]
    path.write_text('{"prompt": "no key first"}\n')
    with pytest.raises(ValueError, match="line 1: does not start with an IFBench key"):
        ifbench.prompts(path=path)
