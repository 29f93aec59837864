"""Template placeholders (`[Your Name]`, `[Company]`, `<name>`, `{name}`): a fill-in slot left in an answer.

An instruction-tuned model asked to "replace 'Tom' with your name" signs `[Your Name]`: a template, not an
answer. `without_placeholder_lines` gives the text without the lines that are nothing but such a slot, and
`with_salutations_named` addresses a greeting that is nothing but one to the role it names: rule-made edits of a
text, which change no line that is not a slot (the loop's `rule` tactic proposes them as a candidate for the critic
to judge: reflection_graph/_text/_rule_revision.py). A slot the task and its context do not hold, inline or alone
on its line (`inline_placeholders`), keeps the `JudgeCritic` from accepting the candidate (its critique names the slot; one
the candidate brought in, that the answer it is compared with lacked, also judges it worse) and ranks it below
every candidate without one in selection (`_rules.rank`), so a final answer holds one only when every candidate
does, or when the task asks for a template (below).

Only prose is read: text inside code fences or backticks is skipped, and a text that looks like code holds none:
a line opening with `def`, `class`, `import`, `return`, `#include`, ...; a SQL statement (`SELECT`, `INSERT
INTO`, `UPDATE ... SET`, `CREATE TABLE`, ...); an INI or TOML file (a `[section]` header over a `key = value`
line, or two `key = value` lines). So `f"{name}"`, `List<T>`, T-SQL's `[Customer Name]` and `[flake8]` are code,
not slots. A slot is 1 to 40 characters with at least two letters, and none of these is one: `[1]` (a citation),
`[x]` (a checkbox), `[text](url)`, `[text][ref]`, `[ref]: url` and a `[ref]` that such a line defines (Markdown
links), `scores[Name]` and `List<Item>` (a bracket attached to a name on its left: an index, a type argument),
a config section header (a line that is nothing but a bracketed name with no space, when the name is dotted or
holds a digit, the brackets are doubled, or a `key = value` line follows: `[tool.ruff]`, `[flake8]`, `[[bin]]`;
a lone `[Name]` under a sign-off stays a slot), `<a@b.org>`, `<br>` and `x^{2}`.
A task that asks for bracketed fields ("template", "placeholder", "fill in", "blank", "mail-merge", "merge
field", "in square brackets", ...) asks for its slots: none is a fault there.

Every function here is a pure function of its strings, and a candidate is read once: its reading against its
task and context (the lines left out, the inline slots) and the task's own are kept in small bounded memos
(`functools.lru_cache`), so `generate`, the judge and a rule-based edit asking about the same candidate share one.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

__all__ = [
    "asks_for_template",
    "inline_placeholders",
    "introduced_placeholders",
    "placeholders",
    "with_salutations_named",
    "without_placeholder_lines",
]

_FENCED = re.compile(r"```.*?(?:```|\Z)|`[^`\n]*`", re.S)
_CODE_LINE = re.compile(
    r"^[^\S\n]*(?:def |class |import |from \S+ import |return\b|#include|function |const |let |var |public |private |"
    r"package |fn |func |@\w+)",
    re.M,
)
_SQL = re.compile(
    r"^[ \t]*(?:SELECT|INSERT[ \t]+INTO|UPDATE[ \t][^\n]*?[ \t]SET|DELETE[ \t]+FROM|MERGE[ \t]+INTO|"
    r"ALTER[ \t]+TABLE|DROP[ \t]+(?:TABLE|VIEW)|CREATE[ \t]+(?:OR[ \t]+(?:REPLACE|ALTER)[ \t]+)?(?:UNIQUE[ \t]+)?"
    r"(?:TABLE|VIEW|INDEX|PROC|PROCEDURE|FUNCTION|TRIGGER))(?![\w'’])|^[ \t]*WITH[ \t]+\w+[ \t]+AS[ \t]*\(",
    re.M,
)
"""A line opening a SQL statement, in capitals ("Select the option" and "Update:" are prose)."""
_SQL_ANY_CASE = re.compile(_SQL.pattern, re.M | re.I)
_STATEMENT_END = re.compile(r";[ \t]*$", re.M)
"""A statement's end: SQL in lower case counts where a line ends with one."""
_CONFIG_KEY = re.compile(r"^[ \t]*(?:[A-Za-z_][\w.\-]*|\"[^\"\n]+\")[ \t]*=[ \t]*\S", re.M)
"""An INI or TOML `key = value` line."""
_BLANK_LINES = re.compile(r"[ \t]*\r?\n(?:[ \t]*\r?\n)*")
_SECTION = re.compile(r"^[ \t]*(?P<slot>\[\[?(?P<name>[\w.\-]+)\]\]?)[ \t]*$", re.M)
"""A line that is nothing but a bracketed name with no space in it: a config section header when it is doubled,
dotted or holds a digit (`[[bin]]`, `[tool.ruff]`, `[flake8]`), or when a `key = value` line follows it."""
_REF_DEF = re.compile(
    r"^[ \t]{0,3}\[(?P<label>[^\[\]\n]+)\]:[ \t]*(?:<[^<>\n]*>|[^\s/.#]*[/.#]\S*)"
    r"(?:[ \t]+(?:\"[^\"\n]*\"|'[^'\n]*'|\([^()\n]*\)))?[ \t]*$",
    re.M,
)
"""A Markdown link reference definition: `[guide]: https://example.org "title"`."""
_SQUARE = re.compile(r"(?<![\w\])])\[([^\[\]\n]{1,40})\](?![(\[])")
"""A bracketed slot; not an index (`scores[Name]`), nor either half of a link (`[text](url)`, `[text][ref]`)."""
_DOTTED = re.compile(r"\w+(?:\.\w+)+")
_ANGLE = re.compile(r"(?<!\w)<(\w[^<>\n]{0,38}\w|\w)>")
_CURLY = re.compile(r"(?<![\w\\^_}$])\{(\w[^{}\n]{0,38}\w|\w)\}")
_HTML_TAGS = frozenset(
    "a b i u p s q br hr em li ol ul dd dl dt tr td th div span strong small sub sup code pre html body head "
    "title table thead tbody img nav main section article header footer blockquote h1 h2 h3 h4 h5 h6".split()
)
_QUOTE = re.compile(r"(?<![A-Za-z])['’]|['’](?![A-Za-z])")
"""A quote mark that is not a possessive or a contraction ("[Recruiter's Name]" is a slot; "<a href='x'>" is not)."""
_OPENING = re.compile(r"[\[<{]")
_NOT_A_SLOT = frozenset({"sic", "sic!", "x", "citation needed"})
_TEMPLATE_ASKED = re.compile(
    r"\b(?:templates?|placeholders?|fill[- ]?ins?|blanks?|mail[- ]?merg(?:e[ds]?|ing)|merge[- ](?:fields?|tags?)|"
    r"form letters?|(?:square|angle|curly)[- ]brackets?|in brackets|bracketed)\b",
    re.I,
)


def _looks_like_sql(text: str) -> bool:
    """A line of `text` opens a SQL statement: in capitals, or in any case where a line ends with `;`."""
    return bool(_SQL.search(text) or (_STATEMENT_END.search(text) and _SQL_ANY_CASE.search(text)))


def _looks_like_config(text: str) -> bool:
    """An INI or TOML file: a section header over a `key = value` line, or two `key = value` lines."""
    keys = list(_CONFIG_KEY.finditer(text))
    if len(keys) >= 2:
        return True
    return bool(keys) and any(_heads_keys(text, m.end()) for m in _SECTION.finditer(text))


def _heads_keys(text: str, end: int) -> bool:
    """The first line after the one ending at `end` that is not blank is a `key = value` line."""
    gap = _BLANK_LINES.match(text, end)
    return gap is not None and _CONFIG_KEY.match(text, gap.end()) is not None


def _prose(text: str) -> str:
    """`text` without code fences and inline code; empty when the text looks like code, SQL or a config file."""
    if _CODE_LINE.search(text) or _looks_like_sql(text) or _looks_like_config(text):
        return ""
    return _FENCED.sub(" ", text)


def _headers(prose: str) -> set[int]:
    """Where the config section headers of `prose` start (as `_SQUARE` matches them)."""
    starts: set[int] = set()
    for m in _SECTION.finditer(prose):
        name = m["name"]
        doubled = m["slot"].startswith("[[") and m["slot"].endswith("]]")
        if doubled or "." in name or any(ch.isdigit() for ch in name) or _heads_keys(prose, m.end()):
            starts.update((m.start("slot"), m.start("slot") + 1))
    return starts


def _is_slot(inner: str, bracket: str) -> bool:
    word = " ".join(inner.split())
    if sum(ch.isalpha() for ch in word) < 2 or word.casefold() in _NOT_A_SLOT:
        return False
    if any(ch in word for ch in '@:/="#%&;|') or _QUOTE.search(word):
        return False  # an address, a URL, an attribute, a JSON pair, a quote: not a slot
    if bracket == "[" and _DOTTED.fullmatch(word):
        return False  # a dotted name (`[tool.ruff]`, `[os.path]`): code, not a slot
    return not (bracket == "<" and word.casefold() in _HTML_TAGS)


def placeholders(text: str) -> list[str]:
    """The template placeholders in the prose of `text`, as written, in the order they appear (no repeats)."""
    if not text or not _OPENING.search(text):
        return []  # no bracket at all: the common case
    prose = _prose(text)
    links = {_key(m["label"]) for m in _REF_DEF.finditer(prose)}
    if links:
        prose = _REF_DEF.sub(lambda m: " " * len(m[0]), prose)
    headers = _headers(prose)
    found: list[tuple[int, str]] = []
    for pattern, bracket in ((_SQUARE, "["), (_ANGLE, "<"), (_CURLY, "{")):
        found += [
            (m.start(), m.group(0))
            for m in pattern.finditer(prose)
            if _is_slot(m.group(1), bracket)
            and not (bracket == "[" and (m.start() in headers or _key(m.group(1)) in links))
        ]
    return list(dict.fromkeys(slot for _, slot in sorted(found)))


def _key(slot: str) -> str:
    return " ".join(slot.casefold().split())


def _keys(texts: Iterable[str | None]) -> set[str]:
    return {_key(slot) for text in texts if text for slot in placeholders(text)}


def asks_for_template(*texts: str | None) -> bool:
    """True when a task (or its context) asks for a template, or holds a placeholder itself."""
    return any(t and (_TEMPLATE_ASKED.search(t) or placeholders(t)) for t in texts)


@functools.lru_cache(maxsize=32)
def _held(task: str, context: str | None) -> frozenset[str] | None:
    """The placeholders the task and its context hold (as `_key`s); None when they ask for a template."""
    if asks_for_template(task, context):
        return None
    return frozenset(_keys((task, context)))


def introduced_placeholders(
    candidate: str, *, task: str, context: str | None = None, earlier: Iterable[str | None] = ()
) -> list[str]:
    """The placeholders of `candidate` that neither the task, its context nor an `earlier` answer (the one it
    revises, or the one it is compared with) holds; none at all when the task asks for a template."""
    held = _held(task, context)
    if held is None:
        return []
    found = [slot for slot in placeholders(candidate) if _key(slot) not in held]
    return _not_in(found, earlier)


def _not_in(slots: list[str], earlier: Iterable[str | None]) -> list[str]:
    """`slots` without those an `earlier` answer holds."""
    if not slots:
        return slots
    others = _keys(earlier)
    return [slot for slot in slots if _key(slot) not in others]


_SLOT_LINE_REST = re.compile(r"[\s,;.:!\-*]*")


@functools.lru_cache(maxsize=128)
def _reading(candidate: str, task: str, context: str | None) -> tuple[str, tuple[str, ...]]:
    """`candidate` without its placeholder-only lines, and the placeholders the task did not ask for that it
    still holds inline: read once per candidate, though `generate`, the judge and a rule-based edit each ask."""
    slots = list(_introduced(candidate, task, context))
    if not slots:
        return candidate, ()
    kept = []
    for line in candidate.split("\n"):
        rest = line
        for slot in slots:
            rest = rest.replace(slot, "")
        if rest != line and _SLOT_LINE_REST.fullmatch(rest):
            continue
        kept.append(line)
    text = "\n".join(kept).strip()
    return text, tuple(introduced_placeholders(text, task=task, context=context))


def without_placeholder_lines(answer: str, *, task: str, context: str | None = None) -> str:
    """`answer` without the lines that hold nothing but placeholders the task did not ask for (`[Your Name]`
    under a sign-off, `[Your Position], [Company]`): part of the rule's fix (`_rule_revision.rule_revision`).
    Inline slots ("Dear [Name],") stay. Code, and a task that asks for a template, are returned as they are."""
    return _reading(answer, task, context)[0]


_SALUTATION_SLOT = re.compile(
    r"^(?P<indent>[ \t]*)(?P<greeting>Dear|Hi|Hello)[ \t]+"
    r"(?P<slot>\[[^\[\]\n]{1,40}\]|<[^<>\n]{1,40}>|\{[^{}\n]{1,40}\}|(?P<bare>[A-Z][\w ]{0,30}['’]s [Nn]ame))"
    r"(?P<end>[ \t]*[,:!]?[ \t]*)$",
    re.M,
)
_NAME_WORDS = re.compile(r"(?:['’]s)?\s*(?:full\s+|first\s+|last\s+)?name$", re.I)
_NOT_A_ROLE = frozenset(
    {"", "your", "recipient", "recipient's", "name", "the", "their", "his", "her", "contact"}
)


def with_salutations_named(answer: str, *, task: str, context: str | None = None) -> str:
    """`answer` with a greeting line that holds nothing but a placeholder the task did not ask for ("Dear
    [Recruiter's Name],", or its bare "Dear Recruiter's Name," a reviser told to drop the brackets writes)
    addressed to the role the slot names ("Dear Recruiter,"), or, when it names none
    ("Dear [Name],"), "Hello,": part of the rule's fix (`_rule_revision.rule_revision`). Other lines, code and a
    task asking for a template are left as they are."""
    if _SALUTATION_SLOT.search(answer) is None or asks_for_template(
        task, context
    ):  # the common case: no scan
        return answer
    slots = set(introduced_placeholders(answer, task=task, context=context))

    def named(match: re.Match[str]) -> str:
        if match["bare"] is None and match["slot"] not in slots:
            return match[0]
        inner = match["bare"] or match["slot"][1:-1]
        role = _NAME_WORDS.sub("", inner.strip()).strip()
        end = match["end"].strip() or ","
        if role.casefold() in _NOT_A_ROLE or role.casefold().startswith("your "):
            return f"{match['indent']}Hello{end}"
        return f"{match['indent']}{match['greeting']} {role}{end}"

    return _SALUTATION_SLOT.sub(named, answer)


def inline_placeholders(
    candidate: str, *, task: str, context: str | None = None, earlier: Iterable[str | None] = ()
) -> list[str]:
    """The placeholders of `candidate` a person would be handed (`introduced_placeholders`), inline or on a
    line of their own ("[Your Name]" under a sign-off): nothing removes them after the loop, so each keeps a
    candidate from being accepted and sends the reviser after it."""
    return _not_in(list(_introduced(candidate, task, context)), earlier)


@functools.lru_cache(maxsize=128)
def _introduced(candidate: str, task: str, context: str | None) -> tuple[str, ...]:
    """`introduced_placeholders` of a candidate, read once though `generate`, the judge and the rule ask."""
    return tuple(introduced_placeholders(candidate, task=task, context=context))
