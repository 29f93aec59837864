"""A record of every llama.cpp call the embedded model makes, so a benchmark can replay the very same calls.

`recording(model)` collects, while active, one `CallRecord` per completion and per reading (next-token or
continuation log-probabilities) on that model's loaded GGUF: its tokens, its sampling arguments and grammar, how
many prompt tokens it evaluated itself (the rest came from a saved prefix state) and its seconds.
`bench/bench_embedded.py` replays them through llama-cpp-python alone, with no reuse, for the run's floor.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

__all__ = ["CallRecord", "recording"]


@dataclass
class CallRecord:
    """One llama.cpp call of the embedded model.

    Attributes:
        kind: `"completion"` (`Llama.create_completion`), `"next_token"` or `"continuation"` (a reading).
        prompt: what `create_completion` was given (token ids through a chat template, else the text).
        ids: the prompt's tokens.
        args: `create_completion`'s sampling arguments (seed, temperature, stop, max_tokens, ...), and the
            `RepetitionStop` that watched it as its `stopping_criteria` (a replay stops where the call stopped).
        grammar: the `LlamaGrammar` of a JSON reply, or None.
        targets: a continuation reading's scored tokens (they are evaluated too).
        evaluated: prompt tokens the call evaluated itself (the rest were loaded from a saved state).
        prompt_s: seconds spent on the prompt; `generate_s` on the completion after it.
        completion_tokens: tokens generated.
        text: the completion's raw text.
        lookup: generated with prompt-lookup decoding; `steps` its decodes of generated tokens.
        revision: the call continued a conversation holding an earlier answer (a revision, with or without lookup).
    """

    kind: str
    prompt: str | list[int]
    ids: list[int]
    args: dict[str, Any] = field(default_factory=dict)
    grammar: Any = None
    targets: list[int] = field(default_factory=list)
    evaluated: int = 0
    prompt_s: float = 0.0
    generate_s: float = 0.0
    completion_tokens: int = 0
    text: str = ""
    lookup: bool = False
    steps: int = 0
    revision: bool = False


def add(loaded: Any, record: CallRecord) -> None:
    """Append `record` to the loaded model's active recording, if any."""
    records = getattr(loaded, "recorder", None)
    if records is not None:
        records.append(record)


@contextlib.contextmanager
def recording(model: Any) -> Iterator[list[CallRecord]]:
    """Record every call on `model`'s loaded GGUF (an `EmbeddedChatModel`) while the block runs.

    Example:
        ```python
        with recording(model) as calls:
            graph.invoke({"task": "..."})
        print(len(calls), sum(c.completion_tokens for c in calls))
        ```
    """
    loaded = model._loaded()
    records: list[CallRecord] = []
    previous, loaded.recorder = loaded.recorder, records
    try:
        yield records
    finally:
        loaded.recorder = previous
