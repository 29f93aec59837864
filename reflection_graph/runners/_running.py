"""Running a batch's pending records: what a run starts from (``OUT`` compacted, the summary so far and the
records still to run: `start_from`), the graph a factory builds (`resolve_graph`), one record's attempts, each
under the job's timeout (`Attempts`), the records run at most `concurrency` at once with each entry appended to
``OUT`` as it ends (`run_pending`), and the run's token total, which a record must find unspent to start
(`TokenTotal`). The batch around them (input, lock, the final compaction, summary) is `batch.py`."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from reflection_graph.runners._job import JobOptions
from reflection_graph.runners._jsonl import AppendLog
from reflection_graph.runners._lock import OutputLock
from reflection_graph.runners._output import compact, error_entry, ok_entry
from reflection_graph.runners._progress import ProgressBar
from reflection_graph.runners._records import BatchRecord, InputError
from reflection_graph.runners._summary import BatchSummary, tokens

__all__ = [
    "Attempts",
    "GraphOrFactory",
    "SupportsAinvoke",
    "TokenTotal",
    "resolve_graph",
    "run_pending",
    "start_from",
]


@runtime_checkable
class SupportsAinvoke(Protocol):
    """Anything with LangGraph's ``ainvoke(input, config)``: a compiled graph, a Runnable, or a test fake."""

    def ainvoke(self, input: Any, config: Any = None, **kwargs: Any) -> Awaitable[Any]: ...


GraphOrFactory = SupportsAinvoke | Callable[[], SupportsAinvoke]


def resolve_graph(graph_or_factory: GraphOrFactory) -> SupportsAinvoke:
    """`graph_or_factory` itself when it has `ainvoke`, else the graph its factory builds (a one-line `TypeError`
    when neither has one)."""
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


@dataclass
class Attempts:
    """Runs one record through the graph: up to ``1 + job.retries`` attempts, each under ``job.timeout_s``."""

    graph: SupportsAinvoke
    config: dict[str, Any] | None
    job: JobOptions
    shard_label: str | None

    async def _attempt(self, record: BatchRecord) -> dict[str, Any]:
        run_config = dict(self.config or {})
        run_config["metadata"] = {
            **run_config.get("metadata", {}),
            "batch_id": record.id,
            "batch_input_hash": record.input_hash,
        }
        coro = self.graph.ainvoke(record.graph_input(), run_config)
        timeout_s = self.job.timeout_s
        result = await (asyncio.wait_for(coro, timeout_s) if timeout_s is not None else coro)
        if not isinstance(result, dict):
            raise TypeError(f"the graph returned {type(result).__name__}, expected a dict of output keys")
        return result

    async def entry(self, record: BatchRecord) -> dict[str, Any]:
        """The record's entry: ``ok``, or the error of its last attempt (one record never stops the batch)."""
        t0 = time.perf_counter()
        entry: dict[str, Any] = {}
        for number in range(1, self.job.retries + 2):
            try:
                result = await self._attempt(record)
            except asyncio.TimeoutError:
                message = f"timed out after {self.job.timeout_s:g}s"
                entry = error_entry(record, "timeout", message, number, time.perf_counter() - t0)
                continue
            except Exception as exc:  # one record's failure must never stop the batch
                message = f"{type(exc).__name__}: {exc}".strip()
                entry = error_entry(record, "exception", message, number, time.perf_counter() - t0)
                continue
            seconds = time.perf_counter() - t0
            if result.get("stop_reason") == "error":
                message = str(result.get("error") or "the graph stopped with stop_reason 'error'")
                entry = error_entry(record, "graph", message, number, seconds, result)
            else:
                entry = ok_entry(record, result, number, seconds)
            break  # a graph-reported error is deterministic enough: retried on the next run, not now
        if self.shard_label is not None:
            entry["shard"] = self.shard_label
        return entry


async def _gather_all(coros: list[Coroutine[Any, Any, None]]) -> None:
    """Run ``coros`` together; when one fails (a full disk), cancel the others and wait for them, then raise."""
    tasks = [asyncio.ensure_future(c) for c in coros]
    try:
        await asyncio.gather(*tasks)
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


def start_from(
    in_file: Path,
    out_file: Path,
    records: list[BatchRecord],
    input_errors: list[InputError],
    lock: OutputLock,
    shard_label: str | None,
) -> tuple[BatchSummary, list[BatchRecord]]:
    """Compact ``OUT`` and say what this run starts from: the summary so far and the records still to run."""
    start = compact(out_file, records, input_errors, shard_label)
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
    return summary, pending


async def run_pending(
    runner: Attempts,
    out_file: Path,
    pending: list[BatchRecord],
    concurrency: int,
    bar: ProgressBar,
    total: TokenTotal,
) -> dict[str, dict[str, Any]]:
    """Run ``pending`` records, at most ``concurrency`` at once, appending each entry to ``OUT`` as it ends."""
    semaphore = asyncio.Semaphore(concurrency)
    log = AppendLog(out_file)
    results: dict[str, dict[str, Any]] = {}
    counts = Counter[str]()

    async def run_one(record: BatchRecord) -> None:
        async with semaphore:
            entry = total.skip(record) or await runner.entry(record)
            total.used += tokens(entry)  # before the next record may start
        # outside the semaphore: the next record starts while this one's entry is made durable (fsync-ed)
        await log.aappend(entry)
        results[record.key] = entry
        counts[entry["status"]] += 1
        bar.advance(counts["ok"], counts["error"])

    try:
        await _gather_all([run_one(r) for r in pending])
    finally:
        await log.aclose()
        bar.stop()
    return results


@dataclass
class TokenTotal:
    """A batch run's total token budget: a record starts only while the records before it used less."""

    limit: int | None = None
    used: int = 0

    def skip(self, record: BatchRecord) -> dict[str, Any] | None:
        """The entry of a record not started because the total is spent, else None."""
        if self.limit is None or self.used < self.limit:
            return None
        why = f"skipped: budget (this run's {self.used} tokens reached its token budget of {self.limit}); rerun to finish"
        return error_entry(record, "budget", why, 0, 0.0)
