"""Batch throughput, measured three ways side by side in one run (the targets of issue 14).

1. **wall** - in-process, `--records` (500) records, `--rounds` (3) rounds each, concurrency `--concurrency` (64),
   `--slow` (200 ms) simulated latency per model call. Every record's critical path is `rounds * 2` calls, so
   the ideal wall time is `rounds * 2 * latency * ceil(records / concurrency)`. Target: reflection-graph within
   1.25x of the ideal. At this latency the figure measures the batch design (bounded concurrency, group-committed
   fsyncs), not LangGraph's CPU. It also runs the design's answer for more than one core: `--shards` (2)
   processes of `batch --shard I/N`, each with its share of the concurrency, then `merge_outputs`; its wall time
   counts from the first process start (Python and LangGraph imports included) to the merged output.
2. **cpu** - the same records at `--fast` (20 ms) latency, where the run is CPU-bound on small machines: CPU
   seconds per run (`time.process_time` over the whole batch / records) of reflection-graph beside the lean
   LangGraph loop (`bench/_common.lean_langgraph_loop`: plain node functions, `json.loads` of the critic's
   reply, the same fake models) and the minimal one (`minimal_langgraph_loop`).
3. **server** - the Studio graph `reflection` (graphs/reflection.py), its models behind a fake OpenAI-compatible
   server on loopback (`--server-latency`, 20 ms per call), run in-process with `arun_batch` and through
   `langgraph dev` with `batch --server` (`ServerGraph`): seconds per record one at a time (the overhead per
   record) and the wall time of `--server-records` records at concurrency `--server-concurrency`.

The fake models are those of the other benchmarks (`_common.FastChat`, a critic that never accepts); every
variant's output is checked (one ok entry per record, `rounds` iterations each) before its time is reported.

    python bench/bench_batch.py                 # all three parts, ~3-4 min on 2 busy cores
    python bench/bench_batch.py --parts wall cpu --records 200
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402
    ROOT,
    FastChat,
    draft_text,
    lean_langgraph_loop,
    median,
    minimal_langgraph_loop,
    never_accepting_critic,
    print_table,
)

from reflection_graph import create_reflection_graph  # noqa: E402
from reflection_graph.runners.batch import arun_batch, read_output, summary_path  # noqa: E402

VARIANTS = ("asyncio floor", "lean LangGraph", "minimal LangGraph", "reflection-graph")


class SleepGraph:
    """No graph at all: `calls` sleeps of `latency` seconds, then a result shaped like the graph's."""

    def __init__(self, calls: int, latency: float) -> None:
        self.calls = calls
        self.latency = latency

    async def ainvoke(self, input: dict[str, Any], config: Any = None) -> dict[str, Any]:
        for _ in range(self.calls):
            await asyncio.sleep(self.latency)
        return {"candidate": "x", "iterations": self.calls // 2, "stop_reason": "max_iterations"}


class _Adapter:
    """The batch engine calls `ainvoke(input, config)`; the lean loop takes only the input."""

    def __init__(self, loop: Any) -> None:
        self.loop = loop

    async def ainvoke(self, input: dict[str, Any], config: Any = None) -> dict[str, Any]:
        result: dict[str, Any] = await self.loop.ainvoke(input)
        return result


def make_graph(variant: str, rounds: int, latency: float) -> Any:
    if variant == "asyncio floor":
        return SleepGraph(rounds * 2, latency)
    gen = FastChat(reply=draft_text(600), latency=latency)
    crit = never_accepting_critic(latency=latency)
    if variant == "lean LangGraph":
        return _Adapter(lean_langgraph_loop(gen, crit, rounds))
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


def check(out_path: Path, records: int, rounds: int | None) -> None:
    entries, dropped = read_output(out_path)
    assert dropped == 0 and len(entries) == records, (len(entries), dropped)
    assert len({e["id"] for e in entries}) == records and all(e["status"] == "ok" for e in entries)
    if rounds is not None:
        assert all(e["iterations"] == rounds for e in entries), {e["iterations"] for e in entries}


async def timed_batch(graph: Any, in_path: Path, out_path: Path, concurrency: int) -> tuple[float, float]:
    """(wall seconds, process CPU seconds) of one batch run."""
    cpu, start = time.process_time(), time.perf_counter()
    await arun_batch(graph, in_path, out_path, concurrency=concurrency, progress=False)
    return time.perf_counter() - start, time.process_time() - cpu


SHARD_BATCH_SECONDS: list[float] = []


def sharded_variant(args: argparse.Namespace) -> str:
    return f"reflection-graph, {args.shards} shard processes + merge"


async def sharded(
    args: argparse.Namespace, in_path: Path, workdir: Path, latency: float
) -> tuple[float, float]:
    """`--shards` processes, each `batch --shard I/N` (concurrency split between them), then `merge_outputs`.

    Returns (wall seconds from the first process start to the merged output, children's CPU seconds).
    """
    import resource

    from reflection_graph.runners.batch import merge_outputs

    outs = [workdir / f"shard-{i}-{time.monotonic_ns()}.jsonl" for i in range(args.shards)]
    per_shard = max(1, args.concurrency // args.shards)
    cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    procs = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            __file__,
            "--as-shard",
            f"{i}/{args.shards}",
            "--in",
            str(in_path),
            "--out",
            str(out),
            "--latency",
            str(latency),
            "--rounds",
            str(args.rounds),
            "--concurrency",
            str(per_shard),
        )  # fmt: skip
        for i, out in enumerate(outs)
    ]
    codes = [await proc.wait() for proc in procs]
    assert codes == [0] * args.shards, codes
    merged = workdir / f"merged-{time.monotonic_ns()}.jsonl"
    merge_outputs(outs, in_path, merged)
    wall = time.perf_counter() - start
    cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    check(merged, args.records, args.rounds)
    slowest = max(json.loads(summary_path(out).read_text())["seconds"] for out in outs)
    SHARD_BATCH_SECONDS.append(slowest)  # the slowest shard's own batch time, imports excluded
    return wall, (cpu1.ru_utime + cpu1.ru_stime) - (cpu0.ru_utime + cpu0.ru_stime)


def run_shard(args: argparse.Namespace) -> int:
    """One shard process of the sharded variant (`--as-shard I/N`)."""
    from reflection_graph.runners.batch import parse_shard, run_batch

    graph = make_graph("reflection-graph", args.rounds, args.latency)
    run_batch(
        graph,
        args.in_path,
        args.out_path,
        concurrency=args.concurrency,
        progress=False,
        shard=parse_shard(args.as_shard),
    )
    return 0


async def in_process(
    args: argparse.Namespace, workdir: Path, latency: float, with_shards: bool = False
) -> dict[str, list[tuple[float, float]]]:
    in_path = workdir / "in.jsonl"
    write_input(in_path, args.records)
    variants = list(args.variants) + ([sharded_variant(args)] if with_shards and args.shards > 1 else [])
    out: dict[str, list[tuple[float, float]]] = {v: [] for v in variants}
    rng = random.Random(0)
    for _ in range(args.reps):
        rng.shuffle(variants)
        for variant in variants:
            if variant == sharded_variant(args):
                out[variant].append(await sharded(args, in_path, workdir, latency))
                continue
            path = workdir / f"out-{variant.replace(' ', '_')}-{time.monotonic_ns()}.jsonl"
            graph = make_graph(variant, args.rounds, latency)
            out[variant].append(await timed_batch(graph, in_path, path, args.concurrency))
            check(path, args.records, None if variant == "asyncio floor" else args.rounds)
    return out


def part_wall(args: argparse.Namespace, results: dict[str, list[tuple[float, float]]]) -> None:
    ideal = args.rounds * 2 * args.slow * math.ceil(args.records / args.concurrency)
    print(
        f"\n## 1. wall time in-process: {args.records} records x {args.rounds} rounds, {args.slow * 1e3:g} ms per "
        f"call, concurrency {args.concurrency}; ideal = {args.rounds}*2*{args.slow:g}s*ceil({args.records}/"
        f"{args.concurrency}) = {ideal:.2f} s; median of {args.reps}\n"
    )
    rows = []
    for variant, runs in sorted(results.items(), key=lambda kv: median([w for w, _ in kv[1]])):
        wall, cpu = median([w for w, _ in runs]), median([c for _, c in runs])
        rows.append(
            [variant, round(wall, 2), round(wall / ideal, 3), round(args.records / wall, 1), round(cpu, 2)]
        )
    print_table(["variant", "wall s", "x ideal", "records/s", "process CPU s"], rows)
    if "reflection-graph" in results:
        ours = median([w for w, _ in results["reflection-graph"]])
        verdict = "met" if ours / ideal <= 1.25 else "MISSED"
        print(f"\nreflection-graph / ideal = {ours / ideal:.3f}x (target <= 1.25x: {verdict})")
    if SHARD_BATCH_SECONDS:
        slowest = median(SHARD_BATCH_SECONDS)
        print(
            f"{args.shards} shard processes: the slowest shard's batch took {slowest:.2f} s = {slowest / ideal:.3f}x "
            "the ideal; the rest of their wall time is process start-up (imports) and the merge"
        )


def part_cpu(args: argparse.Namespace, results: dict[str, list[tuple[float, float]]]) -> None:
    ideal = args.rounds * 2 * args.fast * math.ceil(args.records / args.concurrency)
    print(
        f"\n## 2. CPU per run in-process: {args.records} records x {args.rounds} rounds, {args.fast * 1e3:g} ms "
        f"per call, concurrency {args.concurrency} (ideal wall {ideal:.2f} s); median of {args.reps}\n"
    )
    lean = median([c for _, c in results["lean LangGraph"]]) if "lean LangGraph" in results else None
    rows = []
    for variant, runs in sorted(results.items(), key=lambda kv: median([c for _, c in kv[1]])):
        wall, cpu = median([w for w, _ in runs]), median([c for _, c in runs])
        per_run = cpu / args.records * 1e3
        rows.append(
            [
                variant,
                round(per_run, 2),
                round(cpu / lean, 2) if lean else "-",
                round(wall, 2),
                round(wall / ideal, 2),
            ]
        )
    print_table(["variant", "CPU ms/run", "x lean LangGraph", "wall s", "x ideal"], rows)


async def bare_waits(url: str, n: int) -> float:
    """Seconds per `runs.wait` on a new thread, one at a time: the server's own latency per run."""
    from langgraph_sdk import get_client

    client = get_client(url=url, api_key=None)
    start = time.perf_counter()
    for i in range(n):
        await client.runs.wait(
            None, "reflection", input={"task": f"Write a polite email declining offer #{i}."}
        )
    return (time.perf_counter() - start) / n


async def part_server(args: argparse.Namespace, workdir: Path) -> None:
    from reflection_graph.runners.batch import ServerGraph
    from tests._fake_openai import fake_openai_server
    from tests.test_studio import langgraph_dev

    seq_in, par_in = workdir / "seq.jsonl", workdir / "par.jsonl"
    write_input(seq_in, args.server_sequential)
    write_input(par_in, args.server_records)
    with fake_openai_server(latency=args.server_latency) as (model_url, fake):
        env = {
            "REFLECTION_GRAPH_MODEL": "openai:fake",
            "OPENAI_BASE_URL": model_url,
            "OPENAI_API_KEY": "sk-fake",
        }
        os.environ.update(env)
        from graphs.reflection import (
            graph as local_graph,
        )  # built from the environment, as the server builds it

        jobs = str(max(args.server_concurrency, 1))
        with langgraph_dev(env=env, args=("--n-jobs-per-worker", jobs)) as (url, _):
            remote = ServerGraph(url, "reflection")
            await remote.connect()
            await remote.ainvoke(  # warm up the server's graph and model client
                {"task": "warm up"}, {"metadata": {"batch_id": "warm", "batch_input_hash": str(time.time())}}
            )
            await local_graph.ainvoke({"task": "warm up"})
            rows = []
            timings: dict[str, dict[str, list[float]]] = {"in-process": {}, "langgraph dev": {}}
            bare = await bare_waits(url, args.server_sequential)  # the server's own latency per run, no batch
            order = [("in-process", local_graph), ("langgraph dev", remote)]
            for rep in range(args.reps):
                for name, graph in order if rep % 2 == 0 else order[::-1]:
                    for label, path, conc in (
                        ("seq", seq_in, 1),
                        ("par", par_in, args.server_concurrency),
                    ):
                        out = workdir / f"{name.replace(' ', '_')}-{label}-{time.monotonic_ns()}.jsonl"
                        if isinstance(graph, ServerGraph):
                            graph.context = {"run": out.name}  # fresh threads for every repetition
                        wall, _ = await timed_batch(graph, path, out, conc)
                        check(out, args.server_sequential if label == "seq" else args.server_records, 1)
                        timings[name].setdefault(label, []).append(wall)
    seq = {k: median(v["seq"]) / args.server_sequential for k, v in timings.items()}
    par = {k: median(v["par"]) for k, v in timings.items()}
    print(
        f"\n## 3. through langgraph dev vs in-process: graphs/reflection.py, fake OpenAI-compatible model at "
        f"{args.server_latency * 1e3:g} ms per call (2 calls per record), median of {args.reps}; model requests "
        f"served: {fake.requests}\n"
    )
    rows.append(["bare SDK runs.wait, new thread each (no batch)", round(bare * 1e3, 1), "-", "-"])
    for name in ("in-process", "langgraph dev"):
        rows.append(
            [
                "batch " + ("--server (langgraph dev)" if name == "langgraph dev" else "in-process"),
                round(seq[name] * 1e3, 1),
                round(par[name], 2),
                round(args.server_records / par[name], 1),
            ]
        )
    print_table(
        [
            "path",
            f"ms/record (1 at a time, {args.server_sequential} records)",
            f"wall s ({args.server_records} records, concurrency {args.server_concurrency})",
            "records/s",
        ],
        rows,
    )
    print(
        f"\nbatch --server vs a bare runs.wait: {(seq['langgraph dev'] - bare) * 1e3:+.1f} ms per record "
        "(the client's own cost: thread lookup, run check, JSONL)"
    )
    overhead = (seq["langgraph dev"] - seq["in-process"]) * 1e3
    print(
        f"\nserver overhead per record: {overhead:+.1f} ms one at a time ({seq['langgraph dev'] / seq['in-process']:.2f}x); "
        f"{par['langgraph dev'] / par['in-process']:.2f}x the in-process wall time at concurrency {args.server_concurrency}"
    )


async def main_async(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        workdir = Path(tmp)
        if "wall" in args.parts:
            part_wall(args, await in_process(args, workdir, args.slow, with_shards=True))
        if "cpu" in args.parts:
            part_cpu(args, await in_process(args, workdir, args.fast))
        if "server" in args.parts:
            await part_server(args, workdir)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--parts", nargs="+", choices=("wall", "cpu", "server"), default=["wall", "cpu", "server"]
    )
    parser.add_argument("--records", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--slow", type=float, default=0.2, help="seconds per model call in part 1")
    parser.add_argument("--fast", type=float, default=0.02, help="seconds per model call in part 2")
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--reps", type=int, default=1)
    parser.add_argument("--variants", nargs="+", choices=VARIANTS, default=list(VARIANTS))
    parser.add_argument("--server-latency", type=float, default=0.02)
    parser.add_argument(
        "--server-sequential", type=int, default=40, help="records run one at a time in part 3"
    )
    parser.add_argument("--server-records", type=int, default=200)
    parser.add_argument("--server-concurrency", type=int, default=32)
    parser.add_argument("--dir", default=None, help="where to write the JSONL files (default: the temp dir)")
    parser.add_argument(
        "--shards",
        type=int,
        default=2,
        help="part 1 also runs this many `--shard` processes + merge (1: not)",
    )
    parser.add_argument("--as-shard", default=None, help=argparse.SUPPRESS)  # internal: one shard process
    parser.add_argument("--in", dest="in_path", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--out", dest="out_path", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--latency", type=float, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    if args.as_shard:
        return run_shard(args)
    return asyncio.run(main_async(args))


if __name__ == "__main__":
    raise SystemExit(main())
