"""Examples written as prose in a docstring, read as (call, expected value) pairs for tests.

Docstrings often show examples without doctest's `>>>`: `f(3) ==> 9`, `f(3) == 9`, `f(3) -> 9`, `f(3) => 9`,
`f(3) ➞ 9`, `f(3)   # returns 9`, `f(3) should return 9`, `For x = 3 the output should be 9`, or an
`Input: 3` line followed by an `Output: 9` line. `prose_examples` reads the lines of those shapes whose call is of
the function itself with literal arguments and whose expected value is a Python literal (`true`/`false` are read
as booleans; after an arrow, a worked sum such as `19 - 5 - 6 = 8` gives the value after its last `=`). Anything
else is skipped: an example it cannot read for sure never becomes a test.
"""

from __future__ import annotations

import ast
import re

__all__ = ["prose_examples"]

_SEPARATORS = (r"==>", r"=>", r"==", r"->", r"➞", r"#\s*returns?", r"should\s+return", r"returns?")
_CALL_LINE = re.compile(
    r"^\s*(?P<call>[A-Za-z_]\w*\s*\(.*\))\s*(?P<sep>" + "|".join(_SEPARATORS) + r")\s*:?\s*(?P<want>.+?)\s*$"
)
_FOR_LINE = re.compile(
    r"^\s*for\s+(?P<args>.+?),?\s+the\s+(?:output|result|answer)\s+should\s+be\s+(?P<want>.+?)\s*\.?\s*$",
    re.IGNORECASE,
)
_INPUT_LINE = re.compile(r"^\s*input\s*:\s*(?P<args>.+?)\s*$", re.IGNORECASE)
_OUTPUT_LINE = re.compile(r"^\s*output\s*:\s*(?P<want>.+?)\s*$", re.IGNORECASE)
_BOOLEANS = {"true": "True", "false": "False"}


def _literal(text: str) -> str | None:
    """`text` as the source of a Python literal (a trailing `.` or `,` dropped), or None."""
    text = text.strip().rstrip(".,;").strip()
    text = _BOOLEANS.get(text.lower(), text) if text.lower() in _BOOLEANS else text
    if not text:
        return None
    try:
        ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    return text


def _expected(text: str, arrow: bool) -> str | None:
    """The expected value's source: the text itself as a literal, or (after an arrow) the value after the last
    `=` of a worked computation such as `19 - 5 - 6 = 8`."""
    text = re.split(r"\s+#", text, maxsplit=1)[0]
    found = _literal(text)
    if found is None and arrow and re.search(r"[^=<>!]=[^=]", text):
        found = _literal(text.rsplit("=", 1)[1])
    return found


def _literal_call(source: str, name: str) -> str | None:
    """`source` normalised when it is a call of `name` whose arguments are all literals, else None."""
    try:
        node = ast.parse(source.strip(), mode="eval").body
    except (SyntaxError, ValueError):
        return None
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name) or node.func.id != name:
        return None
    values = [*node.args, *(k.value for k in node.keywords)]
    if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
        return None
    try:
        for value in values:
            ast.literal_eval(value)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    return ast.unparse(node)


def _call_from_arguments(text: str, name: str, params: list[str]) -> str | None:
    """A call of `name` from `x = 1, y = [2]` (the parameters by name) or, for a one-parameter function, from a
    bare literal."""
    text = text.strip().rstrip(".,;")
    if re.match(r"^[A-Za-z_]\w*\s*=[^=]", text):
        return _literal_call(f"{name}({text})", name) if _named_only(text, params) else None
    if len(params) == 1 and _literal(text) is not None:
        return _literal_call(f"{name}({text})", name)
    return None


def _named_only(text: str, params: list[str]) -> bool:
    try:
        node = ast.parse(f"f({text})", mode="eval").body
    except (SyntaxError, ValueError):
        return False
    return isinstance(node, ast.Call) and not node.args and all(k.arg in params for k in node.keywords)


def prose_examples(docstring: str, name: str, params: list[str]) -> list[tuple[str, str]]:
    """The (call source, expected value source) pairs of the prose examples in `docstring` for function `name`
    with parameters `params`, in order, without repeats."""
    found: list[tuple[str, str]] = []
    lines = docstring.splitlines()
    for index, line in enumerate(lines):
        pair: tuple[str | None, str | None] = (None, None)
        if match := _CALL_LINE.match(line):
            arrow = match["sep"] in ("->", "==>", "=>", "➞")
            pair = (_literal_call(match["call"], name), _expected(match["want"], arrow))
        elif match := _FOR_LINE.match(line):
            pair = (_call_from_arguments(match["args"], name, params), _expected(match["want"], False))
        elif (match := _INPUT_LINE.match(line)) and index + 1 < len(lines):
            output = _OUTPUT_LINE.match(lines[index + 1])
            if output:
                pair = (_call_from_arguments(match["args"], name, params), _expected(output["want"], False))
        call, want = pair
        if call is not None and want is not None and (call, want) not in found:
            found.append((call, want))
    return found
