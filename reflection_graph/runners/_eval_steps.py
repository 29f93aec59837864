"""The steps of `evaluate` after the batch run: score every round of the records that ran, the rows of
`rounds.jsonl` in input order, the `EvalReport` of the figures, and the report files."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from reflection_graph.runners import _report
from reflection_graph.runners._eval_input import SCORER_PREFIX
from reflection_graph.runners._job import JobOptions
from reflection_graph.runners._progress import ProgressBar
from reflection_graph.runners._records import BatchRecord, InputError
from reflection_graph.runners._report import EvalReport
from reflection_graph.runners._rounds import (
    ScoreCache,
    Scored,
    agreement,
    comparison,
    error_row,
    flips,
    hit_budget,
    ok_rows,
    recommend,
    round_stats,
    rounds_of,
    score_record,
)
from reflection_graph.runners.scorers import Scorer, ScorerError

__all__ = ["build_report", "round_rows", "score_all", "write_files"]


async def score_all(
    scorer: Scorer,
    cache: ScoreCache,
    ok: list[tuple[BatchRecord, dict[str, Any]]],
    job: JobOptions,
) -> tuple[dict[str, Scored], dict[str, str]]:
    """Score every round of the ``ok`` records (``job.concurrency`` at once): the scored ones by key, and the
    scorer's errors by key."""
    semaphore = asyncio.Semaphore(job.concurrency)
    bar = ProgressBar("score", len(ok), enabled=job.progress)
    scored: dict[str, Scored] = {}
    score_errors: dict[str, str] = {}

    async def score_one(record: BatchRecord, entry: dict[str, Any]) -> None:
        rounds, selected = rounds_of(entry)
        async with semaphore:
            try:
                await score_record(scorer, cache, record, rounds)
            except ScorerError as exc:
                score_errors[record.key] = str(exc)
            else:
                scored[record.key] = Scored(record, entry, rounds, selected)
        bar.advance()

    try:
        await asyncio.gather(*(score_one(r, e) for r, e in ok))
    finally:
        bar.stop()
    return scored, score_errors


def round_rows(
    records: list[BatchRecord],
    input_errors: list[InputError],
    by_key: dict[str, dict[str, Any]],
    scored: dict[str, Scored],
    score_errors: dict[str, str],
    pass_mark: float,
    budget: int | None,
) -> list[dict[str, Any]]:
    """The rows of ``rounds.jsonl`` in input order: a scored record's rounds, or one error row."""
    rows: list[tuple[int, list[dict[str, Any]]]] = []
    for err in input_errors:
        rows.append((err.line, [error_row(err.id, err.line, "input", err.message)]))
    for record in records:
        if record.key in scored:
            rows.append((record.line, ok_rows(scored[record.key], pass_mark, budget)))
            continue
        if record.key in score_errors:
            kind, message = "scorer", score_errors[record.key]
        else:
            entry = by_key.get(record.key, {})
            message = str(entry.get("error") or "the record did not run")
            kind = str(entry.get("error_type") or "exception")
            if message.startswith(SCORER_PREFIX):
                kind, message = "scorer", message[len(SCORER_PREFIX) :]
        rows.append((record.line, [error_row(record.id, record.line, kind, message, record.task)]))
    rows.sort(key=lambda item: item[0])
    return [row for _, group in rows for row in group]


def build_report(
    out: Path,
    scorer: Scorer,
    select: str,
    records: int,
    ordered: list[Scored],
    rows: list[dict[str, Any]],
    budget: int | None,
) -> EvalReport:
    errors = [row for row in rows if row["status"] == "error"]
    report = EvalReport(out_dir=str(out), scorer=scorer.spec, pass_mark=scorer.pass_mark)
    report.records = records
    report.scored = len(ordered)
    report.errors = len(errors)
    by_type: dict[str, int] = {}
    for row in errors:
        by_type[row["error_type"]] = by_type.get(row["error_type"], 0) + 1
    report.errors_by_type = dict(sorted(by_type.items()))
    report.error_samples = [f"{row['id']}: {row['error']}" for row in errors[:5]]
    report.rounds = round_stats(ordered, scorer.pass_mark, select, budget)
    report.budget = budget
    report.budget_hits = [s.record.id for s in ordered if hit_budget(s, budget)]
    report.comparison = comparison(ordered, scorer.pass_mark)
    report.flips = flips(ordered, scorer.pass_mark)
    report.agreement = agreement(ordered, scorer.pass_mark)
    report.best_max_iterations, report.recommendation = recommend(report.rounds)
    return report


def write_files(out: Path, report: EvalReport, ordered: list[Scored], plot: bool) -> None:
    files = {"runs": out / "runs.jsonl", "rounds": out / "rounds.jsonl", "summary_csv": out / "summary.csv"}
    _report.write_csv(files["summary_csv"], report.rounds)
    png: bytes | None = None
    if plot and report.rounds:
        files["plot"] = out / "gain.png"
        png = _report.plot(files["plot"], report)
    files["html"] = out / "report.html"
    files["summary_json"] = out / "summary.json"
    report.files = {k: str(v) for k, v in files.items()}
    _report.write_html(files["html"], report, ordered, png, plot)
