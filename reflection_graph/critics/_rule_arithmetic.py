"""The arithmetic rule (`by="rule:arithmetic"`): a sum the answer works out and gets wrong, read only where it is
unambiguous.

- **An equation**, in symbols or words: "3 x 4 = 13", "£40 + £25 = £75", "2 × 12.50 = 24.00", "12 plus 15 is
  28", "100 divided by 4 is 20" (operators `+ - − × x * · / ÷`, "plus", "minus", "times", "multiplied by",
  "divided by"; results after `=`, "equals", "is", "makes", "gives", "comes to"); and a percentage of a number,
  "20% of 80 is 18".
- **A total of a quantity at a price**, in one clause: "4 tickets at £12.50 each come to £45.00", "3 nights at
  $120 a night, $340 in total". Both amounts carry a currency, the price is one per item ("each", "a night",
  "per hour" where the items are hours, or after "at"), the items are not a measure ("500 g at £4"), and the
  sentence holds no other number before the total and no word of a charge or a discount ("fee", "tax",
  "discount", "plus", ...).

A result counts as right when it is the true value rounded or cut to the decimals it shows ("33.33" for 100 / 3).
Nothing is read in code, in quotes, inside brackets, next to a date, time, version or phone number (a number
that runs on with `-`, `/`, `:` or `.`; a hyphen is a minus only with a space on each side, a dash never), in a
longer expression ("2x + 3 + 4 = 10") or a sum of more than 12 numbers, after a label ("chapters 3 + 4 are 50
pages"), where a currency changes within the sum, in a sentence that shows the sum as wrong ("not", "incorrect")
or a clause that supposes or guesses it ("if", "should", "about"), or where the task holds the same sum (a sum the
answer quotes). A sentence is read up to 600 characters each side of the sum, so a long answer is read in time
that grows with its length, not faster.

Each fault's fix quotes the wrong result and the right one, written the same way ('Replace "£45.00" with
"£50.00".'). Every function here is a pure function of its strings; none calls a model.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from reflection_graph.critics._faults import Fault
from reflection_graph.critics._rule_reading import CODE, RULE_ARITHMETIC, blank_quotes, number

__all__ = ["arithmetic_faults"]

_CURRENCY = r"[$€£¥₹]"
_DIGITS = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?"
_EDGE_BEFORE = r"(?<![\w.,:/\-−–+×*·÷=%$€£¥₹^(])"
"""A number starts clear of another number, a word, an operator or a bracket."""
_EDGE_AFTER = r"(?![\w:/^(]|[.,\-−–]\d)"
"""A number ends clear of a word, a time, a date, a version or a range."""


def _amount(name: str) -> str:
    """An amount, its currency and percent sign captured as `name`c, `name` and `name`p."""
    return rf"(?P<{name}c>{_CURRENCY})?\s?(?P<{name}>{_DIGITS})(?P<{name}p>%)?"


_OPS = {
    **dict.fromkeys(("+", "plus"), "+"),
    **dict.fromkeys(("-", "−", "minus"), "-"),
    **dict.fromkeys(("×", "x", "*", "·", "times", "multiplied by"), "*"),
    **dict.fromkeys(("/", "÷", "divided by"), "/"),
}
_OP = r"(?:[+−×xX*·/÷]|(?<=\s)-(?=\s)|plus|minus|times|multiplied\s+by|divided\s+by)"
_MOST_TERMS = 12
r"""The most numbers in a sum read: a longer chain is part of a longer expression, and not reading it keeps the
regular expression's work at each place bounded, so a long answer of numbers and operators is read in linear time.
Each term is written so that a space is read one way only (`\s*` then an optional currency and its space, not
`\s*`, an optional currency, then `\s?`): with two ways for each of its spaces, a chain that ends in no result
("1 + 1 + ... + 1 and") was tried in 2 to the power of its length ways, seconds for 18 terms."""
_GIVES = r"(?:=|equals|equal\s+to|is|are|makes|gives(?:\s+you)?|comes?\s+to)"
_EQUATION = re.compile(
    rf"{_EDGE_BEFORE}(?P<chain>{_CURRENCY}?\s?(?:{_DIGITS})(?:\s*{_OP}\s*(?:{_CURRENCY}\s?)?(?:{_DIGITS})){{1,{_MOST_TERMS - 1}}})"
    rf"\s*{_GIVES}\s*{_amount('r')}{_EDGE_AFTER}(?!\s*(?:[+\-−×*·/÷=]|x\s*\d|plus|minus|times|divided))",
    re.I,
)
_RUNS_ON = re.compile(
    r"(?:[+\-−–×*·/÷=^#]|\b(?:x|plus|minus|times|by|chapters?|pages?|steps?|sections?|rooms?|levels?|grades?|"
    r"items?|versions?|days?|weeks?|years?|units?|figures?|fig|tables?|questions?|q|parts?|lines?|rows?|"
    r"columns?|no|numbers?|points?|rules?))\s*$",
    re.I,
)
"""The end of text that runs on into a sum: an operator, or a label whose numbers are names, not amounts."""
_SPAN_OF_TIME = re.compile(r"\s*(?:hours?|hrs?|h|minutes?|mins?|days?|nights?|weeks?|months?|years?)\b", re.I)
_TERM = re.compile(rf"(?P<op>{_OP})?\s*(?P<c>{_CURRENCY})?\s?(?P<n>{_DIGITS})", re.I)
_PERCENT_OF = re.compile(
    rf"{_EDGE_BEFORE}(?P<pct>{_DIGITS})\s?(?:%|percent\b)\s+of\s+{_amount('b')}{_EDGE_AFTER}"
    rf"\s*{_GIVES}\s*{_amount('r')}{_EDGE_AFTER}(?!\s*[+\-−×*·/÷=])",
    re.I,
)
_QUANTITY = (
    r"(?P<q>\d{1,4}|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen|"
    r"sixteen|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|sixty)"
)
_PER = r"(?P<per>each|apiece|a\s+piece|each\s+one|per\s+(?P<unit1>[a-z]+)|an?\s+(?!total\b)(?P<unit2>[a-z]+))"
_TOTAL_AT = re.compile(
    rf"(?<![\w.,$€£¥₹-]){_QUANTITY}\s+(?:[a-z][\w-]*\s+){{0,2}}?(?P<last>[a-z][\w-]*)\s+"
    rf"(?P<how>at|@|for|costing)\s+{_amount('p')}{_EDGE_AFTER}(?:\s+{_PER})?"
    r"(?P<gap>\s*,?\s*(?:(?:which|that|so|this|it|in\s+total|altogether|together|all|will|then)\s+){0,3})"
    rf"(?:(?:comes?\s+to|costs?|totals?|totalling|totaling|is|are|makes?|gives?|for\s+a\s+total\s+of|"
    rf"(?:the\s+)?total\s+(?:is|comes\s+to)|that's|=)\s*{_amount('t')}"
    rf"|{_amount('u')}\s+(?:in\s+total|total|altogether|in\s+all))"
    rf"{_EDGE_AFTER}",
    re.I,
)
_MEASURES = re.compile(
    r"(?:g|kg|grams?|kilos?|kilograms?|lbs?|oz|ounces?|ml|l|litres?|liters?|gallons?|pints?|m|cm|km|metres?|"
    r"meters?|feet|foot|ft|yards?|miles?|inches|sq|square|cubic|tonnes?|tons?)",
    re.I,
)
"""Nouns of a measure: a price "at £4" for 500 g may be per kg."""
_COUNTED = re.compile(
    r"\b(?:\d|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|thirty|forty|fifty|"
    r"hundred|dozen|both|couple|pair)",
    re.I,
)
_OTHER_CHARGE = re.compile(
    r"\b(?:fees?|tax(?:es)?|vat|charges?|surcharge|discount(?:ed)?|off|tips?|gratuity|shipping|delivery|postage|"
    r"deposit|includ\w*|incl|excluding|plus|minus|extra|commission|service|insurance|less|saving|save|free|"
    r"after|before|each\s+way|return|half|double|twice|per\s+(?:person|adult|child|head))\b|[+%&]",
    re.I,
)
"""Words of a charge or a discount beside the quantity and price."""
_DISPUTED = re.compile(
    r"\b(?:not|isn't|aren't|wrong|incorrect|mistaken?|error|false|instead|rather|claims?|claimed|says?|said|"
    r"check)\b|≠|!=",
    re.I,
)
"""Words of a sentence that shows a sum as wrong, or as someone's."""
_SUPPOSED = re.compile(
    r"\b(?:should|would|could|might|if|suppose|assuming|approximately|approx|about|roughly|around|nearly|almost|"
    r"estimated?)\b|≈|~",
    re.I,
)
"""Words of a clause that states a sum as a supposition or a guess."""
_SENTENCE_END = re.compile(r"[.!?](?=\s|$)|[;\n]")
_SENTENCE_REACH = 600
"""How far a sentence is read on each side of a sum: a run of text with no sentence end is cut there, so the words
around each sum are read in bounded time however long the answer."""


@dataclass(frozen=True)
class _Sum:
    """A sum the answer works out wrong: where it is, its words, the result as written, and the true value."""

    start: int
    end: int
    said: str
    currency: str
    digits: str
    value: float


def _float(digits: str) -> float:
    return float(digits.replace(",", ""))


def _decimals(digits: str) -> int:
    return len(digits.split(".")[1]) if "." in digits else 0


def _right(said: str, value: float) -> bool:
    """`said` is `value` rounded (or cut) to the decimals it shows."""
    scale = 10 ** _decimals(said)
    exact = value * scale
    return math.floor(exact + 1e-6) <= round(_float(said) * scale) <= math.ceil(exact - 1e-6)


def _written(value: float, like: _Sum, shown: list[str]) -> str:
    """`value` written as `like.said` is: its currency, thousands separators and decimals (an amount of money or
    a result with trailing zeros keeps its decimals; more where the value needs them, up to the most the sum's
    numbers show)."""
    places = _decimals(like.digits)
    if not like.currency and not like.digits.endswith("0"):
        places = 0  # "2.5" for 25: as few decimals as the value needs
    most = max([places, *(_decimals(d) for d in shown)])
    while places < most and abs(round(value, places) - value) > 1e-9:
        places += 1
    text = f"{value:,.{places}f}" if "," in like.digits else f"{value:.{places}f}"
    return f"{like.currency}{text}"


def _apply(a: float, op: str, b: float) -> float:
    if op == "/":
        return a / b if b else math.nan
    return a + b if op == "+" else a - b if op == "-" else a * b


def _values(terms: list[tuple[str, float]]) -> list[float]:
    """The values of `terms` (operator, number), read with the usual precedence and read left to right."""
    in_order = terms[0][1]
    for op, n in terms[1:]:
        in_order = _apply(in_order, op, n)
    total, sign, product = 0.0, "+", terms[0][1]
    for op, n in terms[1:]:
        if op in "*/":
            product = _apply(product, op, n)
        else:
            total, sign, product = _apply(total, sign, product), op, n
    return [_apply(total, sign, product), in_order]


def _sentence(text: str, start: int, end: int) -> tuple[int, int]:
    """The bounds of the sentence of `text` that holds `start`..`end`, at most `_SENTENCE_REACH` characters on each
    side."""
    reach = max(0, start - _SENTENCE_REACH)
    begin = max((m.end() for m in _SENTENCE_END.finditer(text, reach, start)), default=reach)
    limit = min(len(text), end + _SENTENCE_REACH)
    stop = _SENTENCE_END.search(text, end, limit)
    return begin, stop.start() if stop else limit


def _runs_on(text: str, start: int) -> bool:
    """The text before `start` runs on into a sum there (`_RUNS_ON`), read from the last word or operator before the
    spaces, not from the start of `text` (a search that ends at `start` is tried from every place before it)."""
    word_end = start
    while word_end and text[word_end - 1].isspace():
        word_end -= 1
    return bool(_RUNS_ON.search(text, max(0, word_end - 16), start))


def _disputed(text: str, start: int, end: int) -> bool:
    """The sum at `start`..`end` of `text` is shown as wrong in its sentence, or supposed in its clause."""
    begin, stop = _sentence(text, start, end)
    clause = text[begin:end] + text[end:stop].split(",")[0]
    return bool(_DISPUTED.search(text[begin:stop]) or _SUPPOSED.search(clause))


def _equations(text: str) -> list[_Sum]:
    """The equations and percentages of a number in `text` whose result is wrong."""
    sums = []
    for match in _EQUATION.finditer(text):
        if _runs_on(text, match.start()):
            continue  # "2x + 3 + 4 = 10": part of a longer expression
        chain = match.group("chain")
        terms = list(_TERM.finditer(chain))
        currencies = {m.group("c") or "" for m in terms} | {match.group("rc") or ""}
        if len(currencies - {""}) > 1 or match.group("rp") or _disputed(text, match.start(), match.end()):
            continue
        if len(terms) > 2 and re.search(r"\d[-/]\d", chain):
            continue  # "2024-05-01", "1/2/2024": a date, not a sum
        if " - " in chain and _SPAN_OF_TIME.match(text, match.end()):
            continue  # "open 9 - 5 = 8 hours": a span of the clock, not a difference
        read = [(_OPS[" ".join((m.group("op") or "+").split()).lower()], _float(m.group("n"))) for m in terms]
        values = _values(read)
        if any(math.isnan(v) or _right(match.group("r"), v) for v in values):
            continue
        said = text[match.start("rc") if match.group("rc") else match.start("r") : match.end("r")]
        sums.append(
            _Sum(match.start(), match.end(), said, match.group("rc") or "", match.group("r"), values[0])
        )
    for match in _PERCENT_OF.finditer(text):
        if _runs_on(text, match.start()):
            continue
        if (match.group("bc") or "") != (match.group("rc") or "") or match.group("bp") or match.group("rp"):
            continue
        value = _float(match.group("pct")) * _float(match.group("b")) / 100
        if _right(match.group("r"), value) or _disputed(text, match.start(), match.end()):
            continue
        said = text[match.start("rc") if match.group("rc") else match.start("r") : match.end("r")]
        sums.append(_Sum(match.start(), match.end(), said, match.group("rc") or "", match.group("r"), value))
    return sums


def _totals(text: str) -> list[_Sum]:
    """The totals of a quantity at a price in `text` that are wrong."""
    sums = []
    for match in _TOTAL_AT.finditer(text):
        key = "t" if match.group("t") else "u"
        currency = match.group(f"{key}c") or ""
        if (
            not currency
            or currency != (match.group("pc") or "")
            or match.group("pp")
            or match.group(f"{key}p")
        ):
            continue
        if match.group("how").lower() in {"for", "costing"} and not match.group("per"):
            continue  # "4 tickets for £50": a price for all four, or for each
        unit = (match.group("unit1") or match.group("unit2") or "").lower()
        noun = match.group("last").lower()
        if unit and unit not in {noun, noun.rstrip("s"), noun[:-2] if noun.endswith("es") else noun}:
            continue  # "3 nights at $120 per person": the price is not per night
        if not unit and _MEASURES.fullmatch(noun):
            continue  # "500 g at £4": the price may be per kg
        begin, stop = _sentence(text, match.start(), match.end())
        after = text[match.end() : stop].split(",")[0]
        if (
            _COUNTED.search(text[begin : match.start()])
            or re.search(r"\d", after)
            or _OTHER_CHARGE.search(text[begin : match.end()] + after)
            or _disputed(text, match.start(), match.end())
        ):
            continue
        value = number(match.group("q")) * _float(match.group("p"))
        digits = match.group(key)
        if not _right(digits, value):
            said = text[match.start(f"{key}c") : match.end(key)]
            sums.append(_Sum(match.start(), match.end(), said, currency, digits, value))
    return sums


def _prose(text: str) -> str:
    """`text` with code, quotes and brackets blanked (the same length, so positions hold)."""
    return blank_quotes(CODE.sub(lambda m: " " * len(m.group(0)), text))


def arithmetic_faults(answer: str, *, task: str, context: str | None = None) -> list[Fault]:
    """The sums `answer` works out wrong (the module doc), one fault for each.

    Args:
        answer: the candidate answer.
        task: the task it answers (a sum it holds as the answer does is the task's, not the answer's).
        context: the task's context, if any (likewise).
    """
    prose = _prose(answer)
    given = " ".join(f"{task} {context or ''}".split()).casefold()
    faults: list[Fault] = []
    replaced: set[str] = set()  # one fault for each result as written
    for found in sorted([*_equations(prose), *_totals(prose)], key=lambda s: s.start):
        words = " ".join(answer[found.start : found.end].split())
        if words.casefold() in given or found.said in replaced:
            continue
        replaced.add(found.said)
        right = _written(found.value, found, re.findall(_DIGITS, words))
        faults.append(
            Fault(
                issue=f'The answer\'s arithmetic is wrong: in "{words}" the result is {right}, not {found.said}.',
                fix=f'Replace "{found.said}" with "{right}".',
                by=RULE_ARITHMETIC,
            )
        )
    return faults
