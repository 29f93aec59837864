"""MkDocs hook: the API reference, generated from the package's public names when the site is built.

Every public module (no part of its dotted name starts with `_`, as tests/test_public_api.py defines it) and every
name in its `__all__` gets an entry. A name exported by several modules (a class defined in
`reflection_graph.critics.llm`, re-exported by `reflection_graph.critics` and `reflection_graph`) is documented
once, at its home: the public module that defines it, else the most specific public module that exports it. The
other modules' pages link to it. One page per top-level module or subpackage (`reference/critics.md` holds
`reflection_graph.critics` and its public submodules); `reference/index.md` lists them all. mkdocstrings renders
each entry from the docstrings, so the reference follows the code; tests/test_docs.py checks the built site's
inventory (`objects.inv`) against `__all__`.

The pages are virtual files (nothing is written to `docs/`) and the `API reference` entry of `nav` in mkdocs.yml
is filled in here.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

PACKAGE = "reflection_graph"
SECTION = "API reference"


@dataclass
class Module:
    """One public module: its names, and which of them are documented here."""

    name: str
    module: ModuleType
    summary: str
    own: list[str] = field(default_factory=list)  # documented on this module
    elsewhere: dict[str, str] = field(default_factory=dict)  # name -> identifier of its home entry


def public_modules() -> list[ModuleType]:
    """The package and every public submodule, in dotted-name order."""
    root = importlib.import_module(PACKAGE)
    found = [root]
    for info in pkgutil.walk_packages(root.__path__, PACKAGE + "."):
        if not any(part.startswith("_") for part in info.name.split(".")):
            found.append(importlib.import_module(info.name))
    return sorted(found, key=lambda m: m.__name__)


def _summary(module: ModuleType) -> str:
    doc = inspect.getdoc(module) or ""
    return doc.strip().split("\n\n", 1)[0].replace("\n", " ")


def _first_line(obj: Any) -> str:
    """The first sentence-line of an object's own docstring (not its type's), for a table cell."""
    doc = obj.__doc__ if inspect.isclass(obj) or inspect.isroutine(obj) else None
    line = inspect.cleandoc(doc).split("\n\n", 1)[0].replace("\n", " ") if doc else ""
    return line.replace("|", "\\|")


def plan() -> list[Module]:
    """Every public module with the names it documents and the names it links to."""
    modules = {m.__name__: Module(m.__name__, m, _summary(m)) for m in public_modules()}
    exporters: dict[int, list[tuple[str, str]]] = {}  # id(obj) -> [(module, name)]
    objects: dict[int, Any] = {}
    for mod in modules.values():
        for name in getattr(mod.module, "__all__", ()):
            obj = getattr(mod.module, name)
            objects[id(obj)] = obj
            exporters.setdefault(id(obj), []).append((mod.name, name))
    for key, places in exporters.items():
        obj = objects[key]
        defined_in = getattr(obj, "__module__", None) if inspect.isclass(obj) or callable(obj) else None
        home = next((p for p in places if p[0] == defined_in), None)
        if home is None:
            home = max(places, key=lambda p: (p[0].count("."), p[0]))
        modules[home[0]].own.append(home[1])
        for place in places:
            if place != home:
                modules[place[0]].elsewhere[place[1]] = f"{home[0]}.{home[1]}"
    return list(modules.values())


def page_of(module_name: str) -> str:
    """`reflection_graph.critics.llm` -> `reference/critics.md`; the package itself -> `reference/reflection_graph.md`."""
    parts = module_name.split(".")
    return f"reference/{parts[1] if len(parts) > 1 else parts[0]}.md"


def _module_block(mod: Module, heading: str) -> str:
    lines = [
        f"{heading} `{mod.name}`",
        "",
        f"::: {mod.name}",
        "    options:",
        "      show_root_heading: false",
        "      show_root_toc_entry: false",
        "      members: false",
        "",
    ]
    if mod.elsewhere:
        lines += [
            "Also exported here, documented where they are defined:",
            "",
            "| name | what it is |",
            "| --- | --- |",
        ]
        for name, target in sorted(mod.elsewhere.items(), key=lambda item: item[0].lower()):
            summary = _first_line(getattr(mod.module, name))
            lines.append(f"| [`{name}`][{target}] | {summary} |")
        lines.append("")
    for name in sorted(mod.own, key=lambda n: [n[0].islower(), n.lower()]):
        lines += [f"::: {mod.name}.{name}", ""]
    return "\n".join(lines)


def pages() -> dict[str, str]:
    """Every reference page's path and Markdown, the index first."""
    modules = plan()
    by_page: dict[str, list[Module]] = {}
    for mod in modules:
        by_page.setdefault(page_of(mod.name), []).append(mod)
    out: dict[str, str] = {}
    rows = []
    for path, mods in by_page.items():
        head, *subs = mods
        title = head.name
        body = [f"# `{title}`", "", _module_block(head, "##").split("\n", 2)[2]]
        for sub in subs:
            body.append(_module_block(sub, "##"))
        out[path] = "\n".join(body)
        for mod in mods:
            rows.append(f"| [`{mod.name}`]({path.removeprefix('reference/')}) | {mod.summary} |")
    index = [
        "# API reference",
        "",
        "Generated from the docstrings when the site is built: every name in the `__all__` of every public module",
        "has an entry. A name several modules export is documented once, where it is defined, and linked from the",
        "others. `import reflection_graph` holds the names most users need; the rest live in the subpackage named",
        "for them.",
        "",
        "| module | what it holds |",
        "| --- | --- |",
        *rows,
        "",
    ]
    return {"reference/index.md": "\n".join(index), **out}


_PAGES: dict[str, str] = {}


def on_config(config: MkDocsConfig) -> MkDocsConfig:
    """Fill the nav's `API reference` entry with the generated pages."""
    _PAGES.clear()
    _PAGES.update(pages())
    entries: list[Any] = [{"Overview": "reference/index.md"}]
    for path in _PAGES:
        stem = path.removeprefix("reference/").removesuffix(".md")
        if stem != "index":
            entries.append({PACKAGE if stem == PACKAGE else f"{PACKAGE}.{stem}": path})
    for item in config.nav or []:
        if isinstance(item, dict) and SECTION in item:
            item[SECTION] = entries
            break
    else:
        raise ValueError(f"mkdocs.yml: nav needs an '{SECTION}' entry for the generated reference")
    return config


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Add the reference pages as virtual files."""
    for path, text in _PAGES.items():
        files.append(File.generated(config, path, content=text))
    return files
