"""A judge for instruction-tuned models: its token probabilities decide, its written critique explains.

Asked for a 0-10 JSON score, the embedded Qwen2.5-Coder-1.5B-Instruct ranked the good answer above the bad one in
9 of 16 pairs written outside this project and gave 7 or more to 12 of the 16 bad answers; asked "A or B?", its
letter reply was right 59% of the time (it favours A). Read from its next-token probabilities instead, the same
model is a judge (issue 28). `JudgeCritic` uses three readings, none with a constant fitted to data:

- **preference**, when the request shows an earlier candidate: "Which answer does the task better, A or B?",
  asked twice with the answers swapped. In each order the log-odds `log P(candidate's letter) - log P(the other
  letter)` of the reply's first token; the two are summed, so a judge that favours a position adds to one order
  what it takes from the other (the bias cancels). `p = sigmoid(sum / 2)` is the candidate's chance of being the
  better answer. On the 16 outside pairs this ranked 16 of 16.
- **verdict**: "Is this answer correct, and does it do what the task asks? Reply with Yes or No.";
  `p_yes = P(Yes) / (P(Yes) + P(No))`. It ranks well (15 of 16 there) but is lenient: P(Yes) > P(No) for 12 of
  the 16 bad answers, so it never accepts alone.
- **written critique**: the model at temperature 0 lists the answer's faults (issues, suggestions) as JSON
  through its grammar. It never scores: its list only feeds the reviser and vetoes acceptance.

Score: `10 * p_yes` for a candidate with nothing earlier to compare with; otherwise the earlier candidate's score
moved by the preference, towards 10 by `2p - 1` of the way when `p > 1/2`, towards 0 when `p < 1/2`
(`moved_score`), so selection keeps the candidate the judge prefers. Accepted when `p_yes > 1/2`, the written
critique lists no fault, and the candidate is not judged worse than the earlier one (`p >= 1/2`). Every bar is
the point where the model's own two probabilities are even: nothing is fitted. With `score_threshold` set, the
score decides as everywhere.

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
        p_yes: `P(Yes) / (P(Yes) + P(No))` to "is this answer correct and does it do the task?".
        preference: the chance that the candidate is the better of it and the earlier one (None: no earlier one).
        issues: the written critique's faults.
        suggestions: the written critique's fixes.
        score: `10 * p_yes`, or the earlier score moved by the preference (`moved_score`).
        accepted: `p_yes > 1/2`, no fault written, and a preference of at least 1/2 when there is one.
    """

    p_yes: float
    preference: float | None
    issues: tuple[str, ...]
    suggestions: tuple[str, ...]
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
    return preference(x, x)


class JudgeCritic(BaseCritic):
    """Judge a candidate from an instruction-tuned model's token probabilities, with a written critique.

    See the module doc for the three readings, the score and the acceptance rule (nothing fitted).

    Args:
        model: the judge, a chat model whose replies carry next-token logprobs (the embedded model on an
            instruction-tuned GGUF; `ChatOpenAI` against a server that returns them). It runs at temperature 0.
        write: write the critique (issues, suggestions). Without it a candidate is accepted on the probabilities
            alone, and the reviser gets no named fault.
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

    def _plan(self, request: CritiqueRequest) -> tuple[Mapping[str, Any] | None, list[Any]]:
        """The reference (best earlier candidate, or None) and the calls to make: (runnable, messages) pairs."""
        reference = _best(request)
        calls: list[Any] = [(self._reader, self.verdict_messages(request))]
        if reference is not None:
            calls += [
                (self._reader, m) for m in self.preference_messages(request, str(reference["candidate"]))
            ]
        if self.write:
            calls.append((self._writer, self.critique_messages(request)))
        return reference, calls

    def _judgement(self, reference: Mapping[str, Any] | None, replies: Sequence[Any]) -> Judgement:
        p_yes = _sigmoid(log_odds(self._top(replies[0]), "yes", "no"))
        p = None
        if reference is not None:
            as_a = log_odds(self._top(replies[1]), "A", "B")
            as_b = log_odds(self._top(replies[2]), "B", "A")
            p = preference(as_a, as_b)
        written = _written(replies[-1]) if self.write else WrittenCritique()
        issues = tuple(i.strip() for i in written.issues if i.strip())
        suggestions = tuple(s.strip() for s in written.suggestions if s.strip())
        score = (
            10 * p_yes if reference is None else moved_score(float(reference.get("score") or 0.0), p or 0.5)
        )
        accepted = p_yes > 0.5 and not issues and (p is None or p >= 0.5)
        return Judgement(p_yes, p, issues, suggestions, min(10.0, max(0.0, score)), accepted)

    def _critique(self, judgement: Judgement) -> Critique:
        issues = list(judgement.issues)
        notes = []
        if judgement.preference is not None and judgement.preference < 0.5:
            issues.append("Judged worse than the best earlier answer; keep what that answer did right.")
        if judgement.p_yes <= 0.5 and not judgement.issues:
            notes.append("The judge doubts that the answer is correct and does what the task asks.")
        if judgement.accepted:
            feedback = "Judged correct and doing what the task asks; no fault found."
        else:
            feedback = " ".join([*issues, *notes]) or "Not judged better than the earlier answer."
        return Critique(
            issues=issues,
            suggestions=list(judgement.suggestions),
            is_acceptable=judgement.accepted,
            score=judgement.score,
            feedback=feedback,
        )

    # -- sync and async drivers ------------------------------------------------------------------------------
    def judge(self, request: CritiqueRequest, config: RunnableConfig | None = None) -> Judgement:
        """The readings of `request.candidate` (one verdict call, two comparisons when there is an earlier
        candidate, one written critique)."""
        reference, calls = self._plan(request)
        replies = [call(r, m, config, **self._limits()) for r, m in calls]
        return self._judgement(reference, replies)

    async def ajudge(self, request: CritiqueRequest, config: RunnableConfig | None = None) -> Judgement:
        """Async twin of `judge`."""
        reference, calls = self._plan(request)
        replies = [await acall(r, m, config, **self._limits()) for r, m in calls]
        return self._judgement(reference, replies)

    def critique(self, request: CritiqueRequest, config: RunnableConfig | None = None) -> Critique:
        return self._critique(self.judge(request, config))

    async def acritique(self, request: CritiqueRequest, config: RunnableConfig | None = None) -> Critique:
        return self._critique(await self.ajudge(request, config))

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
