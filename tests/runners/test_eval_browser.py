"""`report.html` in a real headless browser (Debian's Chromium, driven over the DevTools protocol).

The page must load with no console errors, no uncaught exceptions and no failed loads, its embedded plot must
decode, and a screenshot must show the plot (its line colours). Two control pages prove the checks can fail: one
with a console error and a broken image, one with the plot removed.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from reflection_graph import evaluate
from tests._browser import Page, require_chromium
from tests._browser import browse as _browse
from tests.runners.test_eval import RECORDS, quiz_graph

PIL = pytest.importorskip("PIL.Image", reason='needs pip install "reflection-graph[eval]"')
websockets_client = pytest.importorskip("websockets.asyncio.client", reason="needs websockets (dev extra)")
require_chromium()

BLUE = (31, 119, 180)  # the "mean score" line of gain.png (matplotlib's C0)
GREEN = (44, 160, 44)  # the "selected" line
IMAGE_WIDTH = (
    "(() => { const i = document.querySelector('img'); return i && i.complete ? i.naturalWidth : 0 })()"
)


def browse(path: Path) -> Page:
    """Open `path` in a fresh headless Chromium; `values["image_width"]` is the first image's decoded width."""
    return _browse(path, {"image_width": IMAGE_WIDTH})


def near(image: Any, colour: tuple[int, int, int], tolerance: int = 24) -> int:
    """How many pixels of `image` are within `tolerance` of `colour` on every channel."""
    r0, g0, b0 = colour
    return sum(
        count
        for count, (r, g, b) in image.getcolors(maxcolors=1 << 24)
        if abs(r - r0) <= tolerance and abs(g - g0) <= tolerance and abs(b - b0) <= tolerance
    )


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("report")
    evaluate(RECORDS, out_dir=out, graph=quiz_graph()[0], scorer="contains", progress=False)
    return out / "report.html"


def test_report_loads_cleanly_and_the_screenshot_shows_the_plot(report: Path) -> None:
    page = browse(report)
    assert page.errors == []
    plot = PIL.open(report.parent / "gain.png")
    assert page.values["image_width"] == plot.size[0]  # the embedded PNG decoded in the browser
    # the plot's blue and green lines are on screen (nothing else on the page uses those colours)
    assert near(page.screenshot, BLUE) > 300 and near(page.screenshot, GREEN) > 200
    assert len(page.screenshot.getcolors(maxcolors=1 << 24)) > 100  # not a blank page


def test_the_checks_can_fail(report: Path, tmp_path: Path) -> None:
    html = report.read_text()
    without_plot = tmp_path / "no_plot.html"
    without_plot.write_text(re.sub(r"<img [^>]*>", "", html))
    page = browse(without_plot)
    assert page.errors == [] and page.values["image_width"] == 0
    assert near(page.screenshot, BLUE) < 20 and near(page.screenshot, GREEN) < 20

    broken = tmp_path / "broken.html"
    broken.write_text(
        html.replace(
            "</body>", '<img src="missing.png"><script>console.error("boom"); nosuch();</script></body>'
        )
    )
    errors = " | ".join(browse(broken).errors)
    assert "console: boom" in errors and "exception:" in errors and "load failed" in errors
