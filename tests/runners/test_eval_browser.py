"""`report.html` in a real headless browser (Debian's Chromium, driven over the DevTools protocol).

The page must load with no console errors, no uncaught exceptions and no failed loads, its embedded plot must
decode, and a screenshot must show the plot (its line colours). Two control pages prove the checks can fail: one
with a console error and a broken image, one with the plot removed.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import io
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest

from reflection_graph import evaluate
from tests.runners.test_eval import RECORDS, quiz_graph

PIL = pytest.importorskip("PIL.Image", reason='needs pip install "reflection-graph[eval]"')
websockets_client = pytest.importorskip("websockets.asyncio.client", reason="needs websockets (dev extra)")

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
if CHROMIUM is None:
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(
            "chromium is not installed; .ci/run installs it (apt-get install chromium)", pytrace=False
        )
    pytest.skip("needs Chromium: apt-get install chromium", allow_module_level=True)

BLUE = (31, 119, 180)  # the "mean score" line of gain.png (matplotlib's C0)
GREEN = (44, 160, 44)  # the "selected" line


class Page:
    """What the browser saw while loading one page."""

    def __init__(self) -> None:
        self.errors: list[str] = []
        self.image_width = 0
        self.screenshot: Any = None


async def _load(browser_ws: str, url: str) -> Page:
    page = Page()
    async with websockets_client.connect(browser_ws, max_size=None) as ws:
        ids = iter(range(1, 10_000))
        pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        loaded = asyncio.Event()

        async def reader() -> None:
            async for raw in ws:
                msg = json.loads(raw)
                if "id" in msg and msg["id"] in pending:
                    pending.pop(msg["id"]).set_result(msg)
                    continue
                method, params = msg.get("method"), msg.get("params", {})
                if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                    page.errors.append(
                        "console: " + " ".join(str(a.get("value")) for a in params.get("args", []))
                    )
                elif method == "Runtime.exceptionThrown":
                    page.errors.append("exception: " + str(params.get("exceptionDetails", {}).get("text")))
                elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
                    page.errors.append("log: " + str(params["entry"].get("text")))
                elif method == "Network.loadingFailed":
                    page.errors.append("load failed: " + str(params.get("errorText")))
                elif method == "Page.loadEventFired":
                    loaded.set()

        async def call(method: str, session: str | None = None, **params: Any) -> dict[str, Any]:
            number = next(ids)
            future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
            pending[number] = future
            message: dict[str, Any] = {"id": number, "method": method, "params": params}
            if session:
                message["sessionId"] = session
            await ws.send(json.dumps(message))
            reply = await asyncio.wait_for(future, 30)
            assert "error" not in reply, reply
            return reply.get("result", {})

        task = asyncio.create_task(reader())
        try:
            target = await call("Target.createTarget", url="about:blank")
            session = (await call("Target.attachToTarget", targetId=target["targetId"], flatten=True))[
                "sessionId"
            ]
            for domain in ("Runtime", "Log", "Page", "Network"):
                await call(f"{domain}.enable", session)
            await call(
                "Emulation.setDeviceMetricsOverride",
                session,
                width=1200,
                height=1400,
                deviceScaleFactor=1,
                mobile=False,
            )
            await call("Page.navigate", session, url=url)
            await asyncio.wait_for(loaded.wait(), 30)
            await asyncio.sleep(0.3)  # late console messages
            found = await call(
                "Runtime.evaluate",
                session,
                expression="(() => { const i = document.querySelector('img'); return i && i.complete ? i.naturalWidth : 0 })()",
                returnByValue=True,
            )
            page.image_width = int(found["result"].get("value") or 0)
            shot = await call("Page.captureScreenshot", session, format="png")
            page.screenshot = PIL.open(io.BytesIO(base64.b64decode(shot["data"]))).convert("RGB")
        finally:
            task.cancel()
    return page


def browse(path: Path) -> Page:
    """Open `path` in a fresh headless Chromium and report what happened."""
    # Chromium's helper processes may still write to the profile as the browser exits: end the whole group, and
    # do not fail the test on a profile file written after that.
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as profile:
        proc = subprocess.Popen(
            [
                CHROMIUM,  # type: ignore[list-item]
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--disable-extensions",
                "--remote-debugging-port=0",
                f"--user-data-dir={profile}",
                "about:blank",
            ],
            stderr=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
        )
        try:
            endpoint = None
            assert proc.stderr is not None
            for line in proc.stderr:
                match = re.search(r"DevTools listening on (ws://\S+)", line)
                if match:
                    endpoint = match.group(1)
                    break
            assert endpoint, "chromium did not start its DevTools endpoint"
            return asyncio.run(_load(endpoint, path.resolve().as_uri()))
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


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
    assert page.image_width == plot.size[0]  # the embedded PNG decoded in the browser
    # the plot's blue and green lines are on screen (nothing else on the page uses those colours)
    assert near(page.screenshot, BLUE) > 300 and near(page.screenshot, GREEN) > 200
    assert len(page.screenshot.getcolors(maxcolors=1 << 24)) > 100  # not a blank page


def test_the_checks_can_fail(report: Path, tmp_path: Path) -> None:
    html = report.read_text()
    without_plot = tmp_path / "no_plot.html"
    without_plot.write_text(re.sub(r"<img [^>]*>", "", html))
    page = browse(without_plot)
    assert page.errors == [] and page.image_width == 0
    assert near(page.screenshot, BLUE) < 20 and near(page.screenshot, GREEN) < 20

    broken = tmp_path / "broken.html"
    broken.write_text(
        html.replace(
            "</body>", '<img src="missing.png"><script>console.error("boom"); nosuch();</script></body>'
        )
    )
    errors = " | ".join(browse(broken).errors)
    assert "console: boom" in errors and "exception:" in errors and "load failed" in errors
