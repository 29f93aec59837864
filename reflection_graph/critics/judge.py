"""A judge for instruction-tuned models: its token probabilities decide, its written critique explains.

Asked for a 0-10 JSON score, the embedded Qwen2.5-Coder-1.5B-Instruct ranked the good answer above the bad one in
9 of 16 pairs written outside this project and gave 7 or more to 12 of the 16 bad answers; asked "A or B?", its
letter reply was right 59% of the time (it favours A). Read from its next-token probabilities instead, the same
model ranks answers well (issue 28). `JudgeCritic` reads two things, with no constant fitted to data:

- **preference**, when the request shows an earlier candidate: "Which answer does the task better, A or B?",
  asked with the candidate as A and then as B. In each order the log-odds of the candidate's letter; a judge that
  favours a position adds to one order what it takes from the other, so their sum is free of it.
  `p_better = sigmoid(sum / 2)`, the candidate's chance of being the better answer. On the 16 outside pairs this
  ranked 16 of 16.
- **verdict**: "Is this answer correct, and does it do what the task asks?", `p_yes = P(Yes) / (P(Yes) + P(No))`.
  It ranks (15 of 16 there) but its level says little: P(Yes) > P(No) for 12 of those 16 bad answers, and here
  0.92 for "The capital of Canada is Toronto." against 0.93 for Ottawa, 0.93 for "12 + 30 = 52." against 0.94 for
  42 (asking the opposite question, "does it contain a mistake?", did not separate them either).

So this judge compares; it does not grade alone. Score: `10 * p_yes` for a candidate with nothing earlier to
compare with; otherwise the earlier candidate's score moved by the preference, towards 10 by `2p - 1` of the way
when `p_better > 1/2`, towards 0 when below (`moved_score`), so selection keeps the candidate the judge prefers.
**Accepted** only after a comparison: when `p_better >= 1/2` (not judged worse than the best earlier candidate)
and `p_yes > 1/2`. A first candidate is never accepted, so the loop always tries one revision, and stops when the
revision is judged no worse; each bar is where the model's own two readings are even, so nothing is fitted. With
`score_threshold` set, the score decides as everywhere.

Only a rejected candidate gets a **written critique**: the model at temperature 0 lists faults and fixes as JSON
through its grammar, for the reviser. It never scores and never accepts: asked for faults, this model lists one
for nearly every answer, right or wrong, and on emails it misses real ones (an email that accepts the offer it
should decline was faulted for "not giving the reason for declining").

It needs a model whose replies carry OpenAI-style next-token `logprobs` (the embedded model always does;
`ChatOpenAI` against a server that returns them); a reply without them raises a clear error. It is the default
critic when the generator is the embedded model running an instruction-tuned GGUF through its chat template.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from langchain_core.runnables import Runnable, RunnableConfig
from pydantic import BaseModel, Field

from reflection_graph._calls import acall, call
from reflection_graph.critics.base import BaseCritic, CritiqueRequest
from reflection_graph.critics.pairwise import _best, moved_score
from reflection_graph.critique import Critique
from reflection_graph.prompts import (
    CHAT_CRITIQUE_PROMPT,
    CHAT_CRITIQUE_SYSTEM,
    CHAT_PREFERENCE_PROMPT,
    CHAT_VERDICT_PROMPT,
    render_prompt,
)

__all__ = ["JudgeCritic", "Judgement", "WrittenCritique", "log_odds", "preference"]


class WrittenCritique(BaseModel):
    """The faults a judge writes down. No score and no verdict: those come from the probabilities."""

    issues: list[str] = Field(
        default_factory=list, description="Real faults of the answer; empty when it does the task."
    )
    suggestions: list[str] = Field(default_factory=list, description="How to fix each fault.")


@dataclass(frozen=True)
class Judgement:
    """The judge's readings of one candidate (nothing in it is fitted to data).

    Attributes:
        p_yes: `P(Yes) / (P(Yes) + P(No))` to "is this answer correct, and does it do what the task asks?".
        p_better: the chance that the candidate is the better of it and the earlier one (None: no earlier one).
        score: `10 * p_yes`, or the earlier score moved by `p_better` (`moved_score`).
        accepted: `p_better >= 1/2` and `p_yes > 1/2`; never without an earlier candidate.
    """

    p_yes: float
    p_better: float | None
    score: float
    accepted: bool


def log_odds(top_logprobs: Mapping[str, float], first: str, second: str) -> float:
    """`log P(first) - log P(second)` for the next token, from its listed alternatives (token text -> logprob).

    Tokens are matched after stripping spaces and punctuation, case-insensitively, and several spellings of one
    word add up. A word not listed gets the smallest listed probability (an upper bound for it). When neither is
    listed the reply says nothing either way: 0.

    Raises:
        ValueError: a logprob that is not a number <= 0.
    """
    mass = {first.lower(): 0.0, second.lower(): 0.0}
    listed = []
    for token, logprob in top_logprobs.items():
        if not isinstance(logprob, (int, float)) or math.isnan(logprob) or logprob > 0:
            raise ValueError(f"logprob of {token!r} must be a number <= 0, got {logprob!r}")
        if math.isinf(logprob):
            continue
        listed.append(logprob)
        word = str(token).strip().strip(".,:;!\"'*").lower()
        if word in mass:
            mass[word] += math.exp(logprob)
    a, b = mass[first.lower()], mass[second.lower()]
    if not a and not b:
        return 0.0
    floor = math.exp(min(listed))
    return math.log(a or floor) - math.log(b or floor)


def preference(as_a: float, as_b: float) -> float:
    """The candidate's chance of being the better answer, from the log-odds of its own letter in each order.

    `as_a` is `log P(A) - log P(B)` with the candidate as A; `as_b` is `log P(B) - log P(A)` with it as B. A
    position bias adds the same amount to one and takes it from the other, so their sum is free of it; the mean
    log-odds `(as_a + as_b) / 2` goes through the logistic function.
    """
    mean = (as_a + as_b) / 2
    return 1 / (1 + math.exp(-mean)) if mean >= 0 else math.exp(mean) / (1 + math.exp(mean))


def _sigmoid(x: float) -> float:
    return preference(x, x)  # the logistic function, without overflow


class JudgeCritic(BaseCritic):
    """Judge a candidate from an instruction-tuned model's token probabilities, with a written critique.

    See the module doc for the three readings, the score and the acceptance rule (nothing fitted).

    Args:
        model: the judge, a chat model whose replies carry next-token logprobs (the embedded model on an
            instruction-tuned GGUF; `ChatOpenAI` against a server that returns them). It runs at temperature 0.
        write: write a critique (issues, suggestions) for a rejected candidate, for the reviser. Acceptance never
            depends on it.
        top_logprobs: how many next-token alternatives to read.
        max_candidate_chars: longer answers are cut (head kept) so the prompts fit a small context window.
        retries: retries of transient model errors.
        timeout_s: time limit of one model call, in seconds (None: no limit).
        name: the critic's name in findings.

    Example:
        ```python
        from reflection_graph import create_reflection_graph
        from reflection_graph.critics import JudgeCritic
        from reflection_graph.models import resolve_model

        model = resolve_model("embedded:qwen2.5-coder-1.5b", role="critic")
        graph = create_reflection_graph(model, critic=JudgeCritic(model))
        ```
    """

    metered = True  # every call goes through reflection_graph/_calls.py

    def __init__(
        self,
        model: BaseChatModel,
        *,
        write: bool = True,
        top_logprobs: int = 20,
        max_candidate_chars: int = 3000,
        retries: int = 2,
        timeout_s: float | None = None,
        name: str = "judge",
    ) -> None:
        if not isinstance(model, BaseChatModel):
            raise TypeError(f"JudgeCritic needs a LangChain chat model, got {type(model).__name__}")
        if not 1 <= top_logprobs <= 20:
            raise ValueError(f"top_logprobs must be between 1 and 20 (the OpenAI limit), got {top_logprobs}")
        if max_candidate_chars < 1:
            raise ValueError(f"max_candidate_chars must be >= 1, got {max_candidate_chars}")
        if timeout_s is not None and timeout_s <= 0:
            raise ValueError(f"timeout_s must be > 0 or None, got {timeout_s}")
        from reflection_graph.critics.probability import _call_options
        from reflection_graph.models import critic_model

        self.model = critic_model(model)
        self.write = write
        self.top_logprobs = top_logprobs
        self.max_candidate_chars = max_candidate_chars
        self.retries = retries
        self.timeout_s = timeout_s
        self.name = name
        self._reader = self.model.bind(
            **_call_options(self.model, max_tokens=1, logprobs=True, top_logprobs=top_logprobs)
        )
        self._writer: Runnable[Any, Any] = self.model.with_structured_output(
            WrittenCritique, include_raw=True
        )

    def for_run(self, *, model: Any = None, prompt: Any = None) -> JudgeCritic:
        """This critic judging with another `model`. It asks its own questions, so a critique `prompt` is not
        used (the default critic with a critique prompt is an `LLMCritic`, which takes one)."""
        if model is None:
            return self
        return JudgeCritic(
            model,
            write=self.write,
            top_logprobs=self.top_logprobs,
            max_candidate_chars=self.max_candidate_chars,
            retries=self.retries,
            timeout_s=self.timeout_s,
            name=self.name,
        )

    # -- prompts ---------------------------------------------------------------------------------------------
    def _text(self, text: str) -> str:
        text = text.strip() or "(empty answer)"
        return text if len(text) <= self.max_candidate_chars else text[: self.max_candidate_chars] + " …"

    def _values(self, request: CritiqueRequest) -> dict[str, str]:
        context = f"Context:\n{request.context.strip()}\n" if request.context else ""
        return {"task": request.task.strip(), "context": context, "candidate": self._text(request.candidate)}

    def verdict_messages(self, request: CritiqueRequest) -> list[BaseMessage]:
        """The yes/no question about `request.candidate`."""
        return [HumanMessage(render_prompt(CHAT_VERDICT_PROMPT, self._values(request)))]

    def preference_messages(self, request: CritiqueRequest, other: str) -> list[list[BaseMessage]]:
        """The comparison of `request.candidate` with `other`: the candidate as A, then as B."""
        values = self._values(request)
        mine, theirs = values["candidate"], self._text(other)
        return [
            [HumanMessage(render_prompt(CHAT_PREFERENCE_PROMPT, {**values, "a": mine, "b": theirs}))],
            [HumanMessage(render_prompt(CHAT_PREFERENCE_PROMPT, {**values, "a": theirs, "b": mine}))],
        ]

    def critique_messages(self, request: CritiqueRequest) -> list[BaseMessage]:
        """The request for the written critique."""
        return [
            SystemMessage(CHAT_CRITIQUE_SYSTEM),
            HumanMessage(render_prompt(CHAT_CRITIQUE_PROMPT, self._values(request))),
        ]

    # -- readings --------------------------------------------------------------------------------------------
    def _top(self, reply: Any) -> dict[str, float]:
        meta = getattr(reply, "response_metadata", None) or {}
        content = (meta.get("logprobs") or {}).get("content") or []
        if not content or not content[0].get("top_logprobs"):
            raise ValueError(
                f"JudgeCritic needs next-token logprobs, and {type(self.model).__name__} returned none; use the "
                "embedded model, a server that returns logprobs, or LLMCritic"
            )
        return {
            str(t.get("token", "")): float(t.get("logprob", -math.inf)) for t in content[0]["top_logprobs"]
        }

    def _questions(
        self, request: CritiqueRequest
    ) -> tuple[Mapping[str, Any] | None, list[list[BaseMessage]]]:
        """The best earlier candidate (or None) and the questions to read: the verdict, then both orders."""
        reference = _best(request)
        questions = [self.verdict_messages(request)]
        if reference is not None:
            questions += self.preference_messages(request, str(reference["candidate"]))
        return reference, questions

    def _p_yes(self, reply: Any) -> float:
        return _sigmoid(log_odds(self._top(reply), "yes", "no"))

    def _p_better(self, as_a: Any, as_b: Any) -> float:
        return preference(log_odds(self._top(as_a), "A", "B"), log_odds(self._top(as_b), "B", "A"))

    def _judgement(self, reference: Mapping[str, Any] | None, replies: Sequence[Any]) -> Judgement:
        p_yes = self._p_yes(replies[0])
        p_better, score = None, 10 * p_yes
        if reference is not None:
            p_better = self._p_better(replies[1], replies[2])
            score = moved_score(min(10.0, max(0.0, float(reference.get("score") or 0.0))), p_better)
        accepted = p_better is not None and p_better >= 0.5 and p_yes > 0.5
        return Judgement(p_yes, p_better, min(10.0, max(0.0, score)), accepted)

    def _critique(self, judgement: Judgement, written: WrittenCritique | None) -> Critique:
        if judgement.accepted:
            return Critique(
                is_acceptable=True,
                score=judgement.score,
                feedback="Judged correct and doing what the task asks.",
            )
        issues = [i.strip() for i in (written.issues if written else []) if i.strip()]
        suggestions = [s.strip() for s in (written.suggestions if written else []) if s.strip()]
        if judgement.p_better is not None and judgement.p_better < 0.5:
            issues.append("Judged worse than the best earlier answer; keep what that answer did right.")
        if judgement.p_yes <= 0.5:
            issues.append(
                "Judged likely wrong or off the task; re-check its facts, numbers and what it asks."
            )
        if not issues:
            issues.append("Not compared with another answer yet: revise it against the task, to compare.")
        return Critique(
            issues=issues,
            suggestions=suggestions,
            is_acceptable=False,
            score=judgement.score,
            feedback=" ".join(issues),
        )

    # -- sync and async drivers ------------------------------------------------------------------------------
    def judge(self, request: CritiqueRequest, config: RunnableConfig | None = None) -> Judgement:
        """The probability readings of `request.candidate`: the verdict, and the comparison in both orders when
        there is an earlier candidate (no written critique)."""
        reference, questions = self._questions(request)
        replies = [call(self._reader, m, config, **self._limits()) for m in questions]
        return self._judgement(reference, replies)

    async def ajudge(self, request: CritiqueRequest, config: RunnableConfig | None = None) -> Judgement:
        """Async twin of `judge`."""
        reference, questions = self._questions(request)
        replies = [await acall(self._reader, m, config, **self._limits()) for m in questions]
        return self._judgement(reference, replies)

    def p_yes(self, request: CritiqueRequest, config: RunnableConfig | None = None) -> float:
        """The verdict alone: `P(Yes) / (P(Yes) + P(No))` for `request.candidate` (one call)."""
        return self._p_yes(call(self._reader, self.verdict_messages(request), config, **self._limits()))

    def p_better(self, request: CritiqueRequest, other: str, config: RunnableConfig | None = None) -> float:
        """The comparison alone: the chance that `request.candidate` does the task better than `other` (two
        calls, one per order)."""
        as_a, as_b = (
            call(self._reader, m, config, **self._limits()) for m in self.preference_messages(request, other)
        )
        return self._p_better(as_a, as_b)

    def faults(self, request: CritiqueRequest, config: RunnableConfig | None = None) -> WrittenCritique:
        """The written critique alone (one call)."""
        return _written(call(self._writer, self.critique_messages(request), config, **self._limits()))

    async def _afaults(self, request: CritiqueRequest, config: RunnableConfig | None) -> WrittenCritique:
        return _written(await acall(self._writer, self.critique_messages(request), config, **self._limits()))

    def critique(self, request: CritiqueRequest, config: RunnableConfig | None = None) -> Critique:
        judgement = self.judge(request, config)
        written = self.faults(request, config) if self.write and not judgement.accepted else None
        return self._critique(judgement, written)

    async def acritique(self, request: CritiqueRequest, config: RunnableConfig | None = None) -> Critique:
        judgement = await self.ajudge(request, config)
        written = await self._afaults(request, config) if self.write and not judgement.accepted else None
        return self._critique(judgement, written)

    def _limits(self) -> dict[str, Any]:
        return {"retries": self.retries, "timeout_s": self.timeout_s}


_UNREAD = "The written critique could not be read, so the answer is not accepted on this round."


def _written(reply: Any) -> WrittenCritique:
    """The written critique from a structured-output reply (`include_raw`: `{"raw", "parsed", "parsing_error"}`).

    A reply that cannot be read is one issue saying so: the candidate is then not accepted, never crashed on.
    """
    parsed = reply.get("parsed") if isinstance(reply, Mapping) and "raw" in reply else reply
    if isinstance(reply, Mapping) and reply.get("parsing_error") is not None:
        parsed = None
    try:
        if isinstance(parsed, WrittenCritique):
            return parsed
        if isinstance(parsed, BaseModel):
            return WrittenCritique.model_validate(parsed.model_dump())
        if isinstance(parsed, Mapping):
            return WrittenCritique.model_validate(dict(parsed))
    except ValueError:
        pass
    return WrittenCritique(issues=[_UNREAD])
