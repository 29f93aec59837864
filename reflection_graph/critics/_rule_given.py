"""The passed-on rule (`by="rule:required"`): a phone number, email address, date or time the task asks the answer
to pass on, that the answer holds in no form.

Read only where a sentence of the task says so plainly: a verb of passing on ("give him my number, 07911 482305",
"include", "add", "mention", "tell", "share", "say", "let ... know", "remind", "announce") up to 15 words before the
value; for a phone number or an email address, also "contact", "call", "reach" or "questions go to ... on ...";
for a date or a time, also a deadline ("by Friday 30 May", "due", "before") in a sentence that asks, tells or
reminds. Not read in a task that asks for a summary or a translation, in quotes, after "not", or in a sentence
that moves a date or leaves it to the writer ("propose another time"), nor where the answer gives another date
(time) in its place, which the facts rule reads. The answer holds a value in any form:
a phone number by its last seven digits, spacing and punctuation aside; a date by its day and month, its weekday,
or "28/6"; a time by its value or its hour alone ("from 10").
"""

from __future__ import annotations

import re

from reflection_graph.critics._faults import Fault
from reflection_graph.critics._rule_facts import DATE_KIND as _DATE
from reflection_graph.critics._rule_facts import TIME_KIND as _TIME
from reflection_graph.critics._rule_reading import (
    CODE,
    RULE_REQUIRED,
    answer_lines,
    clip,
    negated,
    split_sentences,
)

__all__ = ["given_faults"]

_PHONE = re.compile(r"(?<![\w+])\+?\d[\d ()-]{6,}\d(?!\w)")
_EMAIL = re.compile(r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b")
_PASS_ON = re.compile(
    r"\b(?:give|gives|giving|include|includes|including|add|adding|mention|mentions|mentioning|tell|tells|telling|"
    r"share|sharing|say|says|saying|state|stating|let\s+(?:\w+\s+){0,2}know|letting\s+(?:\w+\s+){0,2}know|remind|"
    r"reminding|announce|announcing|provide|providing)\b",
    re.I,
)
_CONTACT = re.compile(r"\b(?:contact|call|ring|reach|questions?|queries|enquiries)\b", re.I)
_DEADLINE = re.compile(r"\b(?:by|before|due|deadline|no later than)\b(?:\s+\w+){0,2}\W*$", re.I)
_ASKS = re.compile(
    r"\b(?:ask|asks|asking|request|requesting|tell|telling|remind|reminding|let\s+(?:\w+\s+){0,2}know)\b",
    re.I,
)
_NOT_READ = re.compile(r"\b(?:summar\w+|tl;?dr|condense|translat\w+)\b", re.I)
_MOVED = re.compile(
    r"\b(?:moved?|moving|chang\w+|reschedul\w+|postpon\w+|cancel\w*|instead|rather than|originally|previously|"
    r"no longer|propos\w+|suggest\w*|another|alternative|different|whenever|any\s+(?:day|date|time)|flexible)\b",
    re.I,
)
_QUOTE = re.compile(r"[\"“][^\"”\n]*[\"”]|(?<!\w)'[^'\n]*'(?!\w)")


def _held_date(value: tuple[int, int], words: str, answer: str) -> bool:
    month, day = value
    said = {_DATE.value(m) for m in _DATE.pattern.finditer(answer)}
    weekday = re.search(r"\b(mon|tues|wednes|thurs|fri|satur|sun)day\W*$", words, re.I)
    return (
        value in said
        or bool(weekday and re.search(rf"\b{weekday.group(1)}day\b", answer, re.I))
        or bool(re.search(rf"\b0?{day}[/.]0?{month}\b|\b0?{month}[/.]0?{day}\b", answer))
    )


def _held_time(value: int, answer: str) -> bool:
    said = [_TIME.value(m) for m in _TIME.pattern.finditer(answer)]
    hour = (value // 60) % 12 or 12
    return _TIME.same(value, said) or bool(re.search(rf"(?<![\d:.£$€]){hour}(?![\d%])", answer))


def _changed(date: bool, task: str, answer: str) -> bool:
    """The answer gives a date (`date`) or a time the task does not give."""
    kind = _DATE if date else _TIME
    given = [kind.value(m) for m in kind.pattern.finditer(task)]
    return any(not kind.same(kind.value(m), given) for m in kind.pattern.finditer(answer))


def _missing(sentence: str, start: int, task: str, answer: str) -> list[tuple[int, int]]:
    """The spans of `sentence` (at `start` of `task`) holding a value it asks to pass on that `answer` lacks."""
    quoted = [m.span() for m in _QUOTE.finditer(sentence)]
    digits = re.sub(r"\D", "", answer)
    out = []
    values = [(m, "contact") for m in (*_PHONE.finditer(sentence), *_EMAIL.finditer(sentence))]
    if not _MOVED.search(sentence):
        values += [(m, "when") for kind in (_DATE, _TIME) for m in kind.pattern.finditer(sentence)]
    for match, what in values:
        if any(a <= match.start() < b for a, b in quoted) or negated(task, start + match.start()):
            continue
        before = sentence[: match.start()]
        near = " ".join(before.split()[-15:])
        asked = bool(_PASS_ON.search(near)) or (
            bool(_CONTACT.search(near))
            if what == "contact"
            else bool(_DEADLINE.search(before) and _ASKS.search(sentence))
        )
        if not asked:
            continue
        text = match.group(0)
        if "@" in text:
            held = text.casefold() in answer.casefold()
        elif what == "contact":
            number = re.sub(r"\D", "", text)
            held = len(number) < 8 or number[-7:] in digits
        elif _changed(match.re is _DATE.pattern, task, answer):
            held = True  # another value in its place: the facts rule's to name
        elif match.re is _DATE.pattern:
            held = _held_date(_DATE.value(match), before, answer)  # type: ignore[arg-type]
        else:
            held = _held_time(_TIME.value(match), answer)  # type: ignore[arg-type]
        if not held:
            out.append(match.span())
    return out


def given_faults(answer: str, *, task: str, context: str | None = None) -> list[Fault]:
    """The phone numbers, email addresses, dates and times `task` asks to pass on that `answer` leaves out.

    Args:
        answer: the candidate answer.
        task: the task; only its own sentences ask for a value.
        context: the task's context (material, not instructions: not read).
    """
    del context
    prose = CODE.sub(" ", answer)
    if not prose.strip() or _NOT_READ.search(task):
        return []
    faults = []
    for found in re.finditer(r"[^.!?\n]+(?:[.!?](?=\S)[^.!?\n]*)*[.!?]?", task):
        sentence = found.group(0)
        spans = _missing(sentence, found.start(), task, prose)
        if not spans:
            continue
        first, last = min(a for a, _ in spans), max(b for _, b in spans)
        deadline = re.search(r"\b(?:by|before)\s+(?:\w+,?\s+){0,1}$", sentence[:first], re.I)
        if deadline:
            first = deadline.start()
        words = sentence[first:last].strip(" ,")
        what = (
            "the deadline"
            if deadline or re.search(r"\bdue\b", sentence[:first], re.I)
            else "the email address"
            if "@" in words
            else "the phone number"
            if _PHONE.fullmatch(words)
            else "the time"
            if not _DATE.pattern.search(words)
            else "the date"
        )
        sentences = [s for line in answer_lines(prose) for s in split_sentences(line)] or [prose.strip()]
        shared = set(re.findall(r"\w{4,}", sentence.casefold()))
        candidates = [s for s in sentences if s.rstrip()[-1:] in ".!?"] or sentences  # not "Hi Sam,"
        anchor = max(
            reversed(candidates), key=lambda s: len(shared & set(re.findall(r"\w{4,}", s.casefold())))
        )
        faults.append(
            Fault(
                issue=f'The answer does not give {what}, "{words}", which the task asks it to pass on.',
                fix=f'Add "{words}" to the answer, in or after "{clip(anchor, 80)}".',
                by=RULE_REQUIRED,
            )
        )
    return faults
