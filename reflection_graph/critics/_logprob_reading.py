"""Reading a chat model's token log-probabilities: the base of the critics that judge by them.

`JudgeCritic` and `LogprobCritic` read the next token's listed alternatives (OpenAI-style `logprobs` in a reply's
`response_metadata`) and compare the probability of two words ("yes"/"no", "A"/"B"). What they share is here:
the reading of a reply (`next_token_logprobs`), the two words' probabilities (`word_probabilities`, `log_odds`),
and `LogprobReadingCritic`, the base that checks their common arguments, cuts long answers and binds the model
for a one-token reply with its alternatives.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from langchain_core.runnables import Runnable

from reflection_graph.critics.base import ModelCritic

__all__ = ["LogprobReadingCritic", "log_odds", "next_token_logprobs", "word_probabilities"]

PUNCTUATION = ".,:;!\"'*"
"""What is stripped around a token before it is matched to a word."""


def next_token_logprobs(reply: Any) -> dict[str, float] | None:
    """The first generated token's listed alternatives in `reply` (token text -> natural log), or None when the
    reply carries none.

    Raises:
        ValueError: a logprob that is not a number.
    """
    meta = getattr(reply, "response_metadata", None) or {}
    content = (meta.get("logprobs") or {}).get("content") or []
    if not content or not content[0].get("top_logprobs"):
        return None
    return {str(t.get("token", "")): float(t.get("logprob", -math.inf)) for t in content[0]["top_logprobs"]}


def word_probabilities(
    top_logprobs: Mapping[str, float], first: str, second: str, *, punctuation: str = PUNCTUATION
) -> tuple[float, float, float]:
    """`P(first)`, `P(second)` and the smallest listed probability, for the next token.

    Tokens are matched after stripping spaces and `punctuation`, case-insensitively, and several spellings of one
    word add up; a token listed with probability 0 (`-inf`) counts as not listed.

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
        word = str(token).strip().strip(punctuation).lower()
        if word in mass:
            mass[word] += math.exp(logprob)
    return mass[first.lower()], mass[second.lower()], math.exp(min(listed)) if listed else 0.0


def log_odds(top_logprobs: Mapping[str, float], first: str, second: str) -> float:
    """`log P(first) - log P(second)` for the next token, from its listed alternatives (token text -> logprob).

    Tokens are matched as `word_probabilities` does. A word not listed gets the smallest listed probability (an
    upper bound for it). When neither is listed the reply says nothing either way: 0.

    Raises:
        ValueError: a logprob that is not a number <= 0.
    """
    a, b, floor = word_probabilities(top_logprobs, first, second)
    if not a and not b:
        return 0.0
    return math.log(a or floor) - math.log(b or floor)


class LogprobReadingCritic(ModelCritic):
    """Base for critics that judge from a chat model's token probabilities (see the module doc).

    A subclass checks and sets its reading settings with `_reading(top_logprobs, max_candidate_chars)` after
    `ModelCritic.__init__`.
    """

    def _reading(self, top_logprobs: int, max_candidate_chars: int) -> None:
        """Check and set how many next-token alternatives to ask for (1 to 20, the OpenAI limit) and how long an
        answer may be before it is cut (head kept) so the prompts fit a small context window."""
        if not 1 <= top_logprobs <= 20:
            raise ValueError(f"top_logprobs must be between 1 and 20 (the OpenAI limit), got {top_logprobs}")
        if max_candidate_chars < 1:
            raise ValueError(f"max_candidate_chars must be >= 1, got {max_candidate_chars}")
        self.top_logprobs = top_logprobs
        self.max_candidate_chars = max_candidate_chars

    def _one_token_reader(self) -> Runnable[Any, Any]:
        """The model at temperature 0 for a one-token reply that lists its `top_logprobs` alternatives."""
        return self._at_temperature_zero(max_tokens=1, logprobs=True, top_logprobs=self.top_logprobs)

    def _cut(self, text: str) -> str:
        """`text` stripped (`(empty answer)` when empty), cut to `max_candidate_chars` with its head kept."""
        text = text.strip() or "(empty answer)"
        return text if len(text) <= self.max_candidate_chars else text[: self.max_candidate_chars] + " …"
