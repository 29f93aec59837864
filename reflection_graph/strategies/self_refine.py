"""The `self_refine` strategy: one Self-Refine pass (Madaan et al.): draft, one critique, and (unless accepted)
one refine that is returned without a second critique.

It forces one round (`max_iterations=1`, `min_iterations=1`), so a run's `Context(max_iterations=...)` cannot turn
it into a loop; only the accept rule stops it after its critique, and its one revision is the last.
"""

from __future__ import annotations

from reflection_graph.settings import Settings
from reflection_graph.strategies.base import Strategy

__all__ = ["SelfRefine"]


class SelfRefine(Strategy):
    name = "self_refine"
    description = "one draft-feedback-refine pass"
    forces = {"max_iterations": 1, "min_iterations": 1}
    stop_rules = frozenset({"accept"})

    def last_revision(self, settings: Settings, iteration: int) -> bool:
        """The refine after the single critique is returned as it is."""
        return iteration > settings.max_iterations
