"""Orchestration overhead per run: reflection-graph vs a plain loop vs a minimal LangGraph loop vs langgraph-reflection.

All four variants run the same loop shape with the same instant fake models: `--rounds` rounds (default 3) of
draft/revise + critique, with a critic that never accepts, so every variant makes exactly `2 * rounds` model calls
(checked before timing). Graphs are built once; only `invoke` (and `ainvoke` with `--mode async|both`) is timed.
Repetitions are interleaved in shuffled order so noise hits every variant alike.

    python bench/bench_overhead.py                 # ~20 s
    python bench/bench_overhead.py --reps 60       # tighter figures
    python bench/bench_overhead.py --profile       # cProfile of our invoke, top functions

Targets: ours / lean LangGraph <= 1.2x (stretch 1.1x) and ours / langgraph-reflection <= 0.5x (issue 18).
langgraph-reflection is not a dependency: without it (`pip install langgraph-reflection`) the peer's row is left
out with a note, and `--skip-peer` leaves it out on purpose.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import importlib.util
import io
import pstats
import random
import sys
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402
    FastChat,
    interleaved,
    langgraph_reflection_graph,
    lean_langgraph_loop,
    median,
    minimal_langgraph_loop,
    never_accepting_critic,
    plain_loop,
    print_table,
    revising_generator,
)

from reflection_graph import create_reflection_graph  # noqa: E402
from reflection_graph.critics import LLMCritic  # noqa: E402

TASK = "Write a polite email declining a job offer."


def build(rounds: int, skip_peer: bool, draft_chars: int) -> dict[str, tuple[Any, FastChat, FastChat]]:
    """Each variant with its own generator and critic fakes: name -> (runner, generator, critic)."""

    def models() -> tuple[FastChat, FastChat]:
        return revising_generator(draft_chars), never_accepting_critic()

    out: dict[str, tuple[Any, FastChat, FastChat]] = {}
    g, c = models()
    out["plain loop"] = (plain_loop(g, c, rounds), g, c)
    g, c = models()
    out["minimal LangGraph"] = (minimal_langgraph_loop(g, c, rounds), g, c)
    g, c = models()
    out["lean LangGraph"] = (lean_langgraph_loop(g, c, rounds), g, c)
    g, c = models()
    ours = create_reflection_graph(
        g, critic=c, max_iterations=rounds, patience=None, stop_on_no_new_issues=False
    )
    out["reflection-graph"] = (ours, g, c)
    # The lean loop parses the critic's reply with json.loads; ours does the same with method="text" (the default
    # "auto" goes through the model's structured-output chain, as the minimal loop does).
    g, c = models()
    text = create_reflection_graph(
        g,
        critic=LLMCritic(c, method="text"),
        max_iterations=rounds,
        patience=None,
        stop_on_no_new_issues=False,
    )
    out["reflection-graph (text critique)"] = (text, g, c)
    if not skip_peer and importlib.util.find_spec("langgraph_reflection") is None:
        print("langgraph-reflection is not installed (pip install langgraph-reflection): its row is left out")
        skip_peer = True
    if not skip_peer:
        g, c = models()
        out["langgraph-reflection"] = (langgraph_reflection_graph(g, c, rounds), g, c)
    return out


def sync_call(name: str, runner: Any) -> Callable[[], Any]:
    if name == "plain loop":
        return lambda: runner(TASK)
    if name == "langgraph-reflection":
        return lambda: runner.invoke({"messages": [("user", TASK)]})
    return lambda: runner.invoke({"task": TASK})


def async_call(name: str, runner: Any) -> Callable[[], Awaitable[Any]] | None:
    if name == "plain loop":
        return None  # the plain loop is synchronous; the async table compares the graphs only
    if name == "langgraph-reflection":
        return lambda: runner.ainvoke({"messages": [("user", TASK)]})
    return lambda: runner.ainvoke({"task": TASK})


async def ainterleaved(
    variants: Mapping[str, Callable[[], Awaitable[Any]]],
    *,
    reps: int,
    per_rep: int,
    seed: int = 0,
    clock: Callable[[], float] = time.perf_counter,
) -> dict[str, list[float]]:
    rng = random.Random(seed)
    names = list(variants)
    out: dict[str, list[float]] = {n: [] for n in names}
    for _ in range(reps):
        rng.shuffle(names)
        for name in names:
            start = clock()
            for _ in range(per_rep):
                await variants[name]()
            out[name].append((clock() - start) / per_rep)
    return out


def check_calls(built: dict[str, tuple[Any, FastChat, FastChat]], rounds: int) -> None:
    """Every variant makes exactly `rounds` generator and `rounds` critic calls, sync and async."""
    for name, (runner, g, c) in built.items():
        runs: list[Callable[[], Any]] = [sync_call(name, runner)]
        acall = async_call(name, runner)
        if acall is not None:
            runs.append(lambda acall=acall: asyncio.run(acall()))
        for run in runs:
            g.calls = c.calls = 0
            run()
            if (g.calls, c.calls) != (rounds, rounds):
                raise SystemExit(
                    f"{name}: expected {rounds} generator and {rounds} critic calls, got {g.calls}/{c.calls}"
                )


def report(title: str, times: dict[str, list[float]]) -> dict[str, float]:
    med = {name: median(v) for name, v in times.items()}
    base = med.get("minimal LangGraph")
    print(f"\n{title}")
    rows = []
    for name, m in sorted(med.items(), key=lambda kv: kv[1]):
        spread = f"{min(times[name]) * 1e3:.3f}-{max(times[name]) * 1e3:.3f}"
        rows.append([name, round(m * 1e3, 3), spread, round(m / base, 2) if base else "-"])
    print_table(["variant", "ms/run (median)", "min-max ms", "x minimal LangGraph"], rows)
    ours = med["reflection-graph"]
    text = med["reflection-graph (text critique)"]
    print(f"ours / lean LangGraph    = {ours / med['lean LangGraph']:.2f}x (target <= 1.2x)")
    print(
        f"ours (text critique) / lean LangGraph = {text / med['lean LangGraph']:.2f}x (same parsing as lean)"
    )
    print(f"ours / minimal LangGraph = {ours / med['minimal LangGraph']:.2f}x")
    if "plain loop" in med:
        print(f"ours / plain loop        = {ours / med['plain loop']:.2f}x")
    if "langgraph-reflection" in med:
        print(f"ours / langgraph-reflection = {ours / med['langgraph-reflection']:.2f}x (target <= 0.5x)")
    return med


def profile(runner: Any, n: int, top: int) -> None:
    call = sync_call("reflection-graph", runner)
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(n):
        call()
    prof.disable()
    buf = io.StringIO()
    stats = pstats.Stats(prof, stream=buf).sort_stats("cumulative")
    stats.print_stats(top)
    print(f"\ncProfile of {n} runs of reflection-graph (cumulative, top {top}):")
    print(buf.getvalue())
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).sort_stats("cumulative").print_stats("reflection_graph", top)
    print("reflection_graph functions only:")
    print(buf.getvalue())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--reps", type=int, default=20, help="interleaved repetitions")
    parser.add_argument("--per-rep", type=int, default=20, help="runs per variant per repetition")
    parser.add_argument("--mode", choices=["sync", "async", "both"], default="both")
    parser.add_argument("--draft-chars", type=int, default=600)
    parser.add_argument("--skip-peer", action="store_true", help="do not measure langgraph-reflection")
    parser.add_argument(
        "--profile", action="store_true", help="cProfile our invoke and print the top functions"
    )
    parser.add_argument("--profile-runs", type=int, default=300)
    parser.add_argument(
        "--clock",
        choices=["wall", "cpu"],
        default="wall",
        help="wall time, or this process's CPU time (steadier when other jobs load the machine)",
    )
    args = parser.parse_args(argv)

    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    built = build(args.rounds, args.skip_peer, args.draft_chars)
    check_calls(built, args.rounds)
    print(
        f"{args.rounds} rounds per run, critic never accepts, instant fake models; "
        f"{args.reps} interleaved repetitions x {args.per_rep} runs per variant; {args.clock} clock"
    )
    for name, (runner, _, _) in built.items():  # warm-up
        for _ in range(5):
            sync_call(name, runner)()
    if args.mode in ("sync", "both"):
        times = interleaved(
            {n: sync_call(n, r) for n, (r, _, _) in built.items()},
            reps=args.reps,
            per_rep=args.per_rep,
            clock=clock,
        )
        report("invoke (sync)", times)
    if args.mode in ("async", "both"):
        calls = {n: async_call(n, r) for n, (r, _, _) in built.items()}
        acalls = {n: c for n, c in calls.items() if c is not None}

        async def run() -> dict[str, list[float]]:
            for c in acalls.values():
                for _ in range(5):
                    await c()
            return await ainterleaved(acalls, reps=args.reps, per_rep=args.per_rep, clock=clock)

        report("ainvoke (async)", asyncio.run(run()))
    if args.profile:
        profile(built["reflection-graph"][0], args.profile_runs, 40)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
