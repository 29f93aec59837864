"""The `finalize` node: save this run's lessons (with memory) and build the outputs: the answer (`select`), its
critique, the stop reason, the rounds and the usage totals (summed once, here, from the rounds).

The answer is a candidate as it was judged: nothing rewrites it here. A rule that fixes text (a template
placeholder the task did not ask for) is a tactic of the loop whose candidate the critic judges like any other
(reflection_graph/_text/_rule_revision.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from langchain_core.runnables import RunnableConfig

from reflection_graph._runtime import run_usage
from reflection_graph.loop import _rules
from reflection_graph.loop._step import Step
from reflection_graph.state import Round

__all__ = ["afinalize", "finalize"]


def _lessons_to_save(step: Step, state: Mapping[str, Any]) -> list[str]:
    """This run's lessons for the Reflexion memory (none without memory or rounds)."""
    if step.memory is None or not state.get("trajectory"):
        return []
    critiques = [r["critique"] for r in state.get("trajectory") or [] if r["critique"]]
    return list(step.memory.lessons_from_critiques(state["task"], critiques))


def _outputs(step: Step, state: Mapping[str, Any], failure: BaseException | None) -> dict[str, Any]:
    """The graph's outputs: the answer (`select`), its critique, the stop reason, the rounds and the usage."""
    trajectory: list[Round] = list(state.get("trajectory") or [])
    memory_error = f"memory save failed: {type(failure).__name__}: {failure}" if failure else None
    error = "; ".join(e for e in (state.get("error"), memory_error) if e) or None
    update: dict[str, Any] = {
        "stop_reason": state.get("stop_reason") or "max_iterations",
        "error": error,
        "iterations": int(state.get("iterations") or 0),
        "usage": run_usage(state),
    }
    pending = state.get("rg_pending")
    unjudged = (
        pending is not None and pending["iteration"] > update["iterations"] and pending["job"] == "revise"
    )
    if pending is not None and unjudged and step.strategy.last_revision(step.settings, pending["iteration"]):
        update["candidate"] = pending["samples"][0]["candidate"]  # a last revision, returned unjudged
        update["critique"] = trajectory[-1]["critique"] if trajectory else None
    elif trajectory:
        chosen = _rules.select_round(trajectory, step.settings.select)
        update["candidate"], update["critique"] = chosen["candidate"], chosen["critique"]
    elif pending is not None and pending["samples"]:  # a first critique failed: the best unjudged candidate
        samples = pending["samples"]
        update["candidate"] = samples[_rules.best_sample(samples)]["candidate"]
        update["critique"] = None
    else:
        update["candidate"], update["critique"] = state.get("candidate") or "", None
    if "trajectory" not in state:
        update["trajectory"] = []
    return update


def finalize(step: Step, state: Mapping[str, Any], config: RunnableConfig) -> dict[str, Any]:
    """Save this run's lessons (when memory is on) and build the outputs."""
    lessons = _lessons_to_save(step, state)
    failure: Exception | None = None
    try:
        if lessons:
            step.memory.save(state["task"], lessons, store=step.store)
    except Exception as exc:  # never lose the run's answer for a lesson
        failure = exc
    return _outputs(step, state, failure)


async def afinalize(step: Step, state: Mapping[str, Any], config: RunnableConfig) -> dict[str, Any]:
    """Async twin of `finalize`."""
    lessons = _lessons_to_save(step, state)
    saving = [step.memory.asave(state["task"], lessons, store=step.store)] if lessons else []
    results = await asyncio.gather(*saving, return_exceptions=True)
    return _outputs(step, state, next((r for r in results if isinstance(r, Exception)), None))
