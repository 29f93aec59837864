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
records whose entry is an error.

Total budget: with ``token_budget``, a record starts only while this run's records have used fewer tokens than
that (their ``usage.total.total_tokens``); every record not started after that is written as an error entry with
``error_type == "budget"`` (``"skipped: budget ..."``), so a rerun with more budget finishes it. Records already
running when the total is reached finish, so the total may be passed by what they use (at most ``concurrency``
records; give each run its own ``token_budget`` to bound those too). Input errors are never sent to the graph; they are recomputed from ``IN`` on
each run, so they go away when the line is fixed.

Record identity: every entry stores ``input_hash`` (`BatchRecord.input_hash`, a sha256 of the ``task``,
``candidate`` and ``context`` the graph received). On a rerun, an entry whose hash differs from its record's
current input (a line inserted above records keyed by line number, or an edited task) is moved to
``OUT.stale.jsonl`` and its record runs again; the summary's ``changed_samples`` say which.

One run per output: a run holds an exclusive lock on ``OUT.lock`` (which names its pid, host and start time).
A second run on the same ``OUT`` raises `BatchLocked`; the lock of a run that died is taken over.

Shards: ``shard=(I, N)`` runs only the records whose id hashes to shard ``I`` (`shard_of`), so N machines can
share one ``IN``; each writes its own ``OUT`` and `merge_outputs` combines them, checking that no record is
missing or doubled.

On a LangGraph server: pass a `ServerGraph` (``ServerGraph(url, graph_name)``) as the graph, and every record
runs as a run on the server, on a thread found again by a rerun (see `reflection_graph.runners._server`).

Durability: while running, entries are appended one line at a time and each is flushed and ``fsync``-ed. At the
start of a run (and at its end) ``OUT`` is compacted atomically (temp file + ``os.replace``) so each record
appears exactly once, ``ok`` winning over ``error``. A process killed at any point leaves at worst a truncated
last line, which the next run ignores; no finished record is lost and none is duplicated. Entries for ids that
are no longer in ``IN`` are kept.

Example:
    ```python
    from reflection_graph import create_reflection_graph
    from reflection_graph.runners.batch import run_batch

    summary = run_batch(lambda: create_reflection_graph("local"), "tasks.jsonl", "out.jsonl", concurrency=4)
    print(summary.ok, summary.error, summary.mean_score_gain)
    ```
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import hashlib
import json
import os
import socket
import threading
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Protocol, TypeVar, runtime_checkable

from reflection_graph.runners._server import ServerError, ServerGraph

_T = TypeVar("_T")

__all__ = [
    "BatchLocked",
    "BatchRecord",
    "BatchSummary",
    "InputError",
    "MergeError",
    "ServerError",
    "ServerGraph",
    "SupportsAinvoke",
    "arun_batch",
    "lock_path",
    "merge_outputs",
    "parse_shard",
    "read_input",
    "read_output",
    "run_batch",
    "shard_of",
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

    @property
    def input_hash(self) -> str:
        """``sha256:<hex>`` of what the graph receives (`graph_input`): a stored result belongs to this input only."""
        canonical = json.dumps(self.graph_input(), ensure_ascii=True, sort_keys=True, separators=(",", ":"))
        return "sha256:" + hashlib.sha256(canonical.encode("ascii")).hexdigest()


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


def lock_path(out_path: str | os.PathLike[str]) -> Path:
    """The lock file of a batch writing ``out_path``: ``OUT`` + ``.lock`` (it names the run holding it)."""
    return Path(os.fspath(out_path) + ".lock")


def _stale_path(out_path: Path) -> Path:
    return Path(os.fspath(out_path) + ".stale.jsonl")


# ---------------------------------------------------------------------------------------------------- lock


class BatchLocked(RuntimeError):
    """Another batch run holds the lock on the same output file (the message names it: pid, host, start)."""


def _describe_holder(text: str) -> str:
    try:
        info = json.loads(text)
        return f"pid {info['pid']} on host {info['host']}, started {info['started']}"
    except (ValueError, KeyError, TypeError):
        return "a run that is just starting" if not text.strip() else f"holder {text.strip()[:80]!r}"


class _OutputLock:
    """An exclusive ``flock`` on ``OUT.lock`` for the whole run, so two runs never write one ``OUT``.

    The lock file holds the holder's pid, host and start time, for the refusal message. The kernel drops an
    ``flock`` when its process dies, so the lock of a killed run is simply taken over by the next one. On
    platforms without ``fcntl`` (Windows) there is no lock.
    """

    def __init__(self, out_path: Path) -> None:
        self.out_path = out_path
        self.path = lock_path(out_path)
        self._fd: int | None = None
        self.previous: str | None = None

    def acquire(self) -> None:
        try:
            import fcntl
        except ImportError:  # pragma: no cover - not POSIX
            return
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                text = os.pread(fd, 4096, 0).decode("utf-8", "replace")
                os.close(fd)
                if exc.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
                raise BatchLocked(
                    f"{self.out_path} is being written by another batch run ({_describe_holder(text)}); "
                    "wait for it to finish, or write to another output file"
                ) from None
            try:
                current = os.stat(self.path)
                mine = os.fstat(fd)
                same = (current.st_ino, current.st_dev) == (mine.st_ino, mine.st_dev)
            except FileNotFoundError:
                same = False
            if not same:  # the holder released (and removed) the file just before we locked it: try again
                os.close(fd)
                continue
            old = os.pread(fd, 4096, 0).decode("utf-8", "replace")
            if old.strip():  # a lock file whose process died without removing it: taken over
                self.previous = _describe_holder(old)
            info = {
                "pid": os.getpid(),
                "host": socket.gethostname(),
                "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            }
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps(info).encode(), 0)
            os.fsync(fd)
            self._fd = fd
            return

    def release(self) -> None:
        if self._fd is None:
            return
        with contextlib.suppress(FileNotFoundError):
            os.unlink(
                self.path
            )  # while still locked: a waiter that opened this file sees it gone and retries
        os.close(self._fd)
        self._fd = None


# --------------------------------------------------------------------------------------------------- shards


def shard_of(record_id: str | int, shards: int) -> int:
    """The shard (``0 .. shards-1``) of a record: a stable hash (sha256) of its id, the same on every machine.

    Args:
        record_id: the record's ``id`` (or its line number when it has none).
        shards: the number of shards, >= 1.
    """
    digest = hashlib.sha256(_id_key(record_id).encode("utf-8", "surrogatepass")).digest()
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


def _dumps(entry: Any, **kwargs: Any) -> str:
    """JSON text that can be written as UTF-8 (`kwargs` go to `json.dumps`; eval writes its files with it too)."""
    text = json.dumps(entry, ensure_ascii=False, default=str, **kwargs)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        # A lone surrogate (valid JSON "\ud800") has no UTF-8 form: escape the entry instead, so the line is
        # still written (and reads back to the same string) and the rest of its group commit is not lost.
        return json.dumps(entry, ensure_ascii=True, default=str, **kwargs)
    return text


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


def _is_stale(entry: dict[str, Any], record: BatchRecord) -> bool:
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
class _Compacted:
    entries: dict[str, dict[str, Any]]  # record entries by key (records of IN and others)
    dropped: int  # unreadable lines
    changed: list[BatchRecord]  # records whose stored entry was for another input (now moved aside)


def _compact(
    out_path: Path,
    records: list[BatchRecord],
    input_errors: list[InputError],
    shard: str | None = None,
) -> _Compacted:
    """Rewrite ``OUT`` with one entry per record, input errors recomputed from ``IN``.

    Entries written for another input than the record's current one (see `_is_stale`) are appended to
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
        record = current.get(_id_key(entry.get("id")))
        (stale if record is not None and _is_stale(entry, record) else fresh).append(entry)
    merged = _merge(fresh)
    for err in input_errors:
        merged[("input", str(err.line))] = err.entry()
    changed_keys = {_id_key(e.get("id")) for e in stale} - {key for kind, key in merged if kind == "record"}
    if stale:
        with open(_stale_path(out_path), "a", encoding="utf-8") as fh:
            fh.write("".join(_dumps(e) + "\n" for e in stale))
            fh.flush()
            os.fsync(fh.fileno())
    by_line: dict[tuple[str, str], int] = {("record", r.key): r.line for r in records}
    by_line.update({("input", str(e.line)): e.line for e in input_errors})
    known = sorted((slot for slot in merged if slot in by_line), key=lambda s: by_line[s])
    others = [slot for slot in merged if slot not in by_line]  # ids no longer in IN: kept, in their old order
    _atomic_write(out_path, [_dumps(merged[slot]) for slot in known + others])
    return _Compacted(
        entries={slot[1]: entry for slot, entry in merged.items() if slot[0] == "record"},
        dropped=dropped,
        changed=[r for r in records if r.key in changed_keys],
    )


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
        "input_hash": record.input_hash,
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


@dataclass
class _TokenTotal:
    """A batch run's total token budget: a record starts only while the records before it used less."""

    limit: int | None = None
    used: int = 0

    @classmethod
    def of(cls, token_budget: int | None) -> _TokenTotal:
        bad = isinstance(token_budget, bool) or not isinstance(token_budget, (int, type(None)))
        if bad or (token_budget is not None and token_budget < 1):
            raise ValueError(f"token_budget must be an integer >= 1 or None (no total), got {token_budget!r}")
        return cls(token_budget)

    def skip(self, record: BatchRecord) -> dict[str, Any] | None:
        """The entry of a record not started because the total is spent, else None."""
        if self.limit is None or self.used < self.limit:
            return None
        why = f"skipped: budget (this run's {self.used} tokens reached its token budget of {self.limit}); rerun to finish"
        return _error_entry(record, "budget", why, 0, 0.0)


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
    shard: tuple[int, int] | None = None,
    token_budget: int | None = None,
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
        config: a RunnableConfig passed to every ``ainvoke`` (the record id is added to its ``metadata`` as
            ``batch_id``, and the record's `BatchRecord.input_hash` as ``batch_input_hash``).
        shard: ``(I, N)`` to run only the records of shard ``I`` of ``N`` (`shard_of` their id; input errors
            go to shard 0). Each shard needs its own ``out_path``; `merge_outputs` combines them.
        token_budget: this run's total tokens over all records, or None; records not started once it is spent
            become resumable ``error_type == "budget"`` entries (see the module docstring).

    Returns:
        The `BatchSummary`, also written to ``OUT.summary.json``.

    Raises:
        ValueError: for invalid options, or an ``out_path`` holding another shard's results.
        FileNotFoundError: when ``in_path`` does not exist.
        BatchLocked: another run is writing ``out_path`` (its lock file ``OUT.lock`` names it).
    """
    _validate_options(concurrency, timeout_s, retries)
    total = _TokenTotal.of(token_budget)
    shard_label = None
    if shard is not None:
        index, count = shard
        parse_shard(f"{index}/{count}")
        shard_label = f"{index}/{count}"
    started = time.perf_counter()
    in_file = Path(in_path)
    out_file = Path(out_path)
    if not in_file.is_file():
        raise FileNotFoundError(f"input file not found: {in_file}")
    out_file.parent.mkdir(parents=True, exist_ok=True)

    records, input_errors = read_input(in_file)
    if shard is not None:
        records = [r for r in records if shard_of(r.id, shard[1]) == shard[0]]
        input_errors = input_errors if shard[0] == 0 else []
    lock = _OutputLock(out_file)
    lock.acquire()
    try:
        return await _run_locked(
            graph_or_factory, in_file, out_file, records, input_errors, lock, started,
            concurrency=concurrency, timeout_s=timeout_s, retries=retries, progress=progress,
            config=config, shard_label=shard_label, total=total,
        )  # fmt: skip
    finally:
        lock.release()


async def _run_locked(
    graph_or_factory: GraphOrFactory,
    in_file: Path,
    out_file: Path,
    records: list[BatchRecord],
    input_errors: list[InputError],
    lock: _OutputLock,
    started: float,
    *,
    concurrency: int,
    timeout_s: float | None,
    retries: int,
    progress: bool,
    config: dict[str, Any] | None,
    shard_label: str | None,
    total: _TokenTotal,
) -> BatchSummary:
    start = _compact(out_file, records, input_errors, shard_label)
    previous = start.entries
    pending = [r for r in records if previous.get(r.key, {}).get("status") != "ok"]
    summary = BatchSummary(in_path=str(in_file), out_path=str(out_file), dropped_lines=start.dropped)
    summary.records = len(records) + len(input_errors)
    summary.input_errors = len(input_errors)
    summary.skipped = len(records) - len(pending)
    summary.retried = sum(1 for r in pending if r.key in previous)
    summary.shard = shard_label
    summary.stale_lock = lock.previous
    summary.changed = len(start.changed)
    summary.changed_samples = [
        f"line {r.line} (id {r.id}): input changed since its result was written; run again"
        for r in start.changed[:20]
    ]

    graph = _resolve_graph(graph_or_factory) if pending else None
    semaphore = asyncio.Semaphore(concurrency)
    log = _AppendLog(out_file)
    bar = _Progress(progress and bool(pending), len(pending), summary.skipped)
    results: dict[str, dict[str, Any]] = {}
    counts = Counter[str]()

    async def attempt(record: BatchRecord) -> dict[str, Any]:
        assert graph is not None
        run_config = dict(config or {})
        run_config["metadata"] = {
            **run_config.get("metadata", {}),
            "batch_id": record.id,
            "batch_input_hash": record.input_hash,
        }
        coro = graph.ainvoke(record.graph_input(), run_config)
        result = await (asyncio.wait_for(coro, timeout_s) if timeout_s is not None else coro)
        if not isinstance(result, dict):
            raise TypeError(f"the graph returned {type(result).__name__}, expected a dict of output keys")
        return result

    async def run_one(record: BatchRecord) -> None:
        async with semaphore:
            t0 = time.perf_counter()
            entry: dict[str, Any] | None = total.skip(record)  # None: the batch's total is not spent
            for number in range(1, retries + 2) if entry is None else ():
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
            total.used += _tokens(entry)  # before the next record may start
            if shard_label is not None:
                entry["shard"] = shard_label
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

    final = _compact(out_file, records, input_errors, shard_label).entries
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
    shard: tuple[int, int] | None = None,
    token_budget: int | None = None,
) -> BatchSummary:
    """Run every pending record of ``in_path`` through the graph and write ``out_path``.

    The synchronous wrapper of `arun_batch` (same arguments). It runs on an event loop of its own that it keeps
    for later calls on the same thread (so cached async HTTP clients stay usable); call `arun_batch` instead from
    code that is already inside a running loop.

    Args:
        graph_or_factory: a compiled graph (anything with ``ainvoke``) or a zero-argument callable returning one.
        in_path: the JSONL input.
        out_path: the JSONL output; created if missing, resumed if present.
        concurrency: at most this many records run at the same time (>= 1).
        timeout_s: per-attempt time limit in seconds, or None.
        retries: extra attempts within this run for a record that raised or timed out.
        progress: show a progress bar on stderr.
        config: a RunnableConfig passed to every ``ainvoke``.
        shard: ``(I, N)`` to run only shard ``I`` of ``N`` (see `arun_batch`).
        token_budget: this run's total tokens over all records (see `arun_batch`), or None.

    Returns:
        The `BatchSummary`, also written to ``OUT.summary.json``.

    Example:
        ```python
        summary = run_batch(graph, "in.jsonl", "out.jsonl", concurrency=4, timeout_s=120)
        ```
    """
    return run_sync(
        "run_batch",
        arun_batch(
            graph_or_factory,
            in_path,
            out_path,
            concurrency=concurrency,
            timeout_s=timeout_s,
            retries=retries,
            progress=progress,
            config=config,
            shard=shard,
            token_budget=token_budget,
        ),
    )


_THREAD_LOOPS = threading.local()


def run_sync(name: str, coro: Coroutine[Any, Any, _T]) -> _T:
    """Run ``coro`` on this thread's long-lived event loop (made on first use, reused by later calls).

    The sync twins (`run_batch`, `evaluate`) call this; inside a running event loop they refuse, naming their
    async twin (``name`` is the sync one's).

    Not `asyncio.run`, which closes its loop: model clients that cache async HTTP connections process-wide (such
    as langchain-openai's default client, langchain-ai/langchain#35783) would then fail the next `run_batch` in
    the same process with "Event loop is closed". A loop interrupted by an exception is closed and replaced.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        coro.close()
        raise RuntimeError(f"{name} was called inside a running event loop; use `await a{name}(...)` instead")
    loop: asyncio.AbstractEventLoop | None = getattr(_THREAD_LOOPS, "loop", None)
    if loop is None or loop.is_closed():
        loop = _THREAD_LOOPS.loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(coro)
    except BaseException:
        with contextlib.suppress(Exception):
            pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
            for task in pending:
                task.cancel()
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.close()
        _THREAD_LOOPS.loop = None
        raise


# ---------------------------------------------------------------------------------------------------- merge


class MergeError(ValueError):
    """Shard outputs that cannot be merged: a missing shard or record, a duplicate, a file given twice."""


def _shard_labels(path: Path, entries: list[dict[str, Any]]) -> tuple[int, int] | None:
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
            shard, a record in two outputs, or ``OUT`` among the inputs. The one-line message says which.
        FileNotFoundError: ``in_path`` or an output does not exist.
    """
    started = time.perf_counter()
    in_file, out_file = Path(in_path), Path(out_path)
    paths = [Path(p) for p in outputs]
    if not paths:
        raise MergeError("no shard outputs given")
    if not in_file.is_file():
        raise FileNotFoundError(f"input file not found: {in_file}")
    for i, path in enumerate(paths):
        if not path.is_file():
            raise FileNotFoundError(f"shard output not found: {path}")
        for other in paths[:i]:
            if os.path.samefile(path, other):
                raise MergeError(f"the same output file is given twice ({other} and {path})")
        if out_file.exists() and os.path.samefile(path, out_file):
            raise MergeError(
                f"the merged output {out_file} is also one of the shard outputs; write it elsewhere"
            )
        if os.path.samefile(path, in_file):
            raise MergeError(f"{path} is the input file, not a shard output")

    by_file: dict[Path, dict[str, dict[str, Any]]] = {}
    shard_files: dict[int, Path] = {}
    count = shards
    for path in paths:
        entries, _ = read_output(path)
        label = _shard_labels(path, entries)
        records_only = [e for e in entries if e.get("error_type") != "input"]
        by_file[path] = {slot[1]: e for slot, e in _merge(records_only).items()}
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

    records, input_errors = read_input(in_file)
    problems: list[str] = []
    merged: dict[str, dict[str, Any]] = {}
    missing: dict[int, list[str]] = {}
    for record in records:
        holders = [
            path
            for path, found in by_file.items()
            if record.key in found and not _is_stale(found[record.key], record)
        ]
        if len(holders) > 1:
            problems.append(f"record {record.key} is in both {holders[0]} and {holders[1]}")
        elif holders:
            merged[record.key] = {k: v for k, v in by_file[holders[0]][record.key].items() if k != "shard"}
        else:
            missing.setdefault(shard_of(record.id, count) if count else -1, []).append(record.key)
    if missing and count is None:
        problems.append(
            f"{sum(map(len, missing.values()))} records have no entry and no output tells the shard count; pass --shards N"
        )
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

    lock = _OutputLock(out_file)
    lock.acquire()
    try:
        lines = [(r.line, _dumps(merged[r.key])) for r in records]
        lines += [(e.line, _dumps(e.entry())) for e in input_errors]
        _atomic_write(out_file, [text for _, text in sorted(lines, key=lambda pair: pair[0])])
        summary = BatchSummary(in_path=str(in_file), out_path=str(out_file))
        summary.records = len(records) + len(input_errors)
        summary.input_errors = len(input_errors)
        summary.skipped = len(records)
        _fill_stats(summary, records, input_errors, merged)
        summary.seconds = round(time.perf_counter() - started, 3)
        _atomic_write(summary_path(out_file), [json.dumps(summary.to_dict(), indent=2)])
    finally:
        lock.release()
    return summary
