"""Text shaping for the memory: Unicode-safe cleaning, task terms, Jaccard similarity and keys.

Terms are NFKC-normalized, case-folded words ("café" stays "café"; English words lose one suffix), and character
bigrams for scripts written without spaces (Chinese, Japanese, Thai, ...). A task keeps at most `MAX_TASK_TERMS`
(64) terms, its most frequent, so a 10,000-word task costs a bounded number of store operations.

Text is stored surrogate-safe: a lone UTF-16 surrogate (valid JSON `"\\ud800"`, but not encodable as UTF-8, so
SQLite and Postgres refuse it) is replaced by U+FFFD; an escaped surrogate pair becomes the character it encodes.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections import Counter

MAX_TASK_TERMS = 64  # most distinct terms per task (indexed per entry, and read per query)
MAX_LESSON_CHARS = 160

_STOP_WORDS = frozenset(
    """a about above after again against all am an and any are as at be been before being below between both but by
    can could did do does doing down during each few for from further had has have having he her here hers him his
    how i if in into is it its itself just me more most my no nor not now of off on once only or other our ours out
    over own same she should so some such than that the their theirs them then there these they this those through
    to too under until up very was we were what when where which while who whom why will with would you your yours
    please using use via make given""".split()
)
WORD = re.compile(r"[^\W_]+")  # runs of Unicode letters and digits
# Scripts written without spaces between words (Thai, Lao, Myanmar, Khmer, Hangul, kana, CJK ideographs): a run of
# them is indexed as overlapping character bigrams, so "丁寧なメール" and "メールを丁寧に" share terms.
_NO_SPACE = (
    "\u0e00-\u0eff\u1000-\u109f\u1100-\u11ff\u1780-\u17ff\u3005-\u3007\u3040-\u30ff\u3130-\u318f"
    "\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\U00020000-\U0003134f"
)
_SCRIPT_RUN = re.compile(f"([{_NO_SPACE}]+)|([^{_NO_SPACE}]+)")
SURROGATE = re.compile("[\ud800-\udfff]")


def _stem(word: str) -> str:
    """Strip one common English suffix so that 'declining', 'declined' and 'decline' share a stem."""
    for suffix in ("ing", "ed", "es", "s", "e"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            if suffix == "s" and word.endswith("ss"):
                return word
            return word[: -len(suffix)]
    return word


def clean_text(text: str) -> str:
    """`text` safe to store in any backend: a lone surrogate (valid JSON "\\ud800", not encodable as UTF-8)
    becomes U+FFFD; an escaped surrogate *pair* becomes the character it encodes."""
    if not SURROGATE.search(text):
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def _normalize(text: str) -> str:
    return unicodedata.normalize("NFKC", clean_text(text)).casefold()


def _terms(text: str) -> list[str]:
    """All terms of `text` in order, repeats included (see `task_tokens`)."""
    terms: list[str] = []
    for word in WORD.findall(_normalize(text)):
        for no_space, spaced in _SCRIPT_RUN.findall(word):
            if no_space:
                pairs = [no_space[i : i + 2] for i in range(len(no_space) - 1)]
                terms.extend(pairs or [no_space])
            elif len(spaced) > 1 and spaced not in _STOP_WORDS:
                terms.append(_stem(spaced) if spaced.isascii() else spaced)
    return terms


def task_tokens(text: str) -> frozenset[str]:
    """Return the normalized term set used for task similarity.

    The text is NFKC-normalized and case-folded ("ＣＡＦÉ" and "café" agree). Words are runs of Unicode letters
    and digits; stop words and one-letter words are dropped, and English (ASCII) words lose one common suffix
    (`ing`, `ed`, `es`, `s`, `e`); other words are kept as they are ("café" stays "café"). Scripts written
    without spaces (Chinese, Japanese, Korean, Thai, ...) give overlapping character bigrams instead of words.
    A lone surrogate counts as U+FFFD (no word). At most `MAX_TASK_TERMS` terms are kept: the most frequent
    ones, earliest first among equals, so a 10,000-word task costs no more store operations than a paragraph.

    Args:
        text: Any text, usually a task.

    Returns:
        The set of terms (empty for text without content words).
    """
    counts = Counter(_terms(text))
    if len(counts) <= MAX_TASK_TERMS:
        return frozenset(counts)
    return frozenset(term for term, _ in counts.most_common(MAX_TASK_TERMS))  # ties: first seen first


def jaccard(a: frozenset[str] | set[str], b: frozenset[str] | set[str]) -> float:
    """Return |a & b| / |a | b| (0.0 when both are empty)."""
    if not a or not b:
        return 0.0
    inter = len(a & b)
    return inter / (len(a) + len(b) - inter)


def task_key(task: str) -> str:
    """The store key of a task's entry: a digest of its NFKC-normalized, case-folded, whitespace-collapsed text.

    So the NFC and NFD forms of one task ("é" as one code point or as "e" and a combining accent), which match
    each other in search, are also saved as one entry.
    """
    normalized = " ".join(_normalize(task).split())
    return hashlib.sha256(normalized.encode("utf-8")).hexdigest()[:32]


def lesson_key(text: str) -> str:
    """What two lessons must share to count as one: their normalized words."""
    return " ".join(WORD.findall(_normalize(text)))


def shorten(text: str, limit: int = MAX_LESSON_CHARS) -> str:
    """`text` on one line, cut at a word boundary to at most `limit` characters (ending in "...")."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[: limit - 3].rsplit(" ", 1)[0].rstrip(",;:")
    return cut + "..."
