"""Under CI, a skipped `postgres`, `server` or `embedded` test fails the run (tests/conftest.py), whether it is
skipped when it runs or, with its whole module, while it is collected (a module-level `importorskip`)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

SAMPLE = """
import pytest

@pytest.mark.postgres
def test_needs_postgres():
    pytest.skip("REFLECTION_GRAPH_PG_DSN is not set")

@pytest.mark.server
@pytest.mark.skipif(True, reason="no server binary")
def test_needs_server():
    pass

def test_plain_skip():
    pytest.skip("fine anywhere")
"""


# The shape of tests/models/test_embedded.py: the import check runs before `pytestmark` is ever reached.
MODULE_LEVEL_SKIP = """
import pytest

pytest.importorskip("no_such_module_anywhere", reason="needs the no-such extra")

pytestmark = pytest.mark.embedded


def test_needs_the_model():
    assert False, "never collected"
"""

UNMARKED_MODULE_LEVEL_SKIP = """
import pytest

pytest.skip("needs a browser", allow_module_level=True)


def test_needs_a_browser():
    pass
"""


def run_sample(
    tmp_path: Path, ci: str, files: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    tests = tmp_path / "tests"
    tests.mkdir(exist_ok=True)
    (tests / "conftest.py").write_text((ROOT / "tests" / "conftest.py").read_text(encoding="utf-8"))
    for name, text in (files or {"test_sample.py": SAMPLE}).items():
        (tests / name).write_text(text)
    env = {"PATH": "/usr/bin:/bin", "CI": ci}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "tests",
            "-m",
            "postgres or server or not postgres",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_skipped_marked_tests_fail_under_ci(tmp_path: Path) -> None:
    proc = run_sample(tmp_path, "true")
    assert proc.returncode == 1, proc.stdout
    assert "postgres test skipped under CI" in proc.stdout and "server test skipped under CI" in proc.stdout
    assert "1 skipped" in proc.stdout  # the unmarked skip stays a skip


def test_outside_ci_they_are_plain_skips(tmp_path: Path) -> None:
    proc = run_sample(tmp_path, "")
    assert proc.returncode == 0, proc.stdout
    assert "3 skipped" in proc.stdout


def test_a_module_skipped_at_collection_fails_under_ci_naming_its_group(tmp_path: Path) -> None:
    proc = run_sample(tmp_path, "true", {"test_embedded_like.py": MODULE_LEVEL_SKIP})
    assert proc.returncode != 0, proc.stdout
    assert "ERROR tests/test_embedded_like.py" in proc.stdout, proc.stdout
    assert "embedded tests skipped at collection under CI (needs the no-such extra)" in proc.stdout, (
        proc.stdout
    )
    assert "skipped" not in proc.stdout.splitlines()[-1], proc.stdout  # the summary line counts no skip


def test_an_unmarked_module_skipped_at_collection_also_fails_under_ci(tmp_path: Path) -> None:
    proc = run_sample(tmp_path, "true", {"test_browser_like.py": UNMARKED_MODULE_LEVEL_SKIP})
    assert proc.returncode != 0, proc.stdout
    assert "whole module (no required group) skipped at collection under CI (needs a browser)" in proc.stdout


def test_outside_ci_a_module_skipped_at_collection_is_a_plain_skip(tmp_path: Path) -> None:
    files = {
        "test_embedded_like.py": MODULE_LEVEL_SKIP,
        "test_browser_like.py": UNMARKED_MODULE_LEVEL_SKIP,
        "test_plain.py": "def test_plain():\n    pass\n",
    }
    proc = run_sample(tmp_path, "", files)
    assert proc.returncode == 0, proc.stdout
    assert "1 passed, 2 skipped" in proc.stdout and "error" not in proc.stdout.lower(), proc.stdout
