"""Prompt size per round over many rounds: reflection-graph vs langgraph-reflection.

Both run `--rounds` rounds (default 10) with the same fake models: every draft is `--draft-chars` characters and
the critic never accepts. We count the characters each round sends to the models (generator/reviser prompt +
critic prompt) and report them as tokens (characters / 4).

reflection-graph sends the task, the previous candidate, the latest critique and a bounded window of earlier
rounds (`history_window`, default 1), so from round 3 on (once the window is full) a round costs the same.
langgraph-reflection passes the whole message history to both models, so each round costs more than the last.

    python bench/bench_prompt_growth.py
    python bench/bench_prompt_growth.py --rounds 20 --history-window 2

Exit status 1 if our per-round size is not flat (spread over rounds 3..N above 5%).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402
    FastChat,
    draft_text,
    langgraph_reflection_graph,
    never_accepting_critic,
    print_table,
)

from reflection_graph import create_reflection_graph  # noqa: E402

TASK = "Write a polite email declining a job offer."


def per_round(gen: FastChat, crit: FastChat) -> list[int]:
    """Tokens (chars / 4) sent per round: generator call i + critic call i."""
    return [(g + c) // 4 for g, c in zip(gen.prompt_chars, crit.prompt_chars, strict=True)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--draft-chars", type=int, default=1200)
    parser.add_argument("--history-window", type=int, default=1)
    parser.add_argument("--skip-peer", action="store_true")
    args = parser.parse_args(argv)

    gen, crit = FastChat(reply=draft_text(args.draft_chars)), never_accepting_critic()
    ours = create_reflection_graph(
        gen,
        critic=crit,
        max_iterations=args.rounds,
        patience=None,
        stop_on_no_new_issues=False,
        history_window=args.history_window,
    )
    result = ours.invoke({"task": TASK})
    assert result["iterations"] == args.rounds, result["stop_reason"]
    mine = per_round(gen, crit)

    theirs: list[int] = []
    if not args.skip_peer:
        pgen, pcrit = FastChat(reply=draft_text(args.draft_chars)), never_accepting_critic()
        peer = langgraph_reflection_graph(pgen, pcrit, args.rounds)
        peer.invoke({"messages": [("user", TASK)]}, {"recursion_limit": 4 * args.rounds + 10})
        theirs = per_round(pgen, pcrit)
        assert len(theirs) == args.rounds, len(theirs)

    print(
        f"Tokens (chars/4) sent per round, drafts of {args.draft_chars} chars, history_window={args.history_window}"
    )
    rows = []
    for i in range(args.rounds):
        row: list[object] = [i + 1, mine[i]]
        if theirs:
            row += [theirs[i], round(theirs[i] / mine[i], 2)]
        rows.append(row)
    headers = ["round", "reflection-graph"] + (["langgraph-reflection", "peer / ours"] if theirs else [])
    print_table(headers, rows)
    print(f"total over {args.rounds} rounds: ours {sum(mine)}" + (f", peer {sum(theirs)}" if theirs else ""))
    if theirs:
        print(
            f"peer total / ours total = {sum(theirs) / sum(mine):.2f}x; last round: {theirs[-1] / mine[-1]:.2f}x"
        )

    steady = mine[2:] if len(mine) > 2 else mine
    spread = (max(steady) - min(steady)) / max(steady)
    flat = spread <= 0.05
    print(
        f"ours from round 3 on: {min(steady)}-{max(steady)} tokens (spread {spread:.1%}): {'flat' if flat else 'GROWS'}"
    )
    return 0 if flat else 1


if __name__ == "__main__":
    raise SystemExit(main())
