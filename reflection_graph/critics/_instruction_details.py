"""How an answer misses an instruction, measured the way the instruction's checker measures it.

`DETAILS` maps an instruction id to a function of the answer and the checker's arguments that says, in words, what
the answer has instead of what the instruction asks ("the word 'whisper' must appear 3 times; it appears 1"). The
verdict is always the checker's (`InstructionCritic`); these only explain a failure.
"""

from __future__ import annotations

import importlib
import re
import string
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["DETAILS"]


def _number(value: Any) -> str:
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


def _times(count: int) -> str:
    return "once" if count == 1 else f"{count} times"


def _keywords_multiple(text: str, args: Mapping[str, Any]) -> str:
    parts = []
    for slot, wanted in zip(
        ("keyword1", "keyword2", "keyword3", "keyword4", "keyword5"), (1, 2, 3, 5, 7), strict=True
    ):
        word = str(args.get(slot) or "")
        found = text.lower().count(word.lower())
        if word and found != wanted:
            parts.append(f"the word {word!r} must appear {_times(wanted)}; it appears {found}")
    return "; ".join(parts)


def _count_words(text: str) -> int:
    util = importlib.import_module("if_verifiable.ifeval.instructions_util")
    return int(util.count_words(text))


def _word_count_range(text: str, args: Mapping[str, Any]) -> str:
    low, high = _number(args.get("min_words")), _number(args.get("max_words"))
    return f"the answer must have between {low} and {high} words; it has {_count_words(text)}"


def _number_words(text: str, args: Mapping[str, Any]) -> str:
    return f"the answer must have {args.get('relation')} {_number(args.get('num_words'))} words; it has {_count_words(text)}"


def _unique_words(text: str, args: Mapping[str, Any]) -> str:
    unique = {w.strip(string.punctuation + " ") for w in text.lower().split()}
    return f"the answer must use at least {_number(args.get('N'))} different words; it uses {len(unique)}"


def _repeats(text: str, args: Mapping[str, Any]) -> str:
    words = Counter(text.lower().translate(str.maketrans("", "", string.punctuation)).split())
    limit = float(args.get("small_n") or 0)
    over = [f"{w!r} ({n} times)" for w, n in words.most_common() if n > limit][:5]
    return f"no word may appear more than {_number(args.get('small_n'))} times; repeated more: " + ", ".join(
        over
    )


def _keyword_frequency(text: str, args: Mapping[str, Any]) -> str:
    word = str(args.get("keyword"))
    found = len(re.findall(word, text, flags=re.IGNORECASE))
    return f"the word {word!r} must appear {args.get('relation')} {_number(args.get('frequency'))} times; it appears {found}"


def _keywords_existence(text: str, args: Mapping[str, Any]) -> str:
    missing = [k for k in args.get("keywords") or [] if not re.search(k, text, flags=re.IGNORECASE)]
    return "missing keywords: " + ", ".join(repr(k) for k in missing)


def _forbidden_words(text: str, args: Mapping[str, Any]) -> str:
    used = [
        w
        for w in args.get("forbidden_words") or []
        if re.search(r"\b" + w + r"\b", text, flags=re.IGNORECASE)
    ]
    return "uses forbidden words: " + ", ".join(repr(w) for w in used)


def _bullets(text: str, args: Mapping[str, Any]) -> str:
    found = len(re.findall(r"^\s*\*[^\*].*$", text, flags=re.MULTILINE)) + len(
        re.findall(r"^\s*-.*$", text, flags=re.MULTILINE)
    )
    return f"the answer must have exactly {_number(args.get('num_bullets'))} bullet points; it has {found}"


DETAILS: dict[str, Callable[[str, Mapping[str, Any]], str]] = {
    "count:keywords_multiple": _keywords_multiple,
    "count:unique_word_count": _unique_words,
    "count:word_count_range": _word_count_range,
    "detectable_format:number_bullet_lists": _bullets,
    "keywords:existence": _keywords_existence,
    "keywords:forbidden_words": _forbidden_words,
    "keywords:frequency": _keyword_frequency,
    "length_constraints:number_words": _number_words,
    "words:repeats": _repeats,
}
