"""The rounds of each evaluated record: their external scores (with a cache of costly ones) and the figures over them.

A record's rounds come from its batch entry's trajectory; each round's candidate is scored by the eval's scorer
(the ground truth). The figures (`RoundStats` per round, first/selected/last/oracle, flips, the critic's
agreement with the scorer, the recommendation) are plain functions of those scores.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from reflection_graph.loop import best_index
from reflection_graph.runners._jsonl import append_lines, read_objects
from reflection_graph.runners._records import BatchRecord
from reflection_graph.runners._summary import mean
from reflection_graph.runners.scorers import Scorer


def _mean(values: Sequence[float]) -> float:
    """`mean`, with 0.0 for no values (every figure here covers the same scored records)."""
    return mean(values) or 0.0


@dataclass
class RoundStats:
    """The figures of one round over every scored record (one row of ``summary.csv``).

    Attributes:
        round: 1-based round number (1 = the first draft).
        records: records scored.
        ran: records that actually ran this round (the others stopped earlier and count their last round).
        mean_score: mean external score of the round's candidate.
        pass_share: share of records whose round candidate scores at or above the pass mark.
        mean_selected: mean external score of what the graph returns with ``max_iterations`` = this round.
        selected_pass_share: pass share of that answer.
        cum_tokens: mean cumulative tokens (in + out) per record up to this round.
        cum_seconds: mean cumulative model seconds per record up to this round.
        hit_budget: records stopped by a token budget by this round: the report's per-record `budget` (its
            rounds are replayed only while their cumulative tokens fit in it) or the run's own
            (`stop_reason == "budget"`).
    """

    round: int
    records: int
    ran: int
    mean_score: float
    pass_share: float
    mean_selected: float
    selected_pass_share: float
    cum_tokens: float
    cum_seconds: float
    hit_budget: int = 0

    COLUMNS: ClassVar[tuple[str, ...]] = (
        "round",
        "ran",
        "mean score",
        "pass share",
        "selected",
        "sel. pass",
        "cum tokens",
        "cum s",
        "hit budget",
    )
    """The headers of `cells`, for the printed and the plain-text tables."""

    def cells(self) -> tuple[str, ...]:
        """This round as table cells, in `COLUMNS` order."""
        return (
            str(self.round),
            f"{self.ran}/{self.records}",
            f"{self.mean_score:.3f}",
            f"{self.pass_share:.0%}",
            f"{self.mean_selected:.3f}",
            f"{self.selected_pass_share:.0%}",
            f"{self.cum_tokens:.0f}",
            f"{self.cum_seconds:.1f}",
            str(self.hit_budget),
        )


class ScoreCache:
    """Costly scores by a digest of (scorer, record, candidate), appended to ``scores.jsonl``."""

    def __init__(self, path: Path, enabled: bool) -> None:
        self.path = path
        self.enabled = enabled
        self.known: dict[str, float] = {}
        if enabled:
            entries, _ = read_objects(path)
            for entry in entries:
                if isinstance(entry.get("k"), str) and isinstance(entry.get("score"), (int, float)):
                    self.known[entry["k"]] = float(entry["score"])

    @staticmethod
    def digest(scorer: Scorer, record: Mapping[str, Any], candidate: str) -> str:
        blob = json.dumps(
            [scorer.spec, dict(record), candidate], sort_keys=True, ensure_ascii=False, default=str
        )
        return hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()

    def add(self, digest: str, score: float) -> None:
        if not self.enabled:
            return
        self.known[digest] = score
        append_lines(self.path, [json.dumps({"k": digest, "score": score})])


def _usage_of(usage: Any) -> tuple[int, int, float]:
    total = usage.get("total") if isinstance(usage, dict) else None
    if not isinstance(total, dict):
        return 0, 0, 0.0
    return (
        int(total.get("input_tokens", 0) or 0),
        int(total.get("output_tokens", 0) or 0),
        float(total.get("seconds", 0.0) or 0.0),
    )


@dataclass
class Round:
    candidate: str
    critic_score: float | None
    critic_accepted: bool | None
    tokens_in: int
    tokens_out: int
    seconds: float
    score: float = 0.0


@dataclass
class Scored:
    record: BatchRecord
    entry: dict[str, Any]
    rounds: list[Round]
    selected: int


def rounds_of(entry: dict[str, Any]) -> tuple[list[Round], int]:
    """The rounds of one ``ok`` batch entry and the index of the returned answer among them."""
    rounds: list[Round] = []
    for step in entry.get("trajectory") or []:
        if not isinstance(step, dict):
            continue
        tin, tout, secs = _usage_of(step.get("usage"))
        score = step.get("score")
        rounds.append(
            Round(
                candidate=str(step.get("candidate") or ""),
                critic_score=float(score) if isinstance(score, (int, float)) else None,
                critic_accepted=bool(step.get("accepted")),
                tokens_in=tin,
                tokens_out=tout,
                seconds=secs,
            )
        )
    answer = entry.get("candidate")
    for index in range(len(rounds) - 1, -1, -1):  # ties go to the later round, as in select="best"
        if rounds[index].candidate == answer:
            return rounds, index
    # the answer was never critiqued (self_refine's final revision, or no round at all): its own unjudged round
    all_in, all_out, all_secs = _usage_of(entry.get("usage"))
    rounds.append(
        Round(
            candidate=str(answer or ""),
            critic_score=None,
            critic_accepted=None,
            tokens_in=max(all_in - sum(r.tokens_in for r in rounds), 0),
            tokens_out=max(all_out - sum(r.tokens_out for r in rounds), 0),
            seconds=max(all_secs - sum(r.seconds for r in rounds), 0.0),
        )
    )
    return rounds, len(rounds) - 1


async def score_record(scorer: Scorer, cache: ScoreCache, record: BatchRecord, rounds: list[Round]) -> None:
    data = record.as_dict()
    done: dict[str, float] = {}
    for item in rounds:
        if item.candidate in done:
            item.score = done[item.candidate]
            continue
        digest = cache.digest(scorer, data, item.candidate) if cache.enabled else ""
        if digest and digest in cache.known:
            value = cache.known[digest]
        else:
            value = await scorer.ascore(data, item.candidate)
            if digest:
                cache.add(digest, value)
        item.score = done[item.candidate] = value


def _select_upto(rounds: list[Round], k: int, select: str, actual: int) -> int:
    """The index of the answer the graph returns when it may run `k` rounds."""
    n = min(k, len(rounds))
    if n >= len(rounds):
        return actual
    if select == "last" or rounds[n - 1].critic_score is None:
        return n - 1
    return best_index([r.critic_score for r in rounds[:n]])


def within_budget(rounds: Sequence[Round], budget: int | None) -> int:
    """How many leading rounds fit in `budget` tokens (their cumulative tokens); all without a budget. The first
    round always counts: a budgeted run keeps its first candidate."""
    if budget is None:
        return len(rounds)
    used = 0
    for index, r in enumerate(rounds):
        used += r.tokens_in + r.tokens_out
        if used > budget:
            return max(index, 1)
    return len(rounds)


def hit_budget(s: Scored, budget: int | None) -> bool:
    """True when a token budget stopped this record: the run's own, or the report's cap."""
    return s.entry.get("stop_reason") == "budget" or within_budget(s.rounds, budget) < len(s.rounds)


def round_stats(
    scored: list[Scored], pass_mark: float, select: str, budget: int | None = None
) -> list[RoundStats]:
    kept = {id(s): within_budget(s.rounds, budget) for s in scored}
    depth = max(kept.values(), default=0)
    stats: list[RoundStats] = []
    for k in range(1, depth + 1):
        scores, selected, tokens, seconds = [], [], [], []
        ran = hit = 0
        for s in scored:
            rounds = s.rounds[: kept[id(s)]]
            n = min(k, len(rounds))
            ran += len(rounds) >= k
            hit += len(rounds) <= k and hit_budget(s, budget)
            actual = _select_upto(s.rounds, len(rounds), select, s.selected)  # what a capped run returns
            scores.append(rounds[n - 1].score)
            selected.append(rounds[_select_upto(rounds, k, select, actual)].score)
            tokens.append(float(sum(r.tokens_in + r.tokens_out for r in rounds[:n])))
            seconds.append(sum(r.seconds for r in rounds[:n]))
        stats.append(
            RoundStats(
                round=k,
                records=len(scored),
                ran=ran,
                mean_score=_mean(scores),
                pass_share=_mean([float(v >= pass_mark) for v in scores]),
                mean_selected=_mean(selected),
                selected_pass_share=_mean([float(v >= pass_mark) for v in selected]),
                cum_tokens=round(_mean(tokens), 1),
                cum_seconds=round(_mean(seconds), 3),
                hit_budget=hit,
            )
        )
    return stats


def comparison(scored: list[Scored], pass_mark: float) -> dict[str, dict[str, float | None]]:
    picks: dict[str, Callable[[Scored], float]] = {
        "first": lambda s: s.rounds[0].score,
        "selected": lambda s: s.rounds[s.selected].score,
        "last": lambda s: s.rounds[-1].score,
        "oracle": lambda s: max(r.score for r in s.rounds),
    }
    out: dict[str, dict[str, float | None]] = {}
    for name, pick in picks.items():
        values = [pick(s) for s in scored]
        out[name] = {
            "mean_score": _mean(values) if values else None,
            "pass_share": _mean([float(v >= pass_mark) for v in values]) if values else None,
        }
    return out


def flips(scored: list[Scored], pass_mark: float) -> dict[str, int]:
    right_to_wrong = wrong_to_right = 0
    for s in scored:
        first, chosen = s.rounds[0].score >= pass_mark, s.rounds[s.selected].score >= pass_mark
        right_to_wrong += first and not chosen
        wrong_to_right += chosen and not first
    return {"right_to_wrong": right_to_wrong, "wrong_to_right": wrong_to_right}


def agreement(scored: list[Scored], pass_mark: float) -> dict[str, float | int | None]:
    tp = fp = fn = tn = 0
    for s in scored:
        for r in s.rounds:
            if r.critic_accepted is None:
                continue
            passed = r.score >= pass_mark
            if r.critic_accepted:
                tp += passed
                fp += not passed
            else:
                fn += passed
                tn += not passed
    return {
        "precision": round(tp / (tp + fp), 4) if tp + fp else None,
        "recall": round(tp / (tp + fn), 4) if tp + fn else None,
        "tp": tp,
        "fp": fp,
        "fn": fn,
        "tn": tn,
    }


def recommend(rounds: list[RoundStats]) -> tuple[int | None, str]:
    if not rounds:
        return None, "Nothing was scored, so there is nothing to recommend."
    first = rounds[0]
    if len(rounds) == 1:
        return None, (
            f"Every record stopped after its first round (mean score {first.mean_selected:.3f}), so this run "
            "cannot show whether more rounds pay off."
        )
    best: tuple[float, RoundStats] | None = None
    for r in rounds[1:]:
        gain = r.mean_selected - first.mean_selected
        extra = max(r.cum_tokens - first.cum_tokens, 1.0)
        if gain > 1e-9 and (best is None or gain / extra > best[0]):
            best = (gain / extra, r)
    if best is None:
        top = max(rounds[1:], key=lambda r: (r.mean_selected, -r.round))
        return None, (
            f"Reflection does not pay off here: no extra round raised the mean score above the first draft's "
            f"{first.mean_selected:.3f} (best later: {top.mean_selected:.3f} at max_iterations={top.round}); "
            f"use max_iterations=1 and save {rounds[-1].cum_tokens - first.cum_tokens:.0f} tokens per record."
        )
    per_k, r = best
    return r.round, (
        f"Use max_iterations={r.round}: the mean score rises from {first.mean_selected:.3f} to "
        f"{r.mean_selected:.3f} (+{r.mean_selected - first.mean_selected:.3f}) for "
        f"{r.cum_tokens - first.cum_tokens:.0f} extra tokens per record "
        f"({per_k * 1000:.3f} score points per 1,000 extra tokens), the best gain per token of the rounds run."
    )


def ok_rows(s: Scored, pass_mark: float, budget: int | None = None) -> list[dict[str, Any]]:
    """The ``rounds.jsonl`` rows of a scored record: one per round, with cumulative figures (and, with a
    `budget`, whether the record hit it and whether the round is past it)."""
    rows = []
    kept, hit = within_budget(s.rounds, budget), hit_budget(s, budget)
    cum_in = cum_out = 0
    cum_s = 0.0
    for index, r in enumerate(s.rounds):
        cum_in += r.tokens_in
        cum_out += r.tokens_out
        cum_s += r.seconds
        rows.append(
            {
                "status": "ok",
                "id": s.record.id,
                "line": s.record.line,
                "round": index + 1,
                "score": r.score,
                "passed": r.score >= pass_mark,
                "critic_score": r.critic_score,
                "critic_accepted": r.critic_accepted,
                "selected": index == s.selected,
                "last": index == len(s.rounds) - 1,
                "stop_reason": s.entry.get("stop_reason"),
                "tokens_in": r.tokens_in,
                "tokens_out": r.tokens_out,
                "tokens": r.tokens_in + r.tokens_out,
                "seconds": round(r.seconds, 3),
                "cum_tokens_in": cum_in,
                "cum_tokens_out": cum_out,
                "cum_tokens": cum_in + cum_out,
                "cum_seconds": round(cum_s, 3),
                "hit_budget": hit,
                "over_budget": index >= kept,
                "task": s.record.task,
                "candidate": r.candidate,
            }
        )
    return rows


def error_row(record_id: Any, line: int, error_type: str, message: str, task: Any = None) -> dict[str, Any]:
    """The ``rounds.jsonl`` row of a record that was not scored (bad input, a failed graph, the scorer)."""
    row: dict[str, Any] = {"status": "error", "id": record_id, "line": line, "error_type": error_type}
    row["error"] = message
    if task is not None:
        row["task"] = task
    return row
