"""The required-element rules that count (`by="rule:required"`): the answer's words against "in 30 words or fewer"
("at most", "no longer than", "a limit of", "under", "at least", and "a 60-word description" well over), its
outermost list items against "exactly 3 bullet points" and "in five numbered steps", its paragraphs against "in one
(two, ...) paragraphs" and its sentences against "in two sentences" ("at most two sentences", "or fewer")."""

from __future__ import annotations

import re

from reflection_graph.critics._faults import Fault
from reflection_graph.critics._rule_reading import (
    CODE,
    ITEM,
    NUMBER,
    RULE_REQUIRED,
    SUBJECT_LINE,
    answer_lines,
    clip,
    number,
    parts_but,
    split_sentences,
    unread,
)

__all__ = ["bullets_fault", "paragraphs_fault", "sentence_count_fault", "word_limit_fault"]


_AT_MOST = (
    r"(?:at most|no more than|not more than|no longer than|not longer than|up to|a maximum of|maximum of|"
    r"max(?:imum)?|(?:a|the)\s+(?:word\s+)?limit\s+of|(?:a\s+)?limit\s+of)"
)
_WORDS_AT_MOST = re.compile(
    rf"\b(?:{_AT_MOST}\s+{NUMBER}\s+words\b|"
    rf"{NUMBER.replace('<n>', '<n2>')}\s+words\s+or\s+(?:fewer|less)\b|"
    rf"{NUMBER.replace('<n>', '<n3>')}[- ]word\s+(?:limit|maximum|max)\b|"
    rf"{NUMBER.replace('<n>', '<n4>')}\s+words\s+(?:max(?:imum)?|at most)\b)",
    re.I,
)
_WORDS_ABOUT = re.compile(rf"\b(?:a|an|one)\s+{NUMBER}-word\s+(?!limit|maximum|max|minimum)[a-z]", re.I)
"""A length to aim at ("a 60-word description"): read as over only past `_ABOUT_SLACK` of it."""
_ABOUT_SLACK = 1.25
_WORDS_UNDER = re.compile(rf"\b(?:under|fewer than|less than|below)\s+{NUMBER}\s+words\b", re.I)
_WORDS_AT_LEAST = re.compile(
    rf"\b(?:at least|no fewer than|no less than|a minimum of|minimum of)\s+{NUMBER}\s+words\b", re.I
)


def _word_counts(answer: str) -> tuple[int, int]:
    """The answer's words counted two ways: split at spaces (tokens with a letter or digit), and runs of letters
    and digits ("don't" is two there)."""
    spaced = sum(1 for token in answer.split() if any(ch.isalnum() for ch in token))
    return spaced, len(re.findall(r"\w+", answer))


def word_limit_fault(task: str, answer: str) -> Fault | None:
    counts = _word_counts(answer)
    for pattern, over in ((_WORDS_AT_MOST, 0), (_WORDS_UNDER, 1)):
        asked = pattern.search(task)
        if asked and not unread(task, asked):
            said = next(v for k in ("n", "n2", "n3", "n4") if (v := asked.groupdict().get(k)))
            limit = number(said) - over
            if min(counts) > limit:
                longest = max(split_sentences(answer), key=len, default=answer.strip())
                return Fault(
                    issue=f"The answer has {counts[0]} words, over the task's limit of {limit}.",
                    fix=f"Cut at least {min(counts) - limit} words so that {limit} or fewer are left, for example "
                    f'by shortening "{clip(longest)}".',
                    by=RULE_REQUIRED,
                )
    asked = _WORDS_ABOUT.search(task)
    if asked and not unread(task, asked):
        aim = number(asked.group("n"))
        if aim >= 10 and min(counts) > aim * _ABOUT_SLACK:
            longest = max(split_sentences(answer), key=len, default=answer.strip())
            return Fault(
                issue=f"The answer has {counts[0]} words, well over the {aim} words the task asks for.",
                fix=f"Cut at least {min(counts) - aim} words so that about {aim} are left, for example by "
                f'shortening "{clip(longest)}".',
                by=RULE_REQUIRED,
            )
    asked = _WORDS_AT_LEAST.search(task)
    if asked and not unread(task, asked):
        floor = number(asked.group("n"))
        if max(counts) < floor:
            return Fault(
                issue=f"The answer has {counts[0]} words, fewer than the {floor} the task asks for.",
                fix=f"Add at least {floor - max(counts)} words of content the task asks for, after "
                f'"{clip(answer_lines(answer)[-1])}".',
                by=RULE_REQUIRED,
            )
    return None


_BULLETS_ASKED = re.compile(
    rf"\b(?:exactly\s+)?{NUMBER}\s+(?:(?P<bullets>bullet(?:\s*points?|s)|(?:numbered|bulleted)\s+(?:list\s+)?"
    r"(?:items|points))|(?P<steps>(?:numbered\s+|bulleted\s+)?steps))\b",
    re.I,
)


def bullets_fault(task: str, answer: str) -> Fault | None:
    asked = _BULLETS_ASKED.search(task)
    if not asked or unread(task, asked, parts=parts_but("bullet", "point", "item", "step")):
        return None
    before = task[max(0, asked.start() - 25) : asked.start()]
    if re.search(
        r"\b(?:at most|up to|no more than|at least|maximum|minimum|or so|about|over|under)\s*$", before, re.I
    ):
        return None
    wanted = number(asked.group("n"))
    items = [m for line in CODE.sub(" ", answer).splitlines() if (m := ITEM.match(line))]
    outer = min((len(m.group("indent").expandtabs(4)) for m in items), default=0)
    top = [m.string.strip() for m in items if len(m.group("indent").expandtabs(4)) == outer]
    if len({line[0].isdigit() for line in top}) > 1:
        return None  # numbered and bulleted items side by side: which are the points is not for a rule to say
    if len(top) == wanted or (
        asked.group("steps") and (not top or re.search(r"^\W*step\s*\d", answer, re.I | re.M))
    ):
        return None  # steps written as prose, or under "Step 1" headings, are not a rule's to count
    noun = "steps" if asked.group("steps") else "bullet points"
    if not top:
        first = split_sentences(answer)[0] if split_sentences(answer) else answer.strip()
        return Fault(
            issue=f"The answer has no bullet points, where the task asks for {wanted}.",
            fix=f'Rewrite it as {wanted} bullet points, each a line starting "- ", the first from "{clip(first)}".',
            by=RULE_REQUIRED,
        )
    if len(top) > wanted:
        extra = ", ".join(f'"{line}"' for line in top[wanted:])
        fix = f"Keep {wanted} {noun}: delete or merge into the others {extra}."
    else:
        each = 'a line starting "- "' if noun == "bullet points" else "on a line of its own"
        fix = f'Add {wanted - len(top)} more {noun[:-1]}(s) after "{top[-1]}", each {each}.'
    return Fault(
        issue=f"The answer has {len(top)} {noun}, where the task asks for {wanted}.",
        fix=fix,
        by=RULE_REQUIRED,
    )


_PARAGRAPHS_ASKED = re.compile(
    rf"\b(?:write|in|into|as|of|with|give|using|a|an)\s+(?:exactly\s+|just\s+|only\s+)?{NUMBER}[- ]paragraphs?\b",
    re.I,
)
_SENTENCES_ASKED = re.compile(
    rf"\b(?:(?:write|in|into|as|of|with|give|using|a|an)\s+(?:exactly\s+|just\s+|only\s+)?|{_AT_MOST}\s+)"
    rf"{NUMBER}[- ]sentences?\b(?:\s+or\s+(?:fewer|less)\b)?",
    re.I,
)


def _prose_blocks(answer: str) -> list[str]:
    """The answer's blocks (between blank lines) without a greeting or subject line first and a short sign-off
    last."""
    blocks = [b.strip() for b in re.split(r"\n\s*\n", answer.strip()) if b.strip()]
    if blocks and "\n" not in blocks[0] and (blocks[0].endswith(",") or SUBJECT_LINE.match(blocks[0])):
        blocks = blocks[1:]
    if blocks and blocks[0].endswith(",") and "\n" not in blocks[0]:
        blocks = blocks[1:]  # a greeting after a subject line
    if (
        blocks
        and all(len(line.split()) <= 4 for line in blocks[-1].splitlines())
        and blocks[-1].count("\n") <= 2
    ):
        blocks = blocks[:-1]
    return [
        b for b in blocks if "\n" in b or len(b.split()) > 8 or b.rstrip("*_ ")[-1:] in ".!?"
    ]  # no headings


def paragraphs_fault(task: str, answer: str) -> Fault | None:
    asked = _PARAGRAPHS_ASKED.search(task)
    if (
        not asked
        or unread(task, asked, parts_but("paragraph"))
        or re.match(r"\s*or\b", task[asked.end() :], re.I)
    ):
        return None
    wanted = number(asked.group("n"))
    if wanted == 1:
        blocks = _prose_blocks(answer)
        if len(blocks) <= 1 or any(ITEM.match(line) for line in answer.splitlines()):
            return None
        return Fault(
            issue=f"The answer has {len(blocks)} paragraphs, where the task asks for one.",
            fix=f'Join the paragraphs into one: remove the blank line before "{clip(split_sentences(blocks[1])[0])}".',
            by=RULE_REQUIRED,
        )
    lines = answer_lines(answer)
    if not lines or len(lines) >= wanted:
        return None
    sentences = split_sentences(answer)
    where = f' before "{clip(sentences[len(sentences) // 2])}"' if len(sentences) > 1 else ""
    return Fault(
        issue=f"The answer is {len(lines)} paragraph{'s' if len(lines) > 1 else ''}, where the task asks for "
        f"{wanted}.",
        fix=f"Split it into {wanted} paragraphs with a blank line between them{where}, each on its own part of "
        "the topic.",
        by=RULE_REQUIRED,
    )


def sentence_count_fault(task: str, answer: str) -> Fault | None:
    asked = _SENTENCES_ASKED.search(task)
    if (
        not asked
        or unread(task, asked, parts_but("sentence"))
        or re.match(r"\s*or\b", task[asked.end() :], re.I)
    ):
        return None
    if any(ITEM.match(line) for line in answer.splitlines()) or "```" in answer:
        return None
    wanted = number(asked.group("n"))
    sentences = split_sentences(answer)
    if len(sentences) <= wanted:
        return None
    extra = ", ".join(f'"{s}"' for s in sentences[wanted:])
    return Fault(
        issue=f"The answer has {len(sentences)} sentences, where the task asks for {wanted}.",
        fix=f"Keep {wanted} sentence{'s' if wanted > 1 else ''}: delete or merge into the others {extra}.",
        by=RULE_REQUIRED,
    )
