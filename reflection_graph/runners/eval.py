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

import os
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from typing_extensions import Required, Unpack

from reflection_graph.graph import create_reflection_graph
from reflection_graph.runners import _report
from reflection_graph.runners._eval_input import CheckedGraph, input_file
from reflection_graph.runners._eval_input import check_fields as _check_fields
from reflection_graph.runners._eval_steps import build_report, round_rows, score_all, write_files
from reflection_graph.runners._job import JobKwargs, JobOptions, chosen_job
from reflection_graph.runners._jsonl import atomic_write, dumps, lines_text
from reflection_graph.runners._output import read_output
from reflection_graph.runners._records import id_key, read_input
from reflection_graph.runners._report import EvalReport
from reflection_graph.runners._rounds import RoundStats, ScoreCache
from reflection_graph.runners.batch import arun_batch, run_sync
from reflection_graph.runners.scorers import Scorer, ScorerError, make_scorer

__all__ = ["EvalOptions", "EvalReport", "RoundStats", "aevaluate", "evaluate"]


def _default_graph() -> Any:

    return create_reflection_graph()


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
    in_path = input_file(data, out, _check_fields(fields))
    records, input_errors = read_input(in_path)
    problems: dict[str, str] = {}
    for record in records:
        try:
            built.check(record.as_dict())
        except ScorerError as exc:
            problems[record.key] = str(exc)
    runs = out / "runs.jsonl"
    await arun_batch(
        CheckedGraph(graph if graph is not None else _default_graph, problems),
        in_path,
        runs,
        job=job,
        config=config,
    )
    entries, _ = read_output(runs)
    by_key = {id_key(e.get("id")): e for e in entries if e.get("error_type") != "input"}
    ok = [(r, by_key[r.key]) for r in records if by_key.get(r.key, {}).get("status") == "ok"]
    cache = ScoreCache(out / "scores.jsonl", built.cache)
    scored, score_errors = await score_all(built, cache, ok, job)
    rows = round_rows(records, input_errors, by_key, scored, score_errors, built.pass_mark, budget)
    atomic_write(out / "rounds.jsonl", lines_text(dumps(r) for r in rows))
    ordered = [scored[r.key] for r in records if r.key in scored]
    report = build_report(out, built, select, len(records) + len(input_errors), ordered, rows, budget)
    write_files(out, report, ordered, plot)
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
