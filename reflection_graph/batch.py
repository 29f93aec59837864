"""Glean many records from a JSONL file with a reflection graph: bounded, per-record isolated and resumable.

Input (``IN``) is JSON Lines. Each line is one object with a non-empty string ``task``; optional ``id`` (string
or integer), ``candidate`` (an existing output to glean) and ``context`` (strings); every other field is kept
as ``metadata`` and copied to the output entry. A record is identified by its ``id`` when it has one, otherwise
by its 1-based line number (an integer). Two records with the same identity are an error on the later line.
Blank lines are ignored.

Output (``OUT``) is JSON Lines with exactly one entry per record (after compaction):

* success: ``{"id", "line", "status": "ok", "task", "candidate", "critique", "stop_reason", "iterations",
  "score", "first_score", "usage", "trajectory", "metadata", "attempts", "seconds"}``. ``score`` is the score
  of the returned candidate, ``first_score`` the score of the first round.
* failure: ``{"id", "line", "status": "error", "error_type", "error", ...}`` where ``error_type`` is
  ``exception``, ``timeout``, ``graph`` (the graph finished with ``stop_reason == "error"``) or ``input`` (a bad
  line: not JSON, not an object, missing ``task``, duplicate ``id``; the message starts with ``line N:``).

Resuming: rerunning with the same ``OUT`` skips every record that already has an ``ok`` entry and retries the
records whose entry is an error. Input errors are never sent to the graph; they are recomputed from ``IN`` on
each run, so they go away when the line is fixed.

Durability: while running, entries are appended one line at a time and each is flushed and ``fsync``-ed. At the
start of a run (and at its end) ``OUT`` is compacted atomically (temp file + ``os.replace``) so each record
appears exactly once, ``ok`` winning over ``error``. A process killed at any point leaves at worst a truncated
last line, which the next run ignores; no finished record is lost and none is duplicated. Entries for ids that
are no longer in ``IN`` are kept.

Example:
    ```python
    from reflection_graph import create_reflection_graph
    from reflection_graph.batch import run_batch

    summary = run_batch(lambda: create_reflection_graph("local"), "tasks.jsonl", "out.jsonl", concurrency=4)
    print(summary.ok, summary.error, summary.mean_score_gain)
    ```
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

__all__ = [
    "BatchRecord",
    "BatchSummary",
    "InputError",
    "SupportsAinvoke",
    "arun_batch",
    "read_input",
    "read_output",
    "run_batch",
    "summary_path",
]

_RESERVED_KEYS = ("id", "task", "candidate", "context")
_RESULT_KEYS = ("candidate", "critique", "stop_reason", "iterations", "usage", "trajectory")


@runtime_checkable
class SupportsAinvoke(Protocol):
    """Anything with LangGraph's ``ainvoke(input, config)``: a compiled graph, a Runnable, or a test fake."""

    def ainvoke(self, input: Any, config: Any = None, **kwargs: Any) -> Awaitable[Any]: ...


GraphOrFactory = SupportsAinvoke | Callable[[], SupportsAinvoke]


@dataclass(frozen=True)
class BatchRecord:
    """One valid input record.

    Attributes:
        id: the record's ``id`` field, or its line number when it has none.
        line: 1-based line number in ``IN``.
        task: what to produce.
        candidate: an existing output to glean, if given.
        context: extra material for the task, if given.
        metadata: every other field of the input object.
    """

    id: str | int
    line: int
    task: str
    candidate: str | None = None
    context: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> str:
        """The identity used to match input records with output entries."""
        return _id_key(self.id)

    def graph_input(self) -> dict[str, Any]:
        """The input mapping handed to the graph (``task`` plus ``candidate``/``context`` when given)."""
        data: dict[str, Any] = {"task": self.task}
        if self.candidate is not None:
            data["candidate"] = self.candidate
        if self.context is not None:
            data["context"] = self.context
        return data


@dataclass(frozen=True)
class InputError:
    """A line of ``IN`` that is not a valid record.

    Attributes:
        line: 1-based line number.
        message: a one-line explanation starting with ``line N:``.
        id: the line's ``id`` when one could be read (and is not a duplicate), else the line number. Input
            error entries are keyed by line, never merged with a record's entry.
    """

    line: int
    message: str
    id: str | int

    def entry(self) -> dict[str, Any]:
        """The error entry written to ``OUT`` for this line."""
        return {
            "id": self.id,
            "line": self.line,
            "status": "error",
            "error_type": "input",
            "error": self.message,
        }


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
        errors_by_type: error entries by ``error_type`` (``exception``, ``timeout``, ``graph``, ``input``).
        total_tokens: tokens of all ``ok`` entries (from their ``usage.total.total_tokens``).
        run_tokens: tokens of the ``ok`` entries produced by this run.
        seconds: wall-clock seconds of this run.
        stop_reasons: ``ok`` entries by ``stop_reason``.
        mean_score_gain: mean of ``score - first_score`` over ``ok`` entries that have both, else None.
        mean_first_score: mean first-round score, else None.
        mean_final_score: mean final score, else None.
        dropped_lines: unreadable lines found in ``OUT`` at start (e.g. a line truncated by a kill).
        error_samples: up to 5 error messages, as ``"id: message"``, in input order.
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

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (what ``OUT.summary.json`` holds)."""
        return asdict(self)


def summary_path(out_path: str | os.PathLike[str]) -> Path:
    """Where the summary of a batch writing ``out_path`` goes: ``OUT`` + ``.summary.json``."""
    return Path(os.fspath(out_path) + ".summary.json")


# --------------------------------------------------------------------------------------------------- input


def _id_key(value: Any) -> str:
    # Integers and strings stay distinct ("3" vs 3); line-number ids are integers.
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _optional_str(obj: dict[str, Any], name: str, line: int) -> str | None:
    value = obj.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError(f"line {line}: `{name}` must be a string or null, got {type(value).__name__}")
    return value


def _parse_line(text: str, line: int) -> BatchRecord:
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"line {line}: not valid JSON: {exc.msg} (column {exc.colno})") from None
    if not isinstance(obj, dict):
        raise ValueError(f"line {line}: expected a JSON object with a `task`, got {type(obj).__name__}")
    raw_id = obj.get("id")
    record_id: str | int
    if raw_id is None:
        record_id = line
    elif isinstance(raw_id, bool) or not isinstance(raw_id, (str, int)):
        raise ValueError(f"line {line}: `id` must be a string or an integer, got {type(raw_id).__name__}")
    elif isinstance(raw_id, str) and not raw_id.strip():
        raise ValueError(f"line {line}: `id` is empty; give a non-empty id or leave it out")
    else:
        record_id = raw_id
    task = obj.get("task")
    if task is None:
        raise ValueError(f"line {line}: missing `task` (each record needs a non-empty string `task`)")
    if not isinstance(task, str):
        raise ValueError(f"line {line}: `task` must be a string, got {type(task).__name__}")
    if not task.strip():
        raise ValueError(f"line {line}: `task` is empty")
    return BatchRecord(
        id=record_id,
        line=line,
        task=task,
        candidate=_optional_str(obj, "candidate", line),
        context=_optional_str(obj, "context", line),
        metadata={k: v for k, v in obj.items() if k not in _RESERVED_KEYS},
    )


def _guess_id(text: str, line: int) -> str | int:
    with contextlib.suppress(ValueError):
        obj = json.loads(text)
        if isinstance(obj, dict):
            raw = obj.get("id")
            if isinstance(raw, (str, int)) and not isinstance(raw, bool) and raw != "":
                return raw
    return line


def read_input(in_path: str | os.PathLike[str]) -> tuple[list[BatchRecord], list[InputError]]:
    """Parse ``IN`` into valid records and per-line input errors (never raises for bad lines).

    Args:
        in_path: the JSONL input file.

    Returns:
        ``(records, errors)`` in file order.

    Raises:
        FileNotFoundError: when ``in_path`` does not exist.
    """
    records: list[BatchRecord] = []
    errors: list[InputError] = []
    seen: dict[str, int] = {}
    with open(in_path, encoding="utf-8", errors="replace") as fh:
        for line_no, raw in enumerate(fh, start=1):
            text = raw.strip()
            if not text:
                continue
            try:
                record = _parse_line(text, line_no)
            except ValueError as exc:
                errors.append(InputError(line=line_no, message=str(exc), id=_guess_id(text, line_no)))
                continue
            first = seen.get(record.key)
            if first is not None:
                hint = " (records without an `id` are identified by their line number)" if first else ""
                errors.append(
                    InputError(
                        line=line_no,
                        message=f"line {line_no}: duplicate id {record.key} (already used on line {first}){hint}",
                        id=line_no,
                    )
                )
                continue
            seen[record.key] = line_no
            records.append(record)
    return records, errors


# -------------------------------------------------------------------------------------------------- output


def _entry_slot(entry: dict[str, Any]) -> tuple[str, str]:
    if entry.get("error_type") == "input":
        return ("input", str(entry.get("line")))
    return ("record", _id_key(entry.get("id")))


def read_output(out_path: str | os.PathLike[str]) -> tuple[list[dict[str, Any]], int]:
    """Read the entries of ``OUT``, skipping unreadable lines (such as one truncated by a kill).

    Args:
        out_path: the JSONL output file; a missing file has no entries.

    Returns:
        ``(entries, dropped)``: the readable entries in file order and the number of lines skipped.
    """
    entries: list[dict[str, Any]] = []
    dropped = 0
    path = Path(out_path)
    if not path.exists():
        return entries, dropped
    with open(path, encoding="utf-8", errors="replace") as fh:
        for raw in fh:
            text = raw.strip()
            if not text:
                continue
            try:
                obj = json.loads(text)
            except json.JSONDecodeError:
                dropped += 1
                continue
            if not isinstance(obj, dict) or "status" not in obj or "id" not in obj:
                dropped += 1
                continue
            entries.append(obj)
    return entries, dropped


def _merge(entries: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    """One entry per slot: ``ok`` wins over ``error``; among equals the later entry wins."""
    merged: dict[tuple[str, str], dict[str, Any]] = {}
    for entry in entries:
        slot = _entry_slot(entry)
        previous = merged.get(slot)
        if previous is not None and previous.get("status") == "ok" and entry.get("status") != "ok":
            continue
        merged[slot] = entry
    return merged


def _dumps(entry: dict[str, Any]) -> str:
    return json.dumps(entry, ensure_ascii=False, default=str)


def _fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):  # not supported on every platform/filesystem
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _atomic_write(path: Path, lines: Iterator[str] | list[str]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        for line in lines:
            fh.write(line + "\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def _compact(
    out_path: Path,
    records: list[BatchRecord],
    input_errors: list[InputError],
) -> tuple[dict[str, dict[str, Any]], int]:
    """Rewrite ``OUT`` with one entry per record, input errors recomputed from ``IN``.

    Returns the record entries by key (ok/error from earlier runs, for records of ``IN`` and others) and the
    number of unreadable lines dropped.
    """
    entries, dropped = read_output(out_path)
    merged = _merge([e for e in entries if e.get("error_type") != "input"])
    for err in input_errors:
        merged[("input", str(err.line))] = err.entry()
    by_line: dict[tuple[str, str], int] = {("record", r.key): r.line for r in records}
    by_line.update({("input", str(e.line)): e.line for e in input_errors})
    known = sorted((slot for slot in merged if slot in by_line), key=lambda s: by_line[s])
    others = [slot for slot in merged if slot not in by_line]  # ids no longer in IN: kept, in their old order
    _atomic_write(out_path, [_dumps(merged[slot]) for slot in known + others])
    return {slot[1]: entry for slot, entry in merged.items() if slot[0] == "record"}, dropped


class _AppendLog:
    """Append-only JSONL writer: each entry is written, flushed and fsync-ed before its `aappend` returns.

    It group-commits: entries that arrive while an fsync is under way are written together and made
    durable by the next single fsync, which runs in a worker thread so the event loop never blocks on the disk.
    """

    def __init__(self, path: Path) -> None:
        self._fh = open(path, "a", encoding="utf-8")  # noqa: SIM115 - closed in close()
        self._pending: list[tuple[str, asyncio.Future[None]]] = []
        self._flusher: asyncio.Task[None] | None = None

    def _sync(self, lines: list[str]) -> None:
        self._fh.write("".join(lines))
        self._fh.flush()
        os.fsync(self._fh.fileno())

    async def _flush_loop(self) -> None:
        while self._pending:
            batch, self._pending = self._pending, []
            try:
                await asyncio.to_thread(self._sync, [line for line, _ in batch])
            except Exception as exc:  # noqa: BLE001 - every waiter learns the write failed
                for _, future in batch:
                    if not future.done():
                        future.set_exception(exc)
                continue
            for _, future in batch:
                if not future.done():
                    future.set_result(None)

    async def aappend(self, entry: dict[str, Any]) -> None:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._pending.append((_dumps(entry) + "\n", future))
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush_loop())
        await future

    def close(self) -> None:
        self._fh.close()


# ------------------------------------------------------------------------------------------------- running


def _score_of(critique: Any) -> float | None:
    if isinstance(critique, dict):
        value = critique.get("score")
    else:
        value = getattr(critique, "score", None)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return None


def _scores(result: dict[str, Any]) -> tuple[float | None, float | None]:
    """(score of the returned candidate, score of the first round)."""
    trajectory = result.get("trajectory") or []
    first: float | None = None
    final: float | None = None
    if trajectory and isinstance(trajectory[0], dict):
        first = _entry_score(trajectory[0])
        candidate = result.get("candidate")
        for step in reversed(trajectory):  # ties go to the later round, as in select="best"
            if isinstance(step, dict) and step.get("candidate") == candidate:
                final = _entry_score(step)
                break
    if final is None:
        final = _score_of(result.get("critique"))
    return final, first


def _entry_score(step: dict[str, Any]) -> float | None:
    value = step.get("score")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return _score_of(step.get("critique"))


def _tokens(entry: dict[str, Any]) -> int:
    usage = entry.get("usage")
    if isinstance(usage, dict):
        total = usage.get("total")
        if isinstance(total, dict):
            value = total.get("total_tokens")
            if isinstance(value, (int, float)):
                return int(value)
    return 0


def _ok_entry(record: BatchRecord, result: dict[str, Any], attempts: int, seconds: float) -> dict[str, Any]:
    score, first_score = _scores(result)
    entry: dict[str, Any] = {"id": record.id, "line": record.line, "status": "ok", "task": record.task}
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


def _error_entry(
    record: BatchRecord,
    error_type: str,
    message: str,
    attempts: int,
    seconds: float,
    result: dict[str, Any] | None = None,
) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "id": record.id,
        "line": record.line,
        "status": "error",
        "error_type": error_type,
        "error": message,
        "task": record.task,
        "metadata": record.metadata,
        "attempts": attempts,
        "seconds": round(seconds, 3),
    }
    if result is not None:
        for key in _RESULT_KEYS:
            entry[key] = result.get(key)
    return entry


def _resolve_graph(graph_or_factory: GraphOrFactory) -> SupportsAinvoke:
    if hasattr(graph_or_factory, "ainvoke"):
        return graph_or_factory  # type: ignore[return-value]
    if callable(graph_or_factory):
        graph = graph_or_factory()
        if not hasattr(graph, "ainvoke"):
            raise TypeError(
                f"the graph factory returned {type(graph).__name__}, which has no `ainvoke`; "
                "return a compiled graph (e.g. from create_reflection_graph)"
            )
        return graph
    raise TypeError(
        f"expected a compiled graph (with `ainvoke`) or a zero-argument factory returning one, "
        f"got {type(graph_or_factory).__name__}"
    )


def _validate_options(concurrency: int, timeout_s: float | None, retries: int) -> None:
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise ValueError(f"concurrency must be an integer >= 1, got {concurrency!r}")
    if timeout_s is not None and (isinstance(timeout_s, bool) or not timeout_s > 0):
        raise ValueError(f"timeout_s must be a number > 0 or None (no timeout), got {timeout_s!r}")
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        raise ValueError(f"retries must be an integer >= 0, got {retries!r}")


class _Progress:
    """A rich progress bar on stderr, or nothing."""

    def __init__(self, enabled: bool, total: int, skipped: int) -> None:
        self._progress: Any = None
        self._task: Any = None
        if not enabled:
            return
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self._progress = Progress(
            TextColumn("[bold]glean[/]"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn(
                "ok [green]{task.fields[ok]}[/] err [red]{task.fields[err]}[/] skipped {task.fields[skip]}"
            ),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=Console(stderr=True),
            transient=False,
        )
        self._task = self._progress.add_task("glean", total=total, ok=0, err=0, skip=skipped)
        self._progress.start()

    def advance(self, ok: int, err: int) -> None:
        if self._progress is not None:
            self._progress.update(self._task, advance=1, ok=ok, err=err)

    def stop(self) -> None:
        if self._progress is not None:
            self._progress.stop()


async def arun_batch(
    graph_or_factory: GraphOrFactory,
    in_path: str | os.PathLike[str],
    out_path: str | os.PathLike[str],
    *,
    concurrency: int = 8,
    timeout_s: float | None = None,
    retries: int = 0,
    progress: bool = True,
    config: dict[str, Any] | None = None,
) -> BatchSummary:
    """Run every pending record of ``in_path`` through the graph and write ``out_path`` (async).

    Args:
        graph_or_factory: a compiled graph (anything with ``ainvoke``) or a zero-argument callable returning
            one. A factory is called once, after the input has been read.
        in_path: the JSONL input (see the module docstring for the record format).
        out_path: the JSONL output; created if missing, resumed if present.
        concurrency: at most this many records run at the same time (>= 1).
        timeout_s: per-record time limit in seconds for one attempt, or None for none. A record that runs
            out of time becomes an error entry with ``error_type == "timeout"``. (Blocking model calls that
            run in worker threads finish in the background after the timeout; their result is discarded.)
        retries: extra attempts within this run for a record that raised or timed out (>= 0).
        progress: show a progress bar on stderr.
        config: a RunnableConfig passed to every ``ainvoke`` (the record id is added to its ``metadata``).

    Returns:
        The `BatchSummary`, also written to ``OUT.summary.json``.

    Raises:
        ValueError: for invalid options.
        FileNotFoundError: when ``in_path`` does not exist.
    """
    _validate_options(concurrency, timeout_s, retries)
    started = time.perf_counter()
    in_file = Path(in_path)
    out_file = Path(out_path)
    if not in_file.is_file():
        raise FileNotFoundError(f"input file not found: {in_file}")
    out_file.parent.mkdir(parents=True, exist_ok=True)

    records, input_errors = read_input(in_file)
    previous, dropped = _compact(out_file, records, input_errors)
    pending = [r for r in records if previous.get(r.key, {}).get("status") != "ok"]
    summary = BatchSummary(in_path=str(in_file), out_path=str(out_file), dropped_lines=dropped)
    summary.records = len(records) + len(input_errors)
    summary.input_errors = len(input_errors)
    summary.skipped = len(records) - len(pending)
    summary.retried = sum(1 for r in pending if r.key in previous)

    graph = _resolve_graph(graph_or_factory) if pending else None
    semaphore = asyncio.Semaphore(concurrency)
    log = _AppendLog(out_file)
    bar = _Progress(progress and bool(pending), len(pending), summary.skipped)
    results: dict[str, dict[str, Any]] = {}
    counts = Counter[str]()

    async def attempt(record: BatchRecord) -> dict[str, Any]:
        assert graph is not None
        run_config = dict(config or {})
        run_config["metadata"] = {**run_config.get("metadata", {}), "batch_id": record.id}
        coro = graph.ainvoke(record.graph_input(), run_config)
        result = await (asyncio.wait_for(coro, timeout_s) if timeout_s is not None else coro)
        if not isinstance(result, dict):
            raise TypeError(f"the graph returned {type(result).__name__}, expected a dict of output keys")
        return result

    async def run_one(record: BatchRecord) -> None:
        async with semaphore:
            t0 = time.perf_counter()
            entry: dict[str, Any] | None = None
            for number in range(1, retries + 2):
                try:
                    result = await attempt(record)
                except asyncio.TimeoutError:
                    entry = _error_entry(
                        record, "timeout", f"timed out after {timeout_s:g}s", number, time.perf_counter() - t0
                    )
                    continue
                except Exception as exc:  # one record's failure must never stop the batch
                    message = f"{type(exc).__name__}: {exc}".strip()
                    entry = _error_entry(record, "exception", message, number, time.perf_counter() - t0)
                    continue
                seconds = time.perf_counter() - t0
                if result.get("stop_reason") == "error":
                    message = str(result.get("error") or "the graph stopped with stop_reason 'error'")
                    entry = _error_entry(record, "graph", message, number, seconds, result)
                else:
                    entry = _ok_entry(record, result, number, seconds)
                break  # a graph-reported error is deterministic enough: retried on the next run, not now
            assert entry is not None
        # outside the semaphore: the next record starts while this one's entry is made durable (fsync-ed)
        await log.aappend(entry)
        results[record.key] = entry
        counts[entry["status"]] += 1
        bar.advance(counts["ok"], counts["error"])

    try:
        await asyncio.gather(*(run_one(r) for r in pending))
    finally:
        log.close()
        bar.stop()

    final, _ = _compact(out_file, records, input_errors)
    summary.processed = len(results)
    summary.run_tokens = sum(_tokens(e) for e in results.values() if e["status"] == "ok")
    _fill_stats(summary, records, input_errors, final)
    summary.seconds = round(time.perf_counter() - started, 3)
    _atomic_write(summary_path(out_file), [json.dumps(summary.to_dict(), indent=2)])
    return summary


def _mean(values: list[float]) -> float | None:
    return round(sum(values) / len(values), 4) if values else None


def _fill_stats(
    summary: BatchSummary,
    records: list[BatchRecord],
    input_errors: list[InputError],
    entries: dict[str, dict[str, Any]],
) -> None:
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
    summary.total_tokens = sum(_tokens(e) for e in ok_entries)
    summary.stop_reasons = dict(sorted(Counter(str(e.get("stop_reason")) for e in ok_entries).items()))
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
    summary.mean_score_gain = _mean(gains)
    summary.mean_first_score = _mean(firsts)
    summary.mean_final_score = _mean(finals)


def run_batch(
    graph_or_factory: GraphOrFactory,
    in_path: str | os.PathLike[str],
    out_path: str | os.PathLike[str],
    *,
    concurrency: int = 8,
    timeout_s: float | None = None,
    retries: int = 0,
    progress: bool = True,
    config: dict[str, Any] | None = None,
) -> BatchSummary:
    """Run every pending record of ``in_path`` through the graph and write ``out_path``.

    The synchronous wrapper of `arun_batch` (same arguments); it starts its own event loop, so call
    `arun_batch` instead from code that is already inside one.

    Args:
        graph_or_factory: a compiled graph (anything with ``ainvoke``) or a zero-argument callable returning one.
        in_path: the JSONL input.
        out_path: the JSONL output; created if missing, resumed if present.
        concurrency: at most this many records run at the same time (>= 1).
        timeout_s: per-attempt time limit in seconds, or None.
        retries: extra attempts within this run for a record that raised or timed out.
        progress: show a progress bar on stderr.
        config: a RunnableConfig passed to every ``ainvoke``.

    Returns:
        The `BatchSummary`, also written to ``OUT.summary.json``.

    Example:
        ```python
        summary = run_batch(graph, "in.jsonl", "out.jsonl", concurrency=4, timeout_s=120)
        ```
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        raise RuntimeError(
            "run_batch was called inside a running event loop; use `await arun_batch(...)` instead"
        )
    return asyncio.run(
        arun_batch(
            graph_or_factory,
            in_path,
            out_path,
            concurrency=concurrency,
            timeout_s=timeout_s,
            retries=retries,
            progress=progress,
            config=config,
        )
    )
