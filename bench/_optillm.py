"""optillm's proxy for bench_peers.py: started from its own Python environment (bench/optillm-requirements.txt, no
torch), pointed at an OpenAI-compatible server, waited for and stopped.

`optillm_proxy(python, upstream, best_of_n=...)` runs `optillm` (its console script's entry point, `optillm.main`)
with `--base-url <upstream> --port <free port>` on 127.0.0.1, as its README documents for an OpenAI-compatible
endpoint: `OPENAI_API_KEY` set (any value: the key of the OpenAI client it makes for `--base-url`), and every
other variable that would choose another client removed (`OPTILLM_API_KEY` selects its local inference engine,
which imports torch; `CEREBRAS_API_KEY` and `AZURE_OPENAI_API_KEY` come first too). The approach stays `auto`, so a
request chooses its technique by the model name's prefix (`bon-<model>`). It yields once `/health` answers, and is
stopped (terminated, then killed) when the block ends. A proxy that cannot start raises `OptillmUnavailable` with
why (the command's error, or the last lines of its log).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from _server import DIE_WITH_PARENT, free_port, parent_env

__all__ = ["REQUIREMENTS", "OptillmProxy", "OptillmUnavailable", "optillm_proxy", "optillm_version"]

REQUIREMENTS = Path(__file__).resolve().parent / "optillm-requirements.txt"
SETUP = "python3 -m venv .venv-optillm && .venv-optillm/bin/pip install --no-deps -r bench/optillm-requirements.txt"
"""The one command that makes optillm's environment (its python is then `.venv-optillm/bin/python`)."""
START_TIMEOUT_S = 120.0
"""How long the proxy may take to answer `/health` (it imports z3, sympy and its plugins first)."""
STOP_TIMEOUT_S = 10.0
"""How long a terminated proxy may take to exit before it is killed."""
ENTRY = DIE_WITH_PARENT + "import sys, optillm; sys.argv[0] = 'optillm'; sys.exit(optillm.main())"
"""What optillm's `optillm` console script runs, with the interpreter given, after binding the proxy's life to
the bench's (`_server.DIE_WITH_PARENT`)."""
CLEARED = ("OPTILLM_", "CEREBRAS_API_KEY", "AZURE_OPENAI_API_KEY")
"""Environment variables (names starting so) that would change the proxy's client or settings."""


class OptillmUnavailable(RuntimeError):
    """optillm's proxy could not be started: the message says why."""


@dataclass(frozen=True)
class OptillmProxy:
    """A running proxy: its `/v1` URL, the optillm version it runs and its log file."""

    url: str
    version: str
    log: Path


def optillm_version(python: str) -> str:
    """The optillm version installed for the interpreter `python`.

    Raises:
        OptillmUnavailable: `python` cannot be run or has no optillm.
    """
    try:
        done = subprocess.run(  # noqa: S603 - the interpreter the user named
            [python, "-c", "import importlib.metadata as m; print(m.version('optillm'))"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise OptillmUnavailable(f"cannot run {python}: {exc}; make its environment with: {SETUP}") from exc
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no error text"])[-1]
        raise OptillmUnavailable(f"{python} has no optillm ({last}); make its environment with: {SETUP}")
    return done.stdout.strip()


def _environment(upstream_key: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(CLEARED)}
    env = parent_env(env)
    env["OPENAI_API_KEY"] = upstream_key
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as reply:  # noqa: S310 - loopback
            return bool(reply.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def _tail(log: Path, lines: int = 5) -> str:
    text = log.read_text(encoding="utf-8", errors="replace") if log.exists() else ""
    return " | ".join(text.strip().splitlines()[-lines:]) or "no output"


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@contextlib.contextmanager
def optillm_proxy(
    python: str, upstream: str, *, best_of_n: int = 3, start_timeout: float = START_TIMEOUT_S
) -> Iterator[OptillmProxy]:
    """optillm's proxy on 127.0.0.1 in front of the OpenAI-compatible server at `upstream` (its `/v1` URL).

    Args:
        python: the interpreter of optillm's environment (`.venv-optillm/bin/python`).
        upstream: the `/v1` URL every call of the proxy goes to.
        best_of_n: the samples its `bon` technique draws (`--best-of-n`).
        start_timeout: seconds the proxy may take to answer `/health`.

    Yields:
        The running proxy; it is stopped when the block ends.

    Raises:
        OptillmUnavailable: `python` has no optillm, or the proxy exited or did not answer in time.
    """
    if best_of_n < 1:
        raise ValueError(f"best_of_n must be at least 1, got {best_of_n}")
    version = optillm_version(python)
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="optillm-") as home:
        log = Path(home) / "optillm.log"
        command = [python, "-c", ENTRY, "--base-url", upstream, "--port", str(port), "--host", "127.0.0.1"]
        command += ["--best-of-n", str(best_of_n)]
        with log.open("wb") as out:
            # cwd: an empty directory, so no local `optillm/plugins` is loaded
            process = subprocess.Popen(  # noqa: S603 - the interpreter the user named
                command, cwd=home, env=_environment("x"), stdout=out, stderr=subprocess.STDOUT
            )
        try:
            deadline = time.monotonic() + start_timeout
            while not _answers(f"http://127.0.0.1:{port}/health"):
                if process.poll() is not None:
                    raise OptillmUnavailable(
                        f"optillm's proxy exited with code {process.returncode}: {_tail(log)}"
                    )
                if time.monotonic() > deadline:
                    raise OptillmUnavailable(
                        f"optillm's proxy did not answer in {start_timeout:g} s: {_tail(log)}"
                    )
                time.sleep(0.1)  # polled: the loop ends as soon as it answers
            yield OptillmProxy(url=f"http://127.0.0.1:{port}/v1", version=version, log=log)
        finally:
            _stop(process)
