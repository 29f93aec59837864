"""Batch throughput: 1,000 records through `reflection_graph.batch.arun_batch` with 20 ms model latency.

Every record runs `--rounds` rounds (default 3; the critic never accepts), so its critical path is
`rounds * 2` model calls of `--latency` seconds. With `--concurrency` records in flight, the ideal wall time is
`rounds * 2 * latency * ceil(records / concurrency)` (waves of records, each as long as its critical path).
We report each variant's wall time as a ratio of that ideal (target <= 1.25x for reflection-graph):

- `asyncio floor`: the batch engine with a coroutine that just sleeps `rounds * 2` times (no graph, no models);
  what the batch engine itself costs (JSONL reading, fsync-ed appends, compaction, the semaphore).
- `minimal LangGraph`: a hand-written generate/critique StateGraph with async nodes and the same fake models.
- `reflection-graph`: `create_reflection_graph` with the same fake models.

Variants are run in shuffled order in each repetition; the median of `--reps` repetitions is shown.

    python bench/bench_batch.py                      # ~1-2 min on 2 busy cores
    python bench/bench_batch.py --records 200 --reps 1
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402
    FastChat,
    draft_text,
    median,
    minimal_langgraph_loop,
    never_accepting_critic,
    print_table,
)

from reflection_graph import create_reflection_graph  # noqa: E402
from reflection_graph.batch import arun_batch, read_output  # noqa: E402

VARIANTS = ("asyncio floor", "minimal LangGraph", "reflection-graph")


class SleepGraph:
    """No graph at all: `calls` sleeps of `latency` seconds, then a result shaped like the graph's."""

    def __init__(self, calls: int, latency: float) -> None:
        self.calls = calls
        self.latency = latency

    async def ainvoke(self, input: dict[str, Any], config: Any = None) -> dict[str, Any]:
        for _ in range(self.calls):
            await asyncio.sleep(self.latency)
        return {"candidate": "x", "iterations": self.calls // 2, "stop_reason": "max_iterations"}


def make_graph(variant: str, rounds: int, latency: float) -> Any:
    if variant == "asyncio floor":
        return SleepGraph(rounds * 2, latency)
    gen = FastChat(reply=draft_text(600), latency=latency)
    crit = never_accepting_critic(latency=latency)
    if variant == "minimal LangGraph":
        return minimal_langgraph_loop(gen, crit, rounds)
    return create_reflection_graph(
        gen, critic=crit, max_iterations=rounds, patience=None, stop_on_no_new_issues=False
    )


def write_input(path: Path, records: int) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        for i in range(records):
            fh.write(
                json.dumps({"id": f"r{i:05d}", "task": f"Write a polite email declining offer #{i}."}) + "\n"
            )


async def run_one(variant: str, args: argparse.Namespace, workdir: Path) -> float:
    in_path = workdir / "in.jsonl"
    out_path = workdir / f"out-{variant.replace(' ', '_')}-{time.monotonic_ns()}.jsonl"
    graph = make_graph(variant, args.rounds, args.latency)
    start = time.perf_counter()
    summary = await arun_batch(graph, in_path, out_path, concurrency=args.concurrency, progress=False)
    seconds = time.perf_counter() - start
    entries, dropped = read_output(out_path)
    assert summary.ok == args.records and summary.error == 0, (variant, summary)
    assert len(entries) == args.records and dropped == 0
    assert len({e["id"] for e in entries}) == args.records
    if variant != "asyncio floor":
        assert all(e["iterations"] == args.rounds for e in entries), variant
    return seconds


async def main_async(args: argparse.Namespace) -> int:
    variants = list(args.variants)
    ideal = args.rounds * 2 * args.latency * math.ceil(args.records / args.concurrency)
    times: dict[str, list[float]] = {v: [] for v in variants}
    rng = random.Random(0)
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        workdir = Path(tmp)
        write_input(workdir / "in.jsonl", args.records)
        for _ in range(args.reps):
            rng.shuffle(variants)
            for variant in variants:
                times[variant].append(await run_one(variant, args, workdir))
    print(
        f"{args.records} records, {args.rounds} rounds each, {args.latency * 1e3:g} ms per model call, "
        f"concurrency {args.concurrency}; ideal = {args.rounds}*2*{args.latency:g}s * "
        f"ceil({args.records}/{args.concurrency}) = {ideal:.2f} s; median of {args.reps}"
    )
    rows = []
    for variant in sorted(times, key=lambda v: median(times[v])):
        m = median(times[variant])
        rows.append([variant, round(m, 2), round(m / ideal, 2), round(args.records / m, 1)])
    print_table(["variant", "wall s", "x ideal", "records/s"], rows)
    if "reflection-graph" in times:
        ours = median(times["reflection-graph"])
        print(f"reflection-graph / ideal = {ours / ideal:.2f}x (target <= 1.25x)")
        if "minimal LangGraph" in times:
            print(f"reflection-graph / minimal LangGraph = {ours / median(times['minimal LangGraph']):.2f}x")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--latency", type=float, default=0.02, help="seconds per model call")
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--reps", type=int, default=1)
    parser.add_argument(
        "--variants",
        nargs="+",
        choices=VARIANTS,
        default=list(VARIANTS),
        help="which variants to run (default: all)",
    )
    parser.add_argument("--dir", default=None, help="where to write the JSONL files (default: the temp dir)")
    args = parser.parse_args(argv)
    return asyncio.run(main_async(args))


if __name__ == "__main__":
    raise SystemExit(main())
