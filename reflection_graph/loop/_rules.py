"""The loop's stop and selection rules as pure functions (property-tested in tests/test_rules.py).

- Stop: `min_iterations` first, then accept, then the round limit, then the plateau (score, then no new issues).
  A plateau never stops a run while a verifier (tests, rule checks: `Critique.checks_total`) still reports
  failures and rounds are left: for a verifier, the same failures again are a reason to try differently.
- Select: a candidate that echoes a prompt, a system message, a critique or the review a revision was given is
  never accepted, and never chosen while another exists;
  then one that brought in a template placeholder (`[Your Name]`, see reflection_graph/_text/_placeholders.py) ranks
  below every candidate without one; then the verifier's count of passed checks outranks the judge's score; then
  the score. Ties across rounds go to
  the later round; ties among one round's samples go to the earlier sample (sample 0 of the first round is the
  plain greedy call).
"""

from __future__ import annotations

import functools
import operator
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from reflection_graph.settings import Settings
from reflection_graph.state import Round, StopReason
from reflection_graph.strategies.base import ALL_STOP_RULES, StopRule

__all__ = [
    "CUT_ISSUE",
    "CUT_ISSUES",
    "ECHO_ISSUE",
    "REPETITION_ISSUE",
    "accepts",
    "best_index",
    "best_sample",
    "bounded",
    "cut_issue",
    "echoes",
    "no_new_issues",
    "plateau",
    "rank",
    "select_round",
    "stop_reason",
    "verifier_failing",
]


def accepts(score: float, is_acceptable: bool, threshold: float | None) -> bool:
    """With a threshold the score decides (`score >= threshold`); without one the critic's verdict decides."""
    return score >= threshold if threshold is not None else is_acceptable


def plateau(scores: Sequence[float], patience: int | None, min_improvement: float) -> bool:
    """True when the best of the last `patience` scores beats the best before them by less than `min_improvement`."""
    if patience is None or len(scores) <= patience:
        return False
    before = max(scores[:-patience])
    recent = max(scores[-patience:])
    return recent < before + min_improvement


def _norm(issue: str) -> str:
    return " ".join(issue.casefold().split())


def no_new_issues(earlier: Iterable[str], current: Iterable[str]) -> bool:
    """True when the current round raises issues and every one of them was raised before."""
    now = {_norm(i) for i in current}
    return bool(now) and now <= {_norm(i) for i in earlier}


def verifier_failing(critique: Mapping[str, Any] | None) -> bool:
    """True when a verifier (tests, rule checks) judged the candidate and some of its checks failed."""
    if not critique:
        return False
    total, passed = critique.get("checks_total"), critique.get("checks_passed")
    return total is not None and (passed or 0) < total


def stop_reason(
    settings: Settings,
    trajectory: Sequence[Round],
    iteration: int,
    critique: Mapping[str, Any],
    accepted: bool,
    rules: frozenset[StopRule] = ALL_STOP_RULES,
) -> StopReason | None:
    """Why the loop stops after critique number `iteration` (`critique` is its dict), or None to revise again.

    Order: `min_iterations` first (nothing stops before it), then accept, then the round limit, then plateau
    (score, then no new issues), which a verifier's failures overrule. Only the `rules` given apply (a strategy's
    `stop_rules`). `trajectory` holds the earlier rounds.
    """
    if iteration < settings.min_iterations:
        return None
    if accepted and "accept" in rules:
        return "accepted"
    if iteration >= settings.max_iterations and "limit" in rules:
        return "max_iterations"
    if "plateau" not in rules or verifier_failing(critique):
        return None  # failures and rounds left: try again, never a plateau
    scores = [float(r["score"]) for r in trajectory if r["score"] is not None] + [float(critique["score"])]
    if plateau(scores, settings.patience, settings.min_improvement):
        return "plateau"
    if settings.stop_on_no_new_issues and trajectory:
        earlier = [i for r in trajectory for i in (r["critique"] or {}).get("issues", [])]
        if no_new_issues(earlier, critique.get("issues") or []):
            return "plateau"
    return None


_CRITIQUE_TEXT = re.compile(r"(?im)^\W*(?:score|acceptable|is_acceptable)\s*:|\"is_acceptable\"\s*:")
_ECHO_PREFIX = 40
"""A candidate that starts with the first this-many characters of a prompt is an echo of it."""
_ECHO_MIN_CHARS = 24
_ECHO_MIN_WORDS = 8
"""Shorter prompts (a bare question) are never taken for echoed: an answer may well restate them."""
_ECHO_MIN_OPENING_WORDS = 5
"""An opening of fewer whole words (a prompt that opens on a long URL or number) is matched by its characters only."""


def _words(text: str) -> list[str]:
    return re.findall(r"\w+", text.casefold())


@functools.lru_cache(maxsize=256)
def _prompt_shape(prompt: str) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
    """A prompt's opening (normalized), the whole words of that opening and all its words, computed once per
    prompt."""
    flat = " ".join(prompt.split())
    head = flat[:_ECHO_PREFIX].casefold()
    opening = _words(head)
    if len(flat) > _ECHO_PREFIX and flat[_ECHO_PREFIX - 1 : _ECHO_PREFIX + 1].isalnum():
        opening = opening[:-1]  # the opening ends inside a word: that word is not whole
    return head, tuple(opening), tuple(_words(prompt))


def echoes(candidate: str, prompts: Iterable[str]) -> bool:
    """True when `candidate` echoes one of `prompts` (the task, a system message) or a critique.

    For prompts of 8 words and 24 characters or more, an echo starts with the prompt's opening (its first 40
    characters, or the whole words of them with the punctuation and spacing between them changed, as in a review
    copied back with "format:quotes" written "format: quotes") or is mostly its words in order (80% of the
    candidate's words). A candidate that carries critique text ("Score: 7", "Acceptable: False", a JSON verdict)
    is an echo whatever the prompts.
    """
    text = candidate.strip()
    if not text:
        return False
    if _CRITIQUE_TEXT.search(text):
        return True
    opening = " ".join(text[: 4 * _ECHO_PREFIX].split()).casefold()
    first_words = _words(opening)
    words: list[str] | None = None
    for prompt in prompts:
        head, head_words, theirs = _prompt_shape(prompt)
        if len(theirs) < _ECHO_MIN_WORDS or len(head) < _ECHO_MIN_CHARS:
            continue  # a prompt too short (a bare question) to tell an echo from an answer restating it
        if opening.startswith(head):
            return True
        if len(head_words) >= _ECHO_MIN_OPENING_WORDS and tuple(first_words[: len(head_words)]) == head_words:
            return True
        if len(text) > 2 * len(prompt) + 40:
            continue  # far longer than the prompt: it cannot be mostly the prompt's words
        words = _words(text) if words is None else words
        if words and len(words) <= len(theirs) + 3:
            shared = sum(map(operator.eq, words, theirs))
            if shared >= 0.8 * len(words):
                return True
    return False


ECHO_ISSUE = "The reply repeats the prompt or the review it was given instead of answering the task."
"""The issue an echo (`echoes`) gets, whatever its critic said: it is never accepted."""
CUT_ISSUE = "The reply was cut off by its token limit (max_tokens) before it was finished."
"""The issue a candidate whose reply hit its reply limit gets, whatever its critic said."""
REPETITION_ISSUE = (
    "The reply fell into repeating the same passage word for word and was stopped; its repeats were dropped, so "
    "it may be unfinished."
)
"""The issue a candidate whose reply was stopped in a loop gets (`finish_reason` "repetition", the embedded
model's `stop_repetition`), whatever its critic said."""
CUT_ISSUES: dict[str, str] = {"length": CUT_ISSUE, "repetition": REPETITION_ISSUE}
"""The `finish_reason`s of a reply that did not finish, each with the issue its candidate gets: such a candidate is
cut, never accepted and never selected over a whole one."""


def cut_issue(reason: str | bool) -> str:
    """The issue of a candidate cut for `reason` (a key of `CUT_ISSUES`; anything else: its reply limit)."""
    return CUT_ISSUES.get(reason, CUT_ISSUE) if isinstance(reason, str) else CUT_ISSUE


def rank(entry: Mapping[str, Any]) -> tuple[bool, bool, bool, int, float]:
    """The sort key of a candidate (a round or a sample; higher is better): not an echo (`entry["echo"]`), then
    not cut (`entry["cut"]`: by its reply limit or in a loop, `CUT_ISSUES`), then no placeholder brought in
    (`entry["placeholder"]`), then the verifier's checks passed, then the score."""
    critique = entry.get("critique") or {}
    passed = int(critique.get("checks_passed") or 0)
    return (
        not entry.get("echo", False),
        not entry.get("cut", False),
        not entry.get("placeholder", False),
        passed,
        float(entry.get("score") or 0.0),
    )


def best_index(keys: Sequence[Any]) -> int:
    """The index of the highest key; ties go to the later one."""
    return max(range(len(keys)), key=lambda i: (keys[i], i))


def best_sample(samples: Sequence[Mapping[str, Any]]) -> int:
    """The index of the best of one round's samples by `rank`; ties go to the *earlier* one.

    A first round's sample 0 is the plain greedy call a user would make without the loop (`_calls.sampled`); the
    warmer samples must beat it on the verifier or the judge to replace it, never merely tie it.
    """
    keys = [rank(s) for s in samples]
    return max(range(len(keys)), key=lambda i: (keys[i], -i))


def select_round(trajectory: Sequence[Round], select: str) -> Round:
    """The round whose candidate the graph returns.

    `best`: by `rank` (no echo, not cut, then no placeholder, then checks passed, then score; ties to the later).
    `last`: the last round that is neither an echo nor brought in a placeholder (else the last that is not an
    echo, else the last).
    """
    if select == "best":
        return trajectory[best_index([rank(r) for r in trajectory])]
    clean = [r for r in trajectory if not r.get("echo", False)]
    whole = [r for r in clean if not r.get("placeholder", False)]
    return (whole or clean or list(trajectory))[-1]


def bounded(items: Sequence[Any], window: int) -> list[Any]:
    """The last `window` items (none for 0): prompts never grow with the round count."""
    return list(items[-window:]) if window > 0 else []
