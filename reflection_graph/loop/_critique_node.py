"""The `critique` node: judge the pending candidates (the best of them makes the round), and stop the loop when a
rule applies (the strategy says which). With nothing pending for this round (generate stopped) it passes."""

from __future__ import annotations

import asyncio
import difflib
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.constants import TAG_NOSTREAM

from reflection_graph._runtime import (
    BudgetExhausted,
    Meter,
    RoleUsage,
    current_budget,
    merge_usage,
    sum_usage,
    with_total,
)
from reflection_graph.critics.base import CritiqueRequest
from reflection_graph.loop import _rules
from reflection_graph.loop._judge import Judged, ajudge, critique_history, judge
from reflection_graph.loop._step import Step, over_limit
from reflection_graph.settings import Settings
from reflection_graph.state import Round

__all__ = ["acritique", "critique", "diff"]


def diff(previous: str | None, current: str) -> str:
    """A round's change: the unified diff of `current` against the `previous` candidate ("" for the first)."""
    if previous is None:
        return ""
    lines = difflib.unified_diff(
        previous.splitlines(), current.splitlines(), "previous", "current", lineterm="", n=1
    )
    return "\n".join(lines)


def _request(state: Mapping[str, Any], settings: Settings, candidate: str) -> CritiqueRequest:
    return CritiqueRequest(
        task=state["task"],
        candidate=candidate,
        context=state.get("context"),
        iteration=int(state.get("iterations") or 0) + 1,
        score_threshold=settings.score_threshold,
        history=critique_history(list(state.get("trajectory") or []), settings.history_window),
    )


def _critic_config(config: RunnableConfig) -> RunnableConfig:
    """The node's config with the critic's model calls tagged `nostream` (LangGraph's `TAG_NOSTREAM`), so they stay
    off the `messages` stream: a written critique names only the faults the judge has confirmed, so its unchecked
    text (and a verdict's JSON or log-probability readings) is not shown; the critique comes in the node's update."""
    return {**config, "tags": [*(config.get("tags") or []), TAG_NOSTREAM]}


def _to_judge(step: Step, state: Mapping[str, Any]) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """The candidates pending for this round, or the update when there is nothing to judge (generate stopped,
    or this run's round limit is already reached)."""
    pending = state.get("rg_pending")
    iteration = int(state.get("iterations") or 0) + 1
    if state.get("stop_reason") is not None or not pending or pending["iteration"] != iteration:
        return [], {}
    over = over_limit(step, state)
    if over is not None:
        return [], over
    budget = current_budget()
    if budget is not None:  # the critiques share what the token budget has left
        budget.split(len(pending["samples"]))
    return pending["samples"], None


def _judged_sample(settings: Settings, sample: Mapping[str, Any], verdict: Judged) -> dict[str, Any]:
    """A judged candidate: its score, verdict, critique, echo and placeholder flags and the usage of its calls."""
    critique, part, _ = verdict
    assert critique is not None
    judged = critique.model_dump()
    accepted = _rules.accepts(critique.score, critique.is_acceptable, settings.score_threshold)
    # a reply cut by its limit or stopped in a loop is not a finished answer, whatever the critic said
    cut = bool(sample.get("cut", False))
    if cut:
        judged["issues"] = [_rules.cut_issue(sample["cut"]), *judged.get("issues", [])]
        judged["is_acceptable"], accepted = False, False
    # a reply that echoes its prompt or the review is no answer, whatever its critic (a checker it satisfies by
    # copying the review's words) said
    if sample.get("echo", False):
        judged["issues"] = [_rules.ECHO_ISSUE, *judged.get("issues", [])]
        judged["is_acceptable"], accepted = False, False
    return {
        "candidate": sample["candidate"],
        "score": critique.score,
        "accepted": accepted,
        "critique": judged,
        "echo": sample.get("echo", False),
        **({"cut": True} if cut else {}),
        "placeholder": sample.get("placeholder", False),
        **{key: sample[key] for key in ("tactic", "repeated") if key in sample},
        "usage": with_total({**sample.get("usage", {}), "critique": part}),
    }


def _critiqued(
    step: Step,
    state: Mapping[str, Any],
    judged: Sequence[tuple[dict[str, Any], Judged]],
    cancelled: Sequence[RoleUsage] = (),
) -> dict[str, Any]:
    """The state update of `critique`: one trajectory round holding the best sample (and all samples).

    Samples whose critique the budget refused, or that were cancelled, are left out of the round; the usage of
    their calls is kept."""
    spent = {"critique": sum_usage([*(part for _, (_, part, _) in judged), *cancelled])}
    failed = next(
        (e for _, (_, _, e) in judged if e is not None and not isinstance(e, BudgetExhausted)), None
    )
    if failed is not None:
        message = f"critique failed: {type(failed).__name__}: {failed}"
        return {"stop_reason": "error", "error": message, "rg_spent": spent}
    refused = [*(part for _, (_, part, e) in judged if e is not None), *cancelled]
    judged = [(sample, verdict) for sample, verdict in judged if verdict[2] is None]
    if not judged:
        return {"stop_reason": "budget", "rg_spent": spent}  # the step's budget says why
    settings, trajectory = step.settings, list(state.get("trajectory") or [])
    iteration = int(state.get("iterations") or 0) + 1
    samples = [_judged_sample(settings, sample, verdict) for sample, verdict in judged]
    chosen = samples[_rules.best_sample(samples)]
    seen = [id(sample) for sample, _ in judged]
    unjudged = [s.get("usage") or {} for s in state["rg_pending"]["samples"] if id(s) not in seen]
    record: Round = {
        "iteration": iteration,
        "candidate": chosen["candidate"],
        "critique": chosen["critique"],
        "score": chosen["score"],
        "accepted": chosen["accepted"],
        "diff": diff(trajectory[-1]["candidate"] if trajectory else None, chosen["candidate"]),
        "usage": merge_usage(
            [*(s["usage"] for s in samples), *unjudged, *({"critique": r} for r in refused)]
        ),
        "job": state["rg_pending"]["job"],
        "echo": chosen["echo"],
        "placeholder": chosen["placeholder"],
    }
    if chosen.get("cut"):
        record["cut"] = True
    if "tactic" in chosen:
        record["tactic"] = chosen["tactic"]
    if "repeated" in chosen:
        record["repeated"] = chosen["repeated"]
    if len(samples) > 1:
        record["samples"] = samples
    update: dict[str, Any] = {"trajectory": [record], "iterations": iteration}
    stop = _rules.stop_reason(
        settings, trajectory, iteration, chosen["critique"], chosen["accepted"], step.strategy.stop_rules
    )
    if stop is not None:
        update["stop_reason"] = stop
    return update


def _ends_search(settings: Settings, sample: Mapping[str, Any], verdict: Judged) -> bool:
    """A failed critique ends this round's search, and so does (with a threshold) a passing sample; a critique
    the budget refused does not (the others already admitted finish), nor does a cut sample, whatever its score
    (it is never accepted, `_judged_sample`)."""
    critique, _, error = verdict
    if error is not None:
        return not isinstance(error, BudgetExhausted)
    return (
        critique is not None
        and not sample.get("cut")
        and settings.score_threshold is not None
        and critique.score >= settings.score_threshold
    )


def critique(step: Step, state: Mapping[str, Any], config: RunnableConfig) -> dict[str, Any]:
    """Judge the pending candidates one after another (stopping at the first that passes a set threshold)."""
    pending, skip = _to_judge(step, state)
    if skip is not None:
        return skip
    judged: list[tuple[dict[str, Any], Judged]] = []
    config = _critic_config(config)
    for sample in pending:
        verdict = judge(step.roles.critic, _request(state, step.settings, sample["candidate"]), config)
        judged.append((sample, verdict))
        if _ends_search(step.settings, sample, verdict):
            break
    return _critiqued(step, state, judged)


async def acritique(step: Step, state: Mapping[str, Any], config: RunnableConfig) -> dict[str, Any]:
    """Async twin of `critique`: the candidates are judged concurrently; once one passes a set threshold (or
    fails), the critiques still running are cancelled, and awaited, so that no critic's work outlives the node
    (a test critic's processes and directories are gone when the node returns or is cancelled)."""
    pending, skip = _to_judge(step, state)
    if skip is not None:
        return skip
    meters = [Meter() for _ in pending]
    config = _critic_config(config)

    async def one(index: int) -> tuple[int, Judged]:
        request = _request(state, step.settings, pending[index]["candidate"])
        return index, await ajudge(step.roles.critic, request, config, meters[index])

    tasks = [asyncio.ensure_future(one(i)) for i in range(len(pending))]
    done: dict[int, Judged] = {}
    try:
        for finished in asyncio.as_completed(tasks):
            index, verdict = await finished
            done[index] = verdict
            if _ends_search(step.settings, pending[index], verdict):
                break
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    cancelled = [m.usage for i, m in enumerate(meters) if i not in done]
    return _critiqued(step, state, [(pending[i], done[i]) for i in sorted(done)], cancelled)
