"""The documentation cannot drift from the code.

- Every Python block in `docs/**/*.md` runs here (the README's run in tests/test_readme.py). A block that cannot run
  offline says why in an HTML comment on the line before its fence, `<!-- not-run: needs an API key -->`; a block
  that needs the embedded model is marked `<!-- embedded -->` and runs in the `embedded` group.
- The site builds with `mkdocs build --strict` (no broken link, anchor or reference), and the built site has an API
  entry for every name in the `__all__` of every public module, the CLI's own help for every command and option,
  and the notebooks with their stored outputs.
- Headless Chromium opens the start page and the API reference, served on 127.0.0.1, and finds their headings with
  no console error and no failed load (nothing is fetched from the network).
"""

from __future__ import annotations

import functools
import html
import http.server
import importlib
import json
import os
import re
import subprocess
import sys
import threading
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests._browser import browse, require_chromium

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
FENCE = re.compile(r"^(?P<indent>[ \t]*)```(?P<info>[^\n`]*)$")
MARKER = re.compile(r"^<!-- (?P<kind>not-run|embedded)(?::\s*(?P<reason>.*?))?\s*-->$")
PYTHON_NAMES = {"py", "python3", "py3", "pycon", "ipython", "python-repl"}


@dataclass(frozen=True)
class Example:
    """One fenced code block of a Markdown file."""

    path: Path
    line: int  # 1-based line of the opening fence
    language: str
    code: str
    marker: str | None  # "not-run", "embedded" or None
    reason: str

    @property
    def id(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def need(module: str, reason: str) -> None:
    """Import `module` or skip; under CI (which installs every extra) a missing module fails instead."""
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        importlib.import_module(module)
    else:
        pytest.importorskip(module, reason=reason)


def examples(path: Path) -> list[Example]:
    """Every fenced block of a Markdown file, with the marker comment on the line before it (blank lines skipped)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    found = []
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        indent, language = opening["indent"], opening["info"].strip().split(" ")[0]
        end = next(
            (
                j
                for j in range(i + 1, len(lines))
                if lines[j].strip() == "```" and lines[j].startswith(indent)
            ),
            None,
        )
        assert end is not None, f"{path.relative_to(ROOT)}:{i + 1}: a code fence is never closed"
        code = "\n".join(line.removeprefix(indent) for line in lines[i + 1 : end]) + "\n"
        before = next((lines[j].strip() for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        marker = MARKER.match(before)
        found.append(
            Example(
                path,
                i + 1,
                language,
                code,
                marker["kind"] if marker else None,
                (marker["reason"] or "") if marker else "",
            )
        )
        i = end + 1
    return found


def doc_pages() -> list[Path]:
    return sorted(DOCS.rglob("*.md"))


def python_examples() -> Iterator[Any]:
    for page in doc_pages():
        for example in examples(page):
            if example.language != "python" or example.marker == "not-run":
                continue
            marks = [pytest.mark.embedded] if example.marker == "embedded" else []
            yield pytest.param(example, id=example.id, marks=marks)


def test_the_example_finder_sees_markers_and_fences(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "text ```python inline``` text\n\n"
        "<!-- not-run: needs an API key -->\n\n```python\nprint(1)\n```\n\n"
        "- a list item\n\n  ```python\n  x = 2\n  ```\n\n"
        "<!-- embedded -->\n```python\ny = 3\n```\n```bash\nls\n```\n"
    )
    found = examples(page)
    assert [(e.language, e.marker, e.reason, e.code) for e in found] == [
        ("python", "not-run", "needs an API key", "print(1)\n"),
        ("python", None, "", "x = 2\n"),
        ("python", "embedded", "", "y = 3\n"),
        ("bash", None, "", "ls\n"),
    ]


def test_every_docs_page_has_python_examples_that_run_and_every_skip_says_why() -> None:
    all_examples = [e for page in doc_pages() for e in examples(page)]
    python = [e for e in all_examples if e.language == "python"]
    assert len([e for e in python if e.marker != "not-run"]) >= 10, "the docs lost their runnable examples"
    for example in all_examples:
        assert example.language not in PYTHON_NAMES, (
            f"{example.id}: write ```python (not {example.language}) so the example is run by the tests"
        )
        if example.marker == "not-run":
            assert example.language == "python" and len(example.reason) >= 10, (
                f"{example.id}: a not-run marker goes before a python block and says why: "
                "<!-- not-run: needs an API key -->"
            )


@pytest.mark.parametrize("example", list(python_examples()))
def test_docs_python_example_runs(example: Example, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    if example.marker == "embedded":
        pytest.importorskip("llama_cpp")
    monkeypatch.chdir(tmp_path)
    exec(compile(example.code, example.id, "exec"), {"__name__": "__docs__"})


def test_getting_started_shows_the_readmes_two_setup_commands() -> None:
    from tests.test_readme import _setup_commands

    page = DOCS / "getting-started.md"
    section = page.read_text(encoding="utf-8").split("## Set up", 1)[1].split("\n## ", 1)[0]
    shown = [e.code.strip() for e in examples(page) if e.language == "bash" and e.code.strip() in section]
    assert shown == _setup_commands()


def test_the_development_page_names_every_module_of_the_package() -> None:
    """docs/development.md's "How it is built" table has a row for every module and subpackage at the top level."""
    page = (DOCS / "development.md").read_text(encoding="utf-8")
    named = set(re.findall(r"^\| `([^`]+)` \|", page, flags=re.MULTILINE))
    package = ROOT / "reflection_graph"
    parts = [
        p.name + "/" if p.is_dir() else p.name for p in package.iterdir() if p.suffix == ".py" or p.is_dir()
    ]
    missing = sorted(
        p for p in parts if p not in named and p != "__init__.py" and not p.startswith("__pycache__")
    )
    assert not missing, f"docs/development.md: add a row for {missing} to the module table"


REPO_PATH = re.compile(
    r"(?<![\w/.-])((?:bench|datasets|tests|notebooks|graphs|reflection_graph|docs|\.ci)/[\w./-]*\w)"
)
NOT_IN_THE_REPOSITORY = {
    "bench/_samples.py": "removed; the HumanEval/40-82 figures name the commit they were measured at",
    "bench/.cache": "made when a benchmark runs (git-ignored)",
    "bench/results/": "written when a benchmark runs",
}


def test_every_repository_path_the_docs_name_exists() -> None:
    """`bench/...`, `datasets/...`, `tests/...` and the like, named in the README or the docs, are files here."""
    missing = []
    for page in [ROOT / "README.md", *doc_pages()]:
        for match in REPO_PATH.finditer(page.read_text(encoding="utf-8")):
            path = match.group(1)
            if not (ROOT / path).exists() and not any(path.startswith(p) for p in NOT_IN_THE_REPOSITORY):
                missing.append(f"{page.relative_to(ROOT)}: {path}")
    assert not missing, missing


def command_lines() -> list[tuple[str, str]]:
    """Every `reflection-graph ...` command line in the README and the docs: in bash blocks and inline code."""
    found = []
    for page in [ROOT / "README.md", *doc_pages()]:
        text = page.read_text(encoding="utf-8")
        spans = [e.code for e in examples(page) if e.language == "bash"]
        spans += re.findall(r"(?<!`)`(reflection-graph [^`]+)`(?!`)", text)
        for span in spans:
            for line in span.splitlines():
                command = line.split("&& ", 1)[-1].split(" #", 1)[0].strip()
                if command.startswith("reflection-graph "):
                    found.append((f"{page.relative_to(ROOT)}", command))
    return found


def test_every_command_line_in_the_docs_names_real_commands_and_options() -> None:
    import typer.main

    from reflection_graph.cli import app

    commands = typer.main.get_command(app).commands  # type: ignore[attr-defined]
    lines = command_lines()
    assert len(lines) >= 10
    for where, line in lines:
        words = line.split()
        if words[1].isupper():  # a placeholder: `reflection-graph COMMAND --help`
            continue
        assert words[1] in commands, (
            f"{where}: `{line}`: no command {words[1]!r} (commands: {sorted(commands)})"
        )
        options = {opt for param in commands[words[1]].params for opt in [*param.opts, *param.secondary_opts]}
        for word in words[2:]:
            flag = word.split("=", 1)[0]
            if flag.startswith("-") and not flag.lstrip("-").isdigit() and flag != "--help":
                assert flag in options, f"{where}: `{line}`: {words[1]} has no option {flag}"


# -- the built site ----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    need("mkdocs", 'needs pip install "reflection-graph[docs]"')
    out = tmp_path_factory.mktemp("site")
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return out


def test_the_strict_build_fails_on_a_broken_link_or_anchor(tmp_path: Path) -> None:
    """The site's own validation settings, on a two-page site: a missing page and a missing anchor each fail."""
    need("mkdocs", 'needs pip install "reflection-graph[docs]"')
    import yaml

    ours = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    for link, problem in [
        ("other.md#nowhere", "nowhere"),
        ("missing.md", "missing.md"),
        ("other.md#there", None),
    ]:
        docs = tmp_path / "docs"
        docs.mkdir(exist_ok=True)
        (docs / "index.md").write_text(f"# Home\n\nSee [the other page]({link}).\n")
        (docs / "other.md").write_text("# Other\n\n## There\n")
        config = {
            "site_name": "check",
            "strict": True,
            "markdown_extensions": ours["markdown_extensions"],
            "validation": ours["validation"],
        }
        (tmp_path / "mkdocs.yml").write_text(yaml.safe_dump(config))
        proc = subprocess.run(
            [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=300,
        )
        if problem is None:
            assert proc.returncode == 0, proc.stderr[-2000:]
        else:
            assert proc.returncode != 0 and problem in proc.stderr, (link, proc.stderr[-2000:])


def inventory(site: Path) -> set[str]:
    """The object names of the site's Sphinx inventory (`objects.inv`, written by mkdocstrings)."""
    raw = (site / "objects.inv").read_bytes()
    header_end = 0
    for _ in range(4):
        header_end = raw.index(b"\n", header_end) + 1
    body = zlib.decompress(raw[header_end:]).decode("utf-8")
    return {line.split(" ", 1)[0] for line in body.splitlines() if " py:" in line}


def _resolve(identifier: str) -> Any:
    """The object an inventory name points at (import the longest module prefix, then getattr)."""
    parts = identifier.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise LookupError(identifier)


def public_names() -> list[tuple[str, str]]:
    from tests.test_public_api import _public_modules

    return [(m.__name__, name) for m in _public_modules() for name in m.__all__]


def test_every_public_name_has_an_api_reference_entry(site: Path) -> None:
    entries = inventory(site)
    documented: dict[int, str] = {}
    for entry in entries:
        try:
            documented.setdefault(id(_resolve(entry)), entry)
        except (LookupError, AttributeError):
            continue
    names = public_names()
    assert len(names) > 100
    missing = [
        f"{module}.{name}"
        for module, name in names
        if f"{module}.{name}" not in entries
        and id(getattr(importlib.import_module(module), name)) not in documented
    ]
    assert not missing, f"no API reference entry for {missing}"
    # the entries show the docstrings
    import reflection_graph

    critics_page = _article(site / "reference" / "critics" / "index.html")
    assert "reflection_graph critics llm LLMCritic" in critics_page
    first_line = (reflection_graph.create_reflection_graph.__doc__ or "").strip().splitlines()[0]
    assert " ".join(_words(first_line)) in _article(site / "reference" / "graph" / "index.html")


def _article(page: Path) -> str:
    """The words of a built page's main text (its `<article>`), joined by single spaces."""
    markup = page.read_text(encoding="utf-8")
    return " ".join(_words(_text(markup[markup.index("<article") : markup.index("</article>")])))


def _text(markup: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", " ", markup))


def _words(text: str) -> list[str]:
    return re.findall(r"[A-Za-z0-9_]+", text)


def test_the_cli_page_is_the_commands_own_help(site: Path) -> None:
    import typer.main

    from reflection_graph.cli import app

    page = _article(site / "cli" / "index.html")
    group = typer.main.get_command(app)
    commands = group.commands  # type: ignore[attr-defined]
    assert set(commands) >= {"run", "batch", "merge", "eval"}
    for name, command in commands.items():
        assert f"reflection graph {name}" in page, name
        for param in command.params:
            for opt in param.opts:
                if opt.startswith("--"):
                    assert " ".join(_words(opt)) in page, f"{name} {opt}"
        summary = " ".join(_words((command.help or "").strip().splitlines()[0]))
        assert summary in page, f"{name}: {summary}"


def test_the_notebooks_are_pages_with_their_stored_outputs(site: Path) -> None:
    notebooks = sorted((ROOT / "notebooks").glob("*.ipynb"))
    assert notebooks
    for path in notebooks:
        page = site / "notebooks" / path.stem / "index.html"
        assert page.is_file(), f"{path.name} has no page"
        notebook = json.loads(path.read_text(encoding="utf-8"))
        outputs = [
            "".join(out.get("text", ""))
            for cell in notebook["cells"]
            for out in cell.get("outputs", [])
            if out.get("output_type") == "stream"
        ]
        line = next((s.strip() for o in outputs for s in o.splitlines() if len(s.strip()) > 12), None)
        assert line, f"{path.name}: no stored stream output"
        assert " ".join(_words(line)) in _article(page), f"{path.name}: {line!r} not on its page"


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass


@pytest.fixture(scope="module")
def served(site: Path) -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(site))
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


HEADINGS = (
    "[...document.querySelectorAll('article h1, article h2, article h3')].map(h => h.textContent.trim())"
)


def test_the_start_page_the_api_reference_and_a_notebook_open_in_a_browser(served: str) -> None:
    require_chromium()
    need("websockets.asyncio.client", "needs websockets (dev extra)")
    need("PIL.Image", 'needs pip install "reflection-graph[eval]"')

    start = browse(served + "/", {"headings": HEADINGS, "nav": "document.querySelectorAll('nav a').length"})
    assert start.errors == []
    assert [h.rstrip("¶") for h in start.values["headings"]] == ["reflection-graph", "Start here", "Use it"]
    assert start.values["nav"] > 20  # the site's navigation, generated pages included

    reference = browse(served + "/reference/", {"headings": HEADINGS})
    assert reference.errors == []
    assert reference.values["headings"][0].rstrip("¶") == "API reference", reference.values["headings"]

    critics = browse(served + "/reference/critics/", {"headings": HEADINGS})
    assert critics.errors == []
    headings = " ".join(critics.values["headings"])
    assert "LLMCritic" in headings and "CodeTestCritic" in headings, critics.values["headings"]

    # a notebook page: its stored plot decodes in the browser, with nothing fetched from elsewhere
    plots = (
        "[...document.querySelectorAll('article img')].filter(i => i.complete && i.naturalWidth > 200).length"
    )
    notebook = browse(served + "/notebooks/gain/", {"headings": HEADINGS, "plots": plots})
    assert notebook.errors == []
    assert notebook.values["headings"][0].startswith("Does reflection pay off?"), notebook.values["headings"]
    assert notebook.values["plots"] >= 1


def test_the_browser_check_can_fail(served: str, site: Path) -> None:
    require_chromium()
    need("websockets.asyncio.client", "needs websockets (dev extra)")
    need("PIL.Image", 'needs pip install "reflection-graph[eval]"')
    broken = site / "broken.html"
    broken.write_text('<h1>x</h1><img src="missing.png"><script>console.error("boom")</script>')
    page = browse(served + "/broken.html", {"headings": "[...document.querySelectorAll('h1')].length"})
    errors = " | ".join(page.errors)
    assert "console: boom" in errors and "404" in errors, errors
