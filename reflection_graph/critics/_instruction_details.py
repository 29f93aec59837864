"""How an answer misses an instruction, measured the way the instruction's checker measures it.

`DETAILS` maps an instruction id to a function of the answer and the checker's arguments. It returns a `Miss`: what
the answer has instead of what the instruction asks ("the word 'whisper' must appear 3 times; it appears 1"), and
the concrete change that would meet it ("Use 'whisper' exactly 3 times (now 1)."). The verdict is always the
checker's (`InstructionCritic`); these only explain a failure, with the checker's own counting rules (its
tokenizer, sentence splitter and word lists). The instructions on the shape of words, sentences and lines are in
`_instruction_shapes.py`; those on what it repeats, in what order and where in `_instruction_order.py`.
"""

from __future__ import annotations

import importlib
import re
import string
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from reflection_graph.critics._instruction_miss import (
    PUNCTUATION,
    Miss,
    count_words,
    listed,
    more_or_fewer,
    number,
    some,
    times,
)
from reflection_graph.critics._instruction_order import (
    increment,
    list_marker,
    options_only,
    overlap,
    repeat_change,
    repeat_span,
    sentence_keyword,
)
from reflection_graph.critics._instruction_shapes import SHAPES

__all__ = ["DETAILS"]


# -- the instructions that name counts ---------------------------------------------------------------------------


def _keywords_multiple(text: str, args: Mapping[str, Any]) -> Miss:
    parts, changes = [], []
    for slot, wanted in zip(
        ("keyword1", "keyword2", "keyword3", "keyword4", "keyword5"), (1, 2, 3, 5, 7), strict=True
    ):
        word = str(args.get(slot) or "")
        found = text.lower().count(word.lower())
        if word and found != wanted:
            parts.append(f"the word {word!r} must appear {times(wanted)}; it appears {found}")
            changes.append(f"{word!r} exactly {times(wanted)} (now {found})")
    return Miss("; ".join(parts), "Use " + ", ".join(changes) + "." if changes else "")


def _word_count_range(text: str, args: Mapping[str, Any]) -> Miss:
    low, high, have = args.get("min_words"), args.get("max_words"), count_words(text)
    found = f"the answer must have between {number(low)} and {number(high)} words; it has {have}"
    if high is not None and have > float(high):
        return Miss(found, f"Cut the answer to at most {number(high)} words (it has {have}).")
    if low is not None and have < float(low):
        return Miss(found, f"Lengthen the answer to at least {number(low)} words (it has {have}).")
    return Miss(found)


def _number_words(text: str, args: Mapping[str, Any]) -> Miss:
    relation, count = args.get("relation"), number(args.get("num_words"))
    have = count_words(text)
    found = f"the answer must have {relation} {count} words; it has {have}"
    change = f"Cut the answer to fewer than {count} words" if relation == "less than" else ""
    change = f"Lengthen the answer to at least {count} words" if relation == "at least" else change
    return Miss(found, f"{change} (it has {have})." if change else "")


def _unique_words(text: str, args: Mapping[str, Any]) -> Miss:
    unique = {w.strip(PUNCTUATION + " ") for w in text.lower().split()}
    want = number(args.get("N"))
    return Miss(
        f"the answer must use at least {want} different words; it uses {len(unique)}",
        f"Use at least {want} different words (it uses {len(unique)}): vary the wording, repeat fewer words.",
    )


def _repeats(text: str, args: Mapping[str, Any]) -> Miss:
    words = Counter(text.lower().translate(str.maketrans("", "", string.punctuation)).split())
    limit = float(args.get("small_n") or 0)
    over = [f"{w!r} ({n} times)" for w, n in words.most_common() if n > limit][:5]
    most = number(args.get("small_n"))
    return Miss(
        f"no word may appear more than {most} times; repeated more: " + ", ".join(over),
        f"Use each of these words at most {most} times, with synonyms for the rest: " + ", ".join(over) + ".",
    )


def _keyword_frequency(text: str, args: Mapping[str, Any]) -> Miss:
    word = str(args.get("keyword"))
    found = len(re.findall(word, text, flags=re.IGNORECASE))
    return Miss(
        f"the word {word!r} must appear {args.get('relation')} {number(args.get('frequency'))} times; "
        f"it appears {found}"
    )


def _keywords_existence(text: str, args: Mapping[str, Any]) -> Miss:
    missing = [k for k in args.get("keywords") or [] if not re.search(k, text, flags=re.IGNORECASE)]
    shown = ", ".join(repr(k) for k in missing)
    return Miss("missing keywords: " + shown, f"Include the keywords {shown}." if missing else "")


def _forbidden_words(text: str, args: Mapping[str, Any]) -> Miss:
    used = [
        w
        for w in args.get("forbidden_words") or []
        if re.search(r"\b" + w + r"\b", text, flags=re.IGNORECASE)
    ]
    shown = ", ".join(repr(w) for w in used)
    return Miss("uses forbidden words: " + shown, f"Remove every use of {shown}." if used else "")


def _bullets(text: str, args: Mapping[str, Any]) -> Miss:
    found = len(re.findall(r"^[^\S\n]*\*[^\*].*$", text, flags=re.MULTILINE)) + len(
        re.findall(r"^[^\S\n]*-.*$", text, flags=re.MULTILINE)
    )
    want = number(args.get("num_bullets"))
    return Miss(
        f"the answer must have exactly {want} bullet points; it has {found}",
        f"Write exactly {want} bullet points (it has {found}).",
    )


_CONJUNCTIONS = ("and", "but", "for", "nor", "or", "so", "yet")


def _conjunctions(text: str, args: Mapping[str, Any]) -> Miss:
    """Distinct words that are coordinating conjunctions once stripped, as the checker counts them (as written)."""
    used = {w for w in text.split() if w.strip(PUNCTUATION + " ").lower() in _CONJUNCTIONS}
    seen = {w.strip(PUNCTUATION + " ").lower() for w in used}
    missing = [c for c in _CONJUNCTIONS if c not in seen]
    want = int(float(args.get("small_n") or 0))
    return Miss(
        f"the answer must use at least {want} different coordinating conjunctions; it uses {len(used)}"
        + (f" (not used: {', '.join(missing)})" if missing else ""),
        f"Use {some(want - len(used), 'more coordinating conjunction')}, different from those used, such as "
        f"{' or '.join(missing[: max(want - len(used), 1)])}.",
    )


def _numbers(text: str, args: Mapping[str, Any]) -> Miss:
    found = re.findall(r"\d+", text.translate(str.maketrans("", "", string.punctuation)))
    want = int(float(args.get("N") or 0))
    return Miss(
        f"the answer must include exactly {want} numbers; it has {len(found)}"
        + (f" ({listed(found)})" if found else ""),
        f"Write exactly {some(want, 'number')} ({more_or_fewer(len(found), want, 'number')}; digits "
        "separated by punctuation count as one number).",
    )


def _person_names_listed() -> list[str]:
    """The names of the checker's list, read from its own description."""
    checker = importlib.import_module("if_verifiable.ifbench.instructions").PersonNameCountChecker(
        "count:person_names"
    )
    listed = checker.build_description(N=1).split("person names:", 1)[1]
    return [name.strip(" .") for name in listed.split(",") if name.strip(" .")]


def _person_names(text: str, args: Mapping[str, Any]) -> Miss:
    names = _person_names_listed()
    named = [name for name in names if name in text]
    unused = [name for name in names if name not in text]
    want = int(float(args.get("N") or 0))
    return Miss(
        f"the answer must mention at least {want} different names from the instruction's list; it mentions "
        f"{len(named)}" + (f" ({listed(named)})" if named else ""),
        f"Mention {some(want - len(named), 'more name')} from the list, such as "
        f"{', '.join(unused[: max(want - len(named), 3)])}.",
    )


_PRONOUNS = frozenset(
    "i me my mine myself we us our ours ourselves you your yours yourself yourselves he him his himself she her "
    "hers herself it its itself they them their theirs themselves".split()
)


def _pronouns(text: str, args: Mapping[str, Any]) -> Miss:
    words = text.replace("/", " ").lower().translate(str.maketrans("", "", string.punctuation)).split()
    have = sum(1 for word in words if word in _PRONOUNS)
    want = int(float(args.get("N") or 0))
    return Miss(
        f"the answer must include at least {want} pronouns; it has {have}",
        f"Use {some(want - have, 'more pronoun')} (I, you, it, we, they, ...) in place of repeated nouns.",
    )


def _japanese_words(text: str, args: Mapping[str, Any]) -> Miss:
    every = int(float(args.get("N") or 1))
    japanese = re.compile(r"[\u3040-\u30ff\u4e00-\u9fff]")
    wrong = []
    for position, word in enumerate(text.split(), start=1):
        word = word.strip(PUNCTUATION + " ")
        if position % every == 0 and word and not word.isdigit() and not japanese.search(word):
            wrong.append(f"word {position} {word!r}")
    return Miss(
        f"every word at a position divisible by {every} must be Japanese; not Japanese: {listed(wrong, 5)}",
        f"Write every word at a position divisible by {every} (word {every}, {2 * every}, {3 * every}, ...) in "
        f"Japanese; {listed(wrong, 3)} {'is' if len(wrong) == 1 else 'are'} not.",
    )


def _punctuation(text: str, args: Mapping[str, Any]) -> Miss:
    bang = "!?" in text or "?!" in text or "‽" in text
    rest = text.replace("?!", "", 1)
    if len(rest) == len(text):
        rest = text.replace("!?", "", 1)
    missing = [mark for mark in (".", ",", "!", "?", ";", ":") if mark not in rest]
    named = [repr(mark) for mark in missing] + ([] if bang else ["the interrobang '?!'"])
    return Miss(
        "the answer must use each of . , ! ? ; : and the interrobang (?!); missing: " + ", ".join(named),
        "Add " + ", ".join(named) + " (the interrobang does not count as its own ! and ?).",
    )


DETAILS: dict[str, Callable[[str, Mapping[str, Any]], Miss]] = {
    "count:conjunctions": _conjunctions,
    "count:keywords_multiple": _keywords_multiple,
    "count:numbers": _numbers,
    "count:person_names": _person_names,
    "count:pronouns": _pronouns,
    "count:punctuation": _punctuation,
    "count:unique_word_count": _unique_words,
    "count:word_count_range": _word_count_range,
    "count:words_japanese": _japanese_words,
    "detectable_format:number_bullet_lists": _bullets,
    "format:list": list_marker,
    "format:options": options_only,
    "keywords:existence": _keywords_existence,
    "keywords:forbidden_words": _forbidden_words,
    "keywords:frequency": _keyword_frequency,
    "length_constraints:number_words": _number_words,
    "ratio:overlap": overlap,
    "repeat:repeat_change": repeat_change,
    "repeat:repeat_span": repeat_span,
    "sentence:increment": increment,
    "sentence:keyword": sentence_keyword,
    "words:repeats": _repeats,
    **SHAPES,
}
