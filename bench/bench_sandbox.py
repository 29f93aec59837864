"""Benchmark: what isolating generated code, and deciding its verdict outside its process, cost per critique.

Judges the same correct candidate against the same three tests with `isolation="off"` and with each isolation
backend that works here (bubblewrap, `unshare`), each with the verdict decided outside the candidate's process (the
default for these assert-style tests: two sandboxed processes) and in-process (the same tests plus an unused
`import solution`, which makes them run in the candidate's process: one sandboxed process), side by side in one
run, repetitions interleaved. Prints the median milliseconds per critique and the ratio to `off, in-process`.

Usage:
    python bench/bench_sandbox.py              # 5 repetitions x 4 critiques per variant
    python bench/bench_sandbox.py --reps 10 --per-rep 8
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench._common import interleaved, median, print_table  # noqa: E402
from reflection_graph.critics import CodeTestCritic  # noqa: E402
from reflection_graph.critics.base import CritiqueRequest  # noqa: E402
from reflection_graph.critics.sandbox import _isolation as _sandbox  # noqa: E402

TESTS = """\
from solution import add


def test_add():
    assert add(2, 2) == 4


def test_negative():
    assert add(-1, 1) == 0


def test_large():
    assert add(10**12, 1) == 10**12 + 1
"""
IN_PROCESS_TESTS = "import solution  # noqa: F401  (makes the tests run in the candidate's process)\n" + TESTS
REQUEST = CritiqueRequest(task="add", candidate="def add(a, b):\n    return a + b\n")


def _variant(backend: str | None, tests: str, where: str) -> Callable[[], None]:
    def run() -> None:
        # pin the backend for this call (the probe result is cached, so this costs nothing)
        _sandbox._BACKEND_ORDER = (backend,) if backend else ()
        critic = CodeTestCritic(tests, isolation="required" if backend else "off")
        verdict = critic.critique(REQUEST)
        assert verdict.is_acceptable and verdict.verdict_source == where

    return run


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--per-rep", type=int, default=4)
    args = parser.parse_args()
    backends: list[str | None] = [None]
    for backend in ("bwrap", "unshare"):
        _sandbox._BACKEND_ORDER = (backend,)
        found, why = _sandbox.isolation_backend()
        if found == backend:
            backends.append(backend)
        else:
            print(f"skipping {backend}: {why}")
    variants: dict[str, Callable[[], None]] = {}
    for backend in backends:
        for where, tests in (("in-process", IN_PROCESS_TESTS), ("outside", TESTS)):
            variants[f"{backend or 'off'}, {where}"] = _variant(backend, tests, where)
    times = interleaved(variants, reps=args.reps, per_rep=args.per_rep)
    base = median(times["off, in-process"])
    rows = [[name, f"{median(t) * 1000:.0f}", f"{median(t) / base:.2f}x"] for name, t in times.items()]
    print_table(["isolation, verdict", "ms per critique (median)", "vs off, in-process"], rows)


if __name__ == "__main__":
    main()
