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
- `mixed`: round 2 draws fresh drafts (as `resample`), round 3 revises the best candidate so far shown its
  failing calls (as `loop`), each at the same call bound (`Strategy.drafts_afresh` per round);
- `loop_lookup`: `loop` with prompt-lookup decoding of its revisions (`EmbeddedChatModel(prompt_lookup=None)`;
  every other variant runs with it off, `prompt_lookup=False`), for item 6: do outcomes change with lookup on?

`--ifbench N` runs the same variants on IFBench instead: the first N development prompts of bench_instructions.py's
fixed order whose raw reply (run 38f5b937) misses an instruction (57 of the 64; the reserved half is never read),
the checker (`InstructionCritic`) as the critic, scored by IFBench's own strict verdicts; the report counts the
instructions followed over the first `--dev-prompts` apart from the later ones. About 2 minutes a variant a prompt.

The variants run interleaved, problem by problem, so a stopped run leaves every variant over the same problems.
Resumable: one record per problem and variant in `--results`, with tokens (prompt and generated, from the
graph's usage), seconds, the tactics that made each candidate, the 1-minute load before and after, the commit.

    python bench/exp_tactics.py                       # every variant on the 28 problems
    python bench/exp_tactics.py --variants sampled --ids 47,54
    python bench/exp_tactics.py --report [--dev 40-82] [--variants resample loop]   # those variants only
    python bench/exp_tactics.py --ifbench 32          # IFBench: the first 32 development prompts, where raw misses
    python bench/exp_tactics.py --ifbench 32 --report
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

sys.path.insert(0, str(Path(__file__).parent))

import _humaneval as he  # noqa: E402
from _humaneval_set import problems  # noqa: E402
from _raw import append_record, embedded_model, read_jsonl, recorded, with_load  # noqa: E402

RESULTS = Path(__file__).parent / "results" / "tactics-qwen2.5-coder-1.5b.jsonl"
IFBENCH_RESULTS = Path(__file__).parent / "results" / "tactics-ifbench-qwen2.5-coder-1.5b.jsonl"
IFBENCH_RAW = Path(__file__).parent / "results" / "ifbench-embedded-qwen2.5-coder-1.5b.jsonl"
IFBENCH_RUN = "38f5b93762b7fad6"
"""The IFBench run whose raw records say which prompts' first draft misses an instruction."""
LOAD_LIMIT = 3.0
FAILING = (
    "47,54,64,65,67,75,86,90,91,93,101,103,106,110,113,119,120,121,126,127,129,132,137,139,140,142,148,163"
)
"""HumanEval/40-163 problems whose greedy draft (raw, run 8391a4e8) fails a visible docstring example."""
BOUND = {"n_drafts": 1, "n_revisions": 2, "max_iterations": 3}
"""The verifier's call bound (`VERIFIER_DEFAULTS` without its strategy): 5 generations at most."""
VARIANTS = ("resample", "loop", "sampled", "fresh_told", "loop_lookup", "mixed")


def _register() -> None:
    """The two single-tactic strategies (`sampled`, `fresh_told`), the loop without its plateau stops
    (`loop_bound`), so every variant may spend the same calls, and `mixed` (fresh drafts in round 2, revisions
    after)."""
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

    class Mixed(Strategy):
        name = "exp_mixed"
        forces = no_plateau

        def drafts_afresh(self, iteration: int) -> bool:
            return iteration == 2

    for cls in (LoopBound, Sampled, FreshTold, Mixed):
        strategies.register(cls(), replace=True)


STRATEGY = {
    "resample": "resample",
    "loop": "exp_loop_bound",
    "sampled": "exp_sampled",
    "fresh_told": "exp_fresh_told",
    "loop_lookup": "exp_loop_bound",
    "mixed": "exp_mixed",
}


def _graph_run(
    task: str, critic: Any, variant: str, model: Any, **focus: Any
) -> tuple[dict[str, Any], dict[str, Any]]:
    """`variant`'s graph on `task` with `critic`: its result, and what every record keeps of it (the tactics that
    made each candidate, calls, tokens from the graph's usage, rounds, stop reason, seconds)."""
    from reflection_graph import create_reflection_graph

    model = model.model_copy(update={"prompt_lookup": None if variant == "loop_lookup" else False})
    graph = create_reflection_graph(model, critic=critic, strategy=STRATEGY[variant], **focus, **BOUND)
    start = time.monotonic()
    result = graph.invoke({"task": task})
    seconds = time.monotonic() - start
    candidates = [s for r in result["trajectory"] for s in (r.get("samples") or [r])]
    usage = (result.get("usage") or {}).get("total") or {}
    return result, {
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
    }


def _candidates(result: dict[str, Any]) -> list[str]:
    return [s["candidate"] or "" for r in result["trajectory"] for s in (r.get("samples") or [r])]


def one(problem: dict[str, Any], variant: str, model: Any, judge: Any) -> dict[str, Any]:
    """`variant` on `problem`, judged on HumanEval's own tests."""
    critic = he.visible_critic(problem)
    result, record = _graph_run(he.task_of(problem), critic, variant, model, focus="code")
    code = result["candidate"] or ""
    return {
        **record,
        "solved": judge.solves(problem, code),
        "visible": judge.visible(problem, code),
        "any_solved": any(judge.solves(problem, c) for c in _candidates(result)),
        "code": code,
    }


def one_instructions(row: dict[str, Any], variant: str, model: Any) -> dict[str, Any]:
    """`variant` on IFBench prompt `row` with its checker (`InstructionCritic`) as the critic, scored by IFBench
    (strict)."""
    import bench_instructions as bi

    critic = bi.critic_of(row)
    result, record = _graph_run(row["prompt"], critic, variant, model)
    answer = result["candidate"] or ""
    return {
        **record,
        "instructions": len(row["instruction_id_list"]),
        "strict": bi.scored(row, answer, critic)["strict"],
        "best_strict": max(sum(bi.scored(row, c, critic)["strict"]) for c in _candidates(result)),
        "answer": answer,
    }


def failing_prompts(count: int) -> list[tuple[int, dict[str, Any]]]:
    """The first `count` IFBench development prompts of bench_instructions.py's fixed order (the reserved half is
    never read) whose raw reply (run 38f5b937) misses an instruction, strict, each with its place in that order:
    elsewhere every variant stops at the first draft, which is that reply."""
    import bench_instructions as bi
    from _ifbench_set import prompts

    raw = {
        r["task_id"]: r for r in read_jsonl(IFBENCH_RAW) if r["run"] == IFBENCH_RUN and r["variant"] == "raw"
    }
    rows = bi.in_order(bi.split_rows(prompts())[0])[:count]
    return [(i, row) for i, row in enumerate(rows) if not all(raw[bi.prompt_id(row)]["strict"])]


def _ranges(text: str) -> set[int]:
    out: set[int] = set()
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return out


def _complete(
    path: Path, order: Any, only: Sequence[str] = VARIANTS
) -> tuple[dict[str, dict[str, Any]], list[str], list[str]]:
    """The records of `path` by task and variant (of `only`), the variants present, and the tasks every variant has
    at load 3 or below (sorted by `order` of a task's records), after naming those left out for their load."""
    rows = [r for r in read_jsonl(path) if r["variant"] in only]
    by: dict[str, dict[str, Any]] = {}
    for r in rows:
        by.setdefault(r["task_id"], {})[r["variant"]] = r
    loaded = sorted(t for t, v in by.items() if any(max(r["load"]) > LOAD_LIMIT for r in v.values()))
    variants = [v for v in VARIANTS if any(v in have for have in by.values())]
    full = sorted(
        (t for t, have in by.items() if t not in loaded and all(v in have for v in variants)),
        key=lambda t: order(t, by[t]),
    )
    if loaded:
        print(f"left out, a record measured above load {LOAD_LIMIT:g}: {', '.join(loaded)}")
    return by, variants, full


def report(path: Path, dev: set[int], only: Sequence[str] = VARIANTS) -> None:
    """Solved counts and tokens per variant (of `only`), over the problems every variant has at load 3 or
    below."""
    by, variants, full = _complete(path, lambda t, _: int(t.split("/")[1]), only)
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


def report_instructions(path: Path, dev_prompts: int, only: Sequence[str] = VARIANTS) -> None:
    """Instructions followed (strict) and tokens per variant (of `only`), over the prompts every variant has at
    load 3 or below; the first `dev_prompts` of the fixed order apart from the rest."""
    by, variants, full = _complete(path, lambda _, have: next(iter(have.values()))["order"], only)
    loads = [x for t in full for r in by[t].values() for x in r["load"]]
    print(
        f"{len(full)} IFBench prompts whose raw reply misses an instruction, every variant ({', '.join(variants)});"
        f" load {min(loads, default=0)}-{max(loads, default=0)}"
    )
    print(
        "| variant | followed (strict) | not counting pasted reviews | first prompts | later prompts | best candidate"
        " | tokens per prompt | seconds |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for v in variants:
        recs = [by[t][v] for t in full]
        early = [r for r in recs if r["order"] < dev_prompts]
        late = [r for r in recs if r["order"] >= dev_prompts]
        n = max(len(recs), 1)

        def share(part: list[dict[str, Any]]) -> str:
            return f"{sum(sum(r['strict']) for r in part)} of {sum(r['instructions'] for r in part)}"

        honest = sum(sum(r["strict"]) for r in recs if not pasted_review(r["answer"]))
        print(
            f"| {v} | {share(recs)} | {honest} | {share(early)} | {share(late)} | {sum(r['best_strict'] for r in recs)}"
            f" | {sum(r['tokens'] for r in recs) / n:,.0f} | {sum(r['seconds'] for r in recs) / n:.0f} |"
        )
    pasted = [f"{t} ({v})" for t in full for v in variants if pasted_review(by[t][v]["answer"])]
    if pasted:
        print(f"answers that paste the review they were given back (not counted above): {', '.join(pasted)}")


def pasted_review(answer: str) -> bool:
    """Whether `answer` pastes back the review a chat revision is given (its opening line, `CHAT_REVISE_PROMPT`'s
    first words): such an answer can satisfy a checker with the review's own words. The package refuses it as an
    echo since 6f6f96f; records made before count it here apart."""
    from reflection_graph.prompts import CHAT_REVISE_PROMPT

    opening = CHAT_REVISE_PROMPT.split("{", 1)[0].strip().casefold()
    return opening in answer.casefold()


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
    parser.add_argument(
        "--ifbench",
        type=int,
        default=0,
        help="IFBench instead: the first N development prompts of the fixed order whose raw reply misses one",
    )
    parser.add_argument(
        "--dev-prompts", type=int, default=32, help="IFBench: the first prompts of the report"
    )
    args = parser.parse_args()
    if args.report:
        if args.ifbench:
            report_instructions(
                IFBENCH_RESULTS if args.results == RESULTS else args.results, args.dev_prompts, args.variants
            )
        else:
            report(args.results, _ranges(args.dev), args.variants)
        return 0
    ids = sorted(_ranges(args.ids))
    if not ids or min(ids) < 40 or max(ids) > 163:
        parser.error("--ids must lie within 40-163 (the problems before 40 are reserved)")
    _register()
    loaded = embedded_model("embedded:qwen2.5-coder-1.5b")
    if loaded is None:
        return 2
    model, _ = loaded
    if args.ifbench:
        return _instructions(args, model)
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


def _instructions(args: argparse.Namespace, model: Any) -> int:
    """Every variant on each IFBench prompt of `failing_prompts(args.ifbench)`, prompt by prompt."""
    import bench_instructions as bi

    path = IFBENCH_RESULTS if args.results == RESULTS else args.results
    done = recorded(path, "variant", "task_id")
    for order, row in failing_prompts(args.ifbench):
        for variant in args.variants:
            if (variant, bi.prompt_id(row)) in done:
                continue
            keys = {"variant": variant, "task_id": bi.prompt_id(row), "order": order}
            record = with_load(keys, one_instructions, row, variant, model)
            shown = [record[k] for k in ("strict", "best_strict", "tactics", "tokens", "seconds", "load")]
            append_record(path, record, row["key"], variant, *shown)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
