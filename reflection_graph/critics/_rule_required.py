"""The required-element rule (`by="rule:required"`): the requirements a task states in a form a rule can check,
and the answer's misses of them (the module doc of reflection_graph/critics/_rule_faults.py lists them). The ones
that count words, list items, paragraphs and sentences are in `_rule_counts.py`."""

from __future__ import annotations

import re
from collections.abc import Callable

from reflection_graph.critics._faults import Fault
from reflection_graph.critics._rule_counts import (
    bullets_fault,
    paragraphs_fault,
    sentence_count_fault,
    word_limit_fault,
)
from reflection_graph.critics._rule_reading import (
    QUOTED,
    RULE_REQUIRED,
    SUBJECT_LINE,
    answer_lines,
    clip,
    fold,
    negated,
    split_sentences,
    unread,
)

__all__ = ["required_faults", "signature_fault"]


_SUBJECT_ASKED = re.compile(
    r"\b(?:with|include|including|add|adding|give it|and)\s+(?:a|an)\s+(?:\w+\s+)?subject(?:\s+line)?\b", re.I
)


def _subject(task: str, answer: str) -> Fault | None:
    asked = _SUBJECT_ASKED.search(task)
    if not asked or unread(task, asked, parts=""):
        return None
    if "line" not in asked.group(0).lower() and not re.search(
        r"\b(?:e-?mail|mail|message|letter|memo)\b", task, re.I
    ):
        return None  # "an essay with a subject of your choice": a topic, not a subject line
    lines = answer_lines(answer)
    if not lines or any(SUBJECT_LINE.match(line) for line in lines):
        return None
    return Fault(
        issue="The answer has no subject line, which the task asks for.",
        fix=f'Add a subject line as the first line, before "{lines[0]}": "Subject:" followed by a few words that say '
        "what the email is about.",
        by=RULE_REQUIRED,
    )


_SIGN_ASKED = re.compile(
    r"\b[Ss]ign(?:ed)?(?:\s+(?:it|off|the\s+\w+))?\s+(?:as|with|by)\s+"
    rf"(?:{QUOTED}|(?P<name>[A-Z][\w'’-]*\.?(?:\s+[A-Z][\w'’-]*\.?){{0,3}}))"
)


def signature_fault(task: str, answer: str) -> Fault | None:
    """The fault of an answer that does not hold the name the task says to sign with ("sign it as Priya Shah"), or
    None (no such request, or the name is there)."""
    asked = _SIGN_ASKED.search(task)
    if not asked or negated(task, asked.start()):
        return None
    name = (asked.group("x") or asked.group("name") or "").strip().rstrip(".,;:!?")
    if len(name) < 2 or fold(name) in fold(answer):
        return None
    lines = answer_lines(answer)
    if not lines:
        return None
    last = lines[-1]
    signed = len(lines) > 1 and lines[-2].endswith(",") and len(last.split()) <= 4
    fix = (
        f'Replace the last line "{last}" with "{name}".'
        if signed
        else f'Add "{name}" as the last line, under a sign-off, after "{last}".'
    )
    return Fault(issue=f"The answer is not signed as {name}, as the task asks.", fix=fix, by=RULE_REQUIRED)


_INCLUDE_ASKED = re.compile(
    r"\b(?:include|includes|including|mention|mentions|mentioning|use|uses|using|contain|contains|containing|"
    r"with)\s+(?:the\s+)?(?:exact\s+)?(?P<noun>(?:key)?words?|phrases?|terms?|sentences?|line)?\s*" + QUOTED,
    re.I,
)
_ENDS_ASKED = re.compile(
    r"\b(?P<verb>end|finish|close|conclude|start|begin|open)(?:s|ing)?\s+"
    r"(?:it|(?:the|your)\s+(?:\w+\s+)?(?:reply|response|answer|message|email|letter|note|post|poem|text))?\s*"
    r"with\s+(?:the\s+)?(?:exact\s+)?(?:(?:key)?words?|phrases?|sentences?|line)?\s*" + QUOTED,
    re.I,
)
_TRAILING = ".,;:!?\"'”’ \n"


def _alternative(task: str, asked: re.Match[str]) -> bool:
    """The quoted words are one of alternatives or examples: `"X" or "Y"`, `such as "X"`."""
    before = task[max(0, asked.start("x") - 16) : asked.start("x") - 1]
    return bool(
        re.match(r"\s*(?:or|/|and/or)\s", task[asked.end() :], re.I)
        or re.search(r"\b(?:or|such as|e\.g\.|like)\s*$", before, re.I)
    )


def _included(task: str, answer: str) -> Fault | None:
    placed = {m.start("x") for m in _ENDS_ASKED.finditer(task)}  # "end it with "X"" is read by `_ends`
    for asked in _INCLUDE_ASKED.finditer(task):
        verb = asked.group(0).split()[0].lower()
        if asked.start("x") in placed or (
            verb in {"with", "contain", "contains", "containing"} and not asked.group("noun")
        ):
            continue  # 'with "X"' alone may name a title; 'contains "abc"' may describe the input, not the answer
        if negated(task, asked.start()) or _alternative(task, asked):
            continue
        words = asked.group("x").strip().rstrip(".,;:")
        if words and fold(words) not in fold(answer):
            return Fault(
                issue=f'The answer does not include "{words}", which the task asks for.',
                fix=f'Add the exact words "{words}" to the answer, in a sentence where they fit.',
                by=RULE_REQUIRED,
            )
    return None


def _ends(task: str, answer: str) -> Fault | None:
    for asked in _ENDS_ASKED.finditer(task):
        if negated(task, asked.start()) or _alternative(task, asked):
            continue
        words = fold(asked.group("x")).strip(_TRAILING)
        text = fold(answer).strip(_TRAILING)
        if not words or not text:
            continue
        at_end = asked.group("verb").lower() in {"end", "finish", "close", "conclude"}
        if words in (text[-(len(words) + 200) :] if at_end else text[: len(words) + 200]):
            continue  # there, or near enough ("Best regards," over a name) for a rule not to judge
        lines = answer_lines(answer)
        phrase = asked.group("x").strip()
        if at_end:
            return Fault(
                issue=f'The answer does not end with "{phrase}", as the task asks.',
                fix=f'Add "{phrase}" as the last line, after "{clip(lines[-1])}".',
                by=RULE_REQUIRED,
            )
        return Fault(
            issue=f'The answer does not start with "{phrase}", as the task asks.',
            fix=f'Add "{phrase}" as the first words, before "{clip(lines[0])}".',
            by=RULE_REQUIRED,
        )
    return None


_LOWER_ASKED = re.compile(
    r"\b(?:(?:all|entirely|only|completely|written)\s+in\s+(?:all\s+)?lower-?case|in\s+all\s+lower-?case|"
    r"lower-?case\s+(?:letters\s+)?only|all\s+lower-?case)\b",
    re.I,
)
_UPPER_ASKED = re.compile(
    r"\b(?:(?:all|entirely|only|completely|written)\s+in\s+(?:all\s+)?(?:capital letters|capitals|upper-?case)|"
    r"in\s+all\s+(?:capital letters|capitals|upper-?case)|(?:upper-?case|capital)\s+letters\s+only)\b",
    re.I,
)


def _case(task: str, answer: str) -> Fault | None:
    for pattern, wrong, want, convert in (
        (_LOWER_ASKED, str.isupper, "lowercase", str.lower),
        (_UPPER_ASKED, str.islower, "capital", str.upper),
    ):
        asked = pattern.search(task)
        if not asked or unread(task, asked, parts=""):
            continue
        bad = [line for line in answer_lines(answer) if any(wrong(ch) for ch in line)]
        if bad:
            edits = " ".join(f'Replace "{line}" with "{convert(line)}".' for line in bad[:3])
            return Fault(
                issue=f"The answer has letters that are not {want}, where the task asks for {want} letters only.",
                fix=edits,
                by=RULE_REQUIRED,
            )
    return None


_NO_COMMAS = re.compile(
    r"\b(?:without|no|not use|n't use|never use|avoid)\s+(?:using\s+)?(?:any\s+)?commas?\b(?![\s-]*splices?)|\bcomma-?free\b",
    re.I,
)


def _commas(task: str, answer: str) -> Fault | None:
    asked = _NO_COMMAS.search(task)
    if not asked or unread(task, asked, parts=""):
        return None
    bad = [s for s in split_sentences(answer) if "," in s or "，" in s]
    if not bad:
        return None
    quoted = ", ".join(f'"{s}"' for s in bad[:2])
    return Fault(
        issue="The answer uses commas, which the task forbids.",
        fix=f"Remove every comma, rewording where needed: in {quoted}.",
        by=RULE_REQUIRED,
    )


_REQUIRED: tuple[Callable[[str, str], Fault | None], ...] = (
    _subject,
    signature_fault,
    word_limit_fault,
    bullets_fault,
    _included,
    _ends,
    _case,
    _commas,
    paragraphs_fault,
    sentence_count_fault,
)


def required_faults(answer: str, *, task: str, context: str | None = None) -> list[Fault]:
    """The requirements stated in `task` that `answer` misses, each checked by a rule (see the module doc).

    Args:
        answer: the candidate answer.
        task: the task; only its own words state requirements.
        context: the task's context (read by no requirement rule: it is material, not instructions).
    """
    del context
    if not answer.strip():
        return []
    return [fault for rule in _REQUIRED if (fault := rule(task, answer)) is not None]
