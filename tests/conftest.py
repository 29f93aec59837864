from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import os  # noqa: E402

import pytest  # noqa: E402

_MUST_RUN_UNDER_CI = ("postgres", "server", "embedded")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    """Under CI (CI=true), a skipped `postgres`, `server` or `embedded` test fails: CI cannot pass by skipping."""
    outcome = yield
    report = outcome.get_result()
    if not report.skipped or os.environ.get("CI", "").lower() not in ("1", "true", "yes"):
        return
    marks = [m for m in _MUST_RUN_UNDER_CI if item.get_closest_marker(m) is not None]
    if marks and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        reason = report.longrepr[-1] if isinstance(report.longrepr, tuple) else report.longrepr
        report.longrepr = f"{'/'.join(marks)} test skipped under CI ({reason}); CI must run it, not skip it"
