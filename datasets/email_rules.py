"""A rule-based ground truth for the declining-a-job-offer emails in emails.jsonl (a `module:function` scorer).

    reflection-graph eval datasets/emails.jsonl --scorer email_rules:score --out eval-emails

The score is the share of nine checks the email passes: it declines, does not accept, thanks, names the company
and the role, opens with a greeting, closes with a sign-off, carries no prompt or critique debris ("Score:",
"is_acceptable", "Revised answer", ...), echoes nothing it was prompted with (the task's own instruction, or twelve
words in a row of the package's prompts, their worked examples included: a stock closing such as "Thank you
again for thinking of me. Best regards, Tom" is ten), and is 25 to 250 words long. The loop's
critic never sees these rules.

`real_email` is the README's bar for its first command: a greeting, the decline, thanks, a sign-off, the role or
the company named, no debris and no echo (any length).
"""

from __future__ import annotations

import functools
import re
from typing import Any

DECLINES = re.compile(
    r"\b(declin\w*|unable to|not be able to|cannot accept|can ?not accept|can't accept|regret\w*|turn(ing)? down|"
    r"will not be (accepting|joining|taking)|won't be (accepting|joining|taking)|not (to )?accept|pass on)\b",
    re.I,
)
ACCEPTS = re.compile(
    r"\b(i accept|i am (happy|pleased|excited|delighted|thrilled) to accept|i'm (happy|pleased|excited|delighted|"
    r"thrilled) to accept|look forward to (starting|joining))\b",
    re.I,
)
THANKS = re.compile(r"\b(thank\w*|grateful|appreciat\w*)\b", re.I)
GREETING = re.compile(r"^\s*(dear|hi|hello|good (morning|afternoon|evening))\b", re.I | re.M)
SIGN_OFF = re.compile(
    r"^\s*(sincerely( yours)?|yours sincerely|best|best regards|best wishes|kind regards|regards|warm regards|"
    r"warmly|cheers|all the best|yours\b.*|thank you|thanks|with gratitude|respectfully)\s*[,.!]?\s*$",
    re.I | re.M,
)
DEBRIS = re.compile(
    r"(score\s*[:=]|/10\b|is_acceptable|needs_improvement|\bjson\b|revised answer|\bdraft\s*:|\btask\s*:|"
    r"\bcritique\b|\bfeedback\s*:|\bissues\s*:|\bsuggestions?\s*:|candidate answer|\bround \d)",
    re.I,
)


_WORD = re.compile(r"[a-z0-9']+")
ECHO_WORDS = 12
"""An echo of a prompt: this many words in a row, copied from it."""


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


@functools.lru_cache(maxsize=1)
def _prompt_windows() -> frozenset[tuple[str, ...]]:
    """Every run of `ECHO_WORDS` words in the package's prompts (system messages, templates, worked examples)."""
    from reflection_graph import prompts

    texts = [value for name, value in vars(prompts).items() if name.isupper() and isinstance(value, str)]
    texts += list(prompts.FOCUS_PROMPTS.values())
    windows: set[tuple[str, ...]] = set()
    for text in texts:
        words = _words(text)
        windows.update(tuple(words[i : i + ECHO_WORDS]) for i in range(len(words) - ECHO_WORDS + 1))
    return frozenset(windows)


def echoes(record: dict[str, Any], candidate: str) -> bool:
    """True when the candidate repeats the task's instruction (its first six words) or a prompt of the package."""
    words = _words(candidate)
    task = _words(str(record.get("task", "")))[:6]
    joined = " ".join(words)
    if len(task) >= 4 and " ".join(task) in joined:
        return True
    windows = _prompt_windows()
    return any(tuple(words[i : i + ECHO_WORDS]) in windows for i in range(len(words) - ECHO_WORDS + 1))


def checks(record: dict[str, Any], candidate: str) -> dict[str, bool]:
    """Each check by name (True = passed)."""
    text = candidate.strip()
    words = len(text.split())
    return {
        "declines": bool(DECLINES.search(text)),
        "does_not_accept": not ACCEPTS.search(text),
        "thanks": bool(THANKS.search(text)),
        "names_company_and_role": str(record["company"]).lower() in text.lower()
        and str(record["role"]).lower() in text.lower(),
        "greeting": bool(GREETING.search(text)),
        "sign_off": bool(SIGN_OFF.search(text)),
        "no_debris": not DEBRIS.search(text),
        "no_echo": not echoes(record, text),
        "length_25_to_250_words": 25 <= words <= 250,
    }


REAL_EMAIL_CHECKS = ("greeting", "declines", "does_not_accept", "thanks", "sign_off", "no_debris", "no_echo")


def real_email(record: dict[str, Any], candidate: str) -> bool:
    """The README's bar: greeting, decline, thanks, sign-off, the role or the company, no debris, no echo."""
    results = checks(record, candidate)
    lowered = candidate.lower()
    names = str(record["company"]).lower() in lowered or str(record["role"]).lower() in lowered
    return names and all(results[name] for name in REAL_EMAIL_CHECKS)


def score(record: dict[str, Any], candidate: str) -> float:
    """The share of the checks passed, in [0, 1]."""
    results = checks(record, candidate)
    return sum(results.values()) / len(results)
