"""How an answer misses an instruction, measured the way the instruction's checker measures it.

`DETAILS` maps an instruction id to a function of the answer and the checker's arguments. It returns a `Miss`: what
the answer has instead of what the instruction asks ("the word 'whisper' must appear 3 times; it appears 1"), and
the concrete change that would meet it ("Use the word 'whisper' 2 more times"). The verdict is always the checker's
(`InstructionCritic`); these only explain a failure, with the checker's own counting rules (its tokenizer, sentence
splitter and word lists).
"""

from __future__ import annotations

import importlib
import re
import string
from collections import Counter
from collections.abc import Callable, Mapping
from itertools import pairwise
from typing import Any, NamedTuple

__all__ = ["DETAILS", "Miss"]


class Miss(NamedTuple):
    """How an answer misses one instruction."""

    found: str
    """What the instruction asks and what the answer has instead."""
    change: str = ""
    """The change that meets it, as an imperative sentence ("" when no single change can be named)."""


_PUNCTUATION = "".join(string.punctuation)
_SHOWN = 60


def _number(value: Any) -> str:
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


def _times(count: int) -> str:
    return "once" if count == 1 else f"{count} times"


def _quote(text: str, limit: int = _SHOWN) -> str:
    text = " ".join(text.split())
    return repr(text if len(text) <= limit else text[: limit - 3] + "...")


def _listed(items: list[str], limit: int = 8) -> str:
    shown = ", ".join(items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")


def _ifbench_util() -> Any:
    return importlib.import_module("if_verifiable.ifbench.instructions_util")


def _count_words(text: str) -> int:
    return int(_ifbench_util().count_words(text))


def _sentences(text: str) -> list[str]:
    return list(_ifbench_util().split_into_sentences(text))


def _some(count: int, noun: str) -> str:
    """`count` and the noun, plural unless the count is 1 ("1 number", "2 numbers")."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _more_or_fewer(have: int, want: int, noun: str) -> str:
    return _some(want - have, f"more {noun}") if have < want else _some(have - want, f"fewer {noun}")


# -- the instructions that name counts ---------------------------------------------------------------------------


def _keywords_multiple(text: str, args: Mapping[str, Any]) -> Miss:
    parts, changes = [], []
    for slot, wanted in zip(
        ("keyword1", "keyword2", "keyword3", "keyword4", "keyword5"), (1, 2, 3, 5, 7), strict=True
    ):
        word = str(args.get(slot) or "")
        found = text.lower().count(word.lower())
        if word and found != wanted:
            parts.append(f"the word {word!r} must appear {_times(wanted)}; it appears {found}")
            changes.append(f"{word!r} exactly {_times(wanted)} (now {found})")
    return Miss("; ".join(parts), "Use " + ", ".join(changes) + "." if changes else "")


def _word_count_range(text: str, args: Mapping[str, Any]) -> Miss:
    low, high, have = args.get("min_words"), args.get("max_words"), _count_words(text)
    found = f"the answer must have between {_number(low)} and {_number(high)} words; it has {have}"
    if high is not None and have > float(high):
        return Miss(found, f"Cut the answer to at most {_number(high)} words (it has {have}).")
    if low is not None and have < float(low):
        return Miss(found, f"Lengthen the answer to at least {_number(low)} words (it has {have}).")
    return Miss(found)


def _number_words(text: str, args: Mapping[str, Any]) -> Miss:
    relation, count = args.get("relation"), _number(args.get("num_words"))
    have = _count_words(text)
    found = f"the answer must have {relation} {count} words; it has {have}"
    change = f"Cut the answer to fewer than {count} words" if relation == "less than" else ""
    change = f"Lengthen the answer to at least {count} words" if relation == "at least" else change
    return Miss(found, f"{change} (it has {have})." if change else "")


def _unique_words(text: str, args: Mapping[str, Any]) -> Miss:
    unique = {w.strip(_PUNCTUATION + " ") for w in text.lower().split()}
    want = _number(args.get("N"))
    return Miss(
        f"the answer must use at least {want} different words; it uses {len(unique)}",
        f"Use at least {want} different words (it uses {len(unique)}): vary the wording, repeat fewer words.",
    )


def _repeats(text: str, args: Mapping[str, Any]) -> Miss:
    words = Counter(text.lower().translate(str.maketrans("", "", string.punctuation)).split())
    limit = float(args.get("small_n") or 0)
    over = [f"{w!r} ({n} times)" for w, n in words.most_common() if n > limit][:5]
    most = _number(args.get("small_n"))
    return Miss(
        f"no word may appear more than {most} times; repeated more: " + ", ".join(over),
        f"Use each of these words at most {most} times, with synonyms for the rest: " + ", ".join(over) + ".",
    )


def _keyword_frequency(text: str, args: Mapping[str, Any]) -> Miss:
    word = str(args.get("keyword"))
    found = len(re.findall(word, text, flags=re.IGNORECASE))
    return Miss(
        f"the word {word!r} must appear {args.get('relation')} {_number(args.get('frequency'))} times; "
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
    found = len(re.findall(r"^\s*\*[^\*].*$", text, flags=re.MULTILINE)) + len(
        re.findall(r"^\s*-.*$", text, flags=re.MULTILINE)
    )
    want = _number(args.get("num_bullets"))
    return Miss(
        f"the answer must have exactly {want} bullet points; it has {found}",
        f"Write exactly {want} bullet points (it has {found}).",
    )


_CONJUNCTIONS = ("and", "but", "for", "nor", "or", "so", "yet")


def _conjunctions(text: str, args: Mapping[str, Any]) -> Miss:
    """Distinct words that are coordinating conjunctions once stripped, as the checker counts them (as written)."""
    used = {w for w in text.split() if w.strip(_PUNCTUATION + " ").lower() in _CONJUNCTIONS}
    seen = {w.strip(_PUNCTUATION + " ").lower() for w in used}
    missing = [c for c in _CONJUNCTIONS if c not in seen]
    want = int(float(args.get("small_n") or 0))
    return Miss(
        f"the answer must use at least {want} different coordinating conjunctions; it uses {len(used)}"
        + (f" (not used: {', '.join(missing)})" if missing else ""),
        f"Use {_some(want - len(used), 'more coordinating conjunction')}, different from those used, such as "
        f"{' or '.join(missing[: max(want - len(used), 1)])}.",
    )


def _numbers(text: str, args: Mapping[str, Any]) -> Miss:
    found = re.findall(r"\d+", text.translate(str.maketrans("", "", string.punctuation)))
    want = int(float(args.get("N") or 0))
    return Miss(
        f"the answer must include exactly {want} numbers; it has {len(found)}"
        + (f" ({_listed(found)})" if found else ""),
        f"Write exactly {_some(want, 'number')} ({_more_or_fewer(len(found), want, 'number')}; digits "
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
        f"{len(named)}" + (f" ({_listed(named)})" if named else ""),
        f"Mention {_some(want - len(named), 'more name')} from the list, such as "
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
        f"Use {_some(want - have, 'more pronoun')} (I, you, it, we, they, ...) in place of repeated nouns.",
    )


def _japanese_words(text: str, args: Mapping[str, Any]) -> Miss:
    every = int(float(args.get("N") or 1))
    japanese = re.compile(r"[\u3040-\u30ff\u4e00-\u9fff]")
    wrong = []
    for position, word in enumerate(text.split(), start=1):
        word = word.strip(_PUNCTUATION + " ")
        if position % every == 0 and word and not word.isdigit() and not japanese.search(word):
            wrong.append(f"word {position} {word!r}")
    return Miss(
        f"every word at a position divisible by {every} must be Japanese; not Japanese: {_listed(wrong, 5)}",
        f"Write every word at a position divisible by {every} (word {every}, {2 * every}, {3 * every}, ...) in "
        f"Japanese; {_listed(wrong, 3)} {'is' if len(wrong) == 1 else 'are'} not.",
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


def _list_marker(text: str, args: Mapping[str, Any]) -> Miss:
    sep = str(args.get("sep"))
    found = len(re.findall(re.escape(sep), text))
    return Miss(
        f"the list marker {sep!r} must appear at least twice; it appears {_times(found) if found else '0 times'}",
        f"Start each list item with {sep!r}, for at least two items.",
    )


def _options(text: str, args: Mapping[str, Any]) -> Miss:
    options = str(args.get("options"))
    words = len(text.split())
    return Miss(
        f"the answer must be exactly one of the options {options} and nothing else; it is {words} words long: "
        f"{_quote(text)}",
        f"Answer with exactly one of {options}, with no other words (the answer has {words}).",
    )


def _overlap(text: str, args: Mapping[str, Any]) -> Miss:
    nltk = importlib.import_module("nltk")
    reference = str(args.get("reference_text"))
    mine = set(nltk.ngrams(text, 3))
    theirs = set(nltk.ngrams(reference, 3))
    share = 100 * len(mine & theirs) / len(mine) if mine else 0.0
    want = float(args.get("percentage") or 0)
    direction = "more" if share < want else "less"
    return Miss(
        f"the share of the answer's character trigrams found in the reference text must be "
        f"{_number(want)}% (±2); it is {share:.1f}%",
        f"Reuse {direction} of the reference text's exact wording, to bring the overlap from {share:.1f}% to "
        f"between {_number(want - 2)}% and {_number(want + 2)}%.",
    )


def _first_difference(have: list[str], want: list[str], offset: int = 0) -> str:
    """Where two word lists first differ, in words (positions counted from 1 + `offset`)."""
    for index, (mine, theirs) in enumerate(zip(have, want, strict=False)):
        if mine != theirs:
            return f"word {index + 1 + offset} is {mine!r}, not {theirs!r}"
    if len(have) < len(want):
        return f"it stops after word {len(have) + offset}, before {' '.join(want[len(have) :])[:_SHOWN]!r}"
    return f"it goes on after word {len(want) + offset} with {' '.join(have[len(want) :])[:_SHOWN]!r}"


def _repeat_change(text: str, args: Mapping[str, Any]) -> Miss:
    request = str(args.get("prompt_to_repeat"))
    change = "Repeat the request word for word, with only its first word changed, and write nothing else."
    if text == request:
        return Miss("the answer repeats the request unchanged; its first word must be different", change)
    return Miss(
        "after its first word the answer must repeat the request word for word; "
        + _first_difference(text.split()[1:], request.split()[1:], offset=1),
        change,
    )


def _repeat_span(text: str, args: Mapping[str, Any]) -> Miss:
    words = str(args.get("prompt_to_repeat")).strip().split()
    span = words[int(float(args.get("n_start") or 0)) : int(float(args.get("n_end") or 0))]
    have = text.strip().lower().split()
    return Miss(
        f"the answer must be exactly the span {_quote(' '.join(span), 120)} ({len(span)} words) and nothing "
        f"else; {_first_difference(have, [w.lower() for w in span])}",
        f"Answer with exactly these words and nothing else: {' '.join(span)!r}.",
    )


def _increment(text: str, args: Mapping[str, Any]) -> Miss:
    step = int(float(args.get("small_n") or 0))
    counts = [
        len([w for w in s.translate(str.maketrans("", "", string.punctuation)).strip().split() if w])
        for s in _sentences(text)
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


def _sentence_keyword(text: str, args: Mapping[str, Any]) -> Miss:
    word, position = str(args.get("word")), int(float(args.get("N") or 1))
    sentences = _sentences(text)
    change = f"Put the word {word!r} in sentence {position}."
    if len(sentences) < position:
        return Miss(
            f"sentence {position} must contain {word!r}; the answer has only {len(sentences)} sentences",
            change,
        )
    return Miss(
        f"sentence {position} must contain {word!r}; it does not: {_quote(sentences[position - 1])}", change
    )


# -- the instructions on words, sentences and layout, with no arguments --------------------------------------------


def _without_punctuation(text: str) -> str:
    return text.translate(str.maketrans("", "", string.punctuation))


_CONSONANTS = frozenset("bcdfghjklmnpqrstvwxyz")


def _consonant_clusters(text: str, args: Mapping[str, Any]) -> Miss:
    words = text.lower().strip().split()
    bare = [w for w in words if not any(a in _CONSONANTS and b in _CONSONANTS for a, b in pairwise(w))]
    shown = _listed([repr(w) for w in dict.fromkeys(bare)])
    return Miss(
        f"every word must hold two consonants in a row; {len(bare)} of its {_some(len(words), 'word')} "
        f"{'does' if len(bare) == 1 else 'do'} not: {shown}",
        f"Replace or drop each word without two consonants together ({shown}).",
    )


_PALINDROMES = "level, radar, civic, refer, rotor, kayak, madam, stats, tenet, racecar, repaper, reviver"


def _palindromes(text: str, args: Mapping[str, Any]) -> Miss:
    found = [w for w in _without_punctuation(text).lower().split() if w == w[::-1] and len(w) >= 5]
    return Miss(
        f"the answer must hold at least 10 palindromes of 5 or more letters; it has {len(found)}"
        + (f" ({_listed(found)})" if found else ""),
        f"Use {_some(10 - len(found), 'more palindrome')} of 5 or more letters (such as {_PALINDROMES}).",
    )


def _no_consecutive(text: str, args: Mapping[str, Any]) -> Miss:
    words = [w for w in _without_punctuation(text).lower().split() if w]
    pairs = [f"{a!r} {b!r}" for a, b in pairwise(words) if a[0] == b[0]]
    return Miss(
        f"no two neighbouring words may start with the same letter; {_some(len(pairs), 'pair')} do: "
        + _listed(pairs, 5),
        f"Reword so that no two neighbouring words start with the same letter: {_listed(pairs, 5)}.",
    )


_PRIMES = frozenset(
    (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71, 73, 79, 83, 89, 97)
)


def _prime_lengths(text: str, args: Mapping[str, Any]) -> Miss:
    wrong = [
        f"{w!r} ({len(w)})"
        for w in dict.fromkeys(_without_punctuation(text).split())
        if len(w) not in _PRIMES
    ]
    return Miss(
        "every word's length must be a prime number (2, 3, 5, 7, 11, ...; punctuation not counted); these are "
        f"not: {_listed(wrong)}",
        f"Replace each word whose length is not prime: {_listed(wrong)}.",
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
    sentences = _sentences(text)
    counts = {mark: sum(1 for s in sentences if s.endswith(mark)) for mark in ".?!"}
    shown = (
        f"{_some(counts['.'], 'statement')} (.), {_some(counts['?'], 'question')} (?), "
        f"{_some(counts['!'], 'exclamation')} (!)"
    )
    most = max(counts.values())
    return Miss(
        f"the answer must hold as many statements as questions and exclamations; it has {shown}",
        f"Make the three counts equal, e.g. {most} of each (it has {shown}).",
    )


def _sentence_lengths(text: str, args: Mapping[str, Any]) -> Miss:
    sentences = _sentences(text)
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
    bare = [f"{_quote(chunk, 30)}" for chunk in chunks if "-" not in chunk]
    return Miss(
        "every bullet point (*) must be followed by a sub-bullet (-) before the next one; "
        f"{_some(len(bare), 'bullet')} of {len(chunks)} {'has' if len(bare) == 1 else 'have'} none: {_listed(bare, 3)}",
        f"Add a sub-bullet line starting with - under each bullet that has none: {_listed(bare, 3)}.",
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
                f"({_quote(lines[index].strip(), 30)}) has {indents[index]}, the line before {indents[index - 1]}",
                f"Indent line {index + 1} by at least {indents[index - 1] + 1} spaces, and every later line by "
                "more than the one before it.",
            )
    return Miss("")


def _emoji_endings(text: str, args: Mapping[str, Any]) -> Miss:
    emoji = importlib.import_module("emoji")
    sentences = _sentences(text)

    def stripped(index: int) -> str:
        return str(_without_punctuation(sentences[index]).strip())

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
                f"{_quote(sentences[index])}",
                f"End sentence {index + 1} ({_quote(sentences[index], 30)}) with an emoji, as every sentence must.",
            )
    return Miss("")


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
    "format:list": _list_marker,
    "format:options": _options,
    "keywords:existence": _keywords_existence,
    "keywords:forbidden_words": _forbidden_words,
    "keywords:frequency": _keyword_frequency,
    "length_constraints:number_words": _number_words,
    "ratio:overlap": _overlap,
    "repeat:repeat_change": _repeat_change,
    "repeat:repeat_span": _repeat_span,
    "sentence:increment": _increment,
    "sentence:keyword": _sentence_keyword,
    "format:emoji": _emoji_endings,
    "format:line_indent": _line_indent,
    "format:sub-bullets": _sub_bullets,
    "ratio:sentence_balance": _sentence_balance,
    "ratio:sentence_words": _sentence_lengths,
    "words:consonants": _consonant_clusters,
    "words:no_consecutive": _no_consecutive,
    "words:palindrome": _palindromes,
    "words:prime_lengths": _prime_lengths,
    "words:repeats": _repeats,
    "words:vowel": _three_vowels,
}
