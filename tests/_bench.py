"""A bench/ script imported by a test: the folder is on `sys.path` only while the test runs; and a fake of the
embedded model under Qwen's profile, for the benches' call caches."""

from __future__ import annotations

import contextlib
import importlib
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parents[1] / "bench"

SHORT_IFBENCH_ROW: dict[str, Any] = {
    "key": "7",
    "prompt": "In one sentence, say what the wind does. Use the word whisper at least twice.",
    "instruction_id_list": ["keywords:frequency"],
    "kwargs": [{"keyword": "whisper", "frequency": 2, "relation": "at least", "letter": None}],
}
"""One prompt in IFBench's form (its checker, its scorer) whose replies are a sentence, for the real-model tests
of the benches, whose claim is the wiring and the accounting, not an answer's length."""


@contextlib.contextmanager
def bench_module(name: str) -> Iterator[Any]:
    """The module `bench/<name>.py`, imported with bench/ first on `sys.path` (removed again after)."""
    sys.path.insert(0, str(BENCH))
    try:
        yield importlib.import_module(name)
    finally:
        sys.path.remove(str(BENCH))


def bench_import(name: str) -> Any:
    """The module `bench/<name>.py` (a benchmark set a test reads, say), kept in `sys.modules` once imported."""
    with bench_module(name) as module:
        return module


def fake_qwen(
    reply: Callable[[dict[str, Any], list[Any]], str], tokens: tuple[int, int], **fields: Any
) -> Any:
    """The embedded model with Qwen's profile (its settings, prompt format and call keys) and no GGUF loaded: each
    call's reply is `reply(<the call's sampling settings>, <its messages>)`, with `tokens` (input, output) as its
    usage."""
    from langchain_core.messages import AIMessage
    from langchain_core.outputs import ChatGeneration, ChatResult

    from reflection_graph.models.embedded import EmbeddedChatModel

    class FakeQwen(EmbeddedChatModel):
        def _loaded(self) -> Any:
            raise AssertionError("no GGUF is loaded in this test")

        def _generate(
            self, messages: list[Any], stop: Any = None, run_manager: Any = None, **kwargs: Any
        ) -> ChatResult:
            text = reply(self._sampling(stop, kwargs), messages)
            usage = {"input_tokens": tokens[0], "output_tokens": tokens[1], "total_tokens": sum(tokens)}
            message = AIMessage(
                content=text, usage_metadata=usage, response_metadata={"finish_reason": "stop"}
            )
            return ChatResult(generations=[ChatGeneration(message=message)])

    return FakeQwen(model="qwen2.5-coder-1.5b", **fields)
