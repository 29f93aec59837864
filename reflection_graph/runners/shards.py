"""Split one batch over N machines: ``shard=(I, N)`` runs the records whose id hashes to shard ``I``.

Each shard writes its own ``OUT`` (its entries carry ``"shard": "I/N"``); `merge_outputs` combines them into one
``OUT``, checking that no record is missing or doubled.

Example:
    ```python
    from reflection_graph.runners.shards import merge_outputs, shard_of

    assert 0 <= shard_of("record-7", 4) < 4
    ```
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from reflection_graph.runners._jsonl import atomic_write, dumps, lines_text, same_file
from reflection_graph.runners._lock import OutputLock
from reflection_graph.runners._output import is_stale, merge_entries, read_output
from reflection_graph.runners._records import BatchRecord, id_key, read_input
from reflection_graph.runners._side_files import check_inputs_spared, resolve_output
from reflection_graph.runners._summary import BatchSummary, fill_stats, write_summary

__all__ = ["MergeError", "merge_outputs", "parse_shard", "shard_of"]


class MergeError(ValueError):
    """Shard outputs that cannot be merged: a missing shard or record, a duplicate, a file given twice."""


def shard_of(record_id: str | int, shards: int) -> int:
    """The shard (``0 .. shards-1``) of a record: a stable hash (sha256) of its id, the same on every machine.

    Args:
        record_id: the record's ``id`` (or its line number when it has none).
        shards: the number of shards, >= 1.
    """
    digest = hashlib.sha256(id_key(record_id).encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big") % shards


def parse_shard(text: str) -> tuple[int, int]:
    """Parse ``"I/N"`` (shard ``I`` of ``N``, numbered from 0) into ``(I, N)``.

    Raises:
        ValueError: not of the form I/N, N < 1 or I outside 0..N-1 (the message says which).
    """
    index_text, sep, count_text = text.partition("/")
    if not sep or not index_text.strip().isdigit() or not count_text.strip().isdigit():
        raise ValueError(f"shard {text!r} is not of the form I/N (shard I of N, numbered from 0), e.g. 0/4")
    index, count = int(index_text), int(count_text)
    if count < 1:
        raise ValueError(f"shard {text!r}: the shard count N must be >= 1")
    if index >= count:
        raise ValueError(f"shard {text!r}: the index must be 0..{count - 1} (shards are numbered 0 to N-1)")
    return index, count


def _shard_label(path: Path, entries: list[dict[str, Any]]) -> tuple[int, int] | None:
    labels = {e.get("shard") for e in entries if e.get("error_type") != "input"}
    if not labels:
        return None
    if len(labels) > 1 or None in labels:
        found = ", ".join(sorted(str(x) if x is not None else "unsharded" for x in labels))
        raise MergeError(f"{path} mixes results of several runs ({found}); it is not one shard's output")
    label = labels.pop()
    try:
        return parse_shard(str(label))
    except ValueError:
        raise MergeError(f"{path}: entries name an invalid shard {label!r}") from None


def _names(keys: list[str], limit: int = 3) -> str:
    shown = ", ".join(keys[:limit])
    return shown + (f" and {len(keys) - limit} more" if len(keys) > limit else "")


def _check_paths(paths: list[Path], in_file: Path, out_file: Path) -> None:
    """Refuse, before anything is written, files given twice, a shard output that is the input, and an output
    (or a file written beside it: summary, lock, temporary files) that is an input or a shard output."""
    if not paths:
        raise MergeError("no shard outputs given")
    if not in_file.is_file():
        raise FileNotFoundError(f"input file not found: {in_file}")
    inputs: list[tuple[str, Path]] = [("the input file", in_file)]
    inputs += [("the shard output", path) for path in paths]
    check_inputs_spared(out_file, inputs, stale=False, error=MergeError)
    for i, path in enumerate(paths):
        if not path.is_file():
            raise FileNotFoundError(f"shard output not found: {path}")
        for other in paths[:i]:
            if same_file(path, other):
                raise MergeError(f"the same output file is given twice ({other} and {path})")
        if same_file(path, in_file):
            raise MergeError(f"{path} is the input file, not a shard output")


def _read_shards(
    paths: list[Path], shards: int | None
) -> tuple[dict[Path, dict[str, dict[str, Any]]], dict[int, Path], int | None]:
    """Each output's record entries by key, the output of each shard index, and the shard count."""
    by_file: dict[Path, dict[str, dict[str, Any]]] = {}
    shard_files: dict[int, Path] = {}
    count = shards
    for path in paths:
        entries, _ = read_output(path)
        label = _shard_label(path, entries)
        records_only = [e for e in entries if e.get("error_type") != "input"]
        by_file[path] = {slot[1]: e for slot, e in merge_entries(records_only).items()}
        if label is None:
            continue
        index, n = label
        if count is None:
            count = n
        elif n != count:
            raise MergeError(f"{path} is shard {index}/{n}, but the other outputs are shards of {count}")
        if index in shard_files:
            raise MergeError(f"{shard_files[index]} and {path} are both shard {index}/{count}")
        shard_files[index] = path
    return by_file, shard_files, count


def _collect(
    records: list[BatchRecord],
    by_file: dict[Path, dict[str, dict[str, Any]]],
    shard_files: dict[int, Path],
    count: int | None,
) -> dict[str, dict[str, Any]]:
    """Each record's one entry (without its ``shard`` field), or `MergeError` naming what is missing or doubled."""
    problems: list[str] = []
    merged: dict[str, dict[str, Any]] = {}
    missing: dict[int, list[str]] = {}
    for record in records:
        holders = [
            p
            for p, found in by_file.items()
            if record.key in found and not is_stale(found[record.key], record)
        ]
        if len(holders) > 1:
            problems.append(f"record {record.key} is in both {holders[0]} and {holders[1]}")
        elif holders:
            merged[record.key] = {k: v for k, v in by_file[holders[0]][record.key].items() if k != "shard"}
        else:
            missing.setdefault(shard_of(record.id, count) if count else -1, []).append(record.key)
    if missing and count is None:
        lost = sum(map(len, missing.values()))
        problems.append(f"{lost} records have no entry and no output tells the shard count; pass --shards N")
    for index in sorted(k for k in missing if k >= 0):
        keys = missing[index]
        if index not in shard_files:
            problems.append(f"shard {index}/{count} is missing: no output given for it ({len(keys)} records)")
        else:
            problems.append(
                f"shard {index}/{count} ({shard_files[index]}) lacks {len(keys)} records ({_names(keys)}); rerun it"
            )
    if problems:
        raise MergeError("; ".join(problems))
    return merged


def merge_outputs(
    outputs: Sequence[str | os.PathLike[str]],
    in_path: str | os.PathLike[str],
    out_path: str | os.PathLike[str],
    *,
    shards: int | None = None,
) -> BatchSummary:
    """Merge the outputs of ``batch --shard I/N`` runs into one ``OUT``, checking every record is there once.

    Every record of ``in_path`` must have exactly one entry (``ok`` or ``error``) across the shard outputs, one
    written for its current input. The shard of each output is read from its entries (``"shard": "I/N"``);
    bad lines of ``IN`` are recomputed from ``IN``. ``OUT`` is written only when nothing is missing, in the order of
    ``IN``, without the ``shard`` field (so a plain ``batch`` can resume it); entries for ids that are no longer in
    ``IN`` and entries written for another input than the record's current one are left out.

    Args:
        outputs: the shard outputs, in any order.
        in_path: the input all shards ran on.
        out_path: where the merged JSONL goes (its summary goes to ``OUT.summary.json``).
        shards: the shard count N, when no output has entries to tell it.

    Returns:
        The `BatchSummary` of the merged output.

    Raises:
        MergeError: a file given twice, two outputs of one shard, a missing shard or records missing from a
            shard, a record in two outputs, or ``OUT`` or a file written beside it (``OUT.tmp``,
            ``OUT.summary.json`` and its ``.tmp``, ``OUT.lock``) among the inputs and shard outputs. The one-line
            message says which.
        FileNotFoundError: ``in_path`` or an output does not exist.
    """
    started = time.perf_counter()
    in_file, out_file = Path(in_path), Path(out_path)
    paths = [Path(p) for p in outputs]
    _check_paths(paths, in_file, out_file)
    out_file = resolve_output(out_file)  # a symlink named as OUT stays one; its target is written
    by_file, shard_files, count = _read_shards(paths, shards)
    records, input_errors = read_input(in_file)
    merged = _collect(records, by_file, shard_files, count)
    lock = OutputLock(out_file)
    lock.acquire()
    try:
        lines = [(r.line, dumps(merged[r.key])) for r in records]
        lines += [(e.line, dumps(e.entry())) for e in input_errors]
        atomic_write(out_file, lines_text(text for _, text in sorted(lines, key=lambda pair: pair[0])))
        summary = BatchSummary(in_path=str(in_file), out_path=str(Path(out_path)))
        summary.records = len(records) + len(input_errors)
        summary.input_errors = len(input_errors)
        summary.skipped = len(records)
        fill_stats(summary, records, input_errors, merged)
        summary.seconds = round(time.perf_counter() - started, 3)
        write_summary(summary, out_file)
    finally:
        lock.release()
    return summary
