"""A rule-based ground truth for the declining-a-job-offer emails in emails.jsonl (a `module:function` scorer).

    reflection-graph eval datasets/emails.jsonl --scorer email_rules:score --out eval-emails

The score is the share of eight checks the email passes: it declines, does not accept, thanks, names the company
and the role, opens with a greeting, closes with a sign-off, carries no prompt or critique debris ("Score:",
"is_acceptable", "Revised answer", ...), and is 25 to 250 words long. The loop's critic never sees these rules.
"""

from __future__ import annotations

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
    r"^\s*(sincerely|best|best regards|kind regards|regards|warm regards|yours\b.*|thank you|thanks|"
    r"with gratitude|respectfully)\s*,?\s*$",
    re.I | re.M,
)
DEBRIS = re.compile(
    r"(score\s*[:=]|/10\b|is_acceptable|needs_improvement|\bjson\b|revised answer|\bdraft\s*:|\btask\s*:|"
    r"\bcritique\b|\bfeedback\s*:|\bissues\s*:|\bsuggestions?\s*:|candidate answer|\bround \d)",
    re.I,
)


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
        "length_25_to_250_words": 25 <= words <= 250,
    }


def score(record: dict[str, Any], candidate: str) -> float:
    """The share of the checks passed, in [0, 1]."""
    results = checks(record, candidate)
    return sum(results.values()) / len(results)
