"""The package's imports form no cycle, counting every import: at the top, inside a function and under
`if TYPE_CHECKING:`. So no import is made late to dodge one, and a package import inside a function exists only
for an optional extra (none of the package's own modules is one).

Run as a script, this file lists the cycles and the package imports inside functions:
`python tests/test_import_cycles.py`.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "reflection_graph"
NOT_YET: tuple[str, ...] = ()


@dataclass
class Imports:
    """The package's modules, the package modules each imports, and the imports made inside a function."""

    edges: dict[str, set[str]] = field(default_factory=dict)
    inside_functions: list[tuple[str, int, str]] = field(default_factory=list)


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _in_function(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    while node in parents:
        node = parents[node]
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            return True
    return False


def read_imports() -> Imports:
    """Every import statement of every module: `import a.b`, `from a import b` (b a module or a name of a),
    relative ones resolved; an edge goes to the module named (not to the packages above it)."""
    files = {_module_name(path): path for path in PACKAGE.rglob("*.py")}
    found = Imports(edges={name: set() for name in files})
    for name, path in files.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        here = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(here[: len(here) - node.level + 1] + ([base] if base else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in files else base for a in node.names]
            else:
                continue
            for target in targets:
                while target not in files and "." in target:
                    target = target.rsplit(".", 1)[0]
                if target in files and target != name:
                    found.edges[name].add(target)
            if targets and _in_function(node, parents):
                found.inside_functions.append((name, node.lineno, targets[0]))
    return found


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(edges[successor]))))
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def _counted(module: str) -> bool:
    return not module.startswith(NOT_YET)


def test_the_package_has_no_import_cycle() -> None:
    found = [c for c in cycles(read_imports().edges) if any(_counted(m) for m in c)]
    assert not found, (
        f"import cycle(s) {found}: move what both sides need into the lower module (python {__file__})"
    )


def test_no_package_module_is_imported_inside_a_function() -> None:
    inside = [
        f"{module}:{line} imports {target}"
        for module, line, target in read_imports().inside_functions
        if target.startswith("reflection_graph") and _counted(module)
    ]
    assert not inside, f"import these at the top of the module: {inside}"


def test_the_cycle_finder_finds_a_cycle_through_three_modules_and_none_in_a_chain() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


if __name__ == "__main__":
    imports = read_imports()
    for component in cycles(imports.edges):
        print(f"cycle through {len(component)} modules:")
        for module in component:
            print(f"    {module} -> {sorted(imports.edges[module] & set(component))}")
    inside = [item for item in imports.inside_functions if item[2].startswith("reflection_graph")]
    print(f"{len(inside)} package imports inside functions:")
    for module, line, target in inside:
        print(f"    {module}:{line} imports {target}")
