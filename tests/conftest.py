from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import ast  # noqa: E402
import os  # noqa: E402

import pytest  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

# Property tests check what is true, never how fast: no per-example deadline and no "too slow" health check, so a
# busy machine (a benchmark beside the suite, a loaded CI runner) cannot fail them.
settings.register_profile(
    "reflection-graph",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile("reflection-graph")

_MUST_RUN_UNDER_CI = ("postgres", "server", "embedded")

# Plain `embedded` (and no model at all) means the fast Gemma 3 270M in the tests, subprocesses included: the tests
# that need the capable model name it (`embedded:qwen2.5-coder-1.5b`), and the default itself is tested with this
# variable removed (tests/models/test_bundled.py).
os.environ.setdefault("REFLECTION_GRAPH_EMBEDDED", "gemma-3-270m")


def _under_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def _skip_reason(longrepr: object) -> str:
    reason = str(longrepr[-1] if isinstance(longrepr, tuple) else longrepr)
    return reason.removeprefix("Skipped: ")


def _required_groups_in(path: Path) -> list[str]:
    """The required groups a test module marks anywhere (`pytest.mark.embedded`, ...), read from its source.

    A module skipped while it was imported never finished defining its tests or `pytestmark`, so its marks can
    only be read from the file itself.
    """
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError):
        return []
    marked = {
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and node.attr in _MUST_RUN_UNDER_CI
        and isinstance(node.value, ast.Attribute)
        and node.value.attr == "mark"
    }
    return [group for group in _MUST_RUN_UNDER_CI if group in marked]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    """Under CI (CI=true), a skipped `postgres`, `server` or `embedded` test fails: CI cannot pass by skipping."""
    outcome = yield
    report = outcome.get_result()
    if not report.skipped or not _under_ci():
        return
    marks = [m for m in _MUST_RUN_UNDER_CI if item.get_closest_marker(m) is not None]
    if marks and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        reason = _skip_reason(report.longrepr)
        report.longrepr = f"{'/'.join(marks)} test skipped under CI ({reason}); CI must run it, not skip it"


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector):  # type: ignore[no-untyped-def]
    """Under CI, a test module skipped while it is collected (a module-level `pytest.importorskip` or
    `pytest.skip(allow_module_level=True)`) is a collection error, not a skip.

    The per-test hook above never sees such a skip: the module's tests were never collected. The error names the
    required groups (`embedded`, `server`, `postgres`) the module holds, read from its source. A module with none
    fails too: `.ci/run` installs every extra, so a whole module skipped there means a dependency went missing.
    """
    outcome = yield
    report = outcome.get_result()
    if not report.skipped or not _under_ci() or not isinstance(collector, pytest.Module):
        return
    groups = _required_groups_in(collector.path)
    what = f"{'/'.join(groups)} tests" if groups else "whole module (no required group)"
    report.outcome = "failed"
    report.longrepr = (
        f"{collector.nodeid}: {what} skipped at collection under CI ({_skip_reason(report.longrepr)}); "
        "CI must run it, not skip it"
    )
