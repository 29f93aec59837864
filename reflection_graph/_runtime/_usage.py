"""Token and time accounting per role.

The package's own model calls are counted where they are made: `reflection_graph._runtime._calls` records
every attempt (and its reply's `AIMessage.usage_metadata`) in the `Meter` of the current context
(`metering()`). A critic that calls models itself, outside that layer (a user's own critic), is measured with
the `UsageCounter` callback instead (`track_usage`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypedDict, cast
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage
from langchain_core.outputs import ChatGeneration, LLMResult
from typing_extensions import NotRequired

from reflection_graph._runtime._estimate import estimate_usage, reported_usage, text_tokens

__all__ = [
    "Meter",
    "RoleUsage",
    "UsageCounter",
    "add_role_usage",
    "call_usage",
    "current_meter",
    "empty_usage",
    "merge_usage",
    "message_usage",
    "metering",
    "reported_tokens",
    "run_usage",
    "sum_usage",
    "track_usage",
    "with_total",
]


class RoleUsage(TypedDict):
    """Tokens (from `usage_metadata`, else estimated), model calls and wall seconds of one role, one round or a
    whole run. `estimated_tokens`, present only when some are, says how many of `total_tokens` are an estimate
    (calls of models that report no usage; reflection_graph/_runtime/_estimate.py)."""

    input_tokens: int
    output_tokens: int
    total_tokens: int
    calls: int
    seconds: float
    estimated_tokens: NotRequired[int]


def empty_usage() -> RoleUsage:
    return {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0, "calls": 0, "seconds": 0.0}


def add_role_usage(left: RoleUsage | None, right: RoleUsage | None) -> RoleUsage:
    """`left` plus `right` (None counts as nothing)."""
    return sum_usage([part for part in (left, right) if part])


def sum_usage(parts: Iterable[Mapping[str, Any]]) -> RoleUsage:
    """The sum of `parts` (an empty usage for none), in one pass: read for every step of every run."""
    inputs = outputs = totals = calls = estimated = 0
    seconds = 0.0
    for part in parts:
        inputs += int(part.get("input_tokens", 0))
        outputs += int(part.get("output_tokens", 0))
        totals += int(part.get("total_tokens", 0))
        calls += int(part.get("calls", 0))
        seconds += float(part.get("seconds", 0.0))
        estimated += int(part.get("estimated_tokens", 0))
    out: RoleUsage = {
        "input_tokens": inputs,
        "output_tokens": outputs,
        "total_tokens": totals,
        "calls": calls,
        "seconds": round(seconds, 6),
    }
    if estimated:
        out["estimated_tokens"] = estimated
    return out


def _per_role(parts: Iterable[Mapping[str, RoleUsage]], roles: Iterable[str] = ()) -> dict[str, RoleUsage]:
    """`parts` (each usage per role) summed per role, `roles` present even when no part has them."""
    grouped: dict[str, list[RoleUsage]] = {role: [] for role in roles}
    for part in parts:
        for role, value in part.items():
            if role != "total":
                grouped.setdefault(role, []).append(value or {})
    return {role: sum_usage(values) for role, values in grouped.items()}


def message_usage(result: Any) -> Any:
    """The `usage_metadata` of a reply: an `AIMessage`, or a structured-output result holding it as `raw`."""
    return reported_usage(result)


def _count(meta: Mapping[str, Any], key: str) -> int:
    value = meta.get(key)
    if type(value) is int:  # the common case, read for every call
        return value if value > 0 else 0
    try:
        return max(int(value or 0), 0)
    except (TypeError, ValueError, OverflowError):  # not a count (None, text, NaN, infinity): nothing
        return 0


def reported_tokens(meta: Mapping[str, Any] | None) -> dict[str, int] | None:
    """The tokens a reply's `usage_metadata` reports, never fewer than it adds up to: a count that is missing,
    negative or not a number is 0, and `total_tokens` is at least `input_tokens + output_tokens` (a total of 0 or
    -1 beside thousands of tokens in and out is not believed). None when it reports no token at all: such a call
    is counted by the estimate, as one that reports nothing."""
    if not meta:
        return None
    tokens = {key: _count(meta, key) for key in ("input_tokens", "output_tokens", "total_tokens")}
    tokens["total_tokens"] = max(tokens["total_tokens"], tokens["input_tokens"] + tokens["output_tokens"])
    return tokens if tokens["total_tokens"] else None


def call_usage(runnable: Any, value: Any, result: Any) -> dict[str, int]:
    """The tokens of one call of `runnable` on `value` that returned `result` (None: it raised, and counts no
    tokens): those its reply reports (`reported_tokens`), else the estimate (with `estimated_tokens`)."""
    if result is None:
        return {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}
    return reported_tokens(reported_usage(result)) or estimate_usage(runnable, value, result)


def _as_usage(tokens: Mapping[str, int], *, calls: int) -> RoleUsage:
    return cast(RoleUsage, {**tokens, "calls": calls, "seconds": 0.0})


class Meter:
    """Model calls and tokens of one step, recorded by the call layer (`record`), plus its wall seconds."""

    __slots__ = ("_lock", "usage")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.usage = empty_usage()

    def record(self, tokens: Mapping[str, int]) -> None:
        """One model call (an attempt) that used `tokens` (`call_usage`)."""
        with self._lock:
            usage: Any = self.usage
            usage["calls"] += 1
            for key, value in tokens.items():
                if value:
                    usage[key] = usage.get(key, 0) + int(value)


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
    totals = _per_role(parts, ("generate", "critique", "revise"))
    return {**totals, "total": sum_usage(totals.values())}


class UsageCounter(BaseCallbackHandler):
    """Counts chat-model calls and sums `usage_metadata` of every reply (`reported_tokens`), whatever the
    model's name; a reply without usage is counted by the character estimate of its prompt and text
    (reflection_graph/_runtime/_estimate.py), marked in `estimated_tokens`."""

    run_inline = True  # cheap and thread-safe: no executor hop per event under ainvoke
    ignore_chain = True  # only model events matter; skipping chain events keeps the handler cheap
    ignore_retriever = True
    ignore_agent = True

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()
        self._prompts: dict[UUID, int] = {}
        self.usage = empty_usage()

    def on_chat_model_start(
        self, serialized: dict[str, Any], messages: list[list[Any]], *, run_id: UUID, **kwargs: Any
    ) -> None:
        text = "\n".join(getattr(m, "text", str(m)) for batch in messages for m in batch)
        with self._lock:
            self.usage["calls"] += 1
            self._prompts[run_id] = text_tokens(None, text)

    def on_llm_start(
        self, serialized: dict[str, Any], prompts: list[str], *, run_id: UUID, **kwargs: Any
    ) -> None:
        with self._lock:
            self.usage["calls"] += 1
            self._prompts[run_id] = text_tokens(None, "\n".join(prompts))

    def on_llm_end(self, response: LLMResult, *, run_id: UUID, **kwargs: Any) -> None:
        reported = {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}
        found, reply = False, 0
        for generations in response.generations:
            for generation in generations:
                message = generation.message if isinstance(generation, ChatGeneration) else None
                meta = message.usage_metadata if isinstance(message, AIMessage) else None
                tokens = reported_tokens(cast(Any, meta))
                if tokens:
                    found = True
                    for key in reported:
                        reported[key] += tokens[key]
                reply += text_tokens(None, generation.text)
        with self._lock:
            prompt = self._prompts.pop(run_id, 0)
            if not found:
                total = prompt + reply
                reported = {"input_tokens": prompt, "output_tokens": reply, "total_tokens": total}
                reported["estimated_tokens"] = total
            self.usage = add_role_usage(self.usage, _as_usage(reported, calls=0))

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        with self._lock:
            self._prompts.pop(run_id, None)


@contextmanager
def track_usage() -> Iterator[UsageCounter]:
    """Yield a counter to pass in `config["callbacks"]`; wall seconds are added when the block ends."""
    counter = UsageCounter()
    start = time.perf_counter()
    try:
        yield counter
    finally:
        counter.usage["seconds"] = round(time.perf_counter() - start, 6)


def with_total(usage: Mapping[str, RoleUsage]) -> dict[str, RoleUsage]:
    """`usage` per role with its `total` (re)computed from the roles."""
    roles = {role: value for role, value in usage.items() if role != "total"}
    return {**roles, "total": sum_usage(roles.values())}


def merge_usage(
    parts: Iterator[Mapping[str, RoleUsage]] | list[Mapping[str, RoleUsage]],
) -> dict[str, RoleUsage]:
    """The usage of several parts (each per role), summed per role, with its `total`."""
    merged = _per_role(parts)
    return {**merged, "total": sum_usage(merged.values())}
