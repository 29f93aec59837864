"""MkDocs hook: the parts of pages that are generated from the code when the site is built, so they cannot drift.

A marker comment in a page is replaced by what it names:

- `<!-- cli-reference -->` (cli.md): every command of `reflection-graph`, from the command's own help (typer's
  Markdown docs generator, the same text `reflection-graph COMMAND --help` prints);
- `<!-- settings-table -->` (concepts.md): every field of `reflection_graph.Settings` with its default, bounds,
  choices and description;
- `<!-- strategies-table -->` (concepts.md): every registered strategy, with what it forces and its stop rules;
- `<!-- studio-graphs -->` (studio.md): every graph `langgraph.json` serves, with its module's docstring summary.

A page that names a marker this hook does not know, or a known marker on another page than its own, fails the build.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import Files
from mkdocs.structure.pages import Page

ROOT = Path(__file__).resolve().parents[2]
MARKER = re.compile(r"<!-- (cli-reference|settings-table|strategies-table|studio-graphs) -->")


def cli_reference() -> str:
    """The `reflection-graph` command's help as Markdown, one section per command."""
    import typer.main
    from typer.cli import get_docs_for_click

    from reflection_graph.cli import app

    command = typer.main.get_command(app)
    docs = get_docs_for_click(obj=command, ctx=typer.Context(command), name="reflection-graph")
    # typer's generator starts each command's section at level 1 ("# reflection-graph"); the page has its own title
    return re.sub(r"(?m)^(#+) ", lambda m: "#" + m.group(1) + " ", docs).strip()


def _cell(value: Any) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def settings_table() -> str:
    """Every setting: name, default, bounds or choices, per run, description."""
    from reflection_graph.settings import allowed_values, default, setting_fields

    rows = [
        "| setting | default | allowed | per run (`Context`) | on the CLI | in the middleware | what it does |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for f in setting_fields():
        meta = f.metadata
        allowed = ", ".join(f"`{c!r}`" for c in allowed_values(f.name)) or " to ".join(
            f"{meta[k]:,}" for k in ("min", "max") if meta[k] is not None
        )
        if meta["min"] is not None and meta["max"] is None:
            allowed = f">= {meta['min']}"
        elif meta["max"] is not None and meta["min"] is None:
            allowed = f"<= {meta['max']}"
        flag = meta["flag"] or "--" + f.name.replace("_", "-")
        rows.append(
            f"| `{f.name}` | `{default(f.name)!r}` | {_cell(allowed)} | {'yes' if meta['runtime'] else ''} | "
            f"{f'`{flag}`' if meta['cli'] else ''} | {'yes' if meta['agent'] else ''} | "
            f"{_cell(meta['description'])} |"
        )
    return "\n".join(rows)


def strategies_table() -> str:
    """Every registered strategy: its name, description, forced settings and stop rules."""
    from reflection_graph import strategies
    from reflection_graph.settings import default as setting_default

    rows = [
        "| `strategy=` | what it does | forces | stop rules after a critique |",
        "| --- | --- | --- | --- |",
    ]
    for name in strategies.names():
        strategy = strategies.get(name)
        forces = ", ".join(f"`{k}={v!r}`" for k, v in strategy.forces.items()) or "nothing"
        rules = ", ".join(sorted(strategy.stop_rules))
        default = " (default)" if name == setting_default("strategy") else ""
        rows.append(f"| `{name}`{default} | {_cell(strategy.description)} | {_cell(forces)} | {rules} |")
    return "\n".join(rows)


def studio_graphs() -> str:
    """The graphs of `langgraph.json`: name, module, and the first paragraph of the module's docstring."""
    graphs = json.loads((ROOT / "langgraph.json").read_text(encoding="utf-8"))["graphs"]
    rows = ["| graph | module | what it is |", "| --- | --- | --- |"]
    for name, target in graphs.items():
        path = target.split(":", 1)[0].removeprefix("./")
        doc = ast.get_docstring(ast.parse((ROOT / path).read_text(encoding="utf-8"))) or ""
        summary = doc.strip().split("\n\n", 1)[0]
        rows.append(f"| `{name}` | `{path}` | {_cell(summary)} |")
    return "\n".join(rows)


GENERATORS: dict[str, tuple[str, Callable[[], str]]] = {
    "cli-reference": ("cli.md", cli_reference),
    "settings-table": ("concepts.md", settings_table),
    "strategies-table": ("concepts.md", strategies_table),
    "studio-graphs": ("studio.md", studio_graphs),
}


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    """Replace each marker with what it generates."""

    def replace(match: re.Match[str]) -> str:
        owner, generate = GENERATORS[match.group(1)]
        if page.file.src_uri != owner:
            raise ValueError(f"{page.file.src_uri}: the {match.group(0)} marker belongs on {owner}")
        return generate()

    return MARKER.sub(replace, markdown)
