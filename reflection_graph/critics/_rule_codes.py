"""The changed-code check of the facts rule (`by="rule:facts"`): a code or number the task gives after a word
("order 4417", "flat 12B", "TP 1357", "spring 2027") that the answer holds in no form, with a variant of the same
shape after the same word in its place (two characters swapped or one changed: "order 4471"; any variant after a
word that is not a small one: "Room 2A" for "Room 4B").

A code is three digits or more, or digits with capitals; not an amount, a time, a decimal or an ordinal. Not read
where the task leaves that thing to the writer ("another room"), or inside code. The fault's fix is a concrete edit
('Replace "4471" with "4417".'). Every function here is a pure function of its strings; none calls a model.
"""

from __future__ import annotations

import re

from reflection_graph.critics._faults import Fault
from reflection_graph.critics._rule_reading import CODE, RULE_FACTS, derived

__all__ = ["code_faults"]

_TOKEN = re.compile(r"(?<![\w$€£.,:/-])[A-Za-z]*\d[A-Za-z0-9]*(?![\w%]|[.,:/-]\w)")
_NOT_A_CODE = re.compile(r"\d+(?:st|nd|rd|th|am|pm|s)", re.I)
_LABEL = re.compile(r"(?P<label>[A-Za-z][\w'’]*)\W{0,3}(?:(?:number|no|nr)\b\.?\W{0,3})?$", re.I)
_STOPWORDS = frozenset("a an and at by for from in is of on or the to was with".split())


def _shape(token: str) -> str:
    return re.sub(r"[A-Za-z]", "a", re.sub(r"\d", "9", token)).lower()


def _codes(text: str) -> list[tuple[str, str]]:
    """The codes, references and numbers in `text` that a slip can change ("order 4417", "flat 12B", "TP 1357",
    "spring 2027"), each with the word before it: three digits or more, or digits with a capital letter; not an
    amount, a percentage, a decimal, a time, a date in figures, an ordinal or a unit."""
    out = []
    for match in _TOKEN.finditer(text):
        token = match.group(0)
        letters = re.sub(r"\d", "", token)
        if (
            _NOT_A_CODE.fullmatch(token)
            or (letters and not letters.isupper())
            or (not letters and len(token) < 3)
        ):
            continue
        label = _LABEL.search(text[max(0, match.start() - 40) : match.start()])
        if label:
            out.append((token, label.group("label").casefold()))
    return out


def _near(a: str, b: str) -> bool:
    """`b` is `a` with two characters swapped or one changed."""
    a, b = a.casefold(), b.casefold()
    return (
        len(a) == len(b)
        and a != b
        and (sorted(a) == sorted(b) or sum(x != y for x, y in zip(a, b, strict=True)) == 1)
    )


def _compact(text: str) -> str:
    return re.sub(r"[\W_]", "", text).casefold()


def code_faults(task: str, answer: str, context: str | None) -> list[Fault]:
    """A code or number the task gives after a word ("order 4417") that the answer holds in no form, where the
    answer has, after the same word, a variant of the same shape the task does not give ("order 4471"): two
    characters swapped or one changed, or any variant where the word is not a small one ("Room 2A" for "Room 4B").
    Not read where the task leaves that kind of thing to the writer ("another room").

    Args:
        task: the task the answer answers.
        answer: the candidate answer.
        context: the task's context, if any (its codes count as given, never as required).
    """
    prose = CODE.sub(" ", answer)
    held, supported = _compact(prose), _compact(f"{task} {context or ''}")
    said = _codes(prose)
    faults = []
    for right, label in dict.fromkeys(_codes(task)):
        if right.casefold() in held or re.search(
            rf"\b(?:another|other|different|new|alternative|any|suggest\w*|propos\w*|choos\w*|pick\w*)\s+"
            rf"(?:\w+\s+){{0,2}}{re.escape(label)}\b",
            task,
            re.I,
        ):
            continue
        variants = {
            wrong
            for wrong, where in said
            if where == label
            and _shape(wrong) == _shape(right)
            and (_near(right, wrong) or label not in _STOPWORDS)
            and wrong.casefold() not in supported
            and not (wrong.isdigit() and derived(("number", float(wrong)), task))
        }
        if len(variants) == 1:
            wrong = variants.pop()
            faults.append(
                Fault(
                    issue=f'The answer says "{wrong}" where the task gives "{right}".',
                    fix=f'Replace "{wrong}" with "{right}".',
                    by=RULE_FACTS,
                )
            )
    return faults
