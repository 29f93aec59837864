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
import base64
import csv
import hashlib
import html
import io
import json
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from reflection_graph import _rules
from reflection_graph.runners.batch import BatchRecord, arun_batch, read_input, read_output, run_sync
from reflection_graph.runners.batch import _dumps as _json_text
from reflection_graph.runners.scorers import Scorer, ScorerError, make_scorer

__all__ = ["EvalReport", "RoundStats", "aevaluate", "evaluate"]

PLOT_INSTALL = "pip install 'reflection-graph[eval]'"
_SCORER_PREFIX = "ScorerError: "


@dataclass
class RoundStats:
    """The figures of one round over every scored record (one row of ``summary.csv``).

    Attributes:
        round: 1-based round number (1 = the first draft).
        records: records scored.
        ran: records that actually ran this round (the others stopped earlier and count their last round).
        mean_score: mean external score of the round's candidate.
        pass_share: share of records whose round candidate scores at or above the pass mark.
        mean_selected: mean external score of what the graph returns with ``max_iterations`` = this round.
        selected_pass_share: pass share of that answer.
        cum_tokens: mean cumulative tokens (in + out) per record up to this round.
        cum_seconds: mean cumulative model seconds per record up to this round.
        hit_budget: records stopped by a token budget by this round: the report's per-record `budget` (its
            rounds are replayed only while their cumulative tokens fit in it) or the run's own
            (`stop_reason == "budget"`).
    """

    round: int
    records: int
    ran: int
    mean_score: float
    pass_share: float
    mean_selected: float
    selected_pass_share: float
    cum_tokens: float
    cum_seconds: float
    hit_budget: int = 0

    COLUMNS: ClassVar[tuple[str, ...]] = (
        "round",
        "ran",
        "mean score",
        "pass share",
        "selected",
        "sel. pass",
        "cum tokens",
        "cum s",
        "hit budget",
    )
    """The headers of `cells`, for the printed and the plain-text tables."""

    def cells(self) -> tuple[str, ...]:
        """This round as table cells, in `COLUMNS` order."""
        return (
            str(self.round),
            f"{self.ran}/{self.records}",
            f"{self.mean_score:.3f}",
            f"{self.pass_share:.0%}",
            f"{self.mean_selected:.3f}",
            f"{self.selected_pass_share:.0%}",
            f"{self.cum_tokens:.0f}",
            f"{self.cum_seconds:.1f}",
            str(self.hit_budget),
        )


@dataclass
class EvalReport:
    """What `evaluate` found (also written to ``summary.json``).

    Attributes:
        out_dir: the output directory.
        scorer: the scorer's name.
        pass_mark: scores at or above it pass.
        records: records in the data (valid or not).
        scored: records with scored rounds.
        errors: records that became error rows.
        errors_by_type: error rows by type (``input``, ``exception``, ``timeout``, ``graph``, ``scorer``).
        error_samples: up to 5 error messages, as ``"id: message"``.
        rounds: one `RoundStats` per round.
        budget: the per-record token budget the rounds were capped at (`evaluate(budget=...)`), or None.
        budget_hits: ids of the records a token budget stopped (the report's cap or the run's own budget).
        comparison: mean score and pass share of the ``first`` draft, the ``selected`` answer, the ``last``
            round and the ``oracle`` round (best by the external score).
        flips: ``right_to_wrong`` / ``wrong_to_right``: records whose pass/fail changed from the first draft to
            the selected answer.
        agreement: the critic's accept against the scorer's pass over every scored round: ``precision``,
            ``recall`` (None when undefined) and the counts ``tp``, ``fp``, ``fn``, ``tn``.
        best_max_iterations: the ``max_iterations`` with the best gain per token, or None when no extra round
            raises the mean score.
        recommendation: one plain sentence.
        seconds: wall seconds of this call.
        files: the files written, by kind.
    """

    out_dir: str
    scorer: str
    pass_mark: float
    records: int = 0
    scored: int = 0
    errors: int = 0
    errors_by_type: dict[str, int] = field(default_factory=dict)
    error_samples: list[str] = field(default_factory=list)
    rounds: list[RoundStats] = field(default_factory=list)
    budget: int | None = None
    budget_hits: list[Any] = field(default_factory=list)
    comparison: dict[str, dict[str, float | None]] = field(default_factory=dict)
    flips: dict[str, int] = field(default_factory=dict)
    agreement: dict[str, float | int | None] = field(default_factory=dict)
    best_max_iterations: int | None = None
    recommendation: str = ""
    seconds: float = 0.0
    files: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return asdict(self)

    def table(self) -> str:
        """The per-round table as plain text."""
        head = RoundStats.COLUMNS
        rows = [head] + [r.cells() for r in self.rounds]
        widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
        return "\n".join(
            "  ".join(cell.rjust(w) for cell, w in zip(row, widths, strict=True)) for row in rows
        )

    def _repr_html_(self) -> str:
        return _recommendation_html(self) + _rounds_table_html(self) + _comparison_html(self)


# ------------------------------------------------------------------------------------------------- records


def _key(record_id: Any) -> str:
    return json.dumps(record_id, ensure_ascii=False, sort_keys=True)


def _record_dict(record: BatchRecord) -> dict[str, Any]:
    data: dict[str, Any] = {"id": record.id, "task": record.task}
    if record.candidate is not None:
        data["candidate"] = record.candidate
    if record.context is not None:
        data["context"] = record.context
    data.update(record.metadata)
    return data


class _CheckedGraph:
    """Refuses, before the graph runs, the records the scorer cannot score; builds the graph on first use."""

    def __init__(self, graph_or_factory: Any, problems: Mapping[str, str]) -> None:
        self._source = graph_or_factory
        self._graph: Any = None
        self._problems = problems

    def _resolve(self) -> Any:
        if self._graph is None:
            source = self._source
            self._graph = source if hasattr(source, "ainvoke") else source()
        return self._graph

    async def ainvoke(self, input: Any, config: Any = None, **kwargs: Any) -> Any:
        problem = self._problems.get(_key(((config or {}).get("metadata") or {}).get("batch_id")))
        if problem is not None:
            raise ScorerError(problem)
        return await self._resolve().ainvoke(input, config, **kwargs)


# ------------------------------------------------------------------------------------------------- scoring


class _ScoreCache:
    """Costly scores by a digest of (scorer, record, candidate), appended to ``scores.jsonl``."""

    def __init__(self, path: Path, enabled: bool) -> None:
        self.path = path
        self.enabled = enabled
        self.known: dict[str, float] = {}
        if enabled:
            entries, _ = _read_jsonl(path)
            for entry in entries:
                if isinstance(entry.get("k"), str) and isinstance(entry.get("score"), (int, float)):
                    self.known[entry["k"]] = float(entry["score"])

    @staticmethod
    def digest(scorer: Scorer, record: Mapping[str, Any], candidate: str) -> str:
        blob = json.dumps(
            [scorer.spec, dict(record), candidate], sort_keys=True, ensure_ascii=False, default=str
        )
        return hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()

    def add(self, digest: str, score: float) -> None:
        if not self.enabled:
            return
        self.known[digest] = score
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"k": digest, "score": score}) + "\n")


def _read_jsonl(path: Path) -> tuple[list[dict[str, Any]], int]:
    entries: list[dict[str, Any]] = []
    dropped = 0
    if not path.exists():
        return entries, dropped
    with open(path, encoding="utf-8", errors="replace") as fh:
        for raw in fh:
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw)
            except json.JSONDecodeError:
                dropped += 1
                continue
            if isinstance(obj, dict):
                entries.append(obj)
    return entries, dropped


def _usage_of(usage: Any) -> tuple[int, int, float]:
    total = usage.get("total") if isinstance(usage, dict) else None
    if not isinstance(total, dict):
        return 0, 0, 0.0
    return (
        int(total.get("input_tokens", 0) or 0),
        int(total.get("output_tokens", 0) or 0),
        float(total.get("seconds", 0.0) or 0.0),
    )


@dataclass
class _Round:
    candidate: str
    critic_score: float | None
    critic_accepted: bool | None
    tokens_in: int
    tokens_out: int
    seconds: float
    score: float = 0.0


@dataclass
class _Scored:
    record: BatchRecord
    entry: dict[str, Any]
    rounds: list[_Round]
    selected: int


def _rounds_of(entry: dict[str, Any]) -> tuple[list[_Round], int]:
    """The rounds of one ``ok`` batch entry and the index of the returned answer among them."""
    rounds: list[_Round] = []
    for step in entry.get("trajectory") or []:
        if not isinstance(step, dict):
            continue
        tin, tout, secs = _usage_of(step.get("usage"))
        score = step.get("score")
        rounds.append(
            _Round(
                candidate=str(step.get("candidate") or ""),
                critic_score=float(score) if isinstance(score, (int, float)) else None,
                critic_accepted=bool(step.get("accepted")),
                tokens_in=tin,
                tokens_out=tout,
                seconds=secs,
            )
        )
    answer = entry.get("candidate")
    for index in range(len(rounds) - 1, -1, -1):  # ties go to the later round, as in select="best"
        if rounds[index].candidate == answer:
            return rounds, index
    # the answer was never critiqued (self_refine's final revision, or no round at all): its own unjudged round
    all_in, all_out, all_secs = _usage_of(entry.get("usage"))
    rounds.append(
        _Round(
            candidate=str(answer or ""),
            critic_score=None,
            critic_accepted=None,
            tokens_in=max(all_in - sum(r.tokens_in for r in rounds), 0),
            tokens_out=max(all_out - sum(r.tokens_out for r in rounds), 0),
            seconds=max(all_secs - sum(r.seconds for r in rounds), 0.0),
        )
    )
    return rounds, len(rounds) - 1


async def _score_record(
    scorer: Scorer, cache: _ScoreCache, record: BatchRecord, rounds: list[_Round]
) -> None:
    data = _record_dict(record)
    done: dict[str, float] = {}
    for item in rounds:
        if item.candidate in done:
            item.score = done[item.candidate]
            continue
        digest = cache.digest(scorer, data, item.candidate) if cache.enabled else ""
        if digest and digest in cache.known:
            value = cache.known[digest]
        else:
            value = await scorer.ascore(data, item.candidate)
            if digest:
                cache.add(digest, value)
        item.score = done[item.candidate] = value


class _Bar:
    def __init__(self, enabled: bool, total: int, label: str) -> None:
        self._progress: Any = None
        if not enabled or total == 0:
            return
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self._progress = Progress(
            TextColumn(f"[bold]{label}[/]"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=Console(stderr=True),
        )
        self._task = self._progress.add_task(label, total=total)
        self._progress.start()

    def advance(self) -> None:
        if self._progress is not None:
            self._progress.update(self._task, advance=1)

    def stop(self) -> None:
        if self._progress is not None:
            self._progress.stop()


# ------------------------------------------------------------------------------------------------- figures


def _mean(values: Sequence[float]) -> float:
    return round(sum(values) / len(values), 4) if values else 0.0


def _select_upto(rounds: list[_Round], k: int, select: str, actual: int) -> int:
    """The index of the answer the graph returns when it may run `k` rounds."""
    n = min(k, len(rounds))
    if n >= len(rounds):
        return actual
    if select == "last" or rounds[n - 1].critic_score is None:
        return n - 1
    return _rules.best_index([r.critic_score for r in rounds[:n]])


def _within_budget(rounds: Sequence[_Round], budget: int | None) -> int:
    """How many leading rounds fit in `budget` tokens (their cumulative tokens); all without a budget. The first
    round always counts: a budgeted run keeps its first candidate."""
    if budget is None:
        return len(rounds)
    used = 0
    for index, r in enumerate(rounds):
        used += r.tokens_in + r.tokens_out
        if used > budget:
            return max(index, 1)
    return len(rounds)


def _hit_budget(s: _Scored, budget: int | None) -> bool:
    """True when a token budget stopped this record: the run's own, or the report's cap."""
    return s.entry.get("stop_reason") == "budget" or _within_budget(s.rounds, budget) < len(s.rounds)


def _round_stats(
    scored: list[_Scored], pass_mark: float, select: str, budget: int | None = None
) -> list[RoundStats]:
    kept = {id(s): _within_budget(s.rounds, budget) for s in scored}
    depth = max(kept.values(), default=0)
    stats: list[RoundStats] = []
    for k in range(1, depth + 1):
        scores, selected, tokens, seconds = [], [], [], []
        ran = hit = 0
        for s in scored:
            rounds = s.rounds[: kept[id(s)]]
            n = min(k, len(rounds))
            ran += len(rounds) >= k
            hit += len(rounds) <= k and _hit_budget(s, budget)
            actual = _select_upto(s.rounds, len(rounds), select, s.selected)  # what a capped run returns
            scores.append(rounds[n - 1].score)
            selected.append(rounds[_select_upto(rounds, k, select, actual)].score)
            tokens.append(float(sum(r.tokens_in + r.tokens_out for r in rounds[:n])))
            seconds.append(sum(r.seconds for r in rounds[:n]))
        stats.append(
            RoundStats(
                round=k,
                records=len(scored),
                ran=ran,
                mean_score=_mean(scores),
                pass_share=_mean([float(v >= pass_mark) for v in scores]),
                mean_selected=_mean(selected),
                selected_pass_share=_mean([float(v >= pass_mark) for v in selected]),
                cum_tokens=round(_mean(tokens), 1),
                cum_seconds=round(_mean(seconds), 3),
                hit_budget=hit,
            )
        )
    return stats


def _comparison(scored: list[_Scored], pass_mark: float) -> dict[str, dict[str, float | None]]:
    picks: dict[str, Callable[[_Scored], float]] = {
        "first": lambda s: s.rounds[0].score,
        "selected": lambda s: s.rounds[s.selected].score,
        "last": lambda s: s.rounds[-1].score,
        "oracle": lambda s: max(r.score for r in s.rounds),
    }
    out: dict[str, dict[str, float | None]] = {}
    for name, pick in picks.items():
        values = [pick(s) for s in scored]
        out[name] = {
            "mean_score": _mean(values) if values else None,
            "pass_share": _mean([float(v >= pass_mark) for v in values]) if values else None,
        }
    return out


def _flips(scored: list[_Scored], pass_mark: float) -> dict[str, int]:
    right_to_wrong = wrong_to_right = 0
    for s in scored:
        first, chosen = s.rounds[0].score >= pass_mark, s.rounds[s.selected].score >= pass_mark
        right_to_wrong += first and not chosen
        wrong_to_right += chosen and not first
    return {"right_to_wrong": right_to_wrong, "wrong_to_right": wrong_to_right}


def _agreement(scored: list[_Scored], pass_mark: float) -> dict[str, float | int | None]:
    tp = fp = fn = tn = 0
    for s in scored:
        for r in s.rounds:
            if r.critic_accepted is None:
                continue
            passed = r.score >= pass_mark
            if r.critic_accepted:
                tp += passed
                fp += not passed
            else:
                fn += passed
                tn += not passed
    return {
        "precision": round(tp / (tp + fp), 4) if tp + fp else None,
        "recall": round(tp / (tp + fn), 4) if tp + fn else None,
        "tp": tp,
        "fp": fp,
        "fn": fn,
        "tn": tn,
    }


def _recommend(rounds: list[RoundStats]) -> tuple[int | None, str]:
    if not rounds:
        return None, "Nothing was scored, so there is nothing to recommend."
    first = rounds[0]
    if len(rounds) == 1:
        return None, (
            f"Every record stopped after its first round (mean score {first.mean_selected:.3f}), so this run "
            "cannot show whether more rounds pay off."
        )
    best: tuple[float, RoundStats] | None = None
    for r in rounds[1:]:
        gain = r.mean_selected - first.mean_selected
        extra = max(r.cum_tokens - first.cum_tokens, 1.0)
        if gain > 1e-9 and (best is None or gain / extra > best[0]):
            best = (gain / extra, r)
    if best is None:
        top = max(rounds[1:], key=lambda r: (r.mean_selected, -r.round))
        return None, (
            f"Reflection does not pay off here: no extra round raised the mean score above the first draft's "
            f"{first.mean_selected:.3f} (best later: {top.mean_selected:.3f} at max_iterations={top.round}); "
            f"use max_iterations=1 and save {rounds[-1].cum_tokens - first.cum_tokens:.0f} tokens per record."
        )
    per_k, r = best
    return r.round, (
        f"Use max_iterations={r.round}: the mean score rises from {first.mean_selected:.3f} to "
        f"{r.mean_selected:.3f} (+{r.mean_selected - first.mean_selected:.3f}) for "
        f"{r.cum_tokens - first.cum_tokens:.0f} extra tokens per record "
        f"({per_k * 1000:.3f} score points per 1,000 extra tokens), the best gain per token of the rounds run."
    )


# ------------------------------------------------------------------------------------------------- outputs


def _ok_rows(s: _Scored, pass_mark: float, budget: int | None = None) -> list[dict[str, Any]]:
    rows = []
    kept, hit = _within_budget(s.rounds, budget), _hit_budget(s, budget)
    cum_in = cum_out = 0
    cum_s = 0.0
    for index, r in enumerate(s.rounds):
        cum_in += r.tokens_in
        cum_out += r.tokens_out
        cum_s += r.seconds
        rows.append(
            {
                "status": "ok",
                "id": s.record.id,
                "line": s.record.line,
                "round": index + 1,
                "score": r.score,
                "passed": r.score >= pass_mark,
                "critic_score": r.critic_score,
                "critic_accepted": r.critic_accepted,
                "selected": index == s.selected,
                "last": index == len(s.rounds) - 1,
                "stop_reason": s.entry.get("stop_reason"),
                "tokens_in": r.tokens_in,
                "tokens_out": r.tokens_out,
                "tokens": r.tokens_in + r.tokens_out,
                "seconds": round(r.seconds, 3),
                "cum_tokens_in": cum_in,
                "cum_tokens_out": cum_out,
                "cum_tokens": cum_in + cum_out,
                "cum_seconds": round(cum_s, 3),
                "hit_budget": hit,
                "over_budget": index >= kept,
                "task": s.record.task,
                "candidate": r.candidate,
            }
        )
    return rows


def _error_row(record_id: Any, line: int, error_type: str, message: str, task: Any = None) -> dict[str, Any]:
    row: dict[str, Any] = {"status": "error", "id": record_id, "line": line, "error_type": error_type}
    row["error"] = message
    if task is not None:
        row["task"] = task
    return row


def _atomic_text(path: Path, text: str, errors: str = "strict") -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8", errors=errors)
    os.replace(tmp, path)


def _write_csv(path: Path, rounds: list[RoundStats]) -> None:
    buffer = io.StringIO()
    names = list(RoundStats.__dataclass_fields__)
    writer = csv.DictWriter(buffer, fieldnames=names, lineterminator="\n")
    writer.writeheader()
    for r in rounds:
        writer.writerow(asdict(r))
    _atomic_text(path, buffer.getvalue())


def _require_matplotlib() -> None:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise ImportError(f"the eval plot (gain.png) needs matplotlib: {PLOT_INSTALL}") from None


def _plot(path: Path, report: EvalReport) -> bytes:
    import matplotlib

    matplotlib.use("Agg", force=True)
    from matplotlib.figure import Figure

    rounds = report.rounds
    xs = [r.round for r in rounds]
    fig = Figure(figsize=(7.5, 4.8), dpi=110)
    ax = fig.add_subplot()
    ax2 = ax.twinx()
    ax2.bar(
        xs,
        [r.cum_tokens for r in rounds],
        width=0.35,
        color="#bbbbbb",
        alpha=0.5,
        label="cum. tokens / record",
    )
    ax2.set_ylabel("cumulative tokens per record")
    ax.set_zorder(ax2.get_zorder() + 1)
    ax.patch.set_visible(False)
    ax.plot(
        xs, [r.mean_score for r in rounds], "o-", color="#1f77b4", lw=2.5, label="mean score (round's answer)"
    )
    ax.plot(
        xs, [r.mean_selected for r in rounds], "s--", color="#2ca02c", lw=2, label="mean score (selected)"
    )
    ax.plot(xs, [r.pass_share for r in rounds], "^:", color="#d62728", lw=2, label="pass share")
    ax.set_ylim(-0.02, 1.05)
    ax.set_xticks(xs)
    ax.set_xlabel("round (max_iterations)")
    ax.set_ylabel(f"external score ({report.scorer})")
    ax.set_title(f"Gain per round: {report.scored} records, scorer {report.scorer}")
    ax.grid(alpha=0.3)
    handles = ax.get_legend_handles_labels()[0] + ax2.get_legend_handles_labels()[0]
    ax.legend(
        handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2, fontsize=8, frameon=False
    )
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    data = buffer.getvalue()
    path.write_bytes(data)
    return data


_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem auto;max-width:1100px;color:#222}
table{border-collapse:collapse;margin:0.5rem 0 1.5rem}th,td{border:1px solid #ccc;padding:4px 10px;text-align:right}
th{background:#f3f3f3}td.l,th.l{text-align:left}.rec{background:#f4f6fa;border-left:4px solid #557;padding:8px 12px}
.flip{display:grid;grid-template-columns:1fr 1fr;gap:12px;margin-bottom:1.5rem}
.flip pre{white-space:pre-wrap;background:#fafafa;border:1px solid #ddd;padding:8px;margin:0;font-size:13px}
.bad{color:#b00}.good{color:#050}img{max-width:100%}
"""


def _recommendation_html(report: EvalReport) -> str:
    return f'<p class="rec">{html.escape(report.recommendation)}</p>'


def _rounds_table_html(report: EvalReport) -> str:
    head = "".join(
        f"<th>{h}</th>"
        for h in (
            "round",
            "ran",
            "mean score",
            "pass share",
            "selected score",
            "selected pass",
            "cum. tokens",
            "cum. seconds",
        )
    )
    body = "".join(
        f"<tr><td>{r.round}</td><td>{r.ran}/{r.records}</td><td>{r.mean_score:.3f}</td><td>{r.pass_share:.0%}</td>"
        f"<td>{r.mean_selected:.3f}</td><td>{r.selected_pass_share:.0%}</td><td>{r.cum_tokens:.0f}</td>"
        f"<td>{r.cum_seconds:.1f}</td></tr>"
        for r in report.rounds
    )
    return f'<table id="rounds"><tr>{head}</tr>{body}</table>'


def _fmt(value: float | int | None, pct: bool = False) -> str:
    if value is None:
        return "n/a"
    return f"{value:.0%}" if pct else f"{value:.3f}"


def _comparison_html(report: EvalReport) -> str:
    rows = "".join(
        f'<tr><td class="l">{name}</td><td>{_fmt(v.get("mean_score"))}</td><td>{_fmt(v.get("pass_share"), True)}</td></tr>'
        for name, v in report.comparison.items()
    )
    a = report.agreement
    flips = report.flips
    return (
        '<table id="comparison"><tr><th class="l">answer</th><th>mean score</th><th>pass share</th></tr>'
        f"{rows}</table>"
        f"<p>Flips from the first draft to the selected answer: "
        f'<span class="bad">right&rarr;wrong {flips.get("right_to_wrong", 0)}</span>, '
        f'<span class="good">wrong&rarr;right {flips.get("wrong_to_right", 0)}</span>.</p>'
        f"<p>Critic agreement (critic accept vs scorer pass, every round): precision {_fmt(a.get('precision'))}, "
        f"recall {_fmt(a.get('recall'))} (tp {a.get('tp')}, fp {a.get('fp')}, fn {a.get('fn')}, tn {a.get('tn')}).</p>"
    )


def _flips_html(scored: list[_Scored], pass_mark: float, limit: int = 5) -> str:
    worse = [s for s in scored if s.rounds[s.selected].score < s.rounds[0].score]
    worse.sort(
        key=lambda s: (
            not (s.rounds[0].score >= pass_mark > s.rounds[s.selected].score),
            s.rounds[s.selected].score - s.rounds[0].score,
        )
    )
    if not worse:
        return "<p>No record ended worse than its first draft.</p>"
    parts = []
    for s in worse[:limit]:
        first, chosen = s.rounds[0], s.rounds[s.selected]
        parts.append(
            f"<h3>{html.escape(str(s.record.id))}: {html.escape(s.record.task[:200])}</h3>"
            '<div class="flip">'
            f"<div><b>first draft</b> (score {first.score:.2f})<pre>{html.escape(first.candidate)}</pre></div>"
            f"<div><b>selected, round {s.selected + 1}</b> (score {chosen.score:.2f})"
            f"<pre>{html.escape(chosen.candidate)}</pre></div></div>"
        )
    return "".join(parts)


def _write_html(path: Path, report: EvalReport, scored: list[_Scored], png: bytes | None, plot: bool) -> None:
    if png:
        data = base64.b64encode(png).decode("ascii")
        image = f'<img id="gain" alt="gain per round" src="data:image/png;base64,{data}">'
    elif not plot:
        image = f"<p>No plot: drawing was turned off (it needs matplotlib: {html.escape(PLOT_INSTALL)}).</p>"
    else:
        image = "<p>No plot: no record was scored.</p>"
    errors = "".join(f"<li>{html.escape(e)}</li>" for e in report.error_samples)
    page = (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        '<link rel="icon" href="data:,">'
        f"<title>reflection-graph eval: {html.escape(report.scorer)}</title><style>{_CSS}</style></head><body>"
        f"<h1>Does reflection pay off?</h1>"
        f"<p>{report.scored} records scored with <code>{html.escape(report.scorer)}</code> "
        f"(pass mark {report.pass_mark:g}); {report.errors} error rows.</p>"
        f"{_recommendation_html(report)}{image}<h2>Per round</h2>{_rounds_table_html(report)}"
        f"<h2>First draft, selected, last, oracle</h2>{_comparison_html(report)}"
        f"<h2>Worst flips</h2>{_flips_html(scored, report.pass_mark)}"
        + (f"<h2>Errors</h2><ul>{errors}</ul>" if errors else "")
        + "</body></html>"
    )
    _atomic_text(path, page, errors="xmlcharrefreplace")  # a lone surrogate shows as U+FFFD, not an error


# ------------------------------------------------------------------------------------------------- public


def _write_records(path: Path, records: Iterable[Mapping[str, Any]]) -> None:
    lines = [_json_text(dict(r)) for r in records]
    _atomic_text(path, "".join(line + "\n" for line in lines))


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
    """A copy of ``src`` with the mapped fields added; lines that are not JSON objects stay as they are."""
    lines = []
    with open(src, encoding="utf-8", errors="replace") as fh:
        for raw in fh:
            text = raw.rstrip("\n")
            try:
                obj = json.loads(text)
            except json.JSONDecodeError:
                lines.append(text)  # the batch engine reports it, on the same line number
                continue
            lines.append(_json_text(_mapped(obj, mapping)) if isinstance(obj, dict) else text)
    _atomic_text(dst, "".join(line + "\n" for line in lines))
    return dst


def _default_graph() -> Any:
    from reflection_graph.graph import create_reflection_graph

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
    concurrency: int = 4,
    timeout_s: float | None = None,
    retries: int = 0,
    progress: bool = True,
    plot: bool = True,
    config: dict[str, Any] | None = None,
    budget: int | None = None,
    token_budget: int | None = None,
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
        concurrency: records run at once (>= 1); scoring uses the same bound.
        timeout_s: per-record time limit for the graph, or None.
        retries: extra attempts within this run for a record whose graph raised or timed out.
        progress: show progress bars on stderr.
        plot: draw ``gain.png`` (needs matplotlib: ``pip install 'reflection-graph[eval]'``).
        config: a RunnableConfig passed to every graph call.
        budget: cap the per-round figures at this many tokens per record: a record's rounds count only while
            their cumulative tokens fit (the first always does); `RoundStats.hit_budget`, the rows'
            ``hit_budget`` / ``over_budget`` and `EvalReport.budget_hits` show which records it stopped.
        token_budget: the total tokens of the graph runs of this call (see `arun_batch`); records not started
            once it is spent become resumable ``budget`` error rows.

    Returns:
        The `EvalReport` (also in ``out_dir/summary.json``).

    Raises:
        ValueError: an unknown scorer or a bad option.
        ImportError: ``plot=True`` without matplotlib (the message has the pip command).
        FileNotFoundError: ``data`` is a path that does not exist.
    """
    started = time.perf_counter()
    built = scorer if isinstance(scorer, Scorer) else make_scorer(scorer, pass_mark=pass_mark)
    if select not in ("best", "last"):
        raise ValueError(f"select must be 'best' or 'last', got {select!r}")
    if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int) or budget < 1):
        raise ValueError(f"budget must be an integer >= 1 (tokens per record) or None, got {budget!r}")
    if plot:
        _require_matplotlib()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    mapping = _check_fields(fields)
    if isinstance(data, (str, os.PathLike)):
        in_path = Path(data)
        if not in_path.is_file():
            raise FileNotFoundError(f"data file not found: {in_path}")
        if mapping:
            in_path = _mapped_copy(in_path, out / "input.jsonl", mapping)
    else:
        in_path = out / "input.jsonl"
        _write_records(in_path, (_mapped(dict(r), mapping) for r in data))

    records, input_errors = read_input(in_path)
    problems: dict[str, str] = {}
    for record in records:
        try:
            built.check(_record_dict(record))
        except ScorerError as exc:
            problems[record.key] = str(exc)
    runs = out / "runs.jsonl"
    await arun_batch(
        _CheckedGraph(graph if graph is not None else _default_graph, problems),
        in_path,
        runs,
        concurrency=concurrency,
        timeout_s=timeout_s,
        retries=retries,
        progress=progress,
        config=config,
        token_budget=token_budget,
    )
    entries, _ = read_output(runs)
    by_key = {_key(e.get("id")): e for e in entries if e.get("error_type") != "input"}

    cache = _ScoreCache(out / "scores.jsonl", built.cache)
    semaphore = asyncio.Semaphore(concurrency)
    ok = [(r, by_key[r.key]) for r in records if by_key.get(r.key, {}).get("status") == "ok"]
    bar = _Bar(progress, len(ok), "score")
    scored: dict[str, _Scored] = {}
    score_errors: dict[str, str] = {}

    async def score_one(record: BatchRecord, entry: dict[str, Any]) -> None:
        rounds, selected = _rounds_of(entry)
        async with semaphore:
            try:
                await _score_record(built, cache, record, rounds)
            except ScorerError as exc:
                score_errors[record.key] = str(exc)
            else:
                scored[record.key] = _Scored(record, entry, rounds, selected)
        bar.advance()

    try:
        await asyncio.gather(*(score_one(r, e) for r, e in ok))
    finally:
        bar.stop()

    rows: list[tuple[int, list[dict[str, Any]]]] = []
    for err in input_errors:
        rows.append((err.line, [_error_row(err.id, err.line, "input", err.message)]))
    for record in records:
        if record.key in scored:
            rows.append((record.line, _ok_rows(scored[record.key], built.pass_mark, budget)))
        elif record.key in score_errors:
            rows.append(
                (
                    record.line,
                    [_error_row(record.id, record.line, "scorer", score_errors[record.key], record.task)],
                )
            )
        else:
            entry = by_key.get(record.key, {})
            message = str(entry.get("error") or "the record did not run")
            kind = str(entry.get("error_type") or "exception")
            if message.startswith(_SCORER_PREFIX):
                kind, message = "scorer", message[len(_SCORER_PREFIX) :]
            rows.append((record.line, [_error_row(record.id, record.line, kind, message, record.task)]))
    rows.sort(key=lambda item: item[0])
    flat = [row for _, group in rows for row in group]
    _atomic_text(out / "rounds.jsonl", "".join(_json_text(r) + "\n" for r in flat))

    ordered = [scored[r.key] for r in records if r.key in scored]
    errors = [row for row in flat if row["status"] == "error"]
    report = EvalReport(out_dir=str(out), scorer=built.spec, pass_mark=built.pass_mark)
    report.records = len(records) + len(input_errors)
    report.scored = len(ordered)
    report.errors = len(errors)
    by_type: dict[str, int] = {}
    for row in errors:
        by_type[row["error_type"]] = by_type.get(row["error_type"], 0) + 1
    report.errors_by_type = dict(sorted(by_type.items()))
    report.error_samples = [f"{row['id']}: {row['error']}" for row in errors[:5]]
    report.rounds = _round_stats(ordered, built.pass_mark, select, budget)
    report.budget = budget
    report.budget_hits = [s.record.id for s in ordered if _hit_budget(s, budget)]
    report.comparison = _comparison(ordered, built.pass_mark)
    report.flips = _flips(ordered, built.pass_mark)
    report.agreement = _agreement(ordered, built.pass_mark)
    report.best_max_iterations, report.recommendation = _recommend(report.rounds)

    files = {"runs": runs, "rounds": out / "rounds.jsonl", "summary_csv": out / "summary.csv"}
    _write_csv(files["summary_csv"], report.rounds)
    png: bytes | None = None
    if plot and report.rounds:
        files["plot"] = out / "gain.png"
        png = _plot(files["plot"], report)
    files["html"] = out / "report.html"
    files["summary_json"] = out / "summary.json"
    report.files = {k: str(v) for k, v in files.items()}
    _write_html(files["html"], report, ordered, png, plot)
    report.seconds = round(time.perf_counter() - started, 3)
    _atomic_text(files["summary_json"], _json_text(report.to_dict(), indent=2) + "\n")
    return report


def evaluate(
    data: str | os.PathLike[str] | Sequence[Mapping[str, Any]],
    *,
    out_dir: str | os.PathLike[str],
    graph: Any = None,
    scorer: str | Scorer | Callable[[dict[str, Any], str], Any] = "contains",
    pass_mark: float | None = None,
    select: str = "best",
    fields: Mapping[str, str] | None = None,
    concurrency: int = 4,
    timeout_s: float | None = None,
    retries: int = 0,
    progress: bool = True,
    plot: bool = True,
    config: dict[str, Any] | None = None,
    budget: int | None = None,
    token_budget: int | None = None,
) -> EvalReport:
    """Run a reflection graph over a dataset, score every round against ground truth, and report.

    The synchronous twin of `aevaluate` (same arguments, see there); call `aevaluate` from inside an event loop
    (a notebook cell can ``await aevaluate(...)``).

    Args:
        data: a JSONL file of records, or the records themselves.
        out_dir: where ``rounds.jsonl``, ``summary.csv``, ``gain.png`` and ``report.html`` go.
        graph: a compiled graph or a factory; None: the default graph on the embedded model.
        scorer: the ground truth (`contains` by default).
        pass_mark: a score at or above it passes.
        select: the graph's `select` setting.
        fields: record keys taken from other fields, e.g. ``{"task": "prompt"}``.
        concurrency: records run at once.
        timeout_s: per-record time limit, or None.
        retries: extra attempts for a failing record.
        progress: show progress bars.
        plot: draw ``gain.png``.
        config: a RunnableConfig for every graph call.
        budget: cap the per-round figures at this many tokens per record.
        token_budget: the total tokens of the graph runs.

    Returns:
        The `EvalReport`.

    Example:
        ```python
        report = evaluate("datasets/questions.jsonl", graph=graph, scorer="contains", out_dir="eval-out")
        print(report.table())
        ```
    """
    return run_sync(
        "evaluate",
        aevaluate(
            data,
            out_dir=out_dir,
            graph=graph,
            scorer=scorer,
            pass_mark=pass_mark,
            select=select,
            fields=fields,
            concurrency=concurrency,
            timeout_s=timeout_s,
            retries=retries,
            progress=progress,
            plot=plot,
            config=config,
            budget=budget,
            token_budget=token_budget,
        ),
    )
