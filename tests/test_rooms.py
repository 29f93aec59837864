"""The package's rooms: no private module sits at the package root (each lives in the room named for what it
serves), every room says what it holds and has one front door (its `__init__`: imports, `__all__` and a
docstring), and `settings` loads without reaching the strategies that import it."""

from __future__ import annotations

import ast
import importlib
import pkgutil
from collections.abc import Iterator
from pathlib import Path

import reflection_graph

PACKAGE = Path(reflection_graph.__file__).parent
ROOMS = {"_runtime", "_text"}
"""The private rooms at the package root: the lower layers critics, models and the loop use."""
DOORS = ROOMS | {"loop"}
"""Every room with a front door: the private ones and the loop (public by name, its modules private)."""


def _module_file(name: str) -> Path | None:
    """The file of module `name` in the package (its `__init__.py` for a subpackage), or None."""
    path = PACKAGE.parent.joinpath(*name.split("."))
    for candidate in (path / "__init__.py", path.with_suffix(".py")):
        if candidate.is_file():
            return candidate
    return None


def _run_on_load(node: ast.AST) -> Iterator[ast.AST]:
    """`node` and the statements under it that run when the module loads: not a function's body."""
    yield node
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        for child in ast.iter_child_nodes(node):
            yield from _run_on_load(child)


def _loading_imports(name: str) -> set[str]:
    """The package's modules that module `name` imports when it loads: its top-level imports (not those inside a
    function or under `if TYPE_CHECKING:`), each with the subpackages it loads on the way (not the root package,
    whose `__init__` has always loaded first)."""
    path = _module_file(name)
    assert path is not None, name
    found: set[str] = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        for statement in _run_on_load(node):
            if isinstance(statement, ast.Import):
                targets = [alias.name for alias in statement.names]
            elif isinstance(statement, ast.ImportFrom) and statement.module and not statement.level:
                base = statement.module
                targets = [base, *(f"{base}.{alias.name}" for alias in statement.names)]
            else:
                continue
            for target in targets:
                parts = target.split(".")
                for i in range(2, len(parts) + 1):
                    module = ".".join(parts[:i])
                    if parts[0] == "reflection_graph" and _module_file(module) is not None:
                        found.add(module)
    found.discard(name)
    return found


def _reached_when_loading(name: str) -> set[str]:
    """Every module of the package that loading `name` loads, through the imports each one makes as it loads."""
    reached: set[str] = set()
    todo = [name]
    while todo:
        for module in _loading_imports(todo.pop()) - reached:
            reached.add(module)
            todo.append(module)
    return reached


def test_no_private_module_sits_at_the_package_root() -> None:
    found = {m.name: m.ispkg for m in pkgutil.iter_modules(reflection_graph.__path__)}
    loose = sorted(name for name, is_package in found.items() if name.startswith("_") and not is_package)
    assert not loose, (
        f"private module(s) {loose} at the package root: move each into the room it serves, {ROOMS}"
    )
    rooms = {name for name, is_package in found.items() if name.startswith("_") and is_package}
    assert rooms == ROOMS, (
        "a new room: say what it holds in its __init__ and docs/development.md, and list it here"
    )


def test_every_room_says_what_it_holds_and_the_development_page_lists_it() -> None:
    development = (PACKAGE.parent / "docs" / "development.md").read_text(encoding="utf-8")
    for room in sorted(DOORS):
        package = importlib.import_module(f"reflection_graph.{room}")
        assert package.__doc__ and package.__doc__.strip(), (
            f"reflection_graph/{room}/__init__.py has no docstring"
        )
        assert f"| `{room}/` |" in development, f"docs/development.md lists no `{room}/`"
        modules = [m.name for m in pkgutil.iter_modules(package.__path__)]
        assert modules, room
        for module in modules:
            assert f"`{module}`" in package.__doc__, (
                f"reflection_graph/{room}/__init__.py does not name {module}"
            )


def test_a_room_door_holds_only_imports_and_the_names_it_exports() -> None:
    """A room's `__init__` is its front door: a docstring, imports of the names the rest of the package uses, and
    an `__all__` that lists exactly those names (no code of its own, nothing imported and left unlisted)."""
    for room in sorted(DOORS):
        body = ast.parse((PACKAGE / room / "__init__.py").read_text(encoding="utf-8")).body
        docstring, *statements = body
        assert isinstance(docstring, ast.Expr) and isinstance(docstring.value, ast.Constant), room
        imported = [a.asname or a.name for n in statements if isinstance(n, ast.ImportFrom) for a in n.names]
        exports = [n for n in statements if not isinstance(n, ast.ImportFrom)]
        assert len(exports) == 1 and isinstance(exports[0], ast.Assign), (
            f"reflection_graph/{room}/__init__.py: keep it imports and `__all__`"
        )
        listed = ast.literal_eval(exports[0].value)
        assert sorted(imported) == sorted(listed), f"reflection_graph/{room}/__init__.py: __all__ != imports"


def test_settings_loads_without_the_strategies_that_import_it() -> None:
    """The import goes one way: the strategies need `Settings` when they load; `settings` reads the registry
    they fill (`STRATEGIES`, held in reflection_graph/settings/__init__.py), never the strategies themselves."""
    strategies = {m for m in _module_names() if m.split(".")[:2] == ["reflection_graph", "strategies"]}
    assert "reflection_graph.strategies.base" in strategies
    assert not _reached_when_loading("reflection_graph.settings") & strategies, (
        "settings imports a strategy while it loads: read its own `STRATEGIES` registry instead"
    )
    assert "reflection_graph.settings" in _reached_when_loading("reflection_graph.strategies")


def _module_names() -> set[str]:
    return {info.name for info in pkgutil.walk_packages(reflection_graph.__path__, "reflection_graph.")}
