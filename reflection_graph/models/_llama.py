"""llama.cpp for the embedded model: importing it, loading a GGUF once per process.

The bundled GGUF files are found (and verified) by `_bundled`.

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
from dataclasses import dataclass, field
from typing import Any

from reflection_graph.models._bundled import INSTALL_HINT
from reflection_graph.models._reuse import PrefixStates

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


def usable_cpus() -> int:
    """The CPUs this process may run on: its affinity (`taskset`, a container's cpuset) where the OS reports
    one, else every CPU of the machine."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def default_threads() -> int:
    """Every CPU this process may use on a small machine (up to 4), half of them on a larger one (its physical
    cores, as llama-cpp-python's own default assumes). On this project's idle 2-core machine the README job took
    57 s on 2 threads against 86 s on 1, the same replies (docs/models.md)."""
    usable = usable_cpus()
    return usable if usable <= 4 else usable // 2


def thread_counts(n_threads: int | None) -> tuple[int, int]:
    """The threads llama.cpp generates with and the threads it evaluates a prompt with (its batch threads).

    Args:
        n_threads: the user's setting, for both; None: `default_threads` to generate and every usable CPU
            (`usable_cpus`) to evaluate a prompt, which is compute-bound. llama-cpp-python's own default for the
            second is every CPU of the machine, whatever the process's affinity.
    """
    if n_threads is not None:
        return n_threads, n_threads
    return default_threads(), usable_cpus()


@dataclass
class _Loaded:
    llama: Any
    lock: threading.Lock
    formatter: Any = None
    """The GGUF's own chat template (`tokenizer.chat_template`) as llama-cpp-python's `Jinja2ChatFormatter`, or
    None when its metadata has none."""
    end_of_turn: str = ""
    """The text of the end-of-turn (EOS) token the chat template closes a reply with."""
    states: PrefixStates = field(default_factory=PrefixStates)
    """Saved prompt-prefix states (`_reuse`), used under `lock`."""
    recorder: list[Any] | None = None
    """The active `_record.recording`'s list of call records, or None."""


def _chat_formatter(llama: Any) -> tuple[Any, str]:
    """The formatter llama-cpp-python itself builds from a GGUF's chat template (see `Llama.__init__`), and the
    text of its EOS token; (None, "") for a file without a template."""
    template = llama.metadata.get("tokenizer.chat_template")
    if not template:
        return None, ""
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    eos_id, bos_id = llama.token_eos(), llama.token_bos()
    eos = llama._model.token_get_text(eos_id) if eos_id != -1 else ""
    bos = llama._model.token_get_text(bos_id) if bos_id != -1 else ""
    formatter = Jinja2ChatFormatter(template=template, eos_token=eos, bos_token=bos, stop_token_ids=[eos_id])
    return formatter, eos


_LOADED: dict[tuple[str, int, int, int], _Loaded] = {}
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


def has_chat_template(path: str) -> bool:
    """Whether a GGUF's metadata holds a chat template, read without loading its weights (a model already loaded
    in this process answers from its metadata). A file llama.cpp cannot read counts as without one: loading it
    fails later with llama.cpp's own error."""
    real = os.path.realpath(path)
    with _LOAD_LOCK:
        for (where, *_), loaded in _LOADED.items():
            if where == real:
                return loaded.formatter is not None
    return _template_in(real)


@functools.lru_cache(maxsize=16)
def _template_in(path: str) -> bool:
    llama_cpp = _import_llama_cpp()
    try:
        with llama_load_guard(llama_cpp):
            vocab = llama_cpp.Llama(model_path=path, vocab_only=True, verbose=False)
    except (ValueError, RuntimeError, OSError):
        return False
    try:
        return bool(vocab.metadata.get("tokenizer.chat_template"))
    finally:
        vocab.close()


def _load(path: str, n_ctx: int, n_threads: int | None) -> _Loaded:
    """Load a GGUF once per process per (path, n_ctx, thread counts); calls on it are serialized by `lock`.

    Args:
        path: the GGUF file.
        n_ctx: the context window in tokens.
        n_threads: the threads to generate and to evaluate prompts with; None: `thread_counts`' defaults.
    """
    threads, batch_threads = thread_counts(n_threads)
    key = (os.path.realpath(path), n_ctx, threads, batch_threads)
    with _LOAD_LOCK:
        loaded = _LOADED.get(key)
        if loaded is None:
            llama_cpp = _import_llama_cpp()
            with llama_load_guard(llama_cpp):
                llama = llama_cpp.Llama(
                    model_path=path,
                    n_ctx=n_ctx,
                    n_threads=threads,
                    n_threads_batch=batch_threads,
                    n_batch=512,
                    seed=0,
                    verbose=False,
                )
            formatter, end_of_turn = _chat_formatter(llama)
            loaded = _Loaded(llama=llama, lock=threading.Lock(), formatter=formatter, end_of_turn=end_of_turn)
            _LOADED[key] = loaded
        return loaded
