"""Faults a rule names beside the model: each one real by construction, each with the critic that named it.

A small judge writes a fault for nearly every answer and misses most real ones; a few faults need no judge at all,
only a reading of the task and the answer. The rules here name those, and only where the check is unambiguous, so a
fault a rule names is a fault:

- **placeholder** (`by="rule:placeholder"`): a template slot (`[Your Name]`, `<name>`) the task and its context do
  not hold (reflection_graph/_text/_placeholders.py), with the placeholder rule's concrete edits as its fix.
- **required** (`by="rule:required"`): the task states a requirement in a form a rule can check, and the answer
  misses it:
  - "with a subject line" (and "include/add a subject line"): no line of the answer opens with `Subject:`;
  - "sign it as Priya Shah": the name is nowhere in the answer;
  - "in 30 words or fewer" ("at most", "no more than", "under", "fewer than", "at least"): the count is past the
    limit however the words are counted (split at spaces, or runs of letters and digits);
  - "exactly 3 bullet points" ("in 4 bullet points"): the answer's list items, bullets or numbered, at their
    outermost level, are not that many;
  - "include/mention/use the phrase "..."" (quoted): the words are nowhere in the answer, case and spacing
    aside; "end/start it with "..."": the answer does not end (start) with them, its closing punctuation aside;
  - "all in lowercase" ("all in capital letters"): a letter of the other case; "without commas": a comma;
  - "in one paragraph": two blocks of prose apart from a greeting line and a short sign-off; "in two (or more)
    paragraphs": fewer lines than paragraphs; "in one (two, ...) sentences": more sentences than that (split only
    at `.`, `!` or `?` before a capital, not after an abbreviation or an initial).
  A requirement after "not", "never" or "without", or offered as one of alternatives ("X" or "Y"), is not read.
- **script** (`by="rule:script"`): the answer's letters are mostly in one script (Cyrillic, say) that is neither
  the task's nor its context's, nor the script of a language the task names ("Reply in Russian"). A task that
  speaks of translating, a language, a script or an alphabet is left to the judge.

Each rule's fix is a concrete edit that quotes the text it concerns. Every function here is a pure function of its
strings; none calls a model.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence

from reflection_graph._text import bare_sign_off, inline_placeholders, placeholder_edits, script_of, scripts
from reflection_graph.critics._faults import Fault

__all__ = [
    "RULE_PLACEHOLDER",
    "RULE_REQUIRED",
    "RULE_SCRIPT",
    "placeholder_fault",
    "placeholder_faults",
    "required_faults",
    "rule_faults",
    "script_faults",
    "sign_off_fault",
]

RULE_PLACEHOLDER = "rule:placeholder"
RULE_REQUIRED = "rule:required"
RULE_SCRIPT = "rule:script"


# -- placeholders ------------------------------------------------------------------------------------------------------
def placeholder_fault(slots: Sequence[str], edits: Sequence[str] = ()) -> Fault:
    """The fault the placeholder rule names for `slots` (the template placeholders a candidate holds), with `edits`
    (`placeholder_edits`: each a concrete change that quotes the lines it changes) as its fix."""
    plural = "s" if len(slots) > 1 else ""
    return Fault(
        issue=f"The answer holds the template placeholder{plural} {', '.join(slots)}, which the task did not ask for.",
        fix=" ".join(edits)
        or f"Remove {', '.join(slots)}: write the real text only where the task gives it, else leave that part out.",
        by=RULE_PLACEHOLDER,
    )


def sign_off_fault(line: str, edits: Sequence[str] = ()) -> Fault:
    """The fault the placeholder rule names for a letter that ends on the sign-off `line` with no sender."""
    return Fault(
        issue=f'The letter ends on "{line}" with no sender after it.',
        fix=" ".join(edits)
        or f'Delete the line "{line}" and end the letter on its closing sentence, or sign it with a name the task gives.',
        by=RULE_PLACEHOLDER,
    )


def placeholder_faults(answer: str, *, task: str, context: str | None = None) -> list[Fault]:
    """The placeholder rule's fault of `answer`: a slot that `task` and `context` lack, or a letter that ends on
    a bare sign-off (none when neither)."""
    slots = inline_placeholders(answer, task=task, context=context)
    if slots:
        return [placeholder_fault(slots, placeholder_edits(answer, task=task, context=context))]
    line = bare_sign_off(answer)
    return [sign_off_fault(line, placeholder_edits(answer, task=task, context=context))] if line else []


# -- required elements -------------------------------------------------------------------------------------------------
_NUMBERS = {
    word: value
    for value, word in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
        "seventeen eighteen nineteen twenty".split()
    )
}
_NUMBERS.update({"a single": 1, "single": 1, "a": 1, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60})
_N = r"(?P<n>\d{1,4}|a single|single|" + "|".join(w for w in _NUMBERS if " " not in w and w != "a") + r")"
_NEGATED = re.compile(r"(?:\bnot|n't|\bnever|\bwithout|\bavoid|\bno need to)\b[^.!?\n]{0,40}$", re.I)
_OPEN_QUOTE, _CLOSE_QUOTE = '"“”', '"“”'
_QUOTED = rf"[{_OPEN_QUOTE}](?P<x>[^{_CLOSE_QUOTE}\n]{{1,80}})[{_CLOSE_QUOTE}]"


_ELSEWHERE = re.compile(
    r"\s*(?:each|apiece|per\b|in each|for each|on each|within each|for the|in the|in its|in your|except|but\b|"
    r"other than|apart from|unless|or (?:fewer|less|more)|at (?:most|least))",
    re.I,
)
_PARTS = (
    "each|every|per|title|headline|heading|subject|tagline|slogan|caption|name|section|item|bullet|point|sentence|"
    "line|paragraph|step|question"
)


def _unread(task: str, asked: re.Match[str], parts: str = _PARTS) -> bool:
    """The requirement `asked` is not one a rule can read as a whole-answer check: said not to be done, scoped to a
    part of the answer ("a title of at most 5 words", "3 bullet points each"), or with an exception after it."""
    before = re.split(r"[.!?;:\n]", task[max(0, asked.start() - 50) : asked.start()])[-1]
    return (
        _negated(task, asked.start())
        or bool(parts and re.search(rf"\b(?:{parts})s?\b", before, re.I))
        or bool(_ELSEWHERE.match(task[asked.end() :]))
    )


def _parts_but(*nouns: str) -> str:
    return "|".join(part for part in _PARTS.split("|") if part not in nouns)


def _number(text: str) -> int:
    return int(text) if text.isdigit() else _NUMBERS[text.lower()]


def _negated(task: str, start: int) -> bool:
    """The requirement at `start` of `task` is said not to be done ("do not include ...")."""
    return bool(_NEGATED.search(task[max(0, start - 60) : start]))


def _fold(text: str) -> str:
    text = text.replace("’", "'").replace("‘", "'").replace("“", '"').replace("”", '"')
    return " ".join(text.split()).casefold()


_CODE = re.compile(r"```.*?(?:```|\Z)|`[^`\n]*`", re.S)
"""Code, fenced or in backticks: not read as prose."""


def _clip(text: str, limit: int = 100) -> str:
    """`text` as a quote of at most `limit` characters: its opening, cut at a space and marked with "..."."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[:limit].rsplit(" ", 1)[0] if " " in text[:limit] else text[:limit]
    return cut + "..."


def _lines(answer: str) -> list[str]:
    return [line.strip() for line in answer.splitlines() if line.strip()]


_SUBJECT_ASKED = re.compile(
    r"\b(?:with|include|including|add|adding|give it|and)\s+(?:a|an)\s+(?:\w+\s+)?subject(?:\s+line)?\b", re.I
)
_SUBJECT_LINE = re.compile(r"^\W{0,4}(?:subject|subj)(?:\s+line)?\s*\W{0,2}\s*[:\-–]", re.I)


def _subject(task: str, answer: str) -> Fault | None:
    asked = _SUBJECT_ASKED.search(task)
    if not asked or _unread(task, asked, parts=""):
        return None
    if "line" not in asked.group(0).lower() and not re.search(
        r"\b(?:e-?mail|mail|message|letter|memo)\b", task, re.I
    ):
        return None  # "an essay with a subject of your choice": a topic, not a subject line
    lines = _lines(answer)
    if not lines or any(_SUBJECT_LINE.match(line) for line in lines):
        return None
    return Fault(
        issue="The answer has no subject line, which the task asks for.",
        fix=f'Add a subject line as the first line, before "{lines[0]}": "Subject:" followed by a few words that say '
        "what the email is about.",
        by=RULE_REQUIRED,
    )


_SIGN_ASKED = re.compile(
    r"\b[Ss]ign(?:ed)?(?:\s+(?:it|off|the\s+\w+))?\s+(?:as|with|by)\s+"
    rf"(?:{_QUOTED}|(?P<name>[A-Z][\w'’-]*\.?(?:\s+[A-Z][\w'’-]*\.?){{0,3}}))"
)


def _signature(task: str, answer: str) -> Fault | None:
    asked = _SIGN_ASKED.search(task)
    if not asked or _negated(task, asked.start()):
        return None
    name = (asked.group("x") or asked.group("name") or "").strip().rstrip(".,;:!?")
    if len(name) < 2 or _fold(name) in _fold(answer):
        return None
    lines = _lines(answer)
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


_WORDS_AT_MOST = re.compile(
    rf"\b(?:(?:at most|no more than|not more than|up to|a maximum of|maximum of|max(?:imum)?)\s+{_N}\s+words\b|"
    rf"{_N.replace('<n>', '<n2>')}\s+words\s+or\s+(?:fewer|less)\b)",
    re.I,
)
_WORDS_UNDER = re.compile(rf"\b(?:under|fewer than|less than|below)\s+{_N}\s+words\b", re.I)
_WORDS_AT_LEAST = re.compile(
    rf"\b(?:at least|no fewer than|no less than|a minimum of|minimum of)\s+{_N}\s+words\b", re.I
)


def _word_counts(answer: str) -> tuple[int, int]:
    """The answer's words counted two ways: split at spaces (tokens with a letter or digit), and runs of letters
    and digits ("don't" is two there)."""
    spaced = sum(1 for token in answer.split() if any(ch.isalnum() for ch in token))
    return spaced, len(re.findall(r"\w+", answer))


def _sentences(text: str) -> list[str]:
    """`text` split into sentences at `.`, `!` or `?` followed by a space and a capital or a digit, never after an
    abbreviation or an initial ("Mr.", "e.g.", "J. Smith")."""
    parts = re.split(r"(?<=[.!?])[\"'”’)]*\s+(?=[\"'“‘(]?[A-Z0-9])", " ".join(text.split()))
    out: list[str] = []
    for part in parts:
        previous = out[-1].split()[-1] if out and out[-1].split() else ""
        if out and (
            re.fullmatch(
                r"(?:[A-Za-z]|Mr|Mrs|Ms|Dr|St|Jr|Sr|No|vs|etc|approx|(?:[A-Za-z]\.)+[A-Za-z])\.", previous
            )
            or previous.endswith("..")
        ):
            out[-1] += " " + part
        else:
            out.append(part)
    return [part for part in out if part.strip()]


def _word_limit(task: str, answer: str) -> Fault | None:
    counts = _word_counts(answer)
    for pattern, over in ((_WORDS_AT_MOST, 0), (_WORDS_UNDER, 1)):
        asked = pattern.search(task)
        if asked and not _unread(task, asked):
            limit = _number(asked.group("n") or asked.groupdict().get("n2") or "0") - over
            if min(counts) > limit:
                longest = max(_sentences(answer), key=len, default=answer.strip())
                return Fault(
                    issue=f"The answer has {counts[0]} words, over the task's limit of {limit}.",
                    fix=f"Cut at least {min(counts) - limit} words so that {limit} or fewer are left, for example "
                    f'by shortening "{_clip(longest)}".',
                    by=RULE_REQUIRED,
                )
    asked = _WORDS_AT_LEAST.search(task)
    if asked and not _unread(task, asked):
        floor = _number(asked.group("n"))
        if max(counts) < floor:
            return Fault(
                issue=f"The answer has {counts[0]} words, fewer than the {floor} the task asks for.",
                fix=f"Add at least {floor - max(counts)} words of content the task asks for, after "
                f'"{_clip(_lines(answer)[-1])}".',
                by=RULE_REQUIRED,
            )
    return None


_BULLETS_ASKED = re.compile(rf"\b(?:exactly\s+)?{_N}\s+bullet(?:\s*points?|s)\b", re.I)
_ITEM = re.compile(r"^(?P<indent>[ \t]*)(?:[-*•+]|\d{1,2}[.)])\s+\S")


def _bullets(task: str, answer: str) -> Fault | None:
    asked = _BULLETS_ASKED.search(task)
    if not asked or _unread(task, asked, parts=_parts_but("bullet", "point", "item")):
        return None
    before = task[max(0, asked.start() - 25) : asked.start()]
    if re.search(
        r"\b(?:at most|up to|no more than|at least|maximum|minimum|or so|about|over|under)\s*$", before, re.I
    ):
        return None
    wanted = _number(asked.group("n"))
    items = [m for line in _CODE.sub(" ", answer).splitlines() if (m := _ITEM.match(line))]
    outer = min((len(m.group("indent").expandtabs(4)) for m in items), default=0)
    top = [m.string.strip() for m in items if len(m.group("indent").expandtabs(4)) == outer]
    if len({line[0].isdigit() for line in top}) > 1:
        return None  # numbered and bulleted items side by side: which are the points is not for a rule to say
    if len(top) == wanted:
        return None
    if not top:
        first = _sentences(answer)[0] if _sentences(answer) else answer.strip()
        return Fault(
            issue=f"The answer has no bullet points, where the task asks for {wanted}.",
            fix=f'Rewrite it as {wanted} bullet points, each a line starting "- ", the first from "{_clip(first)}".',
            by=RULE_REQUIRED,
        )
    if len(top) > wanted:
        extra = ", ".join(f'"{line}"' for line in top[wanted:])
        fix = f"Keep {wanted} bullet points: delete or merge into the others {extra}."
    else:
        fix = f'Add {wanted - len(top)} more bullet point(s) after "{top[-1]}", each a line starting "- ".'
    return Fault(
        issue=f"The answer has {len(top)} bullet points, where the task asks for {wanted}.",
        fix=fix,
        by=RULE_REQUIRED,
    )


_INCLUDE_ASKED = re.compile(
    r"\b(?:include|includes|including|mention|mentions|mentioning|use|uses|using|contain|contains|containing|"
    r"with)\s+(?:the\s+)?(?:exact\s+)?(?P<noun>(?:key)?words?|phrases?|terms?|sentences?|line)?\s*" + _QUOTED,
    re.I,
)
_ENDS_ASKED = re.compile(
    r"\b(?P<verb>end|finish|close|conclude|start|begin|open)(?:s|ing)?\s+"
    r"(?:it|(?:the|your)\s+(?:\w+\s+)?(?:reply|response|answer|message|email|letter|note|post|poem|text))?\s*"
    r"with\s+(?:the\s+)?(?:exact\s+)?(?:(?:key)?words?|phrases?|sentences?|line)?\s*" + _QUOTED,
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
        if _negated(task, asked.start()) or _alternative(task, asked):
            continue
        words = asked.group("x").strip().rstrip(".,;:")
        if words and _fold(words) not in _fold(answer):
            return Fault(
                issue=f'The answer does not include "{words}", which the task asks for.',
                fix=f'Add the exact words "{words}" to the answer, in a sentence where they fit.',
                by=RULE_REQUIRED,
            )
    return None


def _ends(task: str, answer: str) -> Fault | None:
    for asked in _ENDS_ASKED.finditer(task):
        if _negated(task, asked.start()) or _alternative(task, asked):
            continue
        words = _fold(asked.group("x")).strip(_TRAILING)
        text = _fold(answer).strip(_TRAILING)
        if not words or not text:
            continue
        at_end = asked.group("verb").lower() in {"end", "finish", "close", "conclude"}
        if words in (text[-(len(words) + 200) :] if at_end else text[: len(words) + 200]):
            continue  # there, or near enough ("Best regards," over a name) for a rule not to judge
        lines = _lines(answer)
        phrase = asked.group("x").strip()
        if at_end:
            return Fault(
                issue=f'The answer does not end with "{phrase}", as the task asks.',
                fix=f'Add "{phrase}" as the last line, after "{_clip(lines[-1])}".',
                by=RULE_REQUIRED,
            )
        return Fault(
            issue=f'The answer does not start with "{phrase}", as the task asks.',
            fix=f'Add "{phrase}" as the first words, before "{_clip(lines[0])}".',
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
        if not asked or _unread(task, asked, parts=""):
            continue
        bad = [line for line in _lines(answer) if any(wrong(ch) for ch in line)]
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
    if not asked or _unread(task, asked, parts=""):
        return None
    bad = [s for s in _sentences(answer) if "," in s or "，" in s]
    if not bad:
        return None
    quoted = ", ".join(f'"{s}"' for s in bad[:2])
    return Fault(
        issue="The answer uses commas, which the task forbids.",
        fix=f"Remove every comma, rewording where needed: in {quoted}.",
        by=RULE_REQUIRED,
    )


_PARAGRAPHS_ASKED = re.compile(
    rf"\b(?:write|in|into|as|of|with|give|using|a|an)\s+(?:exactly\s+|just\s+|only\s+)?{_N}[- ]paragraphs?\b",
    re.I,
)
_SENTENCES_ASKED = re.compile(
    rf"\b(?:write|in|into|as|of|with|give|using|a|an)\s+(?:exactly\s+|just\s+|only\s+)?{_N}[- ]sentences?\b",
    re.I,
)


def _prose_blocks(answer: str) -> list[str]:
    """The answer's blocks (between blank lines) without a greeting or subject line first and a short sign-off
    last."""
    blocks = [b.strip() for b in re.split(r"\n\s*\n", answer.strip()) if b.strip()]
    if blocks and "\n" not in blocks[0] and (blocks[0].endswith(",") or _SUBJECT_LINE.match(blocks[0])):
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


def _paragraphs(task: str, answer: str) -> Fault | None:
    asked = _PARAGRAPHS_ASKED.search(task)
    if (
        not asked
        or _unread(task, asked, _parts_but("paragraph"))
        or re.match(r"\s*or\b", task[asked.end() :], re.I)
    ):
        return None
    wanted = _number(asked.group("n"))
    if wanted == 1:
        blocks = _prose_blocks(answer)
        if len(blocks) <= 1 or any(_ITEM.match(line) for line in answer.splitlines()):
            return None
        return Fault(
            issue=f"The answer has {len(blocks)} paragraphs, where the task asks for one.",
            fix=f'Join the paragraphs into one: remove the blank line before "{_clip(_sentences(blocks[1])[0])}".',
            by=RULE_REQUIRED,
        )
    lines = _lines(answer)
    if not lines or len(lines) >= wanted:
        return None
    sentences = _sentences(answer)
    where = f' before "{_clip(sentences[len(sentences) // 2])}"' if len(sentences) > 1 else ""
    return Fault(
        issue=f"The answer is {len(lines)} paragraph{'s' if len(lines) > 1 else ''}, where the task asks for "
        f"{wanted}.",
        fix=f"Split it into {wanted} paragraphs with a blank line between them{where}, each on its own part of "
        "the topic.",
        by=RULE_REQUIRED,
    )


def _sentence_count(task: str, answer: str) -> Fault | None:
    asked = _SENTENCES_ASKED.search(task)
    if (
        not asked
        or _unread(task, asked, _parts_but("sentence"))
        or re.match(r"\s*or\b", task[asked.end() :], re.I)
    ):
        return None
    if any(_ITEM.match(line) for line in answer.splitlines()) or "```" in answer:
        return None
    wanted = _number(asked.group("n"))
    sentences = _sentences(answer)
    if len(sentences) <= wanted:
        return None
    extra = ", ".join(f'"{s}"' for s in sentences[wanted:])
    return Fault(
        issue=f"The answer has {len(sentences)} sentences, where the task asks for {wanted}.",
        fix=f"Keep {wanted} sentence{'s' if wanted > 1 else ''}: delete or merge into the others {extra}.",
        by=RULE_REQUIRED,
    )


_REQUIRED: tuple[Callable[[str, str], Fault | None], ...] = (
    _subject,
    _signature,
    _word_limit,
    _bullets,
    _included,
    _ends,
    _case,
    _commas,
    _paragraphs,
    _sentence_count,
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


# -- another script ----------------------------------------------------------------------------------------------------
_LANGUAGE_SCRIPTS = {
    "english": "LATIN",
    "french": "LATIN",
    "spanish": "LATIN",
    "german": "LATIN",
    "italian": "LATIN",
    "portuguese": "LATIN",
    "dutch": "LATIN",
    "russian": "CYRILLIC",
    "ukrainian": "CYRILLIC",
    "bulgarian": "CYRILLIC",
    "serbian": "CYRILLIC",
    "belarusian": "CYRILLIC",
    "kazakh": "CYRILLIC",
    "mongolian": "CYRILLIC",
    "greek": "GREEK",
    "chinese": "CJK",
    "mandarin": "CJK",
    "cantonese": "CJK",
    "japanese": "CJK",
    "korean": "HANGUL",
    "arabic": "ARABIC",
    "persian": "ARABIC",
    "farsi": "ARABIC",
    "urdu": "ARABIC",
    "hebrew": "HEBREW",
    "yiddish": "HEBREW",
    "hindi": "DEVANAGARI",
    "marathi": "DEVANAGARI",
    "nepali": "DEVANAGARI",
    "thai": "THAI",
    "bengali": "BENGALI",
    "tamil": "TAMIL",
    "georgian": "GEORGIAN",
    "armenian": "ARMENIAN",
}
_LANGUAGE_TALK = re.compile(
    r"translat|transliterat|romani[sz]|language|script|alphabet|characters|kanji|kana|pinyin|how (?:do you|to) say",
    re.I,
)
_MIN_LETTERS = 4


def _script_name(script: str) -> str:
    return "Chinese or Japanese (Han or kana)" if script == "CJK" else script.title()


def script_faults(answer: str, *, task: str, context: str | None = None) -> list[Fault]:
    """The answer written mostly in a script that neither `task`, `context` nor a language `task` names uses (see
    the module doc).

    Args:
        answer: the candidate answer (its code, fenced or in backticks, is not read).
        task: the task.
        context: the task's context; its scripts are allowed too.
    """
    if _LANGUAGE_TALK.search(task):
        return []
    letters = Counter(s for ch in _CODE.sub(" ", answer) if (s := script_of(ch)) is not None)
    total = sum(letters.values())
    if total < _MIN_LETTERS:
        return []
    main, count = letters.most_common(1)[0]
    allowed = set(scripts(task, context))
    allowed |= {script for name, script in _LANGUAGE_SCRIPTS.items() if re.search(rf"\b{name}\b", task, re.I)}
    if count * 2 <= total or main in allowed or not allowed:
        return []
    first = _lines(_CODE.sub(" ", answer))[0]
    theirs = " or ".join(sorted(_script_name(s) for s in scripts(task, context))) or "another"
    return [
        Fault(
            issue=f"The answer is written in the {_script_name(main)} script, not in the task's language "
            f"(the task is in the {theirs} script).",
            fix=f'Write the whole answer again in the task\'s language, starting with its first line "{_clip(first)}".',
            by=RULE_SCRIPT,
        )
    ]


def rule_faults(answer: str, *, task: str, context: str | None = None) -> list[Fault]:
    """Every fault the rules name in `answer`: placeholders, missed requirements, another script (in that order).

    Args:
        answer: the candidate answer.
        task: the task it answers.
        context: the task's context, if any.
    """
    return [
        *placeholder_faults(answer, task=task, context=context),
        *required_faults(answer, task=task, context=context),
        *script_faults(answer, task=task, context=context),
    ]
