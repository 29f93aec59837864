"""What a tests file asks of the candidate, read from its syntax alone (nothing of it runs here).

`plan_tests` finds the tests (`test*` functions, or HumanEval's `def check(candidate)` with an entry point), the
names the tests take from the candidate's module, and whether the tests can be checked outside the candidate's
process: they can when they only *call* the candidate's functions and look at the returned values. Tests that need
the candidate's objects themselves (an attribute of its function, a class to instantiate, `import solution`) run in
the candidate's process, and the plan says why.
"""

from __future__ import annotations

import ast
import builtins
from dataclasses import dataclass
from typing import Literal

VerdictSource = Literal["outside", "in-process"]
"""`"outside"`: the verdict is decided in a process that never runs the candidate's code; `"in-process"`: not."""


@dataclass(frozen=True)
class _TestPlan:
    names: tuple[str, ...]
    """The tests the runner must report on, in order: `test*` functions, or `("check",)`."""
    bind: tuple[str, ...]
    """Names the tests use without defining or importing them: taken from the candidate's module."""
    verdict_source: VerdictSource
    why_in_process: str | None = None


def _bound_names(tree: ast.Module) -> set[str]:
    """Every name the tests file binds anywhere (assignments, defs, imports, parameters, handlers)."""
    bound: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            bound.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
    return bound


def _candidate_names(tree: ast.Module, module: str, bind: set[str]) -> tuple[set[str], str | None]:
    """The local names that stand for the candidate's objects, or why the tests need the module itself."""
    names = set(bind)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == module for a in node.names):
            return names, f"the tests import the module itself (`import {module}`)"
        if isinstance(node, ast.ImportFrom) and node.module == module:
            if any(a.name == "*" for a in node.names):
                return names, f"the tests import everything from it (`from {module} import *`)"
            names.update(a.asname or a.name for a in node.names)
        if isinstance(node, ast.FunctionDef) and node.name == "check" and node.args.args:
            names.add(node.args.args[0].arg)
    return names, None


def _needs_objects(tree: ast.Module, names: set[str], entry_point: str | None) -> str | None:
    """Why the tests need the candidate's objects rather than values returned by calls, or None."""
    for name in sorted(names - {entry_point}):  # the entry point is a function, whatever its name
        if name[:1].isupper():
            return f"the tests use `{name}`, which looks like a class: its instances are not plain data"
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in names:
            return f"the tests look at `{node.value.id}.{node.attr}`, an attribute of the candidate's object"
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("globals", "vars")
        ):
            return f"the tests call `{node.func.id}()`"
    return None


def plan_tests(tests: str, module: str, entry_point: str | None) -> _TestPlan:
    """The plan for `tests` (already checked to parse) against the candidate's module `module`.

    Raises:
        ValueError: the tests define no test: no top-level `test*` function, and no `check` with an entry point.
    """
    tree = ast.parse(tests)
    functions = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    names = tuple(f.name for f in functions if f.name.startswith("test"))
    if not names and entry_point and any(f.name == "check" for f in functions):
        names = ("check",)
    if not names:
        raise ValueError(
            "tests define no top-level test function; write plain-assert functions such as "
            "'def test_add():\\n    assert add(2, 2) == 4', or HumanEval's 'def check(candidate): ...' with "
            "entry_point='<function name>'"
        )
    bind: set[str] = set()
    if entry_point:
        loaded = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
        bind = loaded - _bound_names(tree) - set(dir(builtins))
        bind.add(entry_point)
    candidate, why = _candidate_names(tree, module, bind)
    why = why or _needs_objects(tree, candidate, entry_point)
    if why is not None:
        return _TestPlan(names, tuple(sorted(bind)), "in-process", why)
    return _TestPlan(names, tuple(sorted(bind)), "outside")
