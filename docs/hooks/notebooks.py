"""MkDocs hook: every notebook in `notebooks/` becomes a page of the site, with its stored outputs.

The notebooks stay where the tests run them (`notebooks/`, outside `docs/`); this hook adds each one to the site as
`notebooks/NAME.ipynb` before mkdocs-jupyter (configured with `execute: false`) turns it into a page, and fills
the nav's `Notebooks` entry, titled by each notebook's first heading.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import mkdocs.plugins
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[2]
SECTION = "Notebooks"


def notebooks() -> list[Path]:
    """The repository's notebooks, by name."""
    return sorted((ROOT / "notebooks").glob("*.ipynb"))


def title(path: Path) -> str:
    """The notebook's first Markdown heading, else its file name."""
    for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
        if cell["cell_type"] == "markdown":
            for line in "".join(cell["source"]).splitlines():
                if line.startswith("#"):
                    return line.lstrip("#").strip().strip("`")
    return path.stem


def on_config(config: MkDocsConfig) -> MkDocsConfig:
    """Fill the nav's `Notebooks` entry."""
    entries: list[Any] = [{title(path): f"notebooks/{path.name}"} for path in notebooks()]
    for item in config.nav or []:
        if isinstance(item, dict) and SECTION in item:
            item[SECTION] = entries
            break
    else:
        raise ValueError(f"mkdocs.yml: nav needs a '{SECTION}' entry for the notebooks")
    return config


@mkdocs.plugins.event_priority(100)  # before mkdocs-jupyter's on_files, which turns .ipynb files into pages
def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Add each notebook as a file of the site."""
    for path in notebooks():
        # a File read from the repository root (not File.generated: mkdocs-jupyter's wrapper needs a src_dir)
        files.append(
            File(
                f"notebooks/{path.name}",
                src_dir=str(ROOT),
                dest_dir=config.site_dir,
                use_directory_urls=config.use_directory_urls,
            )
        )
    return files
