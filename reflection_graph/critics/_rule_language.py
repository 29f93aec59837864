"""The language rule (`by="rule:language"`): a sentence, or the whole answer, in another language written in the
same script as the one it should be in: German in an English email, English where the task asks for French. The
script rule cannot see these (both are Latin letters); a language detector can.

The detector is Lingua (`lingua-language-detector`, the `[language]` extra), restricted to the languages it
tells apart here (`LANGUAGES`). Without it the rule names nothing. It is read only where it is sure:

- the language the answer should be in is the one the task asks for ("Reply in French", "into Spanish"; not "with
  a line in German", which asks it of a part), or, when the task names no language and speaks of none (no
  translating, no "a French menu"), the task's own language;
- a sentence is read only when it has at least `MIN_WORDS` words, mostly Latin letters, outside quotes and code
  (an answer with no such sentence is read as one);
- the detector must give another language at least `CONFIDENCE` of its confidence;
- the answer is said to be in another language when no sentence read is in the one it should be in and the
  sentences in that other language hold most of its words; otherwise each sentence in another language is a
  fault of its own, with its replacement asked for.

Both constants were set before the rule was first measured on any case set, and are not tuned.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from reflection_graph._text import script_of
from reflection_graph.critics._faults import Fault
from reflection_graph.critics._rule_reading import CODE, RULE_LANGUAGE, clip, split_sentences

__all__ = ["CONFIDENCE", "LANGUAGES", "MIN_WORDS", "available", "language_faults"]

LANGUAGES = ("ENGLISH", "FRENCH", "GERMAN", "SPANISH", "ITALIAN", "PORTUGUESE", "DUTCH")
"""The languages told apart (Lingua's names): the Latin-script languages a task here is likely written or asked
in. A language outside them is the script rule's or the judge's."""
MIN_WORDS = 5
"""A sentence shorter than this ("Best regards,", "Ciao Marco!") is not read: too short to tell."""
CONFIDENCE = 0.9
"""The detector's confidence in another language needed to name a fault."""

_ASKED = re.compile(
    r"\b(?:in|into)\s+(?:(?:plain|simple|formal|informal|polite|fluent|correct|proper|good|standard)\s+)?"
    rf"(?P<language>{'|'.join(name.lower() for name in LANGUAGES)})\b",
    re.I,
)
_PART = re.compile(
    r"\b(?:line|sentence|word|phrase|greeting|closing|sign-?off|paragraph|part|section|title|heading|caption|"
    r"quote|saying|motto|toast)s?\b(?:\s+\w+){0,3}\s*$",
    re.I,
)
"""Words that scope an asked language to a part of the answer ("with a line in German")."""
_LANGUAGE_TALK = re.compile(
    r"translat|language|bilingual|dialect|accent|" + "|".join(name.lower() for name in LANGUAGES),
    re.I,
)
_QUOTED = re.compile(r"\"[^\"\n]*\"|“[^”\n]*”|«[^»\n]*»|„[^“”\n]*[“”]")
_WORD = re.compile(r"[^\W\d_]+(?:['’][^\W\d_]+)?")


@functools.cache
def _detector() -> Any | None:
    try:
        from lingua import Language, LanguageDetectorBuilder
    except ImportError:
        return None
    return LanguageDetectorBuilder.from_languages(*(getattr(Language, name) for name in LANGUAGES)).build()


def available() -> bool:
    """True when the language detector (the `[language]` extra) is installed, so the rule can name faults."""
    return _detector() is not None


def _language(detector: Any, text: str) -> tuple[str, float] | None:
    """The language `text` is in, by the detector, with its confidence; None when it holds fewer than `MIN_WORDS`
    words or is mostly not Latin letters."""
    words = _WORD.findall(text)
    letters = [s for word in words for ch in word if (s := script_of(ch)) is not None]
    if len(words) < MIN_WORDS or sum(s == "LATIN" for s in letters) * 2 <= len(letters):
        return None
    values = detector.compute_language_confidence_values(text)
    if not values:
        return None
    return values[0].language.name, float(values[0].value)


def _expected(detector: Any, task: str) -> str | None:
    """The language the answer should be in: the one `task` asks for, else `task`'s own when it speaks of no
    language; None when that is not clear."""
    matches = list(_ASKED.finditer(task))
    if any(_PART.search(task[: match.start()]) for match in matches):
        return None  # only a part of the answer is asked for in that language
    asked = {match.group("language").upper() for match in matches}
    if asked:
        return asked.pop() if len(asked) == 1 else None
    if _LANGUAGE_TALK.search(task):
        return None
    found = _language(detector, task)
    return found[0] if found is not None and found[1] >= CONFIDENCE else None


def language_faults(answer: str, *, task: str, context: str | None = None) -> list[Fault]:
    """The answer, or its sentences, in another language than the one it should be in (see the module doc).

    Args:
        answer: the candidate answer (its code and quoted text are not read).
        task: the task, which names the language asked for or is written in it.
        context: the task's context (not read: a context in another language does not change the task's).
    """
    del context
    detector = _detector()
    if detector is None:
        return []
    expected = _expected(detector, task)
    if expected is None:
        return []
    prose = _QUOTED.sub(" ", CODE.sub(" ", answer))
    read = [
        (sentence, found)
        for line in prose.splitlines()
        for sentence in split_sentences(line)
        if (found := _language(detector, sentence)) is not None
    ]
    if not read and (found := _language(detector, prose)) is not None:
        read = [(prose, found)]  # no sentence long enough on its own: the answer as one
    foreign = [
        (sentence, found[0]) for sentence, found in read if found[0] != expected and found[1] >= CONFIDENCE
    ]
    words = len(_WORD.findall(prose))
    in_foreign = sum(len(_WORD.findall(sentence)) for sentence, _ in foreign)
    if (
        foreign
        and all(found[0] != expected for _, found in read)
        and len({language for _, language in foreign}) == 1
        and in_foreign * 2 > words
    ):
        first = next(line.strip() for line in prose.splitlines() if line.strip())
        return [
            Fault(
                issue=f"The answer is in {foreign[0][1].title()}, not in {expected.title()} as the task asks.",
                fix=f'Write the whole answer again in {expected.title()}, starting with its first line "{clip(first)}".',
                by=RULE_LANGUAGE,
            )
        ]
    return [
        Fault(
            issue=f'The sentence "{clip(sentence)}" is in {language.title()}, not in {expected.title()}.',
            fix=f'Replace "{clip(sentence)}" with the same in {expected.title()}.',
            by=RULE_LANGUAGE,
        )
        for sentence, language in foreign
    ]
