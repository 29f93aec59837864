"""Code for base models: complete the function stub instead of restating it.

When a task holds a function stub (a signature and a docstring, with nothing else in the body) and the focus is
"code", the nodes prompt completion-style: a first draft's prompt is the stub itself, exactly what a plain
completion of the stub sees (never worse than no loop: at temperature 0 the first draft is the model's own greedy
completion), so a base model (the embedded Gemma 3 270M) writes the function body next, as in a source file. `finish_candidate` turns that continuation
into the full function (the stub plus the body, cut where the body dedents back to the `def`), which is what the
critic runs and what the run returns. A reply that restates the whole function (chat models do) is taken as is.
Revisions see a solved example, the previous code, the failing tests (the critique's issues) and the stub again.
With a `CodeTestCritic`, the code focus samples fresh drafts by default (`loop._defaults.VERIFIER_DEFAULTS`).

Tasks without a stub keep the default prompts; their replies, which start inside the ```python fence the prompt
opened, are stored well-formed (`well_formed`: the opening fence is put back, an open fence is closed).

The tests that judge a code task, from a stub's docstring among others, are in `_stub_tests`.
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from reflection_graph._text import (
    PYTHON_TAGS,
    extract_code,
    fenced_blocks,
    is_python,
    parse_python,
    well_formed,
)
from reflection_graph.prompts import plain_request

__all__ = [
    "CODE_STOP",
    "Stub",
    "code_messages",
    "find_stub",
    "finish_candidate",
]

EXAMPLE = '''def word_lengths(text: str) -> list:
    """Return the length of every word of text.

    >>> word_lengths("to be or")
    [2, 2, 2]
    """
    lengths = []
    for word in text.split():
        lengths.append(len(word))
    return lengths
'''
"""A solved stub shown before the stub in a revision prompt, so a base model writes a body there, not a comment.
The first draft gets no example: it is the plain completion of the stub."""

CODE_STOP: tuple[str, ...] = ("\ndef ", "\nclass ", "\nif ", "\nprint(", "\n#")
"""The usual stop sequences of a code completion (HumanEval's): a base model that has finished the function
starts the next top-level statement."""

REVISE_HEADER = "# A previous attempt at the function below failed its tests.\n"
CHAT_REVISE = (
    "This code fails these tests from the docstring:\n{failures}\n\n"
    "Find the mistake and write the corrected function in full, in one ```python block."
)
"""A chat model's revision: the failing tests and their errors, after its own previous reply."""
_ISSUES_SHOWN = 4
_ISSUE_CHARS = 300
_TRIM_LINES = 40
"""At most this many trailing lines are cut from a task (or a reply) to make its code parse."""


@dataclass(frozen=True)
class Stub:
    """A function stub found in a task: `source` runs from the preamble (imports, helpers) to the end of the
    docstring; `name` is the function's name; `indent` the indentation of its body."""

    source: str
    name: str
    indent: str

    @property
    def def_indent(self) -> int:
        line = next(
            line for line in self.source.splitlines() if re.match(rf"\s*(async\s+)?def\s+{self.name}\b", line)
        )
        return len(line) - len(line.lstrip())


def _docstring_of(node: ast.FunctionDef | ast.AsyncFunctionDef) -> ast.Expr | None:
    """The docstring statement of a stub: a string after nothing but imports, with nothing but `pass` or more
    strings after it (so `def f():\n    import math\n    \"\"\"Doc.\"\"\"` is a stub too). None otherwise."""
    body = list(node.body)
    while body and isinstance(body[0], (ast.Import, ast.ImportFrom)):
        body.pop(0)
    if not body or not isinstance(body[0], ast.Expr) or not isinstance(body[0].value, ast.Constant):
        return None
    if not isinstance(body[0].value.value, str):
        return None
    empty = all(
        isinstance(s, ast.Pass) or (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))
        for s in body[1:]
    )
    return body[0] if empty else None


def _stub_in(code: str, entry_point: str | None) -> Stub | None:
    tree = parse_python(code)
    if tree is None:
        return None
    found: list[tuple[ast.FunctionDef | ast.AsyncFunctionDef, ast.Expr]] = []
    for node in tree.body:
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or not node.body:
            continue
        doc = _docstring_of(node)
        if doc is not None and (entry_point is None or node.name == entry_point):
            found.append((node, doc))
    if not found:
        return None
    node, doc = found[-1]
    lines = code.splitlines()
    assert doc.end_lineno is not None
    body_line = lines[doc.lineno - 1]
    indent = body_line[: len(body_line) - len(body_line.lstrip())] or "    "
    return Stub("\n".join(lines[: doc.end_lineno]).rstrip(), node.name, indent)


@functools.lru_cache(maxsize=256)
def find_stub(task: str, entry_point: str | None = None) -> Stub | None:
    """The function stub in `task`: in a ```python fence, or the task itself, or the code that starts at the
    task's first `def`/`import` line (prose after it is cut). None when the task holds no stub."""
    chunks = [b.body for b in fenced_blocks(task) if b.tag in PYTHON_TAGS or b.tag == ""]
    chunks.append(task)
    lines = task.splitlines()
    start = next(
        (i for i, ln in enumerate(lines) if re.match(r"(def |async def |from |import |@)", ln)), None
    )
    if start is not None:
        code = lines[start:]
        chunks += ["\n".join(code[:end]) for end in range(len(code), max(0, len(code) - _TRIM_LINES), -1)]
    for chunk in chunks:
        stub = _stub_in(chunk, entry_point)
        if stub is not None:
            return stub
    return None


def _comment(text: str) -> str:
    return "\n".join(f"# {line}".rstrip() for line in text.strip().splitlines())


def code_messages(
    task: str,
    context: str | None,
    *,
    candidate: str | None = None,
    critique: Mapping[str, Any] | None = None,
    entry_point: str | None = None,
    chat: bool = False,
) -> list[BaseMessage] | None:
    """Code prompts for a task that holds a stub (None when it holds none).

    Completion-style (`chat=False`, a base model): a draft is the plain completion of the stub: the prompt is the
    stub's source alone (with the newline that ends its docstring), exactly what a raw completion of the stub
    sees, so a first draft at temperature 0 is the model's own greedy completion (`context`, when given, comes
    first as comments). A revision gets a solved example, the previous code and the critique's issues (the
    failing tests) as comments above the stub.

    Chat (`chat=True`, a model prompted through its chat template): a draft is what a user asks without the loop,
    the task as it is (`prompts.plain_request`). A revision continues that conversation
    (Reflexion-style): the previous code as the model's reply, then the failing tests and their errors and a
    request for the corrected function in full (`CHAT_REVISE`).
    """
    stub = find_stub(task, entry_point)
    if stub is None:
        return None
    if chat:
        return _chat_messages(task, context, candidate, critique)
    given = "# Context:\n" + _comment(context) + "\n\n" if context else ""
    if candidate is None:
        return [HumanMessage(given + stub.source + "\n")]
    parts = [] if stub.name == "word_lengths" else ["# An example of a completed function:\n" + EXAMPLE]
    if given:
        parts.append(given)
    parts.append(REVISE_HEADER + "# Previous attempt:\n" + extract_code(candidate))
    issues = _issues(critique)
    if issues:
        parts.append("# Test results of the previous attempt:\n" + _comment("\n".join(issues)) + "\n")
    parts.append("# Corrected version:\n")
    parts.append(stub.source + "\n")
    return [HumanMessage("\n".join(parts))]


def _issues(critique: Mapping[str, Any] | None) -> list[str]:
    """The critique's issues (the failing tests and their errors), bounded; its feedback when it has none."""
    issues = [str(i)[:_ISSUE_CHARS] for i in (critique or {}).get("issues") or []][:_ISSUES_SHOWN]
    if not issues and (critique or {}).get("feedback"):
        issues = [str((critique or {})["feedback"])[:_ISSUE_CHARS]]
    return issues


def _chat_messages(
    task: str, context: str | None, candidate: str | None, critique: Mapping[str, Any] | None
) -> list[BaseMessage]:

    draft = plain_request(task, context)
    if candidate is None:
        return [HumanMessage(draft)]
    failures = "\n".join(f"- {issue}" for issue in _issues(critique)) or "- the tests failed"
    return [
        HumanMessage(draft),
        AIMessage(f"```python\n{extract_code(candidate).strip()}\n```"),
        HumanMessage(CHAT_REVISE.format(failures=failures)),
    ]


def _defines(code: str, name: str) -> bool:
    """Whether `code` parses and defines `name` with more than a docstring."""
    tree = parse_python(code)
    if tree is None:
        return False
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            body = node.body[1:] if isinstance(node.body[0], ast.Expr) else node.body
            if any(not isinstance(s, ast.Pass) for s in body):
                return True
    return False


def _body_lines(stub: Stub, text: str) -> list[str]:
    """The continuation's lines up to the end of the function (the first line that dedents to the `def`)."""
    lines = text.strip("\n").splitlines()
    if lines and lines[0].strip() and lines[0] == lines[0].lstrip():
        lines[0] = stub.indent + lines[0]  # the model's reply was stripped of its first indentation
    body: list[str] = []
    for line in lines:
        if line.strip() and len(line) - len(line.lstrip()) <= stub.def_indent:
            break
        if line.strip().startswith("```"):
            break
        body.append(line)
    while body and not body[-1].strip():
        body.pop()
    return body


def finish_candidate(task: str, text: str, entry_point: str | None = None) -> str:
    """The candidate to store for a code reply: the full function (stub + body) when the task holds a stub,
    else the reply with well-formed fences.

    A reply that defines the function itself (a chat model restating it) is kept, with the stub's preamble put in
    front when it is missing. A continuation is appended to the stub and cut at the end of the function; when the
    result does not parse (a reply cut off by the token limit), trailing lines are dropped until it does.
    """
    stub = find_stub(task, entry_point)
    if stub is None:
        return well_formed(text)
    code = (
        extract_code(text) if "```" in text or re.search(rf"^[^\S\n]*def {stub.name}\b", text, re.M) else ""
    )
    if code and _defines(code, stub.name):
        preamble = stub.source.split(f"def {stub.name}", 1)[0].strip()
        missing = [line for line in preamble.splitlines() if line.strip() and line not in code]
        return "\n".join([*missing, code.rstrip()]) + "\n" if missing else code
    body = _body_lines(stub, code or text)
    for end in range(len(body), max(-1, len(body) - _TRIM_LINES), -1):
        full = "\n".join([stub.source, *body[:end]])
        if is_python(full):
            return full + "\n"
    return "\n".join([stub.source, *body]) + "\n"
