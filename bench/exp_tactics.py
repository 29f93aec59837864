"""Revision against drawing again, at the same call bound (issue 47, item 5), on HumanEval/40-163.

The variants differ only where the greedy first draft fails a visible docstring example (elsewhere every variant
stops at that draft), so they run there (`--ids`, default: the 28 problems where raw's record of run 8391a4e8
fails one). Each variant is the graph with the code focus and the verifier's call bound (`VERIFIER_DEFAULTS`: one
greedy draft, then up to 2 rounds of 2 candidates, 5 generations at most, stopping at the first candidate that
passes every visible example; no plateau stop, as `resample` forces), the visible examples as the critic
(`CodeTestCritic`), judged on HumanEval's own tests. What makes the later rounds' candidates:

- `resample`: fresh drafts of the task at the sampling temperature, no critique shown (the code default);
- `loop`: revisions shown the failing calls (greedy, then a warmer one; a revision that repeats its input gives
  way to the next tactic, `Strategy.tactics`);
- `sampled`: only sampled revisions (each at the sampling temperature with a seed of its own);
- `fresh_told`: only fresh drafts told the critique's faults (the first greedy, the next sampled);
- `loop_lookup`: `loop` with prompt-lookup decoding of its revisions (`EmbeddedChatModel(prompt_lookup=None)`;
  every other variant runs with it off, `prompt_lookup=False`), for item 6: do outcomes change with lookup on?

The variants run interleaved, problem by problem, so a stopped run leaves every variant over the same problems.
Resumable: one record per problem and variant in `--results`, with tokens (prompt and generated, from the
graph's usage), seconds, the tactics that made each candidate, the 1-minute load before and after, the commit.

    python bench/exp_tactics.py                       # every variant on the 28 problems
    python bench/exp_tactics.py --variants sampled --ids 47,54
    python bench/exp_tactics.py --report [--dev 40-82]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any, ClassVar

sys.path.insert(0, str(Path(__file__).parent))

import _humaneval as he  # noqa: E402
from _humaneval_set import problems  # noqa: E402
from _raw import append_record, embedded_model, recorded, with_load  # noqa: E402

RESULTS = Path(__file__).parent / "results" / "tactics-qwen2.5-coder-1.5b.jsonl"
LOAD_LIMIT = 3.0
FAILING = (
    "47,54,64,65,67,75,86,90,91,93,101,103,106,110,113,119,120,121,126,127,129,132,137,139,140,142,148,163"
)
"""HumanEval/40-163 problems whose greedy draft (raw, run 8391a4e8) fails a visible docstring example."""
BOUND = {"n_drafts": 1, "n_revisions": 2, "max_iterations": 3}
"""The verifier's call bound (`VERIFIER_DEFAULTS` without its strategy): 5 generations at most."""
VARIANTS = ("resample", "loop", "sampled", "fresh_told", "loop_lookup")


def _register() -> None:
    """The two single-tactic strategies (`sampled`, `fresh_told`) and the loop without its plateau stops
    (`loop_bound`), so every variant may spend the same calls."""
    from reflection_graph import strategies
    from reflection_graph.strategies.base import Strategy, Tactic

    no_plateau = {"patience": None, "stop_on_no_new_issues": False}

    class LoopBound(Strategy):
        name = "exp_loop_bound"
        forces = no_plateau

    class Sampled(Strategy):
        name = "exp_sampled"
        forces = no_plateau
        tactics: ClassVar[tuple[Tactic, ...]] = ("sampled_revision",)

    class FreshTold(Strategy):
        name = "exp_fresh_told"
        forces = no_plateau
        tactics: ClassVar[tuple[Tactic, ...]] = ("fresh_draft",)

    for cls in (LoopBound, Sampled, FreshTold):
        strategies.register(cls(), replace=True)


STRATEGY = {
    "resample": "resample",
    "loop": "exp_loop_bound",
    "sampled": "exp_sampled",
    "fresh_told": "exp_fresh_told",
}


def one(problem: dict[str, Any], variant: str, model: Any, judge: Any) -> dict[str, Any]:
    """`variant` on `problem`, judged on HumanEval's own tests."""
    from reflection_graph import create_reflection_graph

    critic = he.visible_critic(problem)
    model = model.model_copy(update={"prompt_lookup": None if variant == "loop_lookup" else False})
    graph = create_reflection_graph(model, critic=critic, focus="code", strategy=STRATEGY[variant], **BOUND)
    start = time.monotonic()
    result = graph.invoke({"task": he.task_of(problem)})
    seconds = time.monotonic() - start
    candidates = [s for r in result["trajectory"] for s in (r.get("samples") or [r])]
    usage = (result.get("usage") or {}).get("total") or {}
    code = result["candidate"] or ""
    return {
        "solved": judge.solves(problem, code),
        "visible": judge.visible(problem, code),
        "any_solved": any(judge.solves(problem, c["candidate"] or "") for c in candidates),
        "candidates": len(candidates),
        "tactics": [c.get("tactic") for c in candidates],
        "repeated": [list(c.get("repeated") or ()) for c in candidates],
        "calls": int(usage.get("calls") or 0),
        "prompt_tokens": int(usage.get("input_tokens") or 0),
        "generated_tokens": int(usage.get("output_tokens") or 0),
        "tokens": int(usage.get("total_tokens") or 0),
        "rounds": result["iterations"],
        "stop": result["stop_reason"],
        "seconds": round(seconds, 1),
        "code": code,
    }


def _ranges(text: str) -> set[int]:
    out: set[int] = set()
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return out


def report(path: Path, dev: set[int]) -> None:
    """Solved counts and tokens per variant, over the problems every variant has at load 3 or below."""
    rows = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    by: dict[str, dict[str, Any]] = {}
    for r in rows:
        by.setdefault(r["task_id"], {})[r["variant"]] = r
    loaded = sorted(t for t, v in by.items() if any(max(r["load"]) > LOAD_LIMIT for r in v.values()))
    variants = [v for v in VARIANTS if any(v in have for have in by.values())]
    full = sorted(
        (t for t, have in by.items() if t not in loaded and all(v in have for v in variants)),
        key=lambda t: int(t.split("/")[1]),
    )
    if loaded:
        print(f"left out, a record measured above load {LOAD_LIMIT:g}: {', '.join(loaded)}")
    print(f"{len(full)} problems with every variant ({', '.join(variants)}); dev = {sorted(dev) and 'given'}")
    loads = [x for t in full for r in by[t].values() for x in r["load"]]
    commits = sorted({r["commit"] for t in full for r in by[t].values()})
    print(f"load {min(loads, default=0)}-{max(loads, default=0)}; commits {commits}")
    print(
        "| variant | solved | dev | held out | some candidate solves | tokens per problem | generated | seconds |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for v in variants:
        recs = [by[t][v] for t in full]
        in_dev = [r for t, r in zip(full, recs, strict=True) if int(t.split("/")[1]) in dev]
        out = [r for t, r in zip(full, recs, strict=True) if int(t.split("/")[1]) not in dev]
        n = max(len(recs), 1)
        print(
            f"| {v} | {sum(r['solved'] for r in recs)} of {len(recs)} | {sum(r['solved'] for r in in_dev)} of"
            f" {len(in_dev)} | {sum(r['solved'] for r in out)} of {len(out)} | {sum(r['any_solved'] for r in recs)}"
            f" | {sum(r['tokens'] for r in recs) / n:,.0f} | {sum(r['generated_tokens'] for r in recs) / n:,.0f}"
            f" | {sum(r['seconds'] for r in recs) / n:.0f} |"
        )
    for v in variants:
        made: dict[str, int] = {}
        for t in full:
            for tactic in by[t][v]["tactics"][1:]:
                made[str(tactic)] = made.get(str(tactic), 0) + 1
        print(f"{v}: later candidates by tactic {made}")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--ids", default=FAILING, help="HumanEval numbers within 40-163 (e.g. 47,54 or 40-82)"
    )
    parser.add_argument("--variants", nargs="*", choices=VARIANTS, default=list(VARIANTS))
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--report", action="store_true")
    parser.add_argument(
        "--dev", default="40-82", help="the development problems of the report (the rest held out)"
    )
    args = parser.parse_args()
    if args.report:
        report(args.results, _ranges(args.dev))
        return 0
    ids = sorted(_ranges(args.ids))
    if not ids or min(ids) < 40 or max(ids) > 163:
        parser.error("--ids must lie within 40-163 (the problems before 40 are reserved)")
    _register()
    loaded = embedded_model("embedded:qwen2.5-coder-1.5b")
    if loaded is None:
        return 2
    model, _ = loaded
    judge = he.Judge()
    done = recorded(args.results, "variant", "task_id")
    for problem in problems(ids):
        if he.visible_critic(problem) is None:
            continue
        for variant in args.variants:
            if (variant, problem["task_id"]) in done:
                continue
            keys = {"variant": variant, "task_id": problem["task_id"]}
            record = with_load(keys, one, problem, variant, model, judge)
            shown = [record[k] for k in ("solved", "tactics", "tokens", "seconds", "load")]
            append_record(args.results, record, problem["task_id"], variant, *shown)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
