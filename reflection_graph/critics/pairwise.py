"""A critic for capable models: "which of these two answers is better?", asked in both orders.

`PairwiseCritic` judges a candidate against the best earlier candidate the critic is shown (the request's
`history`, a bounded window of earlier rounds). It asks the model twice, once with the candidate as answer A and
once as answer B, so a judge that always prefers one position gives a tie, not a verdict (position bias cancels).
The candidate's score moves from the earlier one's towards 10 when it wins both orders, towards 0 when it loses
both, and stays level on a split (ties go to the later candidate in selection). The first candidate, with nothing
to compare against, is judged by `first` (an `LLMCritic` on the same model by default).

Absolute acceptance needs a bar: with `score_threshold` set, the score decides as everywhere; without one, a
comparison alone never accepts, and the loop runs its rounds and keeps the best. On the embedded 270M base model
this comparison is at chance (see bench/bench_critic.py); use it with models that can read two answers.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig

from reflection_graph.critics.base import Critic, CritiqueRequest, ModelCritic
from reflection_graph.critics.llm import LLMCritic
from reflection_graph.critique import Critique
from reflection_graph.prompts import PAIRWISE_PROMPT, render_prompt

__all__ = ["PairwiseCritic", "best_earlier", "moved_score"]

_CHOICE = re.compile(r"\b(A|B)\b")


class PairwiseCritic(ModelCritic):
    """Score a candidate by comparing it with the best earlier candidate, in both orders.

    Args:
        model: the judge (a chat model; it runs at temperature 0 where it has one).
        first: the critic of a candidate with no earlier one to compare against; default `LLMCritic(model)`.
        prompt: the comparison template, with `{task}`, `{context}`, `{a}` and `{b}`; the reply names A or B.
        retries: retries of transient model errors.
        timeout_s: time limit of one model call, in seconds (None: no limit).
        name: the critic's name in findings.

    Example:
        ```python
        from reflection_graph import create_reflection_graph
        from reflection_graph.critics import PairwiseCritic

        graph = create_reflection_graph("openai:gpt-4o-mini", critic=PairwiseCritic(judge_model))
        ```
    """

    def __init__(
        self,
        model: BaseChatModel,
        *,
        first: Critic | None = None,
        prompt: str = PAIRWISE_PROMPT,
        retries: int = 2,
        timeout_s: float | None = None,
        name: str = "pairwise",
    ) -> None:
        super().__init__(model, retries=retries, timeout_s=timeout_s, name=name)
        self.first: Critic = self._stand_in(first, "first")
        self.prompt = prompt
        self._judge = self._at_temperature_zero()

    stand_in_argument = "first"  # for_run: a new model or critique prompt goes to `first` too
    default_stand_in = LLMCritic

    def _messages(self, request: CritiqueRequest, a: str, b: str) -> list[HumanMessage]:
        context = f"Context: {request.context.strip()}\n" if request.context else ""
        values = {"task": request.task.strip(), "context": context, "a": a.strip(), "b": b.strip()}
        return [HumanMessage(render_prompt(self.prompt, values))]

    def _result(self, request: CritiqueRequest, reference: Mapping[str, Any], replies: list[str]) -> Critique:
        """Combine the two orders: the candidate is A in the first reply and B in the second."""
        wins = [_choice(replies[0], "A"), _choice(replies[1], "B")]
        p = sum(wins) / 2
        score = moved_score(float(reference.get("score") or 0.0), p)
        accepted = request.score_threshold is not None and score >= request.score_threshold
        if p > 0.5:
            feedback = "Judged better than the best earlier answer in both orders."
        elif p < 0.5:
            feedback = (
                "Judged worse than the best earlier answer in both orders; keep what that answer did right."
            )
        else:
            feedback = "Neither answer was preferred once the order was swapped."
        issues = [] if p >= 0.5 else [feedback]
        return Critique(
            is_acceptable=accepted, score=min(10.0, max(0.0, score)), issues=issues, feedback=feedback
        )

    def critique(self, request: CritiqueRequest, config: RunnableConfig | None = None) -> Critique:
        reference = best_earlier(request)
        if reference is None:
            return self.first.critique(request, config)
        replies = [
            self._call(self._judge, messages, config).text
            for messages in self._both_orders(request, reference)
        ]
        return self._result(request, reference, replies)

    async def acritique(self, request: CritiqueRequest, config: RunnableConfig | None = None) -> Critique:
        reference = best_earlier(request)
        if reference is None:
            return await self.first.acritique(request, config)
        replies = [
            (await self._acall(self._judge, messages, config)).text
            for messages in self._both_orders(request, reference)
        ]
        return self._result(request, reference, replies)

    def _both_orders(
        self, request: CritiqueRequest, reference: Mapping[str, Any]
    ) -> list[list[HumanMessage]]:
        """The judge's prompts: the candidate as A against the reference, then swapped (position bias cancels)."""
        candidate, other = request.candidate, reference["candidate"]
        return [self._messages(request, candidate, other), self._messages(request, other, candidate)]


def moved_score(base: float, p: float) -> float:
    """An earlier candidate's score `base` moved by `p`, the chance that the new candidate is the better one:
    towards 10 by `2p - 1` of the way when `p > 1/2`, towards 0 by `1 - 2p` when `p < 1/2`, level at 1/2.

    Raises:
        ValueError: `p` outside [0, 1] or `base` outside [0, 10].
    """
    if not 0 <= p <= 1:
        raise ValueError(f"p must be a probability in [0, 1], got {p!r}")
    if not 0 <= base <= 10:
        raise ValueError(f"base must be a score on the 0-10 scale, got {base!r}")
    return base + (p - 0.5) * 2 * ((10 - base) if p >= 0.5 else base)


def best_earlier(request: CritiqueRequest) -> Mapping[str, Any] | None:
    """The highest-scoring earlier candidate shown to the critic (the later one on a tie), or None."""
    best = None
    for entry in request.history:
        if entry.get("candidate") and (
            best is None or float(entry.get("score") or 0) >= float(best.get("score") or 0)
        ):
            best = entry
    return best


def _choice(reply: str, letter: str) -> float:
    """1 when the reply names `letter` first, 0 when it names the other, 0.5 when it names neither."""
    found = _CHOICE.search(reply.strip())
    if found is None:
        return 0.5
    return 1.0 if found.group(1) == letter else 0.0
