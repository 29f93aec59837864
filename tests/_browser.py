"""A real headless browser for the tests: Debian's Chromium, driven over the DevTools protocol (websockets).

`browse(target, values)` opens a file or URL in a fresh headless Chromium and reports what happened: the console
errors, uncaught exceptions and failed loads, the result of each JavaScript expression in `values`, and a
screenshot. Used by the eval report's test (tests/runners/test_eval_browser.py) and the documentation site's
(tests/test_docs.py).
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
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def require_chromium() -> str:
    """Chromium's path; skip the calling module without it (under CI: fail, .ci/run installs it)."""
    if CHROMIUM is None:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(
                "chromium is not installed; .ci/run installs it (apt-get install chromium)", pytrace=False
            )
        pytest.skip("needs Chromium: apt-get install chromium", allow_module_level=True)
    return CHROMIUM


class Page:
    """What the browser saw while loading one page."""

    def __init__(self) -> None:
        self.errors: list[str] = []
        self.values: dict[str, Any] = {}
        self.screenshot: Any = None


async def _load(browser_ws: str, url: str, values: Mapping[str, str]) -> Page:
    from websockets.asyncio.client import connect

    page = Page()
    async with connect(browser_ws, max_size=None) as ws:
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
            for name, expression in values.items():
                found = await call("Runtime.evaluate", session, expression=expression, returnByValue=True)
                page.values[name] = found["result"].get("value")
            shot = await call("Page.captureScreenshot", session, format="png")
            from PIL import Image

            page.screenshot = Image.open(io.BytesIO(base64.b64decode(shot["data"]))).convert("RGB")
        finally:
            task.cancel()
    return page


def browse(target: Path | str, values: Mapping[str, str] | None = None) -> Page:
    """Open `target` (a file, or an http URL) in a fresh headless Chromium and report what happened.

    Args:
        target: a path (opened as a file:// URL) or a URL.
        values: name -> JavaScript expression, evaluated once the page has loaded; the results land in
            `Page.values` (JSON values).
    """
    chromium = require_chromium()
    url = target.resolve().as_uri() if isinstance(target, Path) else target
    # Chromium's helper processes may still write to the profile as the browser exits: end the whole group, and
    # do not fail the test on a profile file written after that.
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as profile:
        proc = subprocess.Popen(
            [
                chromium,
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
            return asyncio.run(_load(endpoint, url, values or {}))
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
