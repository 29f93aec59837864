"""Importing the package loads no module it does not use at once: every process that imports it (the CLI, a
batch worker, `langgraph dev`, each child process the tests start) pays for what it loads. openai (about 0.8 s
here) is loaded by the OpenAI-compatible client when one is made; sqlite-vec and numpy (about 0.5 s) by the SQLite
store when one is made."""

from __future__ import annotations

import json
import subprocess
import sys

LOADED_LATER = ("openai", "numpy", "sqlite_vec", "llama_cpp", "langchain_openai")


def test_importing_the_package_loads_none_of_the_heavy_optional_parts() -> None:
    code = (
        "import json, sys\nimport reflection_graph\n"
        f"print(json.dumps([m for m in {LOADED_LATER!r} if m in sys.modules]))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(done.stdout) == []


def test_a_transient_error_of_openai_is_still_read_as_one_once_openai_is_loaded() -> None:
    import httpx
    import openai

    from reflection_graph._runtime._errors import is_transient

    request = httpx.Request("POST", "http://127.0.0.1/v1/chat/completions")
    assert is_transient(openai.APITimeoutError(request=request))
    assert is_transient(openai.APIConnectionError(request=request))
    assert is_transient(httpx.ConnectTimeout("slow", request=request))
    assert not is_transient(ValueError("bad"))
