"""Eval's report: `EvalReport` (what `evaluate` found), and its files: ``summary.csv``, the ``gain.png`` plot and
the self-contained ``report.html``."""

from __future__ import annotations

import base64
import csv
import html
import io
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from reflection_graph.runners._jsonl import atomic_write
from reflection_graph.runners._rounds import RoundStats, Scored

PLOT_INSTALL = "pip install 'reflection-graph[eval]'"


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
        return recommendation_html(self) + rounds_table_html(self) + comparison_html(self)


def require_matplotlib() -> None:
    """Raise `ImportError` with the pip command when matplotlib (for ``gain.png``) is missing."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise ImportError(f"the eval plot (gain.png) needs matplotlib: {PLOT_INSTALL}") from None


def write_csv(path: Path, rounds: list[RoundStats]) -> None:
    buffer = io.StringIO()
    names = list(RoundStats.__dataclass_fields__)
    writer = csv.DictWriter(buffer, fieldnames=names, lineterminator="\n")
    writer.writeheader()
    for r in rounds:
        writer.writerow(asdict(r))
    atomic_write(path, buffer.getvalue())


def plot(path: Path, report: EvalReport) -> bytes:
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
    atomic_write(path, data)
    return data


_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem auto;max-width:1100px;color:#222}
table{border-collapse:collapse;margin:0.5rem 0 1.5rem}th,td{border:1px solid #ccc;padding:4px 10px;text-align:right}
th{background:#f3f3f3}td.l,th.l{text-align:left}.rec{background:#f4f6fa;border-left:4px solid #557;padding:8px 12px}
.flip{display:grid;grid-template-columns:1fr 1fr;gap:12px;margin-bottom:1.5rem}
.flip pre{white-space:pre-wrap;background:#fafafa;border:1px solid #ddd;padding:8px;margin:0;font-size:13px}
.bad{color:#b00}.good{color:#050}img{max-width:100%}
"""


def recommendation_html(report: EvalReport) -> str:
    return f'<p class="rec">{html.escape(report.recommendation)}</p>'


def rounds_table_html(report: EvalReport) -> str:
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


def comparison_html(report: EvalReport) -> str:
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


def _flips_html(scored: list[Scored], pass_mark: float, limit: int = 5) -> str:
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


def write_html(path: Path, report: EvalReport, scored: list[Scored], png: bytes | None, plot: bool) -> None:
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
        f"{recommendation_html(report)}{image}<h2>Per round</h2>{rounds_table_html(report)}"
        f"<h2>First draft, selected, last, oracle</h2>{comparison_html(report)}"
        f"<h2>Worst flips</h2>{_flips_html(scored, report.pass_mark)}"
        + (f"<h2>Errors</h2><ul>{errors}</ul>" if errors else "")
        + "</body></html>"
    )
    atomic_write(path, page.encode("utf-8", "xmlcharrefreplace"))  # a lone surrogate: a character reference
