"""The facts rule (`by="rule:facts"`): a value the task gives, said otherwise in the answer, and a count the answer
announces for a list it then does not hold.

- **A value changed.** The task (or its context) gives a weekday, a calendar date ("March 14", "14 March"), a
  clock time ("9 am", "14:30"), an amount of money or a percentage ("$250", "15%"). The answer names one value of
  that kind the task does not give, and lacks exactly one the task gives: the answer says Tuesday where the task
  says Monday. Not read where the task leaves such a value to the writer ("propose another time", "suggest a
  date", "any day"), where the answer's value follows from the task's by one step of arithmetic (a sum,
  difference, multiple or percentage of the task's numbers), or inside code.
- **A code changed.** The task gives a code or number after a word ("order 4417") and the answer a variant of it
  ("order 4471"): read in reflection_graph/critics/_rule_codes.py.
- **A count announced and not kept.** A line of the answer announces a number of items ("Here are three
  reasons:") and the list right under it holds another number of items.

Each fault's fix is a concrete edit quoting the text concerned ('Replace "Tuesday" with "Monday".'). Every function
here is a pure function of its strings; none calls a model.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass

from reflection_graph.critics._faults import Fault
from reflection_graph.critics._rule_codes import code_faults
from reflection_graph.critics._rule_reading import CODE, ITEM, NUMBER, RULE_FACTS, clip, derived, number

__all__ = ["DATE_KIND", "TIME_KIND", "facts_faults"]

_DAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_MONTHS = (
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
)
_MONTH = (
    r"(?P<{}>jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|"
    r"oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?"
)
_ORDINAL = r"(?:st|nd|rd|th)?"


@dataclass(frozen=True)
class _Kind:
    """A kind of value a task can give: how it is written, and its value, for comparison."""

    pattern: re.Pattern[str]
    value: Callable[[re.Match[str]], Hashable]
    open_choice: re.Pattern[str]
    """Words of a task that leave a value of this kind to the writer."""
    same: Callable[[Hashable, Iterable[Hashable]], bool] = lambda value, values: value in values
    """Whether `value` is one of `values` (a time with no am/pm matches either half of the day)."""
    follows: Callable[[Hashable, str], bool] = lambda value, task: False
    """Whether `value` follows from the task's numbers by one step of arithmetic (amounts only)."""


def _full_day(text: str) -> str:
    return next(d for d in _DAYS if d.startswith(text.lower()[:3]))


def _date(match: re.Match[str]) -> Hashable:
    named = (match.group("m1") or match.group("m2")).lower()[:3]
    month = next(i for i, m in enumerate(_MONTHS, 1) if m.startswith(named))
    return month, int(match.group("d1") or match.group("d2"))


def _time(match: re.Match[str]) -> Hashable:
    if match.group("h24"):
        return int(match.group("h24")) * 60 + int(match.group("m24"))
    if match.group("noon"):
        return 12 * 60 if match.group("noon").lower() == "noon" else 0
    hour, minute = int(match.group("h")), int(match.group("m") or 0)
    meridiem = (match.group("ap") or "").lower().replace(".", "")
    if meridiem == "pm" and hour < 12:
        hour += 12
    elif meridiem == "am" and hour == 12:
        hour = 0
    return hour * 60 + minute


def _amount(match: re.Match[str]) -> Hashable:
    if match.group("pct"):
        return ("%", round(float(match.group("v2").replace(",", "")), 2))
    value = float(match.group("v").replace(",", ""))
    scale = (match.group("scale") or "").lower()
    value *= 1000 if scale == "k" else 1_000_000 if scale in {"m", "million"} else 1
    return ("money", round(value, 2))


_WHEN_OPEN = re.compile(
    r"\b(?:propose|proposing|suggest|suggesting|offer|offering|pick|choose|another|alternative|other|"
    r"different|new\s+(?:day|date|time|slot)|available|availability|options?|flexible|whenever|any\s+(?:day|"
    r"date|time)|ask\s+(?:them\s+)?(?:when|for\s+a))\b",
    re.I,
)
_AMOUNT_OPEN = re.compile(
    r"\b(?:propose|suggest|estimate|budget|negotiate|counter-?offer|quote|any\s+(?:price|amount)|each|per|apiece|"
    r"a\s+piece|times|total|sum|altogether|in\s+all|split|share|discount|off|save|tax|tip|plus|minus)\b",
    re.I,
)
"""Words of a task that leave an amount to the writer, or ask for arithmetic whose result the rule does not pair."""
_WEEKDAY = _Kind(
    re.compile(r"\b(?P<day>mon|tues?|wed(?:nes)?|thu(?:rs?)?|fri|sat(?:ur)?|sun)(?:day)\b", re.I),
    lambda m: _full_day(m.group("day")),
    _WHEN_OPEN,
)
DATE_KIND = _Kind(
    re.compile(
        rf"\b{_MONTH.format('m1')}\s+(?P<d1>[12]?\d|3[01]){_ORDINAL}\b"
        rf"|\b(?P<d2>[12]?\d|3[01]){_ORDINAL}\s+(?:of\s+)?{_MONTH.format('m2')}\b",
        re.I,
    ),
    _date,
    _WHEN_OPEN,
)
"""A date by day and month ("Friday 28 June", "28th of June"), valued as (month, day)."""
TIME_KIND = _Kind(
    re.compile(
        r"\b(?:(?P<h>1[0-2]|0?[1-9])(?::(?P<m>[0-5]\d))?\s*(?P<ap>[ap]\.?m\.?)(?![a-z])"
        r"|(?P<h24>[01]?\d|2[0-3]):(?P<m24>[0-5]\d)(?!\s*[ap]\.?m)|(?P<noon>noon|midnight))",
        re.I,
    ),
    _time,
    _WHEN_OPEN,
    same=lambda value, values: value in values or _same_time(value, values),
)
"""A clock time ("9:30 am", "14:00", "noon"), valued in minutes after midnight."""
_AMOUNT_KIND = _Kind(
    re.compile(
        r"(?:[$€£]\s?(?P<v>\d[\d,]*(?:\.\d+)?)(?:\s?(?P<scale>k|m|million)\b)?"
        r"|\b(?P<v2>\d[\d,]*(?:\.\d+)?)\s?(?P<pct>%|percent\b))",
        re.I,
    ),
    _amount,
    _AMOUNT_OPEN,
    follows=lambda value, task: derived(value, task),
)
_KINDS = (_WEEKDAY, DATE_KIND, TIME_KIND, _AMOUNT_KIND)


def _values(kind: _Kind, text: str) -> dict[Hashable, str]:
    """The values of `kind` in `text`, each with the words that first say it."""
    out: dict[Hashable, str] = {}
    for match in kind.pattern.finditer(text):
        words = match.group(0).strip()
        if words.endswith(".") and not re.search(r"[ap]\.m\.$", words, re.I):
            words = words[:-1]  # a sentence's full stop after "9 am"
        out.setdefault(kind.value(match), words)
    return out


def _same_time(a: Hashable, given: Iterable[Hashable]) -> bool:
    """A time with no am/pm ("9:00") is the task's time on a 12-hour clock either way."""
    return isinstance(a, int) and any(isinstance(g, int) and a % 720 == g % 720 for g in given)


def _changed(kind: _Kind, task: str, answer: str, context: str | None) -> Fault | None:
    """The one value of `kind` the task gives and the answer lacks, with the one the answer says instead."""
    given = _values(kind, task)
    if not given or kind.open_choice.search(task):
        return None
    supported = {**_values(kind, context or ""), **given}
    said = _values(kind, CODE.sub(" ", answer))
    missing = [v for v in given if not kind.same(v, said)]
    new = [v for v in said if not kind.same(v, supported) and not kind.follows(v, task)]
    if len(missing) != 1 or not new:
        return None
    right, wrong = given[missing[0]], said[new[0]]
    return Fault(
        issue=f'The answer says "{wrong}" where the task gives "{right}".',
        fix=f'Replace "{wrong}" with "{right}".',
        by=RULE_FACTS,
    )


_ANNOUNCED = re.compile(rf"\b{NUMBER}\s+(?:[a-z-]+\s+)?(?P<noun>[a-z]+s)\b[^:\n]{{0,40}}:\s*$", re.I)


def _count(answer: str) -> Fault | None:
    """A line that announces N items ("three reasons:") over a list of another length."""
    lines = [line for line in answer.splitlines() if line.strip()]
    for i, line in enumerate(lines):
        announced = _ANNOUNCED.search(line)
        if not announced or announced.group("n").lower() in {"a", "single", "a single"}:
            continue
        items = [m for m in itertools.takewhile(bool, (ITEM.match(x) for x in lines[i + 1 :])) if m]
        top = [m.string for m in items if m.group("indent") == items[0].group("indent")]
        want = number(announced.group("n"))
        if len(top) < 2 or len(top) == want:
            continue
        said = clip(announced.group(0).rstrip(": "), 60)
        return Fault(
            issue=f'The answer announces "{said}" but lists {len(top)}.',
            fix=(
                f'Add {want - len(top)} more after "{clip(top[-1].strip(), 60)}", or change "{said}" to say '
                f"{len(top)}."
                if want > len(top)
                else f'Change "{said}" to say {len(top)}, or keep only {want} of the items.'
            ),
            by=RULE_FACTS,
        )
    return None


def facts_faults(answer: str, *, task: str, context: str | None = None) -> list[Fault]:
    """The task's values the answer changes, and a list count the answer announces and misses (the module doc).

    Args:
        answer: the candidate answer.
        task: the task it answers.
        context: the task's context, if any (its values count as given, never as required).
    """
    if not answer.strip():
        return []
    faults = [fault for kind in _KINDS if (fault := _changed(kind, task, answer, context)) is not None]
    counted = _count(answer)
    return [*faults, *code_faults(task, answer, context), *([counted] if counted else [])]
