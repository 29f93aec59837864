"""Token and time accounting per role.

The package's own model calls are counted where they are made: `reflection_graph._calls` records every attempt
(and its reply's `AIMessage.usage_metadata`) in the `Meter` of the current context (`metering()`). A critic that
calls models itself, outside that layer (a user's own critic), is measured with the `UsageCounter` callback
instead (`track_usage`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypedDict
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage
from langchain_core.outputs import ChatGeneration, LLMResult

__all__ = [
    "Meter",
    "RoleUsage",
    "UsageCounter",
    "add_role_usage",
    "current_meter",
    "empty_usage",
    "message_usage",
    "metering",
    "run_usage",
    "sum_usage",
    "track_usage",
]


class RoleUsage(TypedDict):
    """Tokens (from `usage_metadata`), model calls and wall seconds of one role, one round or a whole run."""

    input_tokens: int
    output_tokens: int
    total_tokens: int
    calls: int
    seconds: float


def empty_usage() -> RoleUsage:
    return {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0, "calls": 0, "seconds": 0.0}


def add_role_usage(left: RoleUsage | None, right: RoleUsage | None) -> RoleUsage:
    a: Any = left or _ZERO
    b: Any = right or _ZERO
    return {
        "input_tokens": int(a.get("input_tokens", 0)) + int(b.get("input_tokens", 0)),
        "output_tokens": int(a.get("output_tokens", 0)) + int(b.get("output_tokens", 0)),
        "total_tokens": int(a.get("total_tokens", 0)) + int(b.get("total_tokens", 0)),
        "calls": int(a.get("calls", 0)) + int(b.get("calls", 0)),
        "seconds": round(float(a.get("seconds", 0.0)) + float(b.get("seconds", 0.0)), 6),
    }


_ZERO: RoleUsage = empty_usage()


def sum_usage(parts: Iterator[RoleUsage] | list[RoleUsage]) -> RoleUsage:
    """The sum of `parts` (an empty usage for none)."""
    out = empty_usage()
    for part in parts:
        out = add_role_usage(out, part)
    return out


def message_usage(result: Any) -> Any:
    """The `usage_metadata` of a reply: an `AIMessage`, or a structured-output result holding it as `raw`."""
    if isinstance(result, dict):
        result = result.get("raw")
    return result.usage_metadata if isinstance(result, AIMessage) else None


class Meter:
    """Model calls and tokens of one step, recorded by the call layer (`record`), plus its wall seconds."""

    __slots__ = ("_lock", "usage")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.usage = empty_usage()

    def record(self, result: Any) -> None:
        """One model call (an attempt) that returned `result` (None when it raised)."""
        meta = message_usage(result)
        with self._lock:
            self.usage["calls"] += 1
            if meta:
                self.usage["input_tokens"] += int(meta.get("input_tokens", 0))
                self.usage["output_tokens"] += int(meta.get("output_tokens", 0))
                self.usage["total_tokens"] += int(meta.get("total_tokens", 0))


_METER: ContextVar[Meter | None] = ContextVar("reflection_graph_meter", default=None)


def current_meter() -> Meter | None:
    """The meter the call layer records into (None outside `metering`)."""
    return _METER.get()


@contextmanager
def metering(meter: Meter | None = None) -> Iterator[Meter]:
    """Record this block's model calls in `meter` (a new one by default); wall seconds are added when it ends."""
    meter = meter or Meter()
    token = _METER.set(meter)
    start = time.perf_counter()
    try:
        yield meter
    finally:
        _METER.reset(token)
        meter.usage["seconds"] = round(meter.usage["seconds"] + time.perf_counter() - start, 6)


def run_usage(state: Mapping[str, Any]) -> dict[str, RoleUsage]:
    """A run's usage per role and in total, from its state: every round (`trajectory`), the candidates still
    waiting for a critique (`rg_pending`) and a failed step (`rg_spent`)."""
    parts: list[Mapping[str, RoleUsage]] = [r["usage"] for r in state.get("trajectory") or []]
    pending = state.get("rg_pending")
    if pending and pending["iteration"] > int(state.get("iterations") or 0):
        parts += [s.get("usage") or {} for s in pending["samples"]]
    parts.append(state.get("rg_spent") or {})
    totals = {role: empty_usage() for role in ("generate", "critique", "revise")}
    for part in parts:
        for role, value in part.items():
            if role != "total":
                totals[role] = add_role_usage(totals.get(role), value)
    return {**totals, "total": sum_usage(list(totals.values()))}


class UsageCounter(BaseCallbackHandler):
    """Counts chat-model calls and sums `usage_metadata` of every reply, whatever the model's name."""

    run_inline = True  # cheap and thread-safe: no executor hop per event under ainvoke
    ignore_chain = True  # only model events matter; skipping chain events keeps the handler cheap
    ignore_retriever = True
    ignore_agent = True

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()
        self.usage = empty_usage()

    def on_chat_model_start(
        self, serialized: dict[str, Any], messages: list[list[Any]], **kwargs: Any
    ) -> None:
        with self._lock:
            self.usage["calls"] += 1

    def on_llm_start(self, serialized: dict[str, Any], prompts: list[str], **kwargs: Any) -> None:
        with self._lock:
            self.usage["calls"] += 1

    def on_llm_end(self, response: LLMResult, *, run_id: UUID, **kwargs: Any) -> None:
        for generations in response.generations:
            for generation in generations:
                if not isinstance(generation, ChatGeneration):
                    continue
                message = generation.message
                meta = message.usage_metadata if isinstance(message, AIMessage) else None
                if not meta:
                    continue
                with self._lock:
                    self.usage["input_tokens"] += int(meta.get("input_tokens", 0))
                    self.usage["output_tokens"] += int(meta.get("output_tokens", 0))
                    self.usage["total_tokens"] += int(meta.get("total_tokens", 0))


@contextmanager
def track_usage() -> Iterator[UsageCounter]:
    """Yield a counter to pass in `config["callbacks"]`; wall seconds are added when the block ends."""
    counter = UsageCounter()
    start = time.perf_counter()
    try:
        yield counter
    finally:
        counter.usage["seconds"] = round(time.perf_counter() - start, 6)
