"""Under CI, a skipped `postgres`, `server` or `embedded` test fails the run (tests/conftest.py)."""

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


def run_sample(tmp_path: Path, ci: str) -> subprocess.CompletedProcess[str]:
    tests = tmp_path / "tests"
    tests.mkdir(exist_ok=True)
    (tests / "conftest.py").write_text((ROOT / "tests" / "conftest.py").read_text(encoding="utf-8"))
    (tests / "test_sample.py").write_text(SAMPLE)
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
