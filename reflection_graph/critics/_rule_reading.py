"""What the rule critics share: the attribution each rule's faults carry, and the reading of a task and an answer
that more than one rule needs: numbers written as words or digits, an amount one step of arithmetic makes from a
task's numbers, a requirement said not to be done or scoped to a part of the answer, text folded for comparison,
quotes clipped for a fix, quotes and brackets blanked, the answer's lines and sentences, and the shapes of a
subject line, a list item and code.
Every function here is a pure function of its strings.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Hashable

__all__ = [
    "CODE",
    "ITEM",
    "NUMBER",
    "QUOTED",
    "RULE_ARITHMETIC",
    "RULE_FACTS",
    "RULE_LANGUAGE",
    "RULE_PLACEHOLDER",
    "RULE_RECIPIENT",
    "RULE_REQUIRED",
    "RULE_SCRIPT",
    "SUBJECT_LINE",
    "answer_lines",
    "blank_quotes",
    "clip",
    "derived",
    "fold",
    "negated",
    "number",
    "parts_but",
    "split_sentences",
    "unread",
]

RULE_ARITHMETIC = "rule:arithmetic"
RULE_FACTS = "rule:facts"
RULE_LANGUAGE = "rule:language"
RULE_PLACEHOLDER = "rule:placeholder"
RULE_RECIPIENT = "rule:recipient"
RULE_REQUIRED = "rule:required"
RULE_SCRIPT = "rule:script"


# -- reading a task and an answer --------------------------------------------------------------------------------------
_NUMBERS = {
    word: value
    for value, word in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
        "seventeen eighteen nineteen twenty".split()
    )
}
_NUMBERS.update({"a single": 1, "single": 1, "a": 1, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60})
NUMBER = r"(?P<n>\d{1,4}|a single|single|" + "|".join(w for w in _NUMBERS if " " not in w and w != "a") + r")"
_NEGATED = re.compile(r"(?:\bnot|n't|\bnever|\bwithout|\bavoid|\bno need to)\b[^.!?\n]{0,40}$", re.I)
_OPEN_QUOTE, _CLOSE_QUOTE = '"“”', '"“”'
QUOTED = rf"[{_OPEN_QUOTE}](?P<x>[^{_CLOSE_QUOTE}\n]{{1,80}})[{_CLOSE_QUOTE}]"


_PARTS = (
    "each|every|per|title|headline|heading|subject|tagline|slogan|caption|name|section|item|bullet|point|sentence|"
    "line|paragraph|step|question"
)
_ELSEWHERE = re.compile(
    r"\s*(?:each|apiece|per\b|in each|for each|on each|within each|"
    rf"(?:for|in|of) (?:the|its|your)\s+(?:[\w'-]+\s+){{0,2}}?(?:(?:{_PARTS})s?|first|second|third|last|final|"
    r"opening|closing|intro\w*|conclusion|body|summary|abstract|bio|description)\b|"
    r"except|but\b|other than|apart from|unless|or (?:fewer|less|more)|at (?:most|least))",
    re.I,
)
"""What after a requirement scopes it to a part of the answer ("5 words for the title", "each") or makes an
exception; "60 words for the Trailhead backpack" names what the whole answer is about, and is read."""


def unread(task: str, asked: re.Match[str], parts: str = _PARTS) -> bool:
    """The requirement `asked` is not one a rule can read as a whole-answer check: said not to be done, scoped to a
    part of the answer ("a title of at most 5 words", "3 bullet points each"), or with an exception after it."""
    before = re.split(r"[.!?;:\n]", task[max(0, asked.start() - 50) : asked.start()])[-1]
    return (
        negated(task, asked.start())
        or bool(parts and re.search(rf"\b(?:{parts})s?\b", before, re.I))
        or bool(_ELSEWHERE.match(task[asked.end() :]))
    )


def parts_but(*nouns: str) -> str:
    """The parts of an answer a requirement can be scoped to, as a regex alternation, without `nouns`."""
    return "|".join(part for part in _PARTS.split("|") if part not in nouns)


def number(text: str) -> int:
    """The count `text` names, in digits or words ("3", "three", "a single")."""
    return int(text) if text.isdigit() else _NUMBERS[text.lower()]


_MAX_NUMBERS = 40
"""A task with more numbers than this leaves its amounts to the judge (the pairs checked grow as its square)."""
_NUMBERS_IN = re.compile(r"\d[\d,]*(?:\.\d+)?")


def derived(value: Hashable, task: str) -> bool:
    """An amount one step of arithmetic makes from the task's numbers: a sum, difference, product or share."""
    if not isinstance(value, tuple):
        return False
    target = float(value[1])
    numbers = {float(n.replace(",", "")) for n in _NUMBERS_IN.findall(task)}
    numbers |= {
        float(number(w.group("n"))) for w in re.finditer(NUMBER, task, re.I) if not w.group("n").isdigit()
    }
    if len(numbers) > _MAX_NUMBERS:
        return True  # a table of figures: which one the answer computed is not a rule's to say
    for a, b in itertools.product(numbers, repeat=2):
        made = {a + b, abs(a - b), a * b, a * b / 100, a - a * b / 100, a / b if b else a}
        if any(abs(target - x) < 0.005 for x in made):
            return True
    return False


def negated(task: str, start: int) -> bool:
    """The requirement at `start` of `task` is said not to be done ("do not include ...")."""
    return bool(_NEGATED.search(task[max(0, start - 60) : start]))


def fold(text: str) -> str:
    """`text` for comparison: curly quotes made straight, spacing collapsed, case folded."""
    text = text.replace("’", "'").replace("‘", "'").replace("“", '"').replace("”", '"')
    return " ".join(text.split()).casefold()


CODE = re.compile(r"```.*?(?:```|\Z)|`[^`\n]*`", re.S)
"""Code, fenced or in backticks: not read as prose."""


_QUOTE_PAIRS = {'"': '"', "“": "”", "(": ")", "[": "]"}
"""An opening quote or bracket and its closer: from one to the first closer on its line is a quote, not read."""
_OPENER = re.compile(r'["“(\[]')


def blank_quotes(text: str) -> str:
    """`text` with each quote and bracket blanked (the same length, so positions hold), from its opener to the first
    closer on its line (`"..."`, `“...”`, `(...)`, `[...]`). One pass: the next closer of each kind and the next line
    end are found once and kept while they lie ahead, so many openers with no closer do not make the work grow with
    the square of the length."""
    ahead: dict[str, int] = {}

    def next_at(char: str, at: int) -> int:
        found = ahead.get(char, -1)
        if found < at:
            found = text.find(char, at)
            found = ahead[char] = len(text) if found < 0 else found
        return found

    pieces, kept, at = [], 0, 0
    while opener := _OPENER.search(text, at):
        at = opener.start() + 1
        close = next_at(_QUOTE_PAIRS[opener.group()], at)
        if close < len(text) and close < next_at("\n", at):
            pieces += [text[kept : opener.start()], " " * (close + 1 - opener.start())]
            kept = at = close + 1
    return "".join([*pieces, text[kept:]])


def clip(text: str, limit: int = 100) -> str:
    """`text` as a quote of at most `limit` characters: its opening, cut at a space and marked with "..."."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[:limit].rsplit(" ", 1)[0] if " " in text[:limit] else text[:limit]
    return cut + "..."


def answer_lines(answer: str) -> list[str]:
    """The non-blank lines of `answer`, stripped."""
    return [line.strip() for line in answer.splitlines() if line.strip()]


SUBJECT_LINE = re.compile(r"^\W{0,4}(?:subject|subj)(?:\s+line)?\s*\W{0,2}\s*[:\-–]", re.I)
"""A subject line: "Subject:" (or "Subj -") at the start of a line."""
ITEM = re.compile(r"^(?P<indent>[ \t]*)(?:[-*•+]|\d{1,2}[.)])\s+\S")
"""A list item, bulleted or numbered, with its indent."""


def split_sentences(text: str) -> list[str]:
    """`text` split into sentences at `.`, `!` or `?` followed by a space and a capital or a digit (after an opening
    quote, bracket, `¿` or `¡`, if any), never after an abbreviation or an initial ("Mr.", "e.g.", "J. Smith")."""
    parts = re.split(r"(?<=[.!?])[\"'”’)]*\s+(?=[\"'“‘(¿¡]?[A-Z0-9])", " ".join(text.split()))
    out: list[str] = []
    for part in parts:
        last = out[-1].rsplit(None, 1) if out else []  # the last word alone: a merged part can be long
        previous = last[-1] if last else ""
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
