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

One run per output: a run holds an exclusive lock on ``OUT.lock`` (which names its pid, host and start time)
and on the file ``OUT`` itself (`OutputLock`). A second run on the same ``OUT`` raises `BatchLocked`; the lock
of a run that died is taken over. ``OUT`` is taken with its symlinks resolved: a symlink or a hard link to a
running batch's ``OUT`` is refused the same way, and a symlink given as ``OUT`` stays a symlink (its target is
written, and the side files go beside the target).

Inputs are never written: a run refuses, before anything is written, an ``OUT`` that is ``IN``, or one whose
side files (``OUT.tmp``, ``OUT.summary.json`` and its ``.tmp``, ``OUT.lock``, ``OUT.stale.jsonl``) would
overwrite, truncate or remove ``IN`` (the same path, a symlink or a hard link).

Shards: ``shard=(I, N)`` runs only the records whose id hashes to shard ``I`` (`shard_of`), so N machines can
share one ``IN``; each writes its own ``OUT`` and `merge_outputs` combines them, checking that no record is
missing or doubled.

On a LangGraph server: pass a `ServerGraph` (``ServerGraph(url, graph_name)``) as the graph, and every record
runs as a run on the server, on a thread found again by a rerun (see `reflection_graph.runners._server`).

Durability: while running, entries are appended one line at a time and each is flushed and ``fsync``-ed. At the
start of a run (and at its end) ``OUT`` is compacted atomically (temp file + ``os.replace``) so each record
appears exactly once, ``ok`` winning over ``error``. A process killed at any point leaves at worst a truncated
last line, which the next run ignores; no finished record is lost and none is duplicated. Entries for ids that
are no longer in ``IN`` are kept. A write that fails (a full disk) stops the run with a `WriteError` naming the
file and the space needed: an append that failed part-way is cut back to the last whole line, and the temporary
file of a failed compaction is removed, so a rerun after freeing space resumes with nothing lost or doubled.

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
import os
import threading
import time
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

from typing_extensions import Unpack

from reflection_graph.runners._job import JobKwargs, JobOptions, chosen_job
from reflection_graph.runners._jsonl import WriteError
from reflection_graph.runners._lock import BatchLocked, OutputLock, lock_path
from reflection_graph.runners._output import compact, read_output
from reflection_graph.runners._progress import ProgressBar
from reflection_graph.runners._records import BatchRecord, InputError, read_input
from reflection_graph.runners._running import (
    Attempts,
    GraphOrFactory,
    SupportsAinvoke,
    TokenTotal,
    resolve_graph,
    run_pending,
    start_from,
)
from reflection_graph.runners._server import ServerError, ServerGraph
from reflection_graph.runners._side_files import check_inputs_spared, resolve_output
from reflection_graph.runners._summary import BatchSummary, fill_stats, summary_path, tokens, write_summary
from reflection_graph.runners.shards import MergeError, merge_outputs, parse_shard, shard_of

_T = TypeVar("_T")

__all__ = [
    "BatchLocked",
    "BatchOptions",
    "BatchRecord",
    "BatchSummary",
    "InputError",
    "JobOptions",
    "MergeError",
    "ServerError",
    "ServerGraph",
    "SupportsAinvoke",
    "WriteError",
    "arun_batch",
    "lock_path",
    "merge_outputs",
    "parse_shard",
    "read_input",
    "read_output",
    "run_batch",
    "run_sync",
    "shard_of",
    "summary_path",
]


async def arun_batch(
    graph_or_factory: GraphOrFactory,
    in_path: str | os.PathLike[str],
    out_path: str | os.PathLike[str],
    *,
    job: JobOptions | None = None,
    config: dict[str, Any] | None = None,
    shard: tuple[int, int] | None = None,
    **limits: Unpack[JobKwargs],
) -> BatchSummary:
    """Run every pending record of ``in_path`` through the graph and write ``out_path`` (async).

    Args:
        graph_or_factory: a compiled graph (anything with ``ainvoke``) or a zero-argument callable returning
            one. A factory is called once, after the input has been read.
        in_path: the JSONL input (see the module docstring for the record format).
        out_path: the JSONL output; created if missing, resumed if present.
        job: how the records run: `JobOptions` (``concurrency``, ``timeout_s``, ``retries``, ``token_budget``,
            ``progress``); None for its defaults. (Blocking model calls that run in worker threads finish in the
            background after a timeout; their result is discarded.)
        config: a RunnableConfig passed to every ``ainvoke`` (the record id is added to its ``metadata`` as
            ``batch_id``, and the record's `BatchRecord.input_hash` as ``batch_input_hash``).
        shard: ``(I, N)`` to run only the records of shard ``I`` of ``N`` (`shard_of` their id; input errors
            go to shard 0). Each shard needs its own ``out_path``; `merge_outputs` combines them.
        **limits: the fields of `JobOptions` as keyword arguments, over ``job`` (``concurrency=4``, ...).

    Returns:
        The `BatchSummary`, also written to ``OUT.summary.json``.

    Raises:
        ValueError: for invalid options, an ``out_path`` holding another shard's results, or an ``out_path``
            that is ``in_path``, or whose side files (``OUT.tmp``, ``OUT.summary.json``, ``OUT.lock``,
            ``OUT.stale.jsonl``) one of them is (the same path, a symlink or a hard link): nothing is written.
        FileNotFoundError: when ``in_path`` does not exist.
        BatchLocked: another run is writing ``out_path`` (its lock file ``OUT.lock`` names it).
        WriteError: ``out_path`` could not be written (a full disk: the message names the file and the space
            needed); every entry written before is kept whole, and a rerun resumes.
    """
    job = chosen_job(job, limits)
    total = TokenTotal(job.token_budget)
    shard_label = None
    if shard is not None:
        index, count = shard
        parse_shard(f"{index}/{count}")
        shard_label = f"{index}/{count}"
    started = time.perf_counter()
    in_file = Path(in_path)
    if not in_file.is_file():
        raise FileNotFoundError(f"input file not found: {in_file}")
    check_inputs_spared(out_path, [("the input file", in_file)])
    out_file = resolve_output(out_path)  # a symlink named as OUT stays one; its target is written
    out_file.parent.mkdir(parents=True, exist_ok=True)

    records, input_errors = read_input(in_file)
    if shard is not None:
        records = [r for r in records if shard_of(r.id, shard[1]) == shard[0]]
        input_errors = input_errors if shard[0] == 0 else []
    lock = OutputLock(out_file)
    lock.acquire()
    try:
        summary, pending = start_from(in_file, out_file, records, input_errors, lock, shard_label)
        lock.cover()  # the compacted OUT is a new file: any name of it meets the lock too
        summary.out_path = str(Path(out_path))
        graph = resolve_graph(graph_or_factory) if pending else None
        results: dict[str, dict[str, Any]] = {}
        if graph is not None:
            runner = Attempts(graph, config, job, shard_label)
            bar = ProgressBar(
                "glean", len(pending), enabled=job.progress, skipped=summary.skipped, counts=True
            )
            results = await run_pending(runner, out_file, pending, job.concurrency, bar, total)
        final = compact(out_file, records, input_errors, shard_label).entries
        summary.processed = len(results)
        summary.run_tokens = sum(tokens(e) for e in results.values() if e["status"] == "ok")
        fill_stats(summary, records, input_errors, final)
        summary.seconds = round(time.perf_counter() - started, 3)
        write_summary(summary, out_file)
        return summary
    finally:
        lock.release()


class BatchOptions(JobKwargs, total=False):
    """The keyword options of `arun_batch` / `run_batch` (their defaults and meaning are `arun_batch`'s)."""

    job: JobOptions | None
    config: dict[str, Any] | None
    shard: tuple[int, int] | None


def run_batch(
    graph_or_factory: GraphOrFactory,
    in_path: str | os.PathLike[str],
    out_path: str | os.PathLike[str],
    **options: Unpack[BatchOptions],
) -> BatchSummary:
    """Run every pending record of ``in_path`` through the graph and write ``out_path``.

    The synchronous twin of `arun_batch`: the same arguments, with the same defaults. It runs on an event loop
    of its own that it keeps for later calls on the same thread (so cached async HTTP clients stay usable); call
    `arun_batch` instead from code that is already inside a running loop.

    Args:
        graph_or_factory: a compiled graph (anything with ``ainvoke``) or a zero-argument callable returning one.
        in_path: the JSONL input.
        out_path: the JSONL output; created if missing, resumed if present.
        **options: `BatchOptions`: ``job``, ``config``, ``shard``, and the fields of `JobOptions` over ``job``
            (``concurrency``, ``timeout_s``, ``retries``, ``token_budget``, ``progress``; see `arun_batch`).

    Returns:
        The `BatchSummary`, also written to ``OUT.summary.json``.

    Example:
        ```python
        summary = run_batch(graph, "in.jsonl", "out.jsonl", job=JobOptions(concurrency=4, timeout_s=120))
        ```
    """
    return run_sync("run_batch", arun_batch(graph_or_factory, in_path, out_path, **options))


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
