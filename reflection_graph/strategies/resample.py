"""The `resample` strategy: later rounds draw fresh drafts of the task instead of revising, and the critic picks.

Round 1 is the loop's: `n_drafts` first drafts (the first the plain greedy call). While no candidate is accepted,
each later round draws `n_revisions` new drafts from the very same prompt at the sampling temperature, each with
a seed no earlier draft of the run used (draft k of the run has seed + k), and the critic judges them; the run
stops when one is accepted or after `max_iterations` rounds, and `finalize` returns the best candidate of all.
No critique is shown to the model: a checker (tests, instruction rules) selects, it does not advise. This is
best-of-N that stops as soon as the checker is satisfied, so a problem the first draft solves costs one call.

It is the code focus's default with a `CodeTestCritic` (reflection_graph/loop/_code.py says why: on
HumanEval, fresh samples found the passing function more often than revisions shown the failing tests, at
fewer tokens). It forces the plateau stops off (`patience=None`, `stop_on_no_new_issues=False`: a fresh draft
owes nothing to the last one's score), also against a run's `Context`, and refuses `human_review` (a person's
feedback would reach no prompt). It makes the loop's calls, so the loop's `max_model_calls` bounds it.
"""

from __future__ import annotations

from typing import ClassVar

from reflection_graph.strategies.base import Strategy

__all__ = ["Resample"]


class Resample(Strategy):
    name = "resample"
    description = "draws fresh drafts each round until accepted or the limit; the critic picks"
    forces = {"patience": None, "stop_on_no_new_issues": False}
    fresh_drafts: ClassVar[bool] = True

    def check(self, *, human_review: bool) -> None:
        if human_review:
            raise ValueError(
                "strategy='resample' does not take human_review (no prompt shows feedback); "
                "use strategy='loop' to review rounds"
            )
