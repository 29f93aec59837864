"""A critic that runs several critics on the same candidate and merges their verdicts."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from langchain_core.runnables import RunnableConfig

from reflection_graph.critics.base import BaseCritic, Critic, CritiqueRequest, for_run, is_metered
from reflection_graph.critique import Critique, Finding

__all__ = ["CompositeCritic", "ScoreRule"]

ScoreRule = Literal["min", "mean"] | Mapping[str, float] | Sequence[float]
"""How a composite combines scores: "min", "mean", or weights (by critic name, or in critic order)."""


class CompositeCritic(BaseCritic):
    """Run several critics on the same candidate and merge their critiques into one.

    Merge rule:

    - **acceptance**: accepted only when *every* critic accepts.
    - **score**: `score="min"` (the default) takes the lowest score, so one failing check cannot be averaged away;
      `"mean"` takes the plain mean; weights (a mapping `critic name -> weight`, or a sequence in critic order;
      non-negative, not all zero) take the weighted mean.
    - **issues / suggestions**: the union, in critic order, each prefixed with `[critic name]`.
    - **findings**: the union, each `source` set to `critic name` (or `critic name/original source` when the
      critic named a sub-source, such as `code_tests/ruff`). A critic that reports plain issues without findings (an LLM critic) contributes one
      finding per issue with that critic's derived severity; a critic that rejects without any issue contributes
      one finding carrying its feedback, so the composite's severity never understates a rejection.
    - **feedback**: one `critic name: feedback` line per critic that gave feedback.
    - **parsed**: false when any critic's reply could not be parsed.

    `acritique` runs all critics concurrently (`asyncio.gather`); `critique` runs them one after the other. An
    exception in any critic propagates (nothing is hidden). With `score_threshold` set on the graph, the combined
    score decides acceptance there; `"min"` then means every critic must reach the bar.

    Args:
        critics: the critics, as a sequence (names come from each critic's `name`; duplicates get `_2`, `_3`
            suffixes) or a mapping `name -> critic`.
        score: the score rule, see above.
        name: the composite's own name.

    Raises:
        ValueError: no critics, an object that is not a `Critic`, or weights that do not match the critics.

    Example:
        >>> from reflection_graph.critics.rules import LengthCritic, RequiredTermsCritic
        >>> critic = CompositeCritic([LengthCritic(max_words=50), RequiredTermsCritic(["offer"])])
        >>> critic.critique(CritiqueRequest(task="t", candidate="Thanks for the offer.")).is_acceptable
        True
    """

    def __init__(
        self,
        critics: Sequence[Critic] | Mapping[str, Critic],
        *,
        score: ScoreRule = "min",
        name: str = "composite",
    ) -> None:
        if isinstance(critics, Mapping):
            named = [(str(key), critic) for key, critic in critics.items()]
        elif isinstance(critics, (str, bytes)) or not isinstance(critics, Sequence):
            raise ValueError("critics must be a list of Critic objects or a dict name -> Critic")
        else:
            named = []
            seen: dict[str, int] = {}
            for critic in critics:
                base = str(getattr(critic, "name", "") or type(critic).__name__)
                seen[base] = seen.get(base, 0) + 1
                named.append((base if seen[base] == 1 else f"{base}_{seen[base]}", critic))
        if not named:
            raise ValueError("CompositeCritic needs at least one critic")
        for label, critic in named:
            if not isinstance(critic, Critic):
                raise ValueError(
                    f"critic {label!r} ({type(critic).__name__}) is not a Critic: give it `name`, `critique(request, "
                    "config)` and `acritique(request, config)`, or subclass reflection_graph.critics.base.BaseCritic"
                )
        if not isinstance(name, str) or not name:
            raise ValueError("name must be a non-empty string")
        self.critics: tuple[tuple[str, Critic], ...] = tuple(named)
        self.score_rule: str
        self.weights: tuple[float, ...] | None = None
        if isinstance(score, str):
            if score not in ("min", "mean"):
                raise ValueError(f"score must be 'min', 'mean' or weights, got {score!r}")
            self.score_rule = score
        else:
            self.score_rule = "weighted"
            self.weights = self._weights(score)
        self.name = name

    @property
    def metered(self) -> bool:  # type: ignore[override]
        """Metered when every critic it runs is."""
        return all(is_metered(critic) for _, critic in self.critics)

    def for_run(self, *, model: Any = None, prompt: Any = None) -> CompositeCritic | None:
        """Each critic for the run (`for_run`); a critic with no model to swap is kept. None when a `model` is
        named and no critic here has a model to swap."""
        adapted = [(label, for_run(critic, model=model, prompt=prompt)) for label, critic in self.critics]
        if model is not None and all(new is None for _, new in adapted):
            return None
        critics = tuple(
            (label, new or old) for (label, new), (_, old) in zip(adapted, self.critics, strict=True)
        )
        if all(new is old for (_, new), (_, old) in zip(critics, self.critics, strict=True)):
            return self
        copy = object.__new__(CompositeCritic)
        copy.__dict__.update(self.__dict__, critics=critics)
        return copy

    def _weights(self, score: Mapping[str, float] | Sequence[float]) -> tuple[float, ...]:
        labels = [label for label, _ in self.critics]
        if isinstance(score, Mapping):
            unknown = sorted(set(score) - set(labels))
            missing = [label for label in labels if label not in score]
            if unknown or missing:
                raise ValueError(
                    f"score weights must name exactly the critics {labels}; unknown: {unknown}, missing: {missing}"
                )
            weights = [score[label] for label in labels]
        else:
            weights = list(score)
            if len(weights) != len(labels):
                raise ValueError(
                    f"got {len(weights)} weights for {len(labels)} critics {labels}; give one each"
                )
        if any(isinstance(w, bool) or not isinstance(w, (int, float)) or w < 0 for w in weights):
            raise ValueError(f"weights must be non-negative numbers, got {weights}")
        if sum(weights) <= 0:
            raise ValueError("at least one weight must be positive")
        return tuple(float(w) for w in weights)

    def _combine_score(self, scores: list[float]) -> float:
        if self.score_rule == "min":
            return min(scores)
        if self.score_rule == "mean":
            return sum(scores) / len(scores)
        assert self.weights is not None
        return sum(w * s for w, s in zip(self.weights, scores, strict=True)) / sum(self.weights)

    def merge(self, critiques: Sequence[Critique]) -> Critique:
        """Merge one critique per critic (in critic order) by the rule in the class docstring."""
        findings: list[Finding] = []
        issues: list[str] = []
        suggestions: list[str] = []
        feedback: list[str] = []
        for (label, critic), critique in zip(self.critics, critiques, strict=True):
            own = {"", "llm", label, str(getattr(critic, "name", ""))}
            issues += [f"[{label}] {issue}" for issue in critique.issues]
            suggestions += [f"[{label}] {suggestion}" for suggestion in critique.suggestions]
            if critique.feedback.strip():
                feedback.append(f"{label}: {critique.feedback.strip()}")
            if critique.findings:
                for finding in critique.findings:
                    source = label if finding.source in own else f"{label}/{finding.source}"
                    findings.append(finding.model_copy(update={"source": source}))
            else:
                for issue in critique.issues:
                    findings.append(Finding(message=issue, severity=critique.severity, source=label))
            if not critique.is_acceptable and not critique.issues and not critique.findings:
                message = critique.feedback.strip() or f"rejected with score {critique.score:g}"
                issues.append(f"[{label}] {message}")
                findings.append(Finding(message=message, severity=critique.severity, source=label))
        return Critique(
            issues=issues,
            suggestions=suggestions,
            is_acceptable=all(c.is_acceptable for c in critiques),
            score=self._combine_score([c.score for c in critiques]),
            feedback="\n".join(feedback),
            findings=findings,
            parsed=all(c.parsed for c in critiques),
            # the weakest: "in-process" sorts before "outside"
            verdict_source=min((c.verdict_source for c in critiques if c.verdict_source), default=None),
            **_checks(critiques),
        )

    def critique(self, request: CritiqueRequest, config: RunnableConfig | None = None) -> Critique:
        """Run every critic in turn and merge the critiques."""
        return self.merge([critic.critique(request, config) for _, critic in self.critics])

    async def acritique(self, request: CritiqueRequest, config: RunnableConfig | None = None) -> Critique:
        """Run every critic concurrently and merge the critiques."""
        results = await asyncio.gather(*(critic.acritique(request, config) for _, critic in self.critics))
        return self.merge(list(results))


def _checks(critiques: Sequence[Critique]) -> dict[str, Any]:
    """The verifiers' checks summed (None when no critic is a verifier)."""
    verifiers = [c for c in critiques if c.checks_total is not None]
    if not verifiers:
        return {"checks_passed": None, "checks_total": None}
    return {
        "checks_passed": sum(c.checks_passed or 0 for c in verifiers),
        "checks_total": sum(c.checks_total or 0 for c in verifiers),
    }
