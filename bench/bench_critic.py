"""How well does the embedded model judge? Only figures with nothing fitted, or cross-validated, with 95% intervals.

On every (task, good, bad) pair of the chosen sets, each embedded model named by `--model` scores both answers with
each of its signals, side by side in one process. On a base model (Gemma 3 270M):

- `likelihood` (the default critic on the embedded model, `LogprobCritic`): the mean log-probability of the
  answer's tokens after `Task: ...` / `Answer:`; score `10 * exp(mean)`, accepted at >= 5. Nothing fitted.
- `verdict`: `P(Yes) / (P(Yes) + P(No))` after the few-shot `Correct:` prompt; score `10 * p`, accepted at
  p >= 0.5. Nothing fitted (the signal `LogprobCritic` uses through an OpenAI-compatible server).
- `likelihood under the few-shot prompt`: the same mean, read inside the verdict's few-shot prompt. Nothing fitted.
- `old default, leave-one-out`: the earlier default combined the verdict's log-odds and that likelihood, each
  standardized with a mean and spread, and accepted above a bar chosen to accept at most 20% of bad answers. Those
  four constants and the bar were fitted on `datasets/pairs.jsonl`; here they are refitted on all pairs but one
  and tried on the one left out, for every pair (leave-one-out over the sets given), so no figure is read on data
  it was fitted on.
- `JSON LLMCritic` (`--json-critic`): the grammar-constrained JSON critic. Nothing fitted.

On an instruction-tuned model prompted through its chat template (Qwen2.5-Coder-1.5B-Instruct), the readings of
`JudgeCritic`, its default critic (see reflection_graph/critics/judge.py), each nothing fitted:
- `comparison, both orders` (the default judge's ranking): "Which answer does the task better, A or B?" asked with
  the good answer as A and then as B; the good one ranks first when its chance of being the better answer,
  `sigmoid` of the mean log-odds of its letter over the two orders, is above 1/2.
- `verdict P(Yes), its sign alone`: `P(Yes) / (P(Yes) + P(No))` to "is this answer correct, and does it do what
  the task asks?"; accepted when above 1/2 (the judge never accepts on it alone).
- `accepts a revision`: the judge's acceptance of an answer judged against the other one of its pair (the bad
  answer as a revision of the good one, and the other way round): P(Yes) > 1/2 and a win in both orders, or, on
  a tie (the orders split), a P(Yes) above the other answer's. The judge never accepts a first answer (see
  reflection_graph/critics/judge.py).

Printed per set and signal: who wrote the set, its size, pairwise accuracy (the good answer scores higher; a tie
counts half), the share of bad and of good answers accepted, each with a Wilson 95% interval.

The sets: `datasets/pairs.jsonl` (32 pairs) and `datasets/pairs_holdout.jsonl` (16 pairs), both written by this
project's sessions (facts, arithmetic, tone, format, short writing, code). No public set of judged answer pairs
ships in a PyPI package that we found (`rewardbench` on PyPI, for one, ships code only and loads its pairs from
the Hugging Face hub at run time), so none is used here; on 16 pairs written outside this project the issue
tracker records the likelihood at 69% and a pairwise "A or B?" prompt at chance.

Needs the `[local]` extra.

    python bench/bench_critic.py --model embedded:gemma-3-270m     # both sets, about 5 minutes on one idle core
    python bench/bench_critic.py --sets holdout -v --json-critic --model embedded:gemma-3-270m
    python bench/bench_critic.py --sets holdout -v --model embedded:gemma-3-270m \\
        --model embedded:qwen2.5-coder-1.5b
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common  # noqa: E402,F401  (puts the repository on sys.path)
from _common import print_table  # noqa: E402
from _raw import embedded_model, llama_cpp_missing  # noqa: E402

SETS = {
    "pairs": ("datasets/pairs.jsonl", "this project"),
    "holdout": ("datasets/pairs_holdout.jsonl", "this project (never tuned on)"),
}
Z95 = 1.959964


def wilson(successes: float, n: int) -> tuple[float, float]:
    """The Wilson score 95% interval of a proportion (`successes` may hold halves for ties)."""
    if n == 0:
        return (0.0, 1.0)
    p = successes / n
    centre = (p + Z95**2 / (2 * n)) / (1 + Z95**2 / n)
    half = Z95 * math.sqrt(p * (1 - p) / n + Z95**2 / (4 * n * n)) / (1 + Z95**2 / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


def share(successes: float, n: int) -> str:
    low, high = wilson(successes, n)
    return f"{successes / n:.1%} [{low:.0%}, {high:.0%}]"


def load_pairs(path: Path) -> list[dict[str, str]]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    for row in rows:
        missing = {"task", "good", "bad"} - set(row)
        if missing:
            raise ValueError(f"{path}: record {row.get('id', '?')} lacks {sorted(missing)}")
    return rows


def signals(model: Any, row: dict[str, str], side: str) -> dict[str, float]:
    """Every signal for one answer: the default critic's likelihood and verdict, and the few-shot likelihood."""
    from reflection_graph.critics import CritiqueRequest, LogprobCritic

    request = CritiqueRequest(task=row["task"], candidate=row[side])
    likely = LogprobCritic(model, signal="likelihood", explain=False)
    voted = LogprobCritic(model, signal="verdict", explain=False)
    judged = likely.critique(request)
    verdict = voted.critique(request)
    prompt, answer = voted.prompt(request), " " + row[side].strip()
    in_prompt = model.continuation_logprobs(prompt[: prompt.rfind(answer)], answer)
    p = min(max(verdict.score / 10, 1e-9), 1 - 1e-9)
    return {
        "likelihood": judged.score,
        "likelihood_ok": float(judged.is_acceptable),
        "verdict": verdict.score,
        "verdict_ok": float(verdict.is_acceptable),
        "log_odds": math.log(p) - math.log(1 - p),
        "fewshot": sum(in_prompt) / len(in_prompt),
    }


def figures(
    scored: Sequence[dict[str, Any]],
    score: Callable[[dict[str, float]], float],
    accepted: Callable[[dict[str, float]], bool] | None,
) -> list[str]:
    n = len(scored)
    wins = sum(
        1.0 if score(r["good"]) > score(r["bad"]) else 0.5 if score(r["good"]) == score(r["bad"]) else 0.0
        for r in scored
    )
    if accepted is None:
        return [share(wins, n), "-", "-"]
    bad = sum(accepted(r["bad"]) for r in scored)
    good = sum(accepted(r["good"]) for r in scored)
    return [share(wins, n), share(bad, n), share(good, n)]


def _combined(train: Sequence[dict[str, Any]]) -> tuple[Callable[[dict[str, float]], float], float]:
    """The old default's recipe fitted on `train`: standardize both signals, average, bar at <= 20% bad accepted."""
    answers = [r[side] for r in train for side in ("good", "bad")]
    v_mid, v_scale = (
        statistics.mean(a["log_odds"] for a in answers),
        statistics.pstdev(a["log_odds"] for a in answers),
    )
    a_mid, a_scale = (
        statistics.mean(a["fewshot"] for a in answers),
        statistics.pstdev(a["fewshot"] for a in answers),
    )

    def z(s: dict[str, float]) -> float:
        return ((s["log_odds"] - v_mid) / (v_scale or 1) + (s["fewshot"] - a_mid) / (a_scale or 1)) / 2

    bad = sorted((z(r["bad"]) for r in train), reverse=True)
    bar = bad[int(0.2 * len(bad))] + 1e-9  # accept strictly above the bad answer at the 20% mark
    return z, bar


def leave_one_out(scored: Sequence[dict[str, Any]]) -> list[str]:
    """The old default's figures, each pair judged by constants fitted on all the other pairs."""
    wins = bad_ok = good_ok = 0.0
    for i, row in enumerate(scored):
        z, bar = _combined([r for j, r in enumerate(scored) if j != i])
        good, bad = z(row["good"]), z(row["bad"])
        wins += 1.0 if good > bad else 0.5 if good == bad else 0.0
        bad_ok += bad >= bar
        good_ok += good >= bar
    n = len(scored)
    return [share(wins, n), share(bad_ok, n), share(good_ok, n)]


def json_critic(model: Any, rows: Sequence[dict[str, str]]) -> list[str]:
    from reflection_graph.critics import CritiqueRequest, LLMCritic

    critic = LLMCritic(model)
    scored = []
    for row in rows:
        pair = {
            side: critic.critique(CritiqueRequest(task=row["task"], candidate=row[side]))
            for side in ("good", "bad")
        }
        scored.append({side: {"s": c.score, "ok": float(c.is_acceptable)} for side, c in pair.items()})
    return figures(scored, lambda s: s["s"], lambda s: bool(s["ok"]))


def judge_rows(model: Any, rows: Sequence[dict[str, str]], label: str, args: Any) -> list[list[str]]:
    """The `JudgeCritic`'s readings on an instruction-tuned model, each nothing fitted (four calls a pair).

    - the comparison, asked in both orders (the default judge's ranking): the good answer ranks first when its
      chance of being the better one is above 1/2;
    - the verdict P(Yes): ranking by P(Yes); "accepted" is its sign alone (P(Yes) > 1/2);
    - the judge's acceptance of a revision judged against the other answer of the pair (the bad answer after the
      good one, the good one after the bad): P(Yes) > 1/2 and a win in both orders, or, when the orders split
      (a tie), a P(Yes) above the other answer's (issue 37: a tie is not a win).
    """
    from reflection_graph.critics import CritiqueRequest, JudgeCritic
    from reflection_graph.critics.judge import preference

    critic = JudgeCritic(model)
    scored = []
    for row in rows:
        requests = {side: CritiqueRequest(task=row["task"], candidate=row[side]) for side in ("good", "bad")}
        entry: dict[str, Any] = {side: {"p_yes": critic.p_yes(r)} for side, r in requests.items()}
        as_a, as_b = critic.orders(requests["good"], row["bad"])
        p = preference(as_a, as_b)
        entry["good"]["pref"], entry["bad"]["pref"] = p, 1 - p
        wins = {
            "good": as_a > 0 and as_b > 0,
            "bad": as_a < 0 and as_b < 0,
        }  # the bad one's orders: -as_b, -as_a
        tie = not (wins["good"] or wins["bad"])
        for side, other in (("good", "bad"), ("bad", "good")):
            won = entry[side]["p_yes"] > entry[other]["p_yes"] if tie else wins[side]
            entry[side]["ok"] = float(entry[side]["p_yes"] > 0.5 and won)
        scored.append(entry)
        if args.verbose:
            g, b = entry["good"], entry["bad"]
            print(
                f"  {row.get('id', ''):26s} P(good better) {p:4.2f}  P(Yes) {g['p_yes']:4.2f} vs {b['p_yes']:4.2f}",
                flush=True,
            )
    return [
        [
            label,
            "judge: comparison, both orders (default)",
            "no",
            *figures(scored, lambda s: s["pref"], None),
        ],
        [
            label,
            "judge: verdict P(Yes), its sign alone",
            "no",
            *figures(scored, lambda s: s["p_yes"], lambda s: s["p_yes"] > 0.5),
        ],
        [
            label,
            "judge: accepts a revision (P(Yes) > 1/2, not judged worse)",
            "no",
            "-",
            *figures(scored, lambda s: s["p_yes"], lambda s: s["ok"] > 0)[1:],
        ],
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sets", nargs="+", choices=sorted(SETS), default=["pairs", "holdout"])
    parser.add_argument(
        "--model",
        action="append",
        help="an embedded model spec (repeat for several, judged side by side): embedded:gemma-3-270m, "
        "embedded:qwen2.5-coder-1.5b, local:/path.gguf; default: embedded (the default model)",
    )
    parser.add_argument("--json-critic", action="store_true", help="also the JSON LLMCritic (slow)")
    parser.add_argument(
        "--threads", type=int, default=1, help="llama.cpp threads (1 is fastest on 2 shared cores)"
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="print every pair's signals")
    args = parser.parse_args(argv)
    if llama_cpp_missing():
        return 2
    from reflection_graph.models import critic_model

    root = Path(__file__).resolve().parents[1]
    start, table, names = time.perf_counter(), [], []
    for spec in args.model or ["embedded"]:
        found = embedded_model(spec, n_threads=args.threads)
        if found is None:
            return 2
        model = critic_model(found[0])
        model.warm_up()
        name = model.model or Path(model.resolved_model_path).name
        names.append(name)
        pooled = []
        for set_name in args.sets:
            path, author = SETS[set_name]
            rows = load_pairs(root / path)
            label = f"{set_name}: {path}, by {author}, {len(rows)} pairs; {name}"
            if model.uses_chat_template:
                table += judge_rows(model, rows, label, args)
                continue
            scored = []
            for row in rows:
                scored.append({side: signals(model, row, side) for side in ("good", "bad")})
                if args.verbose:
                    g, b = scored[-1]["good"], scored[-1]["bad"]
                    print(
                        f"  {row.get('id', ''):26s} likelihood {g['likelihood']:4.2f} vs "
                        f"{b['likelihood']:4.2f}  verdict {g['verdict']:4.2f} vs {b['verdict']:4.2f}",
                        flush=True,
                    )
            pooled.extend(scored)
            table += [
                [
                    label,
                    "likelihood (default)",
                    "no",
                    *figures(scored, lambda s: s["likelihood"], lambda s: s["likelihood_ok"] > 0),
                ],
                [
                    label,
                    "verdict P(Yes)",
                    "no",
                    *figures(scored, lambda s: s["verdict"], lambda s: s["verdict_ok"] > 0),
                ],
                [label, "likelihood, few-shot prompt", "no", *figures(scored, lambda s: s["fewshot"], None)],
            ]
            if args.json_critic:
                table.append([label, "JSON LLMCritic", "no", *json_critic(model, rows)])
        if pooled and len(pooled) > 2:
            label = f"all {len(pooled)} pairs above; {name}"
            table.append(
                [label, "old default (verdict + likelihood)", "leave-one-out", *leave_one_out(pooled)]
            )
    print_table(["set", "signal", "fitted", "good ranked above bad", "bad accepted", "good accepted"], table)
    print(
        f"\nEmbedded {', '.join(names)} (Q4_K_M), {args.threads} thread(s), {time.perf_counter() - start:.0f} s. "
        "Intervals: Wilson 95%. Ties count half."
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
