"""The README's examples and set-up commands are executed, so the docs cannot drift from the code."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", README, flags=re.DOTALL)


def _setup_commands() -> list[str]:
    section = README.split("## Set up", 1)[1].split("\n## ", 1)[0]
    return [b.strip() for b in re.findall(r"```bash\n(.*?)```", section, flags=re.DOTALL)]


def test_readme_has_exactly_two_setup_commands_and_ci_runs_the_test_one() -> None:
    commands = _setup_commands()
    assert len(commands) == 2, commands
    assert "reflection-graph run" in commands[0]
    install, test_command = commands[1].split(" && ")
    ci = (ROOT / ".ci" / "run").read_text()
    assert 'pip install -e ".[dev]"' in install and 'python -m pip install -e ".[dev]"' in ci
    assert test_command.strip() == "python -m pytest" and "python -m pytest" in ci


def test_readme_is_a_short_front_page_whose_links_resolve() -> None:
    """At most 8,000 characters; the gains table between its markers; every relative link names a file here."""
    assert len(README) <= 8000, f"README.md is {len(README)} characters: move the detail into docs/"
    table = README.split("<!-- gains-table -->", 1)[1].split("<!-- /gains-table -->", 1)[0]
    assert "HumanEval" in table and "| --- |" in table
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README) + re.findall(r'src="([^"]+)"', README)
    relative = [link for link in links if "://" not in link]
    assert len(relative) >= 15
    missing = [link for link in relative if not (ROOT / link).exists()]
    assert not missing, f"README links to files that do not exist: {missing}"


@pytest.mark.parametrize("index", range(len(_blocks("python"))))
def test_readme_python_example_runs(index: int, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    code = _blocks("python")[index]
    exec(compile(code, f"README.md[python {index}]", "exec"), {"__name__": "__readme__"})


@pytest.mark.embedded
def test_readme_first_command_runs_three_rounds_on_the_embedded_model() -> None:
    pytest.importorskip("llama_cpp")
    command = _setup_commands()[0].split(" && ", 1)[1]
    argv = shlex.split(command)
    assert argv[0] == "reflection-graph"
    proc = subprocess.run(
        [sys.executable, "-m", "reflection_graph.cli", *argv[1:], "--json"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
        env={**os.environ, "REFLECTION_GRAPH_MODEL": ""},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout)
    assert result["iterations"] == 3 == len(result["trajectory"]), result["stop_reason"]
    for round_ in result["trajectory"]:
        assert round_["candidate"].strip()
        assert round_["critique"]["parsed"] is True
        assert 0 <= round_["score"] <= 10
