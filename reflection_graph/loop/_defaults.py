"""What a setup defaults to, in one place: the critic a model judges with when none is named, and the settings a
verifier critic brings.

**The default critic.** With no critic given, and neither critic guidelines nor a critique prompt override, the
generator's model judges with the critic its facts name (`describe(model).default_critic`, from the profile of an
embedded model): the embedded model reads its token probabilities (see bench/bench_critic.py), a `JudgeCritic` on
an instruction-tuned GGUF (the bundled Qwen2.5-Coder, or a `local:` file with a chat template), whose comparison
ranks good above bad where its JSON scores do not, a `LogprobCritic` on a base model (Gemma 3 270M), whose answer
likelihood ranks far better than its JSON verdicts. Every other case gets an `LLMCritic` (`default_critic`).

**The verifier defaults.** A verifier counts checks (`Critique.checks_total`: tests, instruction checkers), so it
can tell which of several drafts is best without a judge's opinion. With one, the graph defaults to
`VERIFIER_DEFAULTS` for every field its caller did not set: one first draft (the plain greedy call), then, while a
check fails, up to 2 more rounds of 2 fresh drafts of the same task at the sampling temperature
(`strategy="resample"`, each draft with a new seed), the verifier picking the best. 5 generations at most, 1 when
the first draft passes. A critic says whether it is a verifier, and under which focus, itself (`verifier`, `focus`
in reflection_graph/critics/base.py); no critic class is named here. The package's verifiers:

- `CodeTestCritic` (`focus="code"`: under the code focus). On HumanEval/40-82 (Qwen2.5-Coder-1.5B, run 8391a4e8 of
  bench/README.md), where the greedy reply failed a visible example, fresh samples held a passing function more
  often than revisions shown the failing tests did (best-of-4 by the visible examples solved 24 of 26 measured
  problems, the revising loop 22), and the revisions found no passing function the samples missed;
- `InstructionCritic`, whatever the focus. Chosen on IFBench's first 15 development prompts of the fixed order
  (run 38f5b937 at 7a95cc0, Qwen): instructions followed, raw 2 of 16, the revising loop 2, resample 4; prompts 16
  and later are the held-out check of that choice (docs/benchmarks.md).

`strategy="loop"` (or any setting given) overrides them. With `human_review` they are not applied: a person
reviews rounds of revisions, which fresh drafts do not show.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langchain_core.language_models import BaseChatModel

from reflection_graph.critics.base import Critic
from reflection_graph.critics.judge import JudgeCritic
from reflection_graph.critics.llm import LLMCritic
from reflection_graph.critics.logprob import LogprobCritic
from reflection_graph.models import at_temperature_zero, describe
from reflection_graph.models.profile import DefaultCritic
from reflection_graph.prompts import CRITIQUE_PROMPT
from reflection_graph.settings import Settings

__all__ = ["VERIFIER_DEFAULTS", "default_critic", "setup_defaults"]

VERIFIER_DEFAULTS: dict[str, Any] = {
    "strategy": "resample",
    "n_drafts": 1,
    "n_revisions": 2,
    "max_iterations": 3,
}
"""The settings a verifier critic defaults to (see the module docstring for the measurements behind them)."""


def _judge(model: BaseChatModel, settings: Settings, guidelines: str | None) -> Critic:
    return JudgeCritic(at_temperature_zero(model), retries=settings.retries, timeout_s=settings.timeout_s)


def _logprob(model: BaseChatModel, settings: Settings, guidelines: str | None) -> Critic:
    return LogprobCritic(at_temperature_zero(model), retries=settings.retries, timeout_s=settings.timeout_s)


def _llm(model: BaseChatModel, settings: Settings, guidelines: str | None) -> Critic:
    return LLMCritic(
        at_temperature_zero(model),
        prompt=settings.prompts.get("critique", CRITIQUE_PROMPT),
        guidelines=guidelines,
        parse_retries=settings.parse_retries,
        on_parse_error=settings.on_parse_error,
        retries=settings.retries,
        timeout_s=settings.timeout_s,
    )


CRITICS: dict[DefaultCritic, Callable[[BaseChatModel, Settings, str | None], Critic]] = {
    "judge": _judge,
    "logprob": _logprob,
    "llm": _llm,
}
"""How each kind a model may name as its default critic (`ModelFacts.default_critic`) is built on that model."""


def default_critic(
    model: BaseChatModel, settings: Settings, *, guidelines: str | None = None, named: bool = False
) -> Critic:
    """The critic that judges with `model` (at temperature 0) when the caller gave a model, not a critic.

    Args:
        model: the critic's model: the generator's when no critic was named.
        settings: the built settings: the call limits, the parse options and a critique prompt override.
        guidelines: critic guidelines (an `LLMCritic` takes them).
        named: the caller named this model as the critic (not the generator's model judging by default).

    Returns:
        The kind the model names (`describe(model).default_critic`) when it judges by default with no guidelines
        and no critique prompt override; else an `LLMCritic`.
    """
    plain = guidelines is None and not settings.prompts.get("critique")
    kind = describe(model).default_critic if plain and not named else "llm"
    return CRITICS[kind](model, settings, guidelines)


def setup_defaults(critic: Any, settings: Settings, *, human_review: bool = False) -> Settings:
    """`settings` with `VERIFIER_DEFAULTS` under the fields its caller did not set, when the critic declares itself
    a verifier (`verifier = True`, reflection_graph/critics/base.py) for this focus (its `focus`, when it names
    one, is `settings.focus`) and no person reviews rounds; else `settings` as they are.

    Args:
        critic: the built critic (any object: one that declares nothing is no verifier).
        settings: the settings the caller chose.
        human_review: a person reviews rounds of revisions, which fresh drafts do not show.
    """
    if human_review or getattr(critic, "verifier", False) is not True:
        return settings
    focus = getattr(critic, "focus", None)
    if focus is not None and focus != settings.focus:
        return settings
    return settings.with_defaults(VERIFIER_DEFAULTS)
