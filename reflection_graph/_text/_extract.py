"""The one extractor: code fences, code and JSON taken out of model replies.

Every part of the package that reads code or JSON out of a reply goes through here: `CodeTestCritic` and the
Studio `code` graph (`extract_code`), the rule critics (`extract_json_text`, `first_json_value`) and the critique
parser and structured-output fallback (`extract_json_object`).

Fences are lines starting with three backticks. `fenced_blocks` reads them once, the same way for every caller:

- a fence left open at the end (a reply cut off by the token limit) runs to the end of the text;
- a bare closing fence with text before it and no opening fence (the prompt ended with the opening fence, so the
  reply starts inside it) closes a block that starts at the beginning of the reply;
- a bare closing fence with nothing before it is a stray fence: it opens nothing, and the text after it is not
  taken for a block.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass
from typing import Any

__all__ = [
    "PYTHON_TAGS",
    "Block",
    "extract_code",
    "extract_json_object",
    "extract_json_text",
    "fenced_blocks",
    "first_json_value",
    "is_python",
    "well_formed",
]

PYTHON_TAGS = frozenset({"python", "py", "python3", "py3"})
_FENCE = "```"
_CODE_START = re.compile(
    r"^(?:def |async def |class |import |from \S+ import |@\w|if __name__|[A-Za-z_][\w.]*\s*(?::[^=]+)?=[^=])"
)
"""A line that starts Python code rather than prose: a definition, an import, a decorator or an assignment."""


@dataclass(frozen=True)
class Block:
    """One fenced block: its language `tag` (lower case, "" for none), its `body`, and whether it was closed."""

    tag: str
    body: str
    closed: bool = True
    inside: bool = False
    """The reply started inside this block (its opening fence was the end of the prompt)."""


def _is_fence(line: str) -> bool:
    return line.strip().startswith(_FENCE)


def _is_bare(line: str) -> bool:
    return line.strip() == _FENCE


def fenced_blocks(text: str) -> list[Block]:
    """The fenced blocks of `text`, in order (see the module docstring for open, leading and stray fences)."""
    lines = text.splitlines()
    fences = [i for i, line in enumerate(lines) if _is_fence(line)]
    blocks: list[Block] = []
    if fences and len(fences) % 2 == 1 and _is_bare(lines[fences[0]]):
        first = fences[0]
        if any(line.strip() for line in lines[:first]):
            blocks.append(Block("", "\n".join(lines[:first]), inside=True))
        fences = fences[1:]  # closes the leading block, or a stray fence with nothing to close
    for pair in range(0, len(fences), 2):
        opening = fences[pair]
        closed = pair + 1 < len(fences)
        closing = fences[pair + 1] if closed else len(lines)
        words = lines[opening].strip()[3:].split()
        blocks.append(
            Block(words[0].lower() if words else "", "\n".join(lines[opening + 1 : closing]), closed)
        )
    return blocks


_UNPARSABLE = (SyntaxError, ValueError, MemoryError, RecursionError)
"""What `ast.parse` raises for text that is not a program: a syntax error, a null byte, and for some long or deep
invalid text (a line of 3,000 bare words, say) the parser's own MemoryError or RecursionError."""


def parse_python(code: str) -> ast.Module | None:
    """`code`'s syntax tree, or None when it is not Python (whatever the parser raises for it, `_UNPARSABLE`)."""
    try:
        return ast.parse(code)
    except _UNPARSABLE:
        return None


def is_python(code: str) -> bool:
    """Whether `code` parses as Python."""
    return parse_python(code) is not None


def _code_in_prose(text: str) -> str:
    """The code in unfenced text: from the first line that starts code, trailing prose lines cut while that
    makes it parse. Text with no line that starts code is prose: ""."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if _CODE_START.match(line)), None)
    if start is None:
        return ""
    code = lines[start:]
    for end in range(len(code), 0, -1):
        if is_python("\n".join(code[:end])):
            return "\n".join(code[:end])
    return "\n".join(code)  # code with a syntax error: the critic reports it


def _trivial(tree: ast.Module) -> bool:
    """Text that parses but is no program: bare names, constants and attributes ("Hello", "Done.")."""
    return all(
        isinstance(node, ast.Expr) and isinstance(node.value, (ast.Name, ast.Constant, ast.Attribute))
        for node in tree.body
    )


def _is_program(text: str) -> bool:
    """Whether `text` parses as Python and is more than a few bare words."""
    tree = parse_python(text)
    return tree is not None and bool(tree.body) and not _trivial(tree)


def _looks_like_code(text: str) -> bool:
    return _is_program(text) or bool(_code_in_prose(text))


def _finish(code: str) -> str:
    code = code.strip("\n")
    return code + "\n" if code.strip() else ""


def extract_code(text: str) -> str:
    """Return the Python code in a model reply, or "" when it holds none.

    Rules: the longest fenced block tagged `python`/`py` (or the block the reply started inside) wins; else the
    longest untagged fenced block that is not prose; else a block tagged with another language that parses as
    Python; else, for a reply without code fences, the whole text when it parses, or the code that starts at its
    first line of code (a definition, an import, a decorator or an assignment), with trailing prose cut. Prose is
    never returned as code: a reply that is only prose (after a stray closing fence, say) gives "".
    """
    blocks = [b for b in fenced_blocks(text) if b.body.strip()]
    python = [b.body for b in blocks if b.tag in PYTHON_TAGS or b.inside]
    if python:
        return _finish(max(python, key=len))
    plain = [b.body for b in blocks if b.tag == "" and _looks_like_code(b.body)]
    if plain:
        return _finish(max(plain, key=len))
    other = [b.body for b in blocks if _is_program(b.body)]
    if other:
        return _finish(max(other, key=len))
    unfenced = "\n".join(line for line in text.splitlines() if not _is_fence(line))
    if _is_program(unfenced):
        return _finish(unfenced)
    return _finish(_code_in_prose(unfenced))


def well_formed(reply: str, tag: str = "python") -> str:
    """A reply with balanced fences: the opening fence the prompt ended with is put back in front, and a fence
    left open by the token limit is closed. Balanced replies are returned unchanged (stripped)."""
    text = reply.strip("\n")
    lines = text.splitlines()
    fences = [i for i, line in enumerate(lines) if _is_fence(line)]
    if len(fences) % 2 == 0:
        return text
    if _is_bare(lines[fences[0]]):
        if not any(line.strip() for line in lines[: fences[0]]):
            return "\n".join(lines[: fences[0]] + lines[fences[0] + 1 :]).strip("\n")  # a stray fence
        return f"{_FENCE}{tag}\n{text}"
    return f"{text}\n{_FENCE}"


def extract_json_text(text: str) -> str:
    """Strip surrounding whitespace and one enclosing code fence (```json ... ```) from a reply."""
    stripped = text.strip()
    first_line, newline, rest = stripped.partition("\n")
    if newline and first_line.startswith(_FENCE) and rest.endswith(_FENCE):
        return rest[: -len(_FENCE)].strip()
    return stripped


_JSON_OPENER = re.compile(r"[{\[]")


def first_json_value(text: str, kinds: tuple[type, ...] = (dict, list)) -> Any:
    """The first JSON value of one of `kinds` that starts at a `{` or `[` in `text`.

    Raises:
        ValueError: there is none.
    """
    decoder = json.JSONDecoder()
    for opener in _JSON_OPENER.finditer(text):
        try:
            value, _ = decoder.raw_decode(text, opener.start())
        except (json.JSONDecodeError, RecursionError):  # nested past Python's recursion limit: not read
            continue
        if isinstance(value, kinds):
            return value
    raise ValueError("no JSON value found")


def extract_json_object(text: str) -> dict[str, Any] | None:
    """Return the first JSON object found in `text` (code fences and prose around it are ignored)."""
    text = text.strip()
    for chunk in [*(b.body for b in fenced_blocks(text)), text]:
        try:
            return dict(first_json_value(chunk, (dict,)))
        except ValueError:
            continue
    return None
