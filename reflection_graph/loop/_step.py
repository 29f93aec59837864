"""What every node of a run works with (`Step`), and the round-limit check `generate` and `critique` share."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from reflection_graph.loop._overrides import Roles
from reflection_graph.settings import Settings
from reflection_graph.strategies import Strategy

__all__ = ["Step", "over_limit"]


@dataclass(frozen=True)
class Step:
    """This run's settings and roles, the strategy, the trigger, the memory and the store it uses."""

    settings: Settings
    roles: Roles
    strategy: Strategy
    should_refine: Callable[[Mapping[str, Any]], bool] | None
    memory: Any
    store: Any


def over_limit(step: Step, state: Mapping[str, Any]) -> dict[str, Any] | None:
    """Stop before a round when this run's `max_iterations` is already reached (a resumed run may lower it),
    unless the strategy returns that round's revision without a critique."""
    settings, done = step.settings, int(state.get("iterations") or 0)
    if done < settings.max_iterations or step.strategy.last_revision(settings, done + 1):
        return None
    if done > settings.max_iterations:
        warnings.warn(
            f"the stored run already ran {done} rounds, past max_iterations={settings.max_iterations}: "
            "it stops here without another round",
            stacklevel=2,
        )
    return {"stop_reason": "max_iterations"}
