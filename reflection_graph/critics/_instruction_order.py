"""How an answer misses an instruction on what it repeats, in what order and where (the list marker, one of the
options and nothing else, the overlap with a reference text, the request repeated or a span of it, sentences that
grow by a step, a keyword in a given sentence), measured the way the instruction's checker measures it. `DETAILS` in
`_instruction_details.py` maps each instruction id to its function here.
"""

from __future__ import annotations

import importlib
import re
import string
from collections.abc import Mapping
from typing import Any

from reflection_graph.critics._instruction_miss import SHOWN, Miss, number, quote, split_sentences, times

__all__ = [
    "increment",
    "list_marker",
    "options_only",
    "overlap",
    "repeat_change",
    "repeat_span",
    "sentence_keyword",
]


def list_marker(text: str, args: Mapping[str, Any]) -> Miss:
    sep = str(args.get("sep"))
    found = len(re.findall(re.escape(sep), text))
    return Miss(
        f"the list marker {sep!r} must appear at least twice; it appears {times(found) if found else '0 times'}",
        f"Start each list item with {sep!r}, for at least two items.",
    )


def options_only(text: str, args: Mapping[str, Any]) -> Miss:
    options = str(args.get("options"))
    words = len(text.split())
    return Miss(
        f"the answer must be exactly one of the options {options} and nothing else; it is {words} words long: "
        f"{quote(text)}",
        f"Answer with exactly one of {options}, with no other words (the answer has {words}).",
    )


def overlap(text: str, args: Mapping[str, Any]) -> Miss:
    nltk = importlib.import_module("nltk")
    reference = str(args.get("reference_text"))
    mine = set(nltk.ngrams(text, 3))
    theirs = set(nltk.ngrams(reference, 3))
    share = 100 * len(mine & theirs) / len(mine) if mine else 0.0
    want = float(args.get("percentage") or 0)
    direction = "more" if share < want else "less"
    return Miss(
        f"the share of the answer's character trigrams found in the reference text must be "
        f"{number(want)}% (±2); it is {share:.1f}%",
        f"Reuse {direction} of the reference text's exact wording, to bring the overlap from {share:.1f}% to "
        f"between {number(want - 2)}% and {number(want + 2)}%.",
    )


def _first_difference(have: list[str], want: list[str], offset: int = 0) -> str:
    """Where two word lists first differ, in words (positions counted from 1 + `offset`)."""
    for index, (mine, theirs) in enumerate(zip(have, want, strict=False)):
        if mine != theirs:
            return f"word {index + 1 + offset} is {mine!r}, not {theirs!r}"
    if len(have) < len(want):
        return f"it stops after word {len(have) + offset}, before {' '.join(want[len(have) :])[:SHOWN]!r}"
    return f"it goes on after word {len(want) + offset} with {' '.join(have[len(want) :])[:SHOWN]!r}"


def repeat_change(text: str, args: Mapping[str, Any]) -> Miss:
    request = str(args.get("prompt_to_repeat"))
    change = "Repeat the request word for word, with only its first word changed, and write nothing else."
    if text == request:
        return Miss("the answer repeats the request unchanged; its first word must be different", change)
    return Miss(
        "after its first word the answer must repeat the request word for word; "
        + _first_difference(text.split()[1:], request.split()[1:], offset=1),
        change,
    )


def repeat_span(text: str, args: Mapping[str, Any]) -> Miss:
    words = str(args.get("prompt_to_repeat")).strip().split()
    span = words[int(float(args.get("n_start") or 0)) : int(float(args.get("n_end") or 0))]
    have = text.strip().lower().split()
    return Miss(
        f"the answer must be exactly the span {quote(' '.join(span), 120)} ({len(span)} words) and nothing "
        f"else; {_first_difference(have, [w.lower() for w in span])}",
        f"Answer with exactly these words and nothing else: {' '.join(span)!r}.",
    )


def increment(text: str, args: Mapping[str, Any]) -> Miss:
    step = int(float(args.get("small_n") or 0))
    counts = [
        len([w for w in s.translate(str.maketrans("", "", string.punctuation)).strip().split() if w])
        for s in split_sentences(text)
    ]
    shown = ", ".join(str(c) for c in counts[:12]) + (", ..." if len(counts) > 12 else "")
    for index in range(1, len(counts)):
        if counts[index] != counts[index - 1] + step:
            want = counts[index - 1] + step
            return Miss(
                f"each sentence must have exactly {step} more words than the one before; the sentences have "
                f"{shown} words (sentence {index + 1} has {counts[index]}, not {want})",
                f"Make sentence {index + 1} exactly {want} words long (it has {counts[index]}), and each later "
                f"sentence {step} words longer than the one before it.",
            )
    return Miss(f"each sentence must have exactly {step} more words than the one before; they have {shown}")


def sentence_keyword(text: str, args: Mapping[str, Any]) -> Miss:
    word, position = str(args.get("word")), int(float(args.get("N") or 1))
    sentences = split_sentences(text)
    change = f"Put the word {word!r} in sentence {position}."
    if len(sentences) < position:
        return Miss(
            f"sentence {position} must contain {word!r}; the answer has only {len(sentences)} sentences",
            change,
        )
    return Miss(
        f"sentence {position} must contain {word!r}; it does not: {quote(sentences[position - 1])}", change
    )
