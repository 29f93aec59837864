"""How an answer misses an instruction on the shape of its words, sentences or lines (no arguments).

Each function measures the miss with the checker's own rule (its word split, sentence splitter, vowel and consonant
sets) and names the change; `SHAPES` maps the instruction ids to them, for `DETAILS`.
"""

from __future__ import annotations

import importlib
from collections import Counter
from collections.abc import Callable, Mapping
from itertools import pairwise
from typing import Any

from reflection_graph.critics._instruction_miss import (
    Miss,
    listed,
    quote,
    some,
    split_sentences,
    without_punctuation,
)

__all__ = ["SHAPES"]


_CONSONANTS = frozenset("bcdfghjklmnpqrstvwxyz")


def _consonant_clusters(text: str, args: Mapping[str, Any]) -> Miss:
    words = text.lower().strip().split()
    bare = [w for w in words if not any(a in _CONSONANTS and b in _CONSONANTS for a, b in pairwise(w))]
    shown = listed([repr(w) for w in dict.fromkeys(bare)])
    return Miss(
        f"every word must hold two consonants in a row; {len(bare)} of its {some(len(words), 'word')} "
        f"{'does' if len(bare) == 1 else 'do'} not: {shown}",
        f"Replace or drop each word without two consonants together ({shown}).",
    )


_PALINDROMES = "level, radar, civic, refer, rotor, kayak, madam, stats, tenet, racecar, repaper, reviver"


def _palindromes(text: str, args: Mapping[str, Any]) -> Miss:
    found = [w for w in without_punctuation(text).lower().split() if w == w[::-1] and len(w) >= 5]
    return Miss(
        f"the answer must hold at least 10 palindromes of 5 or more letters; it has {len(found)}"
        + (f" ({listed(found)})" if found else ""),
        f"Use {some(10 - len(found), 'more palindrome')} of 5 or more letters (such as {_PALINDROMES}).",
    )


def _no_consecutive(text: str, args: Mapping[str, Any]) -> Miss:
    words = [w for w in without_punctuation(text).lower().split() if w]
    pairs = [f"{a!r} {b!r}" for a, b in pairwise(words) if a[0] == b[0]]
    return Miss(
        f"no two neighbouring words may start with the same letter; {some(len(pairs), 'pair')} do: "
        + listed(pairs, 5),
        f"Reword so that no two neighbouring words start with the same letter: {listed(pairs, 5)}.",
    )


_PRIMES = frozenset(
    (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71, 73, 79, 83, 89, 97)
)


def _prime_lengths(text: str, args: Mapping[str, Any]) -> Miss:
    wrong = [
        f"{w!r} ({len(w)})" for w in dict.fromkeys(without_punctuation(text).split()) if len(w) not in _PRIMES
    ]
    return Miss(
        "every word's length must be a prime number (2, 3, 5, 7, 11, ...; punctuation not counted); these are "
        f"not: {listed(wrong)}",
        f"Replace each word whose length is not prime: {listed(wrong)}.",
    )


def _three_vowels(text: str, args: Mapping[str, Any]) -> Miss:
    lines = text.strip().split("\n")
    if len(lines) != 1:
        return Miss(
            f"the answer must be one paragraph on one line; it has {len(lines)} lines",
            "Write the answer as one paragraph, with no line breaks.",
        )
    counts = Counter(c for c in lines[0].lower() if c in "aeiou")
    used = sorted(counts)
    keep = sorted(v for v, _ in counts.most_common(3))
    drop = [v for v in used if v not in keep]
    return Miss(
        f"the answer may use at most 3 of the vowels a, e, i, o, u; it uses {len(used)}: {', '.join(used)}",
        f"Drop or replace every word with {' or '.join(drop)}, keeping to the vowels {', '.join(keep)}.",
    )


def _sentence_balance(text: str, args: Mapping[str, Any]) -> Miss:
    sentences = split_sentences(text)
    counts = {mark: sum(1 for s in sentences if s.endswith(mark)) for mark in ".?!"}
    shown = (
        f"{some(counts['.'], 'statement')} (.), {some(counts['?'], 'question')} (?), "
        f"{some(counts['!'], 'exclamation')} (!)"
    )
    most = max(counts.values())
    return Miss(
        f"the answer must hold as many statements as questions and exclamations; it has {shown}",
        f"Make the three counts equal, e.g. {most} of each (it has {shown}).",
    )


def _sentence_lengths(text: str, args: Mapping[str, Any]) -> Miss:
    sentences = split_sentences(text)
    lengths = ", ".join(str(len(s.strip())) for s in sentences[:8])
    if len(sentences) != 3:
        return Miss(
            f"the answer must be exactly 3 sentences of the same length in characters; it has {len(sentences)} "
            f"({lengths} characters)",
            f"Write exactly 3 sentences (it has {len(sentences)}), each of the same number of characters.",
        )
    return Miss(
        f"the 3 sentences must have the same number of characters; they have {lengths}",
        f"Make the 3 sentences the same number of characters long (they have {lengths}).",
    )


def _sub_bullets(text: str, args: Mapping[str, Any]) -> Miss:
    chunks = text.split("*")[1:]
    bare = [f"{quote(chunk, 30)}" for chunk in chunks if "-" not in chunk]
    return Miss(
        "every bullet point (*) must be followed by a sub-bullet (-) before the next one; "
        f"{some(len(bare), 'bullet')} of {len(chunks)} {'has' if len(bare) == 1 else 'have'} none: {listed(bare, 3)}",
        f"Add a sub-bullet line starting with - under each bullet that has none: {listed(bare, 3)}.",
    )


def _line_indent(text: str, args: Mapping[str, Any]) -> Miss:
    lines = text.split("\n")
    for line in list(lines):  # as the checker drops blank lines
        if not line.strip():
            lines.remove(line)
    indents = [len(line) - len(line.lstrip(" ")) for line in lines]
    for index in range(1, len(indents)):
        if indents[index] <= indents[index - 1]:
            return Miss(
                f"each line must be indented by more spaces than the line before; line {index + 1} "
                f"({quote(lines[index].strip(), 30)}) has {indents[index]}, the line before {indents[index - 1]}",
                f"Indent line {index + 1} by at least {indents[index - 1] + 1} spaces, and every later line by "
                "more than the one before it.",
            )
    return Miss("")


def _emoji_endings(text: str, args: Mapping[str, Any]) -> Miss:
    emoji = importlib.import_module("emoji")
    sentences = split_sentences(text)

    def stripped(index: int) -> str:
        return str(without_punctuation(sentences[index]).strip())

    for index in range(len(sentences)):
        bare = stripped(index)
        ends = bool(bare) and (
            emoji.is_emoji(bare[-1]) or emoji.is_emoji(bare[-2] if len(bare) > 1 else bare[-1])
        )
        if not ends and index + 1 < len(sentences) and stripped(index + 1):
            ends = bool(bare) and emoji.is_emoji(stripped(index + 1)[0])
        if not ends:
            return Miss(
                f"every sentence must end with an emoji; sentence {index + 1} of {len(sentences)} does not: "
                f"{quote(sentences[index])}",
                f"End sentence {index + 1} ({quote(sentences[index], 30)}) with an emoji, as every sentence must.",
            )
    return Miss("")


SHAPES: dict[str, Callable[[str, Mapping[str, Any]], Miss]] = {
    "format:emoji": _emoji_endings,
    "format:line_indent": _line_indent,
    "format:sub-bullets": _sub_bullets,
    "ratio:sentence_balance": _sentence_balance,
    "ratio:sentence_words": _sentence_lengths,
    "words:consonants": _consonant_clusters,
    "words:no_consecutive": _no_consecutive,
    "words:palindrome": _palindromes,
    "words:prime_lengths": _prime_lengths,
    "words:vowel": _three_vowels,
}
