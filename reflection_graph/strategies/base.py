"""`Strategy`: what a way of running the rounds decides, in one place. The loop's answers are the defaults.

The graph's nodes (reflection_graph/loop/) are the same for every strategy: `generate` drafts or revises,
`critique` judges, `finalize` picks the answer. A strategy decides the rest, and the nodes ask it; no node tests a
strategy's name:
- `forces`: the settings it fixes, applied when the graph is built and again to every run's overrides
  (`force`, called by `reflection_graph.loop._overrides.Overrides.for_run`), so a run's `Context` cannot undo
  them;
- `check`: the build-time options it refuses (e.g. `human_review` where no round waits for a person);
- `wire`: its nodes and edges after `critique` (what `get_graph()` draws, and Studio shows), and
  `steps_per_round`, the graph steps one round takes (the compiled graph's recursion limit is derived from it);
- `state`: a TypedDict of the state keys its own nodes keep (none for the loop); `generate` may read them;
- the questions the nodes ask during a run: `revise_from` (what the next revision starts from),
  `last_revision` (whether a revision is returned without a critique), `stop_rules` (which of the stop rules
  of reflection_graph/loop/_rules.py apply after a critique), and `drafts_afresh` with `first_seed` (whether a
  later round drafts afresh instead of revising, and the seeds its drafts take);
- `tactics`: what makes the next candidate when a revision returns its input unchanged (whitespace folded):
  such a revision is no new candidate, is not judged and is not counted as a round; the next tactic is tried in
  the same model-call slot (each slot has `1 + retries` attempts, the bound `max_model_calls` already counts);
- `max_model_calls`: the most model calls one run can make with given settings. The default follows from the
  answers above (the loop's calls, plus the revision `last_revision` returns uncritiqued); a strategy that calls
  the models another way says so by overriding it.

Adding a strategy is one module with a `Strategy` subclass and one line in reflection_graph/strategies/__init__.py
(or `reflection_graph.strategies.register(MyStrategy())` from your own code).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from reflection_graph._runtime import max_model_calls
from reflection_graph.settings import Settings
from reflection_graph.strategies import _edges

__all__ = ["ALL_STOP_RULES", "TACTICS", "StopRule", "Strategy", "Tactic"]

StopRule = Literal["accept", "limit", "plateau"]
"""The stop rules after a critique: the critic accepts, the round limit, no progress (score or issues)."""
ALL_STOP_RULES: frozenset[StopRule] = frozenset({"accept", "limit", "plateau"})

Tactic = Literal["revise", "rule", "sampled_revision", "fresh_draft"]
"""What makes a revision round's candidate: the reviser shown the critique (greedy), a rule that fixes text the
critic named (a template placeholder; no model call), the reviser sampled warmer with a seed of its own, or a fresh
draft of the task that is told the critique's faults."""
TACTICS: tuple[Tactic, ...] = ("revise", "rule", "sampled_revision", "fresh_draft")
"""Every tactic, in the loop's default order."""


class Strategy:
    """A way of running the rounds. Subclass it and override what differs from the loop (the defaults here).

    Attributes:
        name: the value of the `strategy` setting that selects it.
        description: one line for the docs.
        forces: settings this strategy fixes whatever the caller or a run asks (e.g. `{"patience": None}`).
        stop_rules: which stop rules apply after a critique: "accept" (the critic accepts), "limit" (the round
            limit `max_iterations`), "plateau" (no progress). `min_iterations` always holds first.
        state: a TypedDict of the state keys the strategy's own nodes keep, or None.
        fresh_drafts: later rounds draw `n_revisions` new drafts of the task (the first draft's prompt, no
            critique shown) instead of revising (`drafts_afresh`, which a strategy may override to choose per
            round); their seeds come from `first_seed`.
        tactics: the order in which a revision round's tactics are tried while each returns its input unchanged
            (`Tactic`; the first is the greedy revision). A tactic that does not apply (no rule fixes this
            candidate) is passed over.
    """

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    forces: ClassVar[Mapping[str, Any]] = {}
    stop_rules: ClassVar[frozenset[StopRule]] = ALL_STOP_RULES
    state: ClassVar[type | None] = None
    fresh_drafts: ClassVar[bool] = False
    tactics: ClassVar[tuple[Tactic, ...]] = TACTICS

    # ---------------------------------------------------------------------------------------- build time

    def force(self, settings: Settings) -> Settings:
        """`settings` with what this strategy forces (validated again); the same settings when it forces nothing
        or they already hold."""
        changes = {k: v for k, v in self.forces.items() if getattr(settings, k) != v}
        return settings.forced(changes) if changes else settings

    def check(self, *, human_review: bool) -> None:
        """Refuse build options this strategy cannot honour (`ValueError` naming the fix)."""

    def wire(self, builder: Any, *, human_review: bool) -> None:
        """Add the nodes and edges after `critique` to `builder` (a `StateGraph` with `generate`, `critique` and
        `finalize`): the loop's router back to `generate` or on to `finalize`, behind a `review` node (an
        `interrupt`) when `human_review` is on."""
        _edges.loop_edges(builder, human_review=human_review)

    def steps_per_round(self, *, human_review: bool) -> int:
        """Graph steps of one round (generate, critique, and the nodes `wire` adds to it)."""
        return 3 if human_review else 2

    # ------------------------------------------------------------------------------------------- run time

    def revise_from(self, state: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
        """The candidate the next revision starts from and the critique it answers: the last round's."""
        last = (state.get("trajectory") or [])[-1]
        return last["candidate"], dict(last["critique"] or {})

    def drafts_afresh(self, iteration: int) -> bool:
        """True when round `iteration` (2 or later) draws fresh drafts of the task instead of revising: every later
        round when `fresh_drafts` is set, none otherwise."""
        return self.fresh_drafts

    def first_seed(self, settings: Settings, iteration: int) -> int:
        """The sample index (seed offset) of the first reply made for round `iteration`. Revisions start again
        at 0 each round (the greedy revision, then warmer ones): each revises another candidate. Fresh drafts
        (`drafts_afresh`) of a later round come after every draft of the rounds before it, so no seed repeats."""
        if iteration <= 1 or not self.drafts_afresh(iteration):
            return 0
        earlier = sum(1 for before in range(2, iteration) if self.drafts_afresh(before))
        return settings.n_drafts + earlier * settings.n_revisions

    def last_revision(self, settings: Settings, iteration: int) -> bool:
        """True when the revision made for round `iteration` is returned without a critique (so it may be made
        past the round limit, and ends the run). The loop critiques every revision."""
        return False

    def max_model_calls(self, settings: Settings, *, glean: bool = False, method_fallbacks: int = 0) -> int:
        """The most model calls one run with `settings` (as forced) and an LLM critic can make; `glean`: the run
        starts from a given candidate. A true bound: the tests run every strategy against it.

        The default is the loop's count (`reflection_graph.max_model_calls`: drafts, `n_revisions` per later
        round, one critique per candidate, each retried), plus the `n_revisions` revisions made after the last
        round when `last_revision` returns them without a critique (`self_refine`).
        """
        attempts = 1 + settings.retries
        bound = max_model_calls(
            settings.max_iterations,
            retries=settings.retries,
            parse_retries=settings.parse_retries,
            n_drafts=settings.n_drafts,
            n_revisions=settings.n_revisions,
            glean=glean,
            method_fallbacks=method_fallbacks,
        )
        if self.last_revision(settings, settings.max_iterations + 1):
            bound += settings.n_revisions * attempts
        return bound

    def __repr__(self) -> str:
        return f"<strategy {self.name!r}>"
