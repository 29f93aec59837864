"""Every private room has one front door: code outside a package imports the package's names from its `__init__`,
never from one of its private modules.

A module is private to the package that holds its last private component (a name starting with `_`, not a dunder):
`reflection_graph._runtime._usage` is private to `reflection_graph._runtime`, `reflection_graph.loop._rules` to
`reflection_graph.loop`. An import of such a module (or of a name from it) by a module outside that package goes
through a back door; `from reflection_graph._runtime import RoleUsage` (the package's own `__init__`) does not. The
count is per imported name, over the package and the repository's `graphs/` (tests may import what they test).

Run as a script, this file lists the back doors: `python tests/test_front_door.py`.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

import reflection_graph

PACKAGE = Path(reflection_graph.__file__).resolve().parent
GRAPHS = Path(__file__).resolve().parent.parent / "graphs"
MOST_BACK_DOORS = 5
DOORS = ("reflection_graph._runtime", "reflection_graph._text", "reflection_graph.loop")
"""The rooms whose door exports only what is used outside them (the public packages export their API too)."""


def _module_parts(path: Path, root: Path) -> tuple[list[str], bool]:
    """The dotted name of the module at `path` (under `root`) as parts, and whether it is a package's `__init__`."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    is_package = parts[-1] == "__init__"
    return (parts[:-1] if is_package else parts), is_package


def _is_module(parts: list[str], roots: dict[str, Path]) -> bool:
    """Whether `parts` names a module or package (not a name defined in one)."""
    root = roots.get(parts[0])
    if root is None:
        return False
    path = root.joinpath(*parts)
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def private_owner(target: list[str]) -> list[str] | None:
    """The package a module is private to: the parts before its last private component (None: not private)."""
    owner = None
    for i, part in enumerate(target):
        if part.startswith("_") and not part.startswith("__"):
            owner = target[:i]
    return owner


def back_doors(files: Iterable[tuple[Path, Path]], roots: dict[str, Path]) -> list[tuple[str, str, str]]:
    """Every import of a private module from outside its package, as (importer, module, name imported).

    Args:
        files: each module's path with the directory its top-level package sits in.
        roots: the directory each top-level package (`reflection_graph`, `graphs`) sits in.
    """
    found = []
    for path, root in files:
        parts, is_package = _module_parts(path, root)
        here = parts if is_package else parts[:-1]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            imported: list[tuple[list[str], str]] = []
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = here[: len(here) - (node.level - 1)] if node.level > 1 else here
                    module = base + (node.module.split(".") if node.module else [])
                else:
                    module = (node.module or "").split(".")
                if module[0] not in roots:
                    continue
                for alias in node.names:
                    named = [*module, alias.name]
                    imported.append((named if _is_module(named, roots) else module, alias.name))
            elif isinstance(node, ast.Import):
                imported = [
                    (a.name.split("."), "*") for a in node.names if a.name.split(".")[0] == "reflection_graph"
                ]
            for target, name in imported:
                owner = private_owner(target)
                if owner is not None and parts[: len(owner)] != owner:
                    found.append((".".join(parts), ".".join(target), name))
    return found


def _project_files() -> list[tuple[Path, Path]]:
    return [(p, PACKAGE.parent) for p in PACKAGE.rglob("*.py")] + [
        (p, GRAPHS.parent) for p in GRAPHS.rglob("*.py")
    ]


ROOTS = {"reflection_graph": PACKAGE.parent, "graphs": GRAPHS.parent}


def test_code_outside_a_package_imports_its_private_modules_through_its_door_only() -> None:
    found = back_doors(_project_files(), ROOTS)
    listed = "\n".join(
        f"  {importer} imports {name} from {module}" for importer, module, name in sorted(found)
    )
    assert len(found) <= MOST_BACK_DOORS, (
        f"{len(found)} imports of a private module from outside its package (at most {MOST_BACK_DOORS}); import "
        f"these from the package's __init__ (export them there):\n{listed}"
    )


def test_a_door_exports_only_names_used_outside_its_room() -> None:
    """A room's `__init__` lists what the rest of the package and `graphs/` import from it, nothing more."""
    used: dict[str, set[str]] = {door: set() for door in DOORS}
    for path, root in _project_files():
        parts, _ = _module_parts(path, root)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module in used and not node.level:
                if ".".join(parts[: node.module.count(".") + 1]) != node.module:
                    used[node.module].update(alias.name for alias in node.names)
    for door, names in used.items():
        module = __import__(door, fromlist=["__all__"])
        unused = sorted(set(module.__all__) - names)
        assert not unused, (
            f"{door} exports {unused}, which nothing outside it imports: drop them from its door"
        )


def test_the_count_finds_back_doors_and_passes_front_doors(tmp_path: Path) -> None:
    """Counted: a private module (or a name from it) imported from outside its package, also relatively and with
    `import`. Not counted: the package's door, and imports inside the package."""
    room = tmp_path / "reflection_graph" / "_room"
    room.mkdir(parents=True)
    (tmp_path / "reflection_graph" / "__init__.py").write_text("")
    (room / "__init__.py").write_text("from reflection_graph._room._inner import x\n")
    (room / "_inner.py").write_text("x = 1\n")
    (room / "_other.py").write_text("from reflection_graph._room._inner import x\nfrom . import _inner\n")
    (tmp_path / "reflection_graph" / "host.py").write_text(
        "from reflection_graph._room import x\n"  # the door
        "from reflection_graph._room._inner import x as y\n"  # counted
        "from reflection_graph._room import _inner\n"  # counted: a private module by name
        "from ._room._inner import x as z\n"  # counted: relative
        "import reflection_graph._room._inner\n"  # counted
    )
    files = [(p, tmp_path) for p in (tmp_path / "reflection_graph").rglob("*.py")]
    found = back_doors(files, {"reflection_graph": tmp_path})
    assert sorted(found) == [
        ("reflection_graph.host", "reflection_graph._room._inner", "*"),
        ("reflection_graph.host", "reflection_graph._room._inner", "_inner"),
        ("reflection_graph.host", "reflection_graph._room._inner", "x"),
        ("reflection_graph.host", "reflection_graph._room._inner", "x"),
    ]


if __name__ == "__main__":
    for importer, module, name in sorted(back_doors(_project_files(), ROOTS)):
        print(f"{importer} imports {name} from {module}")
