"""The settings a verifier critic brings: fresh drafts of the task, the verifier picking.

A verifier counts checks (`Critique.checks_total`: tests, instruction checkers), so it can tell which of several
drafts is best without a judge's opinion. With one, the graph defaults to `VERIFIER_DEFAULTS` for every field its
caller did not set: one first draft (the plain greedy call), then, while a check fails, up to 2 more rounds of 2
fresh drafts of the same task at the sampling temperature (`strategy="resample"`, each draft with a new seed), the
verifier picking the best. 5 generations at most, 1 when the first draft passes. Which setups get them:

- `focus="code"` with a `CodeTestCritic`. On HumanEval/40-82 (Qwen2.5-Coder-1.5B, run 8391a4e8 of
  bench/README.md), where the greedy reply failed a visible example, fresh samples held a passing function more
  often than revisions shown the failing tests did (best-of-4 by the visible examples solved 24 of 26 measured
  problems, the revising loop 22), and the revisions found no passing function the samples missed;
- an `InstructionCritic`, whatever the focus. Chosen on IFBench's first 15 development prompts of the fixed order
  (run 38f5b937 at 7a95cc0, Qwen): instructions followed, raw 2 of 16, the revising loop 2, resample 4; prompts 16
  and later are the held-out check of that choice (docs/benchmarks.md).

`strategy="loop"` (or any setting given) overrides them. With `human_review` they are not applied: a person
reviews rounds of revisions, which fresh drafts do not show.
"""

from __future__ import annotations

from typing import Any

from reflection_graph.settings import Settings

__all__ = ["VERIFIER_DEFAULTS", "setup_defaults"]

VERIFIER_DEFAULTS: dict[str, Any] = {
    "strategy": "resample",
    "n_drafts": 1,
    "n_revisions": 2,
    "max_iterations": 3,
}
"""The settings a verifier critic defaults to (see the module docstring for the measurements behind them)."""


def setup_defaults(critic: Any, settings: Settings, *, human_review: bool = False) -> Settings:
    """`settings` with `VERIFIER_DEFAULTS` under the fields its caller did not set, when the critic is a verifier
    that gains from fresh drafts (a `CodeTestCritic` under `focus="code"`, an `InstructionCritic`) and no person
    reviews rounds; else `settings` as they are."""
    from reflection_graph.critics.code_tests import CodeTestCritic
    from reflection_graph.critics.instructions import InstructionCritic

    if human_review:
        return settings
    if isinstance(critic, InstructionCritic) or (
        settings.focus == "code" and isinstance(critic, CodeTestCritic)
    ):
        return settings.with_defaults(VERIFIER_DEFAULTS)
    return settings
