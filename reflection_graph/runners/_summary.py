"""The summary of a batch (`BatchSummary`, written to ``OUT.summary.json``) and the statistics in it."""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from reflection_graph.runners._jsonl import atomic_write
from reflection_graph.runners._records import BatchRecord, InputError


@dataclass
class BatchSummary:
    """What a batch run did, and the state of ``OUT`` for the records of ``IN`` afterwards.

    Counts describe the records of the current ``IN``: ``ok + error == records``. Token, stop-reason and
    score statistics cover every ``ok`` entry of those records, whichever run produced it; ``seconds`` and
    ``run_tokens`` cover this run only.

    Attributes:
        in_path: the input file.
        out_path: the output file.
        records: number of non-blank lines in ``IN`` (valid records plus input errors).
        ok: records whose entry in ``OUT`` is ``ok``.
        error: records whose entry in ``OUT`` is an error (including input errors).
        skipped: records already ``ok`` before this run, not run again.
        processed: records sent to the graph in this run.
        retried: records of this run that had an error entry from an earlier run.
        input_errors: lines of ``IN`` that are not valid records.
        errors_by_type: error entries by ``error_type`` (``exception``, ``timeout``, ``graph``, ``input``, and
            ``budget`` for records not started once a total ``token_budget`` was spent).
        total_tokens: tokens of all ``ok`` entries (from their ``usage.total.total_tokens``).
        run_tokens: tokens of the ``ok`` entries produced by this run.
        seconds: wall-clock seconds of this run.
        stop_reasons: ``ok`` entries by ``stop_reason``.
        mean_score_gain: mean of ``score - first_score`` over ``ok`` entries that have both, else None.
        mean_first_score: mean first-round score, else None.
        mean_final_score: mean final score, else None.
        dropped_lines: unreadable lines found in ``OUT`` at start (e.g. a line truncated by a kill).
        error_samples: up to 5 error messages, as ``"id: message"``, in input order.
        changed: records whose input changed since their entry was written (the stored ``input_hash`` differs);
            their old entries were moved to ``OUT.stale.jsonl`` and the records were run again.
        changed_samples: up to 20 of those, as ``"line N (id X): ..."``, in input order.
        shard: ``"I/N"`` when this run handled one shard of ``IN`` (see `shard_of`), else None.
        stale_lock: the run whose lock on ``OUT`` this run took over (it had died), or None.
    """

    in_path: str
    out_path: str
    records: int = 0
    ok: int = 0
    error: int = 0
    skipped: int = 0
    processed: int = 0
    retried: int = 0
    input_errors: int = 0
    errors_by_type: dict[str, int] = field(default_factory=dict)
    total_tokens: int = 0
    run_tokens: int = 0
    seconds: float = 0.0
    stop_reasons: dict[str, int] = field(default_factory=dict)
    mean_score_gain: float | None = None
    mean_first_score: float | None = None
    mean_final_score: float | None = None
    dropped_lines: int = 0
    error_samples: list[str] = field(default_factory=list)
    changed: int = 0
    changed_samples: list[str] = field(default_factory=list)
    shard: str | None = None
    stale_lock: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (what ``OUT.summary.json`` holds)."""
        return asdict(self)


def summary_path(out_path: str | os.PathLike[str]) -> Path:
    """Where the summary of a batch writing ``out_path`` goes: ``OUT`` + ``.summary.json``."""
    return Path(os.fspath(out_path) + ".summary.json")


def write_summary(summary: BatchSummary, out_path: Path) -> None:
    """Write ``summary`` to ``OUT.summary.json`` (atomically)."""
    atomic_write(summary_path(out_path), json.dumps(summary.to_dict(), indent=2) + "\n")


def mean(values: Sequence[float]) -> float | None:
    """The mean, rounded to 4 places, or None for no values."""
    return round(sum(values) / len(values), 4) if values else None


def tokens(entry: dict[str, Any]) -> int:
    """The total tokens of an entry (its ``usage.total.total_tokens``), 0 when it has none."""
    usage = entry.get("usage")
    total = usage.get("total") if isinstance(usage, dict) else None
    value = total.get("total_tokens") if isinstance(total, dict) else None
    return int(value) if isinstance(value, (int, float)) else 0


def _score_means(summary: BatchSummary, ok_entries: list[dict[str, Any]]) -> None:
    firsts: list[float] = []
    finals: list[float] = []
    gains: list[float] = []
    for e in ok_entries:
        first, final = e.get("first_score"), e.get("score")
        if isinstance(first, (int, float)):
            firsts.append(float(first))
        if isinstance(final, (int, float)):
            finals.append(float(final))
        if isinstance(first, (int, float)) and isinstance(final, (int, float)):
            gains.append(float(final) - float(first))
    summary.mean_score_gain = mean(gains)
    summary.mean_first_score = mean(firsts)
    summary.mean_final_score = mean(finals)


def fill_stats(
    summary: BatchSummary,
    records: list[BatchRecord],
    input_errors: list[InputError],
    entries: dict[str, dict[str, Any]],
) -> None:
    """Fill the counts and statistics of ``summary`` from the record entries by key."""
    ok_entries = [entries[r.key] for r in records if entries.get(r.key, {}).get("status") == "ok"]
    error_entries = [
        entries[r.key] for r in records if r.key in entries and entries[r.key].get("status") != "ok"
    ]
    summary.ok = len(ok_entries)
    summary.error = len(error_entries) + len(input_errors)
    by_type = Counter(str(e.get("error_type", "exception")) for e in error_entries)
    if input_errors:
        by_type["input"] += len(input_errors)
    summary.errors_by_type = dict(sorted(by_type.items()))
    samples = [
        (r.line, f"{r.id}: {entries[r.key].get('error')}")
        for r in records
        if entries.get(r.key) in error_entries
    ]
    samples += [(e.line, e.message) for e in input_errors]
    summary.error_samples = [text for _, text in sorted(samples)[:5]]
    summary.total_tokens = sum(tokens(e) for e in ok_entries)
    summary.stop_reasons = dict(sorted(Counter(str(e.get("stop_reason")) for e in ok_entries).items()))
    _score_means(summary, ok_entries)
