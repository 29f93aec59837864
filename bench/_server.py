"""llama-cpp-python's OpenAI-compatible server on loopback, for the benches that compare clients of one server.

`llama_server(...)` starts `python -m llama_cpp.server` on 127.0.0.1 with a free port, the given GGUF, context,
threads and seed (the same for every client), waits until `/v1/models` answers, yields the `/v1` base URL and
stops the process. It is started as tests/_servers.py starts it for the tests: through a launcher that applies
`llama_load_guard` first (llama.cpp's AMX weight buffers crash on VMs that advertise AMX without supporting it).

Every server a bench starts dies with the bench (`DIE_WITH_PARENT`, run first in the child): on Linux the kernel
kills it when the process that started it ends, however that ends (a `kill`, a crash, SIGKILL), so a stopped bench
never leaves a model process holding the cores.
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

__all__ = ["DIE_WITH_PARENT", "PARENT_PID_ENV", "free_port", "llama_server", "parent_env", "wait_http"]

ROOT = Path(__file__).resolve().parents[1]
PARENT_PID_ENV = "REFLECTION_GRAPH_BENCH_PARENT"
"""The variable that gives a child the process id of the bench that started it."""
DIE_WITH_PARENT = (
    "import ctypes, os, signal, sys\n"
    "if sys.platform.startswith('linux') and os.environ.get('REFLECTION_GRAPH_BENCH_PARENT'):\n"
    "    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG\n"
    "    if os.getppid() != int(os.environ['REFLECTION_GRAPH_BENCH_PARENT']):\n"
    "        sys.exit('the bench that started this process has ended')\n"
)
"""Python run first in a child a bench starts: ask the kernel to kill it when its parent ends (Linux's
`PR_SET_PDEATHSIG`), and exit at once if the parent ended before the request. Only where `parent_env` set the
variable."""
LAUNCHER = DIE_WITH_PARENT + (
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


def parent_env(env: dict[str, str]) -> dict[str, str]:
    """`env` with the variable that makes `DIE_WITH_PARENT` bind the child to this process."""
    return {**env, PARENT_PID_ENV: str(os.getpid())}


def wait_http(
    url: str, *, timeout: float, process: subprocess.Popen[bytes] | None = None
) -> dict[str, object]:
    """Poll `url` until it answers 200 with JSON (returned); fail early if `process` exits."""
    deadline, last = time.monotonic() + timeout, None
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"server exited with code {process.returncode} before answering {url}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310 - a loopback URL built here
                data: dict[str, object] = json.loads(response.read())
                return data
        except (urllib.error.URLError, ConnectionError, TimeoutError, json.JSONDecodeError) as exc:
            last = exc
            time.sleep(0.3)
    raise TimeoutError(f"{url} did not answer within {timeout:.0f}s (last error: {last})")


@contextlib.contextmanager
def llama_server(
    model_path: str, *, alias: str, n_ctx: int, n_threads: int, seed: int = 0, timeout: float = 300.0
) -> Iterator[str]:
    """Run llama.cpp's OpenAI-compatible server on 127.0.0.1 and yield its `/v1` base URL.

    Args:
        model_path: the GGUF to serve.
        alias: the model name clients send.
        n_ctx: the context window, in tokens.
        n_threads: llama.cpp's threads.
        seed: llama.cpp's seed.
        timeout: seconds to wait for `/v1/models` to answer.

    Raises:
        RuntimeError: the server did not start (with the end of its log).
    """
    port = free_port()
    command = [sys.executable, "-c", LAUNCHER, "--model", model_path, "--model_alias", alias]
    command += ["--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(n_ctx)]
    command += ["--n_threads", str(n_threads), "--seed", str(seed)]
    log = Path(tempfile.mkstemp(prefix="llama-server-", suffix=".log")[1])
    env = parent_env(dict(os.environ))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    with log.open("wb") as sink:
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
