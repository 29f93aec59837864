"""A critic that reads a model's token probabilities instead of asking it for JSON, with nothing fitted to data.

A small *base* model (the embedded Gemma 3 270M) asked for a JSON verdict copies key names and scores nearly
everything 10. What such a model does is assign probabilities to text. `LogprobCritic` reads one of two signals:

- `"likelihood"` (the default where the model reports the probabilities of a prompt's tokens, i.e. the embedded
  model): the mean log-probability `a` of the candidate's own tokens after `Task: ...` / `Answer:`. The score is
  `10 * exp(a)`, ten times the geometric-mean probability per token, and the candidate is accepted when that
  probability is at least one half (score >= 5): a bar that rarely passes, since this judge is weak.
- `"verdict"` (the default elsewhere, e.g. through `ChatOpenAI`, whose chat completions report only next-token
  logprobs): after a few-shot prompt ending in `Correct:`, `p = P(" Yes") / (P(" Yes") + P(" No"))` (G-Eval style:
  a probability, not a sampled word). The score is `10 * p`, accepted when `p >= 0.5`.

No constant is fitted on any data set. Measured by `bench/bench_critic.py` (with confidence intervals), the
likelihood ranks a good answer above a bad one more often than the verdict does, on pairs this project wrote; on
pairs written elsewhere it was the best signal this model offers, at about 69%. The embedded model is a weak judge:
gains on it come from verifiers (tests, rules), not from its own opinion. When it rejects, one more short call
writes the problem line (free text cut at the line end, as in the few-shot examples).

A server that returns no logprobs, or refuses the options, makes the critic hand every later call to its
`fallback` (by default an `LLMCritic` on the same model). The embedded model scores each text from an empty
cache, so the same candidate gets the same score whatever ran before it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage
from langchain_core.runnables import Runnable, RunnableConfig

from reflection_graph.critics._logprob_reading import (
    LogprobReadingCritic,
    next_token_logprobs,
    word_probabilities,
)
from reflection_graph.critics.base import Critic, CritiqueRequest, is_refusal
from reflection_graph.critics.llm import LLMCritic
from reflection_graph.critique import Critique
from reflection_graph.models import describe
from reflection_graph.prompts import JUDGE_EXAMPLES, JUDGE_PROMPT, LIKELIHOOD_PROMPT, render_prompt

__all__ = ["LogprobCritic", "Signal", "Verdict"]

Signal = Literal["auto", "likelihood", "verdict"]
_YES, _NO = "yes", "no"
_PUNCTUATION = ".,:;!\"'"  # stripped around a token before it is matched to yes or no


@dataclass(frozen=True)
class Verdict:
    """The critic's reading of one candidate (nothing in it is fitted to data).

    Attributes:
        signal: `"likelihood"` or `"verdict"`, the signal that set the score.
        p_yes: `P(Yes) / (P(Yes) + P(No))` for the next token (verdict signal; None otherwise).
        answer_logprob: mean log-probability of the candidate's tokens (likelihood signal; None otherwise).
        score: on the 0-10 scale: `10 * exp(answer_logprob)` or `10 * p_yes`.
        accepted: `score >= 5` (a per-token probability, or P(Yes), of at least one half).
    """

    signal: str
    p_yes: float | None
    answer_logprob: float | None
    score: float
    accepted: bool


class _NoLogprobs(Exception):
    """The reply carried no usable next-token logprobs (`permanent`: none at all, so the model gives none)."""

    def __init__(self, message: str, *, permanent: bool) -> None:
        super().__init__(message)
        self.permanent = permanent


class LogprobCritic(LogprobReadingCritic):
    """Judge a candidate from the critic model's token probabilities (nothing fitted; see the module doc).

    Args:
        model: the judge: the embedded model (either signal) or a chat model whose replies carry OpenAI-style
            `logprobs` (e.g. `ChatOpenAI` against llama.cpp's server; the verdict signal).
        signal: `"likelihood"`, `"verdict"`, or `"auto"`: the likelihood on the embedded model, else the verdict.
        examples: the few-shot block of the verdict and explanation prompts (see `prompts.JUDGE_EXAMPLES`).
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
        signal: Signal = "auto",
        examples: str = JUDGE_EXAMPLES,
        top_logprobs: int = 20,
        explain: bool = True,
        fallback: Critic | None = None,
        max_candidate_chars: int = 3000,
        retries: int = 2,
        timeout_s: float | None = None,
        name: str = "logprob",
    ) -> None:
        super().__init__(model, retries=retries, timeout_s=timeout_s, name=name)
        self._reading(top_logprobs, max_candidate_chars)
        if signal not in ("auto", "likelihood", "verdict"):
            raise ValueError(f"signal must be 'auto', 'likelihood' or 'verdict', got {signal!r}")
        embedded = _is_embedded(model)
        if signal == "likelihood" and not embedded:
            raise ValueError(
                "signal='likelihood' needs the probabilities of the prompt's tokens, which only the embedded "
                "model reports; use signal='verdict' (or 'auto') for this model"
            )
        self.signal: str = ("likelihood" if embedded else "verdict") if signal == "auto" else signal
        self.examples = examples
        self.explain = explain
        self.fallback: Critic = self._stand_in(fallback, "fallback")
        self._judge = self._one_token_reader()
        self._explainer = self._at_temperature_zero(max_tokens=48, stop=["\n"])
        self._no_logprobs = False  # set once (never reset) when the model shows it returns no logprobs

    stand_in_argument = "fallback"  # for_run: a new model or critique prompt goes to the fallback too
    default_stand_in = LLMCritic

    # -- shared helpers --------------------------------------------------------------------------------------
    def prompt(self, request: CritiqueRequest) -> str:
        """The few-shot verdict prompt for `request` (it ends with `Correct:`)."""
        return render_prompt(JUDGE_PROMPT, {**self._values(request), "examples": self.examples})

    def likelihood_prompt(self, request: CritiqueRequest) -> str:
        """The prompt whose `Answer:` the candidate's likelihood is read after (it ends with the candidate)."""
        return render_prompt(LIKELIHOOD_PROMPT, self._values(request))

    def _values(self, request: CritiqueRequest) -> dict[str, str]:
        return {
            "task": request.task.strip(),
            "context": f"Context: {request.context.strip()}\n" if request.context else "",
            "candidate": self._candidate(request),
        }

    def _candidate(self, request: CritiqueRequest) -> str:
        return self._cut(request.candidate)

    def _judge_input(self, request: CritiqueRequest) -> tuple[Runnable[Any, Any], list[BaseMessage]]:
        if self.signal == "likelihood":  # the candidate's own tokens only: no next token wanted
            judge = self._judge.bind(score_text=" " + self._candidate(request), top_logprobs=0)
            return judge, [HumanMessage(self.likelihood_prompt(request))]
        return self._judge, [HumanMessage(self.prompt(request))]

    def _explain_input(self, request: CritiqueRequest) -> list[BaseMessage]:
        return [HumanMessage(self.prompt(request) + " No\nProblem:")]

    def verdict(self, top_logprobs: dict[str, float]) -> Verdict:
        """The verdict signal from next-token logprobs (token text -> natural log): score `10 * P(yes)`.

        Tokens are matched after stripping spaces and punctuation, case-insensitively; several spellings of one
        word add up. A word missing from the list gets the smallest listed logprob (an upper bound).

        Raises:
            ValueError: neither "yes" nor "no" is among the tokens, or a value is not a finite number.
        """
        yes, no, floor = word_probabilities(top_logprobs, _YES, _NO, punctuation=_PUNCTUATION)
        if not yes and not no:
            raise ValueError(f"neither 'yes' nor 'no' is among the next tokens {sorted(top_logprobs)[:8]}")
        p_yes, p_no = yes or floor, no or floor
        p = p_yes / (p_yes + p_no)
        return Verdict("verdict", p, None, 10 * p, p >= 0.5)

    def likelihood(self, token_logprobs: list[float]) -> Verdict:
        """The likelihood signal from the candidate's token logprobs: score `10 * exp(mean)`.

        Raises:
            ValueError: no tokens, or a value that is not a finite number <= 0.
        """
        if not token_logprobs:
            raise ValueError("the candidate has no scored tokens")
        for value in token_logprobs:
            if not isinstance(value, (int, float)) or not math.isfinite(value) or value > 0:
                raise ValueError(f"a token logprob must be a finite number <= 0, got {value!r}")
        mean = sum(token_logprobs) / len(token_logprobs)
        score = 10 * math.exp(mean)
        return Verdict("likelihood", None, mean, score, score >= 5)

    def _read(self, reply: Any) -> Verdict:
        meta = getattr(reply, "response_metadata", None) or {}
        try:
            if self.signal == "likelihood":
                scored = meta.get("prompt_logprobs")
                if not scored:
                    raise _NoLogprobs("the reply carries no prompt logprobs", permanent=True)
                return self.likelihood([float(v) for v in scored])
            top = next_token_logprobs(reply)
            if top is None:
                raise _NoLogprobs("the reply carries no logprobs", permanent=True)
            return self.verdict({t: lp for t, lp in top.items() if math.isfinite(lp)})
        except ValueError as exc:
            raise _NoLogprobs(str(exc), permanent=False) from exc

    def _critique(self, verdict: Verdict, problem: str | None) -> Critique:
        if verdict.accepted:
            return Critique(
                is_acceptable=True, score=verdict.score, feedback="Judged correct and appropriate."
            )
        problem = (
            problem or ""
        ).strip() or "The answer looks wrong, off topic or badly phrased for the task."
        return Critique(
            issues=[problem],
            suggestions=["Re-check the facts, numbers, tone and format against the task."],
            is_acceptable=False,
            score=verdict.score,
            feedback=problem,
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
        if not is_refusal(exc, TypeError):
            raise exc
        self._no_logprobs = True

    # -- sync and async drivers ------------------------------------------------------------------------------
    def critique(self, request: CritiqueRequest, config: RunnableConfig | None = None) -> Critique:
        if self._no_logprobs:
            return self.fallback.critique(request, config)
        judge, messages = self._judge_input(request)
        try:
            verdict = self._read(self._call(judge, messages, config))
        except Exception as exc:
            self._hand_over(exc)
            return self.fallback.critique(request, config)
        problem = None
        if self.explain and not verdict.accepted:
            problem = self._call(self._explainer, self._explain_input(request), config).text
        return self._critique(verdict, problem)

    async def acritique(self, request: CritiqueRequest, config: RunnableConfig | None = None) -> Critique:
        if self._no_logprobs:
            return await self.fallback.acritique(request, config)
        judge, messages = self._judge_input(request)
        try:
            verdict = self._read(await self._acall(judge, messages, config))
        except Exception as exc:
            self._hand_over(exc)
            return await self.fallback.acritique(request, config)
        problem = None
        if self.explain and not verdict.accepted:
            problem = (await self._acall(self._explainer, self._explain_input(request), config)).text
        return self._critique(verdict, problem)


def _is_embedded(model: BaseChatModel) -> bool:
    """Whether `model` scores its prompt's own tokens (the embedded model): the likelihood signal needs it."""
    return describe(model).prompt_scoring
