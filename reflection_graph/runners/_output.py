"""The output side of a batch: the entries of ``OUT``, one per record after compaction.

An entry is ``ok`` (the graph's result) or an error (``exception``, ``timeout``, ``graph``, ``input``). Compaction
rewrites ``OUT`` atomically with one entry per record (``ok`` winning over ``error``), input errors recomputed
from ``IN``, and entries written for another input moved to ``OUT.stale.jsonl``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reflection_graph.runners._jsonl import append_lines, atomic_write, dumps, lines_text, read_objects
from reflection_graph.runners._records import BatchRecord, InputError, id_key

_RESULT_KEYS = ("candidate", "critique", "stop_reason", "iterations", "usage", "trajectory")


def read_output(out_path: str | os.PathLike[str]) -> tuple[list[dict[str, Any]], int]:
    """Read the entries of ``OUT``, skipping unreadable lines (such as one truncated by a kill).

    Args:
        out_path: the JSONL output file; a missing file has no entries.

    Returns:
        ``(entries, dropped)``: the readable entries in file order and the number of lines skipped.
    """
    objects, dropped = read_objects(out_path)
    entries = [obj for obj in objects if "status" in obj and "id" in obj]
    return entries, dropped + len(objects) - len(entries)


def stale_path(out_path: Path) -> Path:
    """Where entries written for another input than their record's current one are moved."""
    return Path(os.fspath(out_path) + ".stale.jsonl")


def _entry_slot(entry: dict[str, Any]) -> tuple[str, str]:
    if entry.get("error_type") == "input":
        return ("input", str(entry.get("line")))
    return ("record", id_key(entry.get("id")))


def merge_entries(entries: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    """One entry per slot (a record id, or an input line): ``ok`` wins over ``error``; among equals the later."""
    merged: dict[tuple[str, str], dict[str, Any]] = {}
    for entry in entries:
        slot = _entry_slot(entry)
        previous = merged.get(slot)
        if previous is not None and previous.get("status") == "ok" and entry.get("status") != "ok":
            continue
        merged[slot] = entry
    return merged


def is_stale(entry: dict[str, Any], record: BatchRecord) -> bool:
    """True when ``entry`` was written for another input than ``record``'s (e.g. a line-number id that moved)."""
    stored = entry.get("input_hash")
    if isinstance(stored, str):
        return stored != record.input_hash
    task = entry.get("task")  # entries written before input hashes existed: compare the task they hold
    return isinstance(task, str) and task != record.task


def _check_shard_label(out_path: Path, entry: dict[str, Any], shard: str | None) -> None:
    found = entry.get("shard")
    if found == shard:
        return
    holds = f"shard {found}" if found is not None else "an unsharded run"
    wanted = f"shard {shard}" if shard is not None else "an unsharded run"
    raise ValueError(
        f"{out_path} holds results of {holds}, not of {wanted}; give each shard its own output file "
        "(combine them with `reflection-graph merge`)"
    )


@dataclass
class Compacted:
    """What compaction found: the record entries by key, the unreadable lines, the records to redo."""

    entries: dict[str, dict[str, Any]]  # record entries by key (records of IN and others)
    dropped: int  # unreadable lines
    changed: list[BatchRecord]  # records whose stored entry was for another input (now moved aside)


def compact(
    out_path: Path, records: list[BatchRecord], input_errors: list[InputError], shard: str | None = None
) -> Compacted:
    """Rewrite ``OUT`` with one entry per record, input errors recomputed from ``IN``.

    Entries written for another input than the record's current one (see `is_stale`) are appended to
    ``OUT.stale.jsonl`` and left out, so their records run again. Entries of another shard make it raise
    ``ValueError`` before anything is written.
    """
    entries, dropped = read_output(out_path)
    current = {r.key: r for r in records}
    fresh: list[dict[str, Any]] = []
    stale: list[dict[str, Any]] = []
    for entry in entries:
        if entry.get("error_type") == "input":
            continue
        _check_shard_label(out_path, entry, shard)
        record = current.get(id_key(entry.get("id")))
        (stale if record is not None and is_stale(entry, record) else fresh).append(entry)
    merged = merge_entries(fresh)
    for err in input_errors:
        merged[("input", str(err.line))] = err.entry()
    changed_keys = {id_key(e.get("id")) for e in stale} - {key for kind, key in merged if kind == "record"}
    if stale:
        append_lines(stale_path(out_path), [dumps(e) for e in stale])
    by_line: dict[tuple[str, str], int] = {("record", r.key): r.line for r in records}
    by_line.update({("input", str(e.line)): e.line for e in input_errors})
    known = sorted((slot for slot in merged if slot in by_line), key=lambda s: by_line[s])
    others = [slot for slot in merged if slot not in by_line]  # ids no longer in IN: kept, in their old order
    atomic_write(out_path, lines_text(dumps(merged[slot]) for slot in known + others))
    return Compacted(
        entries={slot[1]: entry for slot, entry in merged.items() if slot[0] == "record"},
        dropped=dropped,
        changed=[r for r in records if r.key in changed_keys],
    )


def _number(value: Any) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return None


def _score_of(critique: Any) -> float | None:
    return _number(critique.get("score") if isinstance(critique, dict) else getattr(critique, "score", None))


def _step_score(step: dict[str, Any]) -> float | None:
    value = _number(step.get("score"))
    return value if value is not None else _score_of(step.get("critique"))


def scores(result: dict[str, Any]) -> tuple[float | None, float | None]:
    """(score of the returned candidate, score of the first round)."""
    trajectory = result.get("trajectory") or []
    first: float | None = None
    final: float | None = None
    if trajectory and isinstance(trajectory[0], dict):
        first = _step_score(trajectory[0])
        candidate = result.get("candidate")
        for step in reversed(trajectory):  # ties go to the later round, as in select="best"
            if isinstance(step, dict) and step.get("candidate") == candidate:
                final = _step_score(step)
                break
    if final is None:
        final = _score_of(result.get("critique"))
    return final, first


def ok_entry(record: BatchRecord, result: dict[str, Any], attempts: int, seconds: float) -> dict[str, Any]:
    """The ``ok`` entry of a record whose graph returned ``result``."""
    score, first_score = scores(result)
    entry: dict[str, Any] = {
        "id": record.id,
        "line": record.line,
        "status": "ok",
        "task": record.task,
        "input_hash": record.input_hash,
    }
    for key in _RESULT_KEYS:
        entry[key] = result.get(key)
    entry.update(
        score=score,
        first_score=first_score,
        metadata=record.metadata,
        attempts=attempts,
        seconds=round(seconds, 3),
    )
    return entry


def error_entry(
    record: BatchRecord,
    error_type: str,
    message: str,
    attempts: int,
    seconds: float,
    result: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The error entry of a record (``exception``, ``timeout``, or ``graph`` with the graph's ``result``)."""
    entry: dict[str, Any] = {
        "id": record.id,
        "line": record.line,
        "status": "error",
        "error_type": error_type,
        "error": message,
        "task": record.task,
        "input_hash": record.input_hash,
        "metadata": record.metadata,
        "attempts": attempts,
        "seconds": round(seconds, 3),
    }
    if result is not None:
        for key in _RESULT_KEYS:
            entry[key] = result.get(key)
    return entry
