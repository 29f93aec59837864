"""A critic that reads a model's token probabilities instead of asking it for JSON.

A small *base* model (the embedded Gemma 3 270M) asked for a JSON verdict copies key names and scores nearly
everything 10. What such a model does well is assign probabilities to text. `LogprobCritic` puts the candidate
into a few-shot prompt that ends with `Correct:` and reads two signals from one forward pass:

1. the verdict: `v = log P(" Yes") - log P(" No")` for the next token (G-Eval style: a probability, not a
   sampled word);
2. the answer's likelihood: `a` = the mean log-probability of the candidate's own tokens under the same prompt
   (a wrong fact, a wrong sum or a rude reply is less likely after the task than the right one). Only the
   embedded model reports it (`EmbeddedChatModel` call option `score_text`); over an OpenAI-compatible server
   the verdict is used alone.

Each signal is standardized with the mean and spread measured on `datasets/pairs.jsonl` and the two are averaged:
`z = ((v - V_MID) / V_SCALE + (a - A_MID) / A_SCALE) / 2`. The candidate is accepted when `z >= accept_at`,
and the score is `10 * sigmoid(2 * (z - accept_at))`, so accepted means a score of at least 5. When it rejects,
one more short call writes the problem line (free text cut at the line end, as in the few-shot examples).

Through `ChatOpenAI` the verdict comes from `logprobs=True, top_logprobs=K` on chat completions. A server that
returns no logprobs, or refuses the options, makes the critic hand every later call to its `fallback` (by default
an `LLMCritic` on the same model).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage
from langchain_core.runnables import Runnable, RunnableConfig

from reflection_graph._calls import acall, call, is_transient
from reflection_graph.critics.base import BaseCritic, Critic, CritiqueRequest
from reflection_graph.critics.llm import LLMCritic
from reflection_graph.critique import Critique
from reflection_graph.prompts import JUDGE_EXAMPLES, JUDGE_PROMPT, render_prompt

__all__ = ["ACCEPT_AT", "LogprobCritic", "Verdict"]

# Spread of the two signals on datasets/pairs.jsonl (64 answers, the embedded Gemma 3 270M, JUDGE_PROMPT).
V_MID, V_SCALE = 0.38, 0.51
A_MID, A_SCALE = -1.70, 1.33
ACCEPT_AT = 0.55
"""The bar on `z`: on datasets/pairs.jsonl the lowest that accepts at most 20% of the bad answers."""
_YES, _NO = "yes", "no"


@dataclass(frozen=True)
class Verdict:
    """The critic's reading of one candidate.

    Attributes:
        p_yes: `P(Yes) / (P(Yes) + P(No))` for the next token.
        answer_logprob: mean log-probability of the candidate's tokens (None when the model does not report it).
        z: the combined, standardized signal; accepted when `z >= accept_at`.
        score: `10 * sigmoid(2 * (z - accept_at))` on the 0-10 scale.
        accepted: `z >= accept_at`.
    """

    p_yes: float
    answer_logprob: float | None
    z: float
    score: float
    accepted: bool


class _NoLogprobs(Exception):
    """The reply carried no usable next-token logprobs (`permanent`: none at all, so the model gives none)."""

    def __init__(self, message: str, *, permanent: bool) -> None:
        super().__init__(message)
        self.permanent = permanent


class LogprobCritic(BaseCritic):
    """Judge a candidate from the critic model's next-token probabilities of "Yes" and "No".

    Args:
        model: the judge: the embedded model (both signals) or a chat model whose replies carry OpenAI-style
            `logprobs` (e.g. `ChatOpenAI` against llama.cpp's server; the verdict signal only).
        examples: the few-shot block put before the candidate (see `prompts.JUDGE_EXAMPLES`).
        accept_at: the acceptance bar on the combined signal `z` (higher accepts less).
        top_logprobs: how many next-token alternatives to ask for.
        explain: when it rejects, make one more short call for the problem line (the reviser's feedback).
        fallback: the critic used when the model returns no logprobs; default an `LLMCritic` on `model`.
        max_candidate_chars: longer candidates are cut (head kept) so the prompt fits a small context window.
        retries: retries of transient model errors.
        timeout_s: time limit of one model call, in seconds (None: no limit).
        name: the critic's name in findings.

    Example:
        ```python
        from reflection_graph import create_reflection_graph
        from reflection_graph.critics import LogprobCritic
        from reflection_graph.models.embedded import EmbeddedChatModel

        graph = create_reflection_graph(None, critic=LogprobCritic(EmbeddedChatModel(temperature=0)))
        ```
    """

    def __init__(
        self,
        model: BaseChatModel,
        *,
        examples: str = JUDGE_EXAMPLES,
        accept_at: float = ACCEPT_AT,
        top_logprobs: int = 20,
        explain: bool = True,
        fallback: Critic | None = None,
        max_candidate_chars: int = 3000,
        retries: int = 2,
        timeout_s: float | None = None,
        name: str = "logprob",
    ) -> None:
        if not isinstance(model, BaseChatModel):
            raise TypeError(f"LogprobCritic needs a LangChain chat model, got {type(model).__name__}")
        if not 1 <= top_logprobs <= 20:
            raise ValueError(f"top_logprobs must be between 1 and 20 (the OpenAI limit), got {top_logprobs}")
        if not math.isfinite(accept_at):
            raise ValueError(f"accept_at must be a finite number, got {accept_at!r}")
        if max_candidate_chars < 1:
            raise ValueError(f"max_candidate_chars must be >= 1, got {max_candidate_chars}")
        if timeout_s is not None and timeout_s <= 0:
            raise ValueError(f"timeout_s must be > 0 or None, got {timeout_s}")
        if fallback is not None and not isinstance(fallback, Critic):
            raise TypeError(f"fallback must be a Critic, got {type(fallback).__name__}")
        self.model = model
        self.examples = examples
        self.accept_at = accept_at
        self.top_logprobs = top_logprobs
        self.explain = explain
        self.fallback: Critic = fallback or LLMCritic(model, retries=retries, timeout_s=timeout_s)
        self.max_candidate_chars = max_candidate_chars
        self.retries = retries
        self.timeout_s = timeout_s
        self.name = name
        self._embedded = _is_embedded(model)
        self._judge = model.bind(
            **_call_options(model, max_tokens=1, logprobs=True, top_logprobs=top_logprobs)
        )
        self._explainer = model.bind(**_call_options(model, max_tokens=48, stop=["\n"]))
        self._no_logprobs = False  # set once (never reset) when the model shows it returns no logprobs

    # -- shared helpers --------------------------------------------------------------------------------------
    def prompt(self, request: CritiqueRequest) -> str:
        """The judge prompt for `request` (it ends with `Correct:`)."""
        return render_prompt(
            JUDGE_PROMPT,
            {
                "examples": self.examples,
                "task": request.task.strip(),
                "context": f"Context: {request.context.strip()}\n" if request.context else "",
                "candidate": self._candidate(request),
            },
        )

    def _candidate(self, request: CritiqueRequest) -> str:
        text = request.candidate.strip() or "(empty answer)"
        return text if len(text) <= self.max_candidate_chars else text[: self.max_candidate_chars] + " …"

    def _judge_input(self, request: CritiqueRequest) -> tuple[Runnable[Any, Any], list[BaseMessage]]:
        judge = self._judge.bind(score_text=" " + self._candidate(request)) if self._embedded else self._judge
        return judge, [HumanMessage(self.prompt(request))]

    def _explain_input(self, request: CritiqueRequest) -> list[BaseMessage]:
        return [HumanMessage(self.prompt(request) + " No\nProblem:")]

    def verdict(self, top_logprobs: dict[str, float], answer_logprob: float | None = None) -> Verdict:
        """The verdict and 0-10 score from next-token logprobs (token text -> natural log) and the answer's mean.

        Tokens are matched after stripping spaces and punctuation, case-insensitively; several spellings of one
        word add up. A word missing from the list gets the smallest listed logprob (an upper bound).

        Raises:
            ValueError: neither "yes" nor "no" is among the tokens, or a value is not a finite number.
        """
        mass = {_YES: 0.0, _NO: 0.0}
        listed = []
        for token, logprob in top_logprobs.items():
            if not isinstance(logprob, (int, float)) or math.isnan(logprob) or logprob > 0:
                raise ValueError(f"logprob of {token!r} must be a number <= 0, got {logprob!r}")
            listed.append(logprob)
            word = str(token).strip().strip(".,:;!\"'").lower()
            if word in mass:
                mass[word] += math.exp(logprob)
        if not mass[_YES] and not mass[_NO]:
            raise ValueError(f"neither 'yes' nor 'no' is among the next tokens {sorted(top_logprobs)[:8]}")
        floor = math.exp(min(listed))
        p_yes, p_no = mass[_YES] or floor, mass[_NO] or floor
        v = math.log(p_yes) - math.log(p_no)
        z = (v - V_MID) / V_SCALE
        if answer_logprob is not None:
            if not math.isfinite(answer_logprob):
                raise ValueError(f"answer_logprob must be finite, got {answer_logprob!r}")
            z = (z + (answer_logprob - A_MID) / A_SCALE) / 2
        score = 10 / (1 + math.exp(-2 * (z - self.accept_at)))
        return Verdict(p_yes / (p_yes + p_no), answer_logprob, z, score, z >= self.accept_at)

    def _read(self, reply: Any) -> Verdict:
        meta = getattr(reply, "response_metadata", None) or {}
        content = (meta.get("logprobs") or {}).get("content") or []
        if not content or not content[0].get("top_logprobs"):
            raise _NoLogprobs("the reply carries no logprobs", permanent=True)
        top = {
            str(t.get("token", "")): float(t.get("logprob", -math.inf)) for t in content[0]["top_logprobs"]
        }
        top = {t: lp for t, lp in top.items() if math.isfinite(lp)}
        scored = meta.get("prompt_logprobs")
        answer = sum(scored) / len(scored) if scored else None
        try:
            return self.verdict(top, answer)
        except ValueError as exc:
            raise _NoLogprobs(str(exc), permanent=False) from exc

    def _critique(self, verdict: Verdict, problem: str | None) -> Critique:
        if verdict.accepted:
            return Critique(
                is_acceptable=True,
                score=verdict.score,
                feedback=f"Judged correct and appropriate (P(yes) {verdict.p_yes:.2f}).",
            )
        problem = (
            problem or ""
        ).strip() or "The answer looks wrong, off topic or badly phrased for the task."
        return Critique(
            issues=[problem],
            suggestions=["Re-check the facts, numbers, tone and format against the task."],
            is_acceptable=False,
            score=verdict.score,
            feedback=f"{problem} (P(yes) {verdict.p_yes:.2f})",
        )

    def _hand_over(self, exc: Exception) -> None:
        """Re-raise `exc` unless the fallback should judge: no usable logprobs, or the options were refused.

        A model that returns no logprobs at all (or refuses the options) is remembered: later calls go straight
        to the fallback. The flag is only ever set, so concurrent runs never see it flip back.
        """
        if isinstance(exc, _NoLogprobs):
            if exc.permanent:
                self._no_logprobs = True
            return
        if not _is_refusal(exc):
            raise exc
        self._no_logprobs = True

    def _limits(self) -> dict[str, Any]:
        return {"retries": self.retries, "timeout_s": self.timeout_s}

    # -- sync and async drivers ------------------------------------------------------------------------------
    def critique(self, request: CritiqueRequest, config: RunnableConfig | None = None) -> Critique:
        if self._no_logprobs:
            return self.fallback.critique(request, config)
        judge, messages = self._judge_input(request)
        try:
            verdict = self._read(call(judge, messages, config, **self._limits()))
        except Exception as exc:
            self._hand_over(exc)
            return self.fallback.critique(request, config)
        problem = None
        if self.explain and not verdict.accepted:
            problem = call(self._explainer, self._explain_input(request), config, **self._limits()).text
        return self._critique(verdict, problem)

    async def acritique(self, request: CritiqueRequest, config: RunnableConfig | None = None) -> Critique:
        if self._no_logprobs:
            return await self.fallback.acritique(request, config)
        judge, messages = self._judge_input(request)
        try:
            verdict = self._read(await acall(judge, messages, config, **self._limits()))
        except Exception as exc:
            self._hand_over(exc)
            return await self.fallback.acritique(request, config)
        problem = None
        if self.explain and not verdict.accepted:
            reply = await acall(self._explainer, self._explain_input(request), config, **self._limits())
            problem = reply.text
        return self._critique(verdict, problem)


def _is_embedded(model: BaseChatModel) -> bool:
    from reflection_graph.models.embedded import EmbeddedChatModel

    return isinstance(model, EmbeddedChatModel)


def _call_options(model: BaseChatModel, **options: Any) -> dict[str, Any]:
    """Call options for `model`: OpenAI-compatible clients also get `max_tokens` in the body (see models.py)."""
    fields = type(model).model_fields
    if "extra_body" in fields and "max_tokens" in options:
        body = dict(getattr(model, "extra_body", None) or {})
        body["max_tokens"] = options["max_tokens"]
        options["extra_body"] = body
    if "temperature" in fields:
        options["temperature"] = 0.0
    return options


def _is_refusal(exc: BaseException) -> bool:
    """A model that rejects the logprob options (bad request, unsupported), not a transient fault."""
    if is_transient(exc):
        return False
    if isinstance(exc, (NotImplementedError, TypeError)):
        return True
    return getattr(exc, "status_code", None) in (400, 404, 422, 500, 501)
