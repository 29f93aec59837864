"""Does reflection pay off? Score every round of a reflection graph against ground truth, and report gain vs cost.

`evaluate` runs a graph over a JSONL dataset with the resumable batch engine (`reflection_graph.runners.batch`: bounded
concurrency, a progress bar, resume, one error row per failed record), then scores *every round's* candidate
with an external scorer (`reflection_graph.runners.scorers`: `exact`, `contains`, `regex`, `json-schema`, `tests`,
`judge:<model>` or your `module:function`). The scorer is the ground truth; the loop's own critic is only
compared against it.

Records: ``{"id"?, "task", "candidate"?, "context"?, "reference"?, "tests"?, "schema"?}``, one JSON object a line.

Files written to ``out_dir``:

* ``runs.jsonl``: the batch engine's output (the graph's result per record); rerun to resume.
* ``rounds.jsonl``: one row per (record, round) with the external ``score`` and ``passed``, the critic's
  ``critic_score`` and ``critic_accepted``, that round's ``tokens_in``/``tokens_out``/``tokens``/``seconds`` and
  the cumulative ``cum_*`` figures; plus one ``status: "error"`` row per record that failed (bad input, the graph
  raised or timed out, the scorer could not score it).
* ``summary.csv``: one row per round (see `RoundStats`).
* ``summary.json``: the whole `EvalReport`.
* ``gain.png``: mean score and pass share per round, cumulative tokens per record on a second axis.
* ``report.html``: one self-contained page: the recommendation, the tables, the plot and the worst flips.
* ``scores.jsonl``: a cache of costly scores (`tests`, `judge:`), so a resumed eval does not pay them twice.

Per-round figures: round *k* of a record that stopped earlier counts its last round (what it returned), so
every round's mean covers the same records. "Selected at k" is the answer the graph returns with
``max_iterations=k`` (its `select` rule over rounds 1..k); the recommendation compares those.

Example:
    ```python
    from reflection_graph import create_reflection_graph, evaluate

    report = evaluate("datasets/questions.jsonl", graph=create_reflection_graph("embedded"),
                      scorer="contains", out_dir="eval-out")
    print(report.recommendation)
    ```
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from typing_extensions import Required, Unpack

from reflection_graph.graph import create_reflection_graph
from reflection_graph.runners import _report
from reflection_graph.runners._job import JobKwargs, JobOptions, chosen_job
from reflection_graph.runners._jsonl import atomic_write, dumps, lines_text, read_lines
from reflection_graph.runners._output import read_output
from reflection_graph.runners._progress import ProgressBar
from reflection_graph.runners._records import BatchRecord, InputError, id_key, read_input
from reflection_graph.runners._report import EvalReport
from reflection_graph.runners._rounds import (
    RoundStats,
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
from reflection_graph.runners.batch import _resolve_graph, arun_batch, run_sync
from reflection_graph.runners.scorers import Scorer, ScorerError, make_scorer

__all__ = ["EvalOptions", "EvalReport", "RoundStats", "aevaluate", "evaluate"]

_SCORER_PREFIX = "ScorerError: "


class _CheckedGraph:
    """Refuses, before the graph runs, the records the scorer cannot score; builds the graph on first use."""

    def __init__(self, graph_or_factory: Any, problems: Mapping[str, str]) -> None:
        self._source = graph_or_factory
        self._graph: Any = None
        self._problems = problems

    def _resolve(self) -> Any:
        if self._graph is None:
            self._graph = _resolve_graph(self._source)
        return self._graph

    async def ainvoke(self, input: Any, config: Any = None, **kwargs: Any) -> Any:
        problem = self._problems.get(id_key(((config or {}).get("metadata") or {}).get("batch_id")))
        if problem is not None:
            raise ScorerError(problem)
        return await self._resolve().ainvoke(input, config, **kwargs)


# ------------------------------------------------------------------------------------------------- input


_FIELDS = ("id", "task", "candidate", "context", "reference", "tests", "schema")


def _check_fields(fields: Mapping[str, str] | None) -> dict[str, str]:
    mapping = dict(fields or {})
    for key, source in mapping.items():
        if key not in _FIELDS:
            raise ValueError(f"fields: unknown record key {key!r}; map one of {', '.join(_FIELDS)}")
        if not isinstance(source, str) or not source:
            raise ValueError(f"fields: the source of {key!r} must be a field name, got {source!r}")
    return mapping


def _mapped(obj: dict[str, Any], mapping: Mapping[str, str]) -> dict[str, Any]:
    for key, source in mapping.items():
        if source in obj:
            obj[key] = obj[source]
    return obj


def _mapped_copy(src: Path, dst: Path, mapping: Mapping[str, str]) -> Path:
    """A copy of ``src`` with the mapped fields added; other lines (not JSON objects, not UTF-8) are kept as
    they are, so the batch engine reports them on the same line number."""
    chunks: list[bytes] = []
    for _, text in read_lines(src):
        if isinstance(text, bytes):
            chunks.append(text.rstrip(b"\n") + b"\n")
            continue
        line = text.rstrip("\n")
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            obj = None
        out = dumps(_mapped(obj, mapping)) if isinstance(obj, dict) else line
        chunks.append((out + "\n").encode("utf-8"))
    atomic_write(dst, b"".join(chunks))
    return dst


def _input_file(
    data: str | os.PathLike[str] | Sequence[Mapping[str, Any]], out: Path, mapping: Mapping[str, str]
) -> Path:
    """The JSONL file the batch engine reads: ``data`` itself, or its mapped copy / its records in ``out``."""
    if isinstance(data, (str, os.PathLike)):
        in_path = Path(data)
        if not in_path.is_file():
            raise FileNotFoundError(f"data file not found: {in_path}")
        return _mapped_copy(in_path, out / "input.jsonl", mapping) if mapping else in_path
    in_path = out / "input.jsonl"
    atomic_write(in_path, lines_text(dumps(_mapped(dict(r), mapping)) for r in data))
    return in_path


def _default_graph() -> Any:

    return create_reflection_graph()


# ------------------------------------------------------------------------------------------------- steps


async def _score_all(
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


def _rows(
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
            if message.startswith(_SCORER_PREFIX):
                kind, message = "scorer", message[len(_SCORER_PREFIX) :]
        rows.append((record.line, [error_row(record.id, record.line, kind, message, record.task)]))
    rows.sort(key=lambda item: item[0])
    return [row for _, group in rows for row in group]


def _build_report(
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


def _write_files(out: Path, report: EvalReport, ordered: list[Scored], plot: bool) -> None:
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


# ------------------------------------------------------------------------------------------------- public


async def aevaluate(
    data: str | os.PathLike[str] | Sequence[Mapping[str, Any]],
    *,
    out_dir: str | os.PathLike[str],
    graph: Any = None,
    scorer: str | Scorer | Callable[[dict[str, Any], str], Any] = "contains",
    pass_mark: float | None = None,
    select: str = "best",
    fields: Mapping[str, str] | None = None,
    job: JobOptions | None = None,
    plot: bool = True,
    config: dict[str, Any] | None = None,
    budget: int | None = None,
    **limits: Unpack[JobKwargs],
) -> EvalReport:
    """Run a reflection graph over a dataset, score every round against ground truth, and report (async).

    Args:
        data: a JSONL file of records, or the records themselves (written to ``out_dir/input.jsonl``).
        out_dir: where the files go (see the module docstring); rerun with the same directory to resume.
        graph: a compiled graph (anything with ``ainvoke``) or a zero-argument factory; None builds the default
            `create_reflection_graph()` (the embedded model) when a record needs it.
        scorer: `exact`, `contains`, `regex`, `json-schema`, `tests`, `judge:<model spec>`, `module:function`,
            a `fn(record, candidate) -> float` in [0, 1], or a built `Scorer`.
        pass_mark: a score at or above it passes (default: per scorer, see `reflection_graph.runners.scorers`).
        select: the graph's `select` setting (`best` or `last`), to replay what it returns with fewer rounds.
        fields: record keys taken from other fields of your data, e.g. ``{"task": "prompt", "id": "task_id"}``
            for HumanEval-style records (the mapped copy is ``out_dir/input.jsonl``).
        job: how the graph runs over the records: `JobOptions` (``concurrency``, also the scoring's bound,
            ``timeout_s``, ``retries``, ``token_budget``: see `arun_batch`, ``progress``: the progress bars);
            None for its defaults.
        plot: draw ``gain.png`` (needs matplotlib: ``pip install 'reflection-graph[eval]'``).
        config: a RunnableConfig passed to every graph call.
        budget: cap the per-round figures at this many tokens per record: a record's rounds count only while
            their cumulative tokens fit (the first always does); `RoundStats.hit_budget`, the rows'
            ``hit_budget`` / ``over_budget`` and `EvalReport.budget_hits` show which records it stopped.
        **limits: the fields of `JobOptions` as keyword arguments, over ``job`` (``concurrency=2``, ...); records
            not started once ``token_budget`` is spent become resumable ``budget`` error rows.

    Returns:
        The `EvalReport` (also in ``out_dir/summary.json``).

    Raises:
        ValueError: an unknown scorer or a bad option.
        ImportError: ``plot=True`` without matplotlib (the message has the pip command).
        FileNotFoundError: ``data`` is a path that does not exist.
    """
    started = time.perf_counter()
    job = chosen_job(job, limits)
    built = scorer if isinstance(scorer, Scorer) else make_scorer(scorer, pass_mark=pass_mark)
    if select not in ("best", "last"):
        raise ValueError(f"select must be 'best' or 'last', got {select!r}")
    if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int) or budget < 1):
        raise ValueError(f"budget must be an integer >= 1 (tokens per record) or None, got {budget!r}")
    if plot:
        _report.require_matplotlib()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    in_path = _input_file(data, out, _check_fields(fields))
    records, input_errors = read_input(in_path)
    problems: dict[str, str] = {}
    for record in records:
        try:
            built.check(record.as_dict())
        except ScorerError as exc:
            problems[record.key] = str(exc)
    runs = out / "runs.jsonl"
    await arun_batch(
        _CheckedGraph(graph if graph is not None else _default_graph, problems),
        in_path,
        runs,
        job=job,
        config=config,
    )
    entries, _ = read_output(runs)
    by_key = {id_key(e.get("id")): e for e in entries if e.get("error_type") != "input"}
    ok = [(r, by_key[r.key]) for r in records if by_key.get(r.key, {}).get("status") == "ok"]
    cache = ScoreCache(out / "scores.jsonl", built.cache)
    scored, score_errors = await _score_all(built, cache, ok, job)
    rows = _rows(records, input_errors, by_key, scored, score_errors, built.pass_mark, budget)
    atomic_write(out / "rounds.jsonl", lines_text(dumps(r) for r in rows))
    ordered = [scored[r.key] for r in records if r.key in scored]
    report = _build_report(out, built, select, len(records) + len(input_errors), ordered, rows, budget)
    _write_files(out, report, ordered, plot)
    report.seconds = round(time.perf_counter() - started, 3)
    atomic_write(out / "summary.json", dumps(report.to_dict(), indent=2) + "\n")
    return report


class EvalOptions(JobKwargs, total=False):
    """The keyword options of `aevaluate` / `evaluate` (their defaults and meaning are `aevaluate`'s)."""

    out_dir: Required[str | os.PathLike[str]]
    graph: Any
    scorer: str | Scorer | Callable[[dict[str, Any], str], Any]
    pass_mark: float | None
    select: str
    fields: Mapping[str, str] | None
    job: JobOptions | None
    plot: bool
    config: dict[str, Any] | None
    budget: int | None


def evaluate(
    data: str | os.PathLike[str] | Sequence[Mapping[str, Any]], **options: Unpack[EvalOptions]
) -> EvalReport:
    """Run a reflection graph over a dataset, score every round against ground truth, and report.

    The synchronous twin of `aevaluate`: the same arguments, with the same defaults; call `aevaluate` from inside
    an event loop (a notebook cell can ``await aevaluate(...)``).

    Args:
        data: a JSONL file of records, or the records themselves.
        **options: `EvalOptions`: ``out_dir`` (required: where ``rounds.jsonl``, ``summary.csv``, ``gain.png``
            and ``report.html`` go), ``graph``, ``scorer``, ``pass_mark``, ``select``, ``fields``, ``job``,
            ``plot``, ``config``, ``budget``, and the fields of `JobOptions` over ``job`` (``concurrency``,
            ``timeout_s``, ``retries``, ``token_budget``, ``progress``; see `aevaluate`).

    Returns:
        The `EvalReport`.

    Example:
        ```python
        report = evaluate("datasets/questions.jsonl", graph=graph, scorer="contains", out_dir="eval-out")
        print(report.table())
        ```
    """
    return run_sync("evaluate", aevaluate(data, **options))
