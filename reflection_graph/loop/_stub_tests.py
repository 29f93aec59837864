"""The tests that judge a code task (`resolve_tests`, checked before any model call): the tests given, else the
`>>>` examples of the task's stub as plain-assert tests for `CodeTestCritic` (`docstring_tests`), else examples
written as prose in its docstring; each made to import the function from `solution` (`with_solution_import`)."""

from __future__ import annotations

import ast
import doctest
import re

from reflection_graph._text import is_python
from reflection_graph.critics.code_tests import CodeTestCritic
from reflection_graph.loop._code import find_stub
from reflection_graph.loop._examples import prose_examples

__all__ = ["docstring_tests", "resolve_tests", "with_solution_import"]


def with_solution_import(tests: str, entry_point: str) -> str:
    """`tests` that import `entry_point` from `solution` (the line is added when no test imports from it)."""
    if re.search(r"^[^\S\n]*(from solution import|import solution)\b", tests, re.M):
        return tests
    return f"from solution import {entry_point}\n\n\n{tests.lstrip()}"


def resolve_tests(
    task: str, tests: str | None = None, entry_point: str | None = None, *, default: str | None = None
) -> str:
    """The tests that judge a code task, checked now (before any model call).

    `tests` as given, else the `>>>` examples of the task's docstring (`docstring_tests`), else `default`. Tests
    that do not import from `solution` get `from solution import <entry_point>` (default: the stub's function).

    Raises:
        ValueError: the tests are empty, do not parse or define no test function; there are no tests at all; or
            nothing says which function they call.
    """
    if entry_point is not None and not (isinstance(entry_point, str) and entry_point.isidentifier()):
        raise ValueError(f"'entry_point' must be a Python function name, got {entry_point!r}")
    if tests is not None and not tests.strip():
        raise ValueError("'tests' is empty: give test functions, or leave 'tests' out to use the defaults")
    if tests is None:
        try:
            tests = docstring_tests(task, entry_point)
        except ValueError:
            if default is None:
                raise
            tests = default
    if not re.search(r"^[^\S\n]*(from solution import|import solution)\b", tests, re.M):
        stub = find_stub(task, entry_point)
        name = entry_point or (stub.name if stub else None)
        if name is None:
            raise ValueError(
                "the tests do not import from `solution` and the task holds no function stub: add "
                "'from solution import <function>' to the tests or pass 'entry_point'"
            )
        tests = with_solution_import(tests, name)

    CodeTestCritic(tests)  # no test function, a syntax error: a clear ValueError now
    return tests


def docstring_tests(task: str, entry_point: str | None = None) -> str:
    """Plain-assert tests built from the `>>>` examples in the docstring of the task's stub.

    Each example with an expected output becomes one test function: `assert <example> == <expected>` when the
    expected output is a Python literal, else a comparison of `repr(<example>)` with the expected text. A
    docstring with no `>>>` example gets its examples written as prose instead (`prose_examples`:
    `f(3) ==> 9`, `f(3) -> 9`, `For x = 3 the output should be 9`, ...), literal values only.

    Raises:
        ValueError: the task holds no stub, or its docstring has no `>>>` example with an expected output.
    """
    stub = find_stub(task, entry_point)
    if stub is None:
        raise ValueError(
            "the task holds no function stub (a def with only a docstring) to take examples from"
        )
    tree = ast.parse(stub.source)
    func = next(
        n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == stub.name
    )
    docstring = ast.get_docstring(func) or ""
    tests = []
    for number, example in enumerate(doctest.DocTestParser().get_examples(docstring), start=1):
        source, want = example.source.strip(), example.want.strip()
        if not want or want.startswith("Traceback") or "\n" in source or not is_python(source):
            continue
        try:
            ast.literal_eval(want)
            check = f"assert {source} == {want}"
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            check = f"assert repr({source}) == {want!r}"
        tests.append(f"def test_example_{number}():\n    {check}\n")
    if not tests:  # no `>>>` example: examples written as prose (`f(3) ==> 9`, `Input: 3` / `Output: 9`, ...)
        params = [a.arg for a in [*func.args.posonlyargs, *func.args.args, *func.args.kwonlyargs]]
        for number, (source, want) in enumerate(prose_examples(docstring, stub.name, params), start=1):
            tests.append(f"def test_example_{number}():\n    assert {source} == {want}\n")
    if not tests:
        raise ValueError(
            f"the docstring of {stub.name}() has no example with an expected output ('>>>' or prose such as "
            f"'{stub.name}(...) == value')"
        )
    return with_solution_import("\n\n".join(tests), stub.name)
