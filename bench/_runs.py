"""Resumable benchmark runs: per-record results on disk, and the package's model calls cached by what they are.

- `Results`: one JSON line per (run key, problem, variant), appended, flushed and synced as soon as it is known,
  so a run can be killed and resumed (`run_key` names a model and its settings);
- `Calls` and `cached_model`: the package's free-text calls on an `EmbeddedChatModel`, keyed by the GGUF, the
  messages and the sampling settings, replayed with their token counts when made before (a call shared by two
  variants, or made before a kill, is never made twice);
- `SERVED` and `VERIFY_EVERY`: a plain greedy call a bench already made with llama-cpp-python alone (its raw
  baseline), served as the package's first draft, which is the same call (tests/models/test_embedded.py checks
  it byte for byte on Qwen); the benches make it for real on every `VERIFY_EVERY`-th problem and count how often
  it gives raw's reply;
- `LOAD_LIMIT`, `loaded` and `to_make`: a record (or a call) measured at a 1-minute load average above the limit
  is flagged, and `--rerun-loaded` makes it again; its model calls are then never replayed from a call made
  under load, or from one whose load is not known (`Calls.max_load`).
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from pathlib import Path
from typing import Any

from _raw import append_jsonl, load_average, read_jsonl

__all__ = [
    "CUT_REASONS",
    "LOAD_LIMIT",
    "SERVED",
    "VERIFY_EVERY",
    "Calls",
    "Results",
    "built_on_other_raw",
    "cached_model",
    "loaded",
    "run_key",
    "serve_raw",
    "to_make",
]

LOAD_LIMIT = 3.0
"""Records measured at a 1-minute load average above this are flagged (figures from them are not reported);
`--rerun-loaded` makes them again."""


def loaded(record: dict[str, Any], limit: float = LOAD_LIMIT) -> bool:
    """Whether `record` (a result, or a cached call) was measured at a 1-minute load above `limit`."""
    return max(record.get("load") or [0.0]) > limit


def to_make(done: dict[str, Any] | None, rerun_loaded: bool) -> bool:
    """Whether a record is made: none yet, or (`--rerun-loaded`) the one there was measured above `LOAD_LIMIT`."""
    return done is None or (rerun_loaded and loaded(done))


def built_on_other_raw(
    variant: str, record: dict[str, Any] | None, raw_text: str | None, samples_needed: bool
) -> bool:
    """Whether `variant`'s `record` was built on a raw reply other than `raw_text` (a raw record made again can
    differ): the samples, drawn or not by another verdict on raw (`samples_needed` is the verdict now); a graph
    whose first draft was served from another raw reply. A graph whose first draft was made for real does not
    depend on raw (the report compares it with the raw it shows)."""
    if record is None or raw_text is None:
        return False
    if variant == "samples":
        return bool(record.get("drawn")) != samples_needed
    return (
        bool(record.get("first_served")) and "first" in record and record["first"].strip() != raw_text.strip()
    )


class Calls:
    """Model calls already made, by GGUF, messages and sampling settings, on disk (JSON Lines, appended)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lock = threading.Lock()
        self.calls: dict[str, dict[str, Any]] = {}
        self.hits = self.misses = 0
        self.replay_only = False
        """Refuse a call not in the file (`explain` replays a run, it never calls the model)."""
        self.max_load: float | None = None
        """Replay only calls made at or below this 1-minute load (`--rerun-loaded`): one made above it, or one
        whose load was not recorded (made before calls carried it), is made again and replaces it."""
        for entry in read_jsonl(path):
            self.calls[entry["key"]] = entry["call"]

    def get(self, key: str) -> dict[str, Any] | None:
        with self.lock:
            call = self.calls.get(key)
            if (
                call is not None
                and self.max_load is not None
                and (not call.get("load") or loaded(call, self.max_load))
            ):
                call = None
            self.hits += call is not None
            self.misses += call is None
            return call

    def put(self, key: str, call: dict[str, Any]) -> None:
        with self.lock:
            self.calls[key] = call
            append_jsonl(self.path, {"key": key, "call": call})


SERVED: dict[str, tuple[str, list[int], str]] = {}
"""Raw's reply, its [prompt, completion] token counts and its finish reason by task, served once as the loop's first draft (the same
greedy call) where the run does not make it again for real (`VERIFY_EVERY`); an entry still here after a run was
not served (the draft was made)."""

CUT_REASONS = ("length", "repetition")
"""The finish reasons of a package reply that did not finish: its limit, or a loop the embedded model stopped."""


def serve_raw(task: str, reply: str, usage: list[int], cut: bool, tokenize: Any) -> bool:
    """Serve raw's `reply` to `task` as the loop's first draft (`SERVED`), unless the package would not have
    written it: a reply cut at its limit, or one whose tokens (`tokenize(text) -> ids`) hold a loop the embedded
    model stops (`reflection_graph.models._repetition`), is made for real. Whether it was served."""
    from reflection_graph.models._repetition import RepetitionDetector

    if cut or RepetitionDetector().extend(tokenize(reply)) is not None:
        return False
    SERVED[task] = (reply, usage, "stop")
    return True


VERIFY_EVERY = 5
"""The loop's first draft is made for real on every problem whose number (HumanEval) or position in the run's
order (IFBench) is a multiple of this, and compared with raw's; on the others it is raw's reply, served: the
package's first draft is the same call (tests/models/test_embedded.py checks that byte for byte)."""


def cached_model(base: Any, calls: Calls, gguf_sha: str, **update: Any) -> Any:
    """`base` (an `EmbeddedChatModel`) with `update` applied, whose free-text calls are served from `calls` when
    the very same call (GGUF, messages, sampling settings) was made before, and recorded when not."""
    from langchain_core.messages import AIMessage
    from langchain_core.outputs import ChatGeneration, ChatResult

    cls = type(base)

    class CachedModel(cls):  # type: ignore[misc,valid-type]
        def _generate(
            self, messages: list[Any], stop: Any = None, run_manager: Any = None, **kwargs: Any
        ) -> ChatResult:
            if kwargs.get("json_schema") is not None or kwargs.get("logprobs") or "top_logprobs" in kwargs:
                return super()._generate(messages, stop, run_manager, **kwargs)
            shown = [[m.type, m.text] for m in messages]
            settings = self._sampling(stop, kwargs)
            if kwargs.get("stop_repetition", getattr(self, "stop_repetition", False)):
                settings["stop_repetition"] = True  # a call made with the stop is not one made without it
            plain = len(messages) == 1 and messages[0].type == "human" and settings["temperature"] == 0.0
            served = SERVED.pop(messages[0].text, None) if plain else None
            if served is not None:  # the plain greedy call raw already made
                text, (n_in, n_out), finish = served
                usage = {"input_tokens": n_in, "output_tokens": n_out, "total_tokens": n_in + n_out}
                meta = {"served": True, "finish_reason": finish}  # a reply raw cut at the limit is served cut
                message = AIMessage(content=text.strip(), usage_metadata=usage, response_metadata=meta)
                return ChatResult(generations=[ChatGeneration(message=message)])
            key = hashlib.sha256(json.dumps([gguf_sha, shown, settings], sort_keys=True).encode()).hexdigest()
            call = calls.get(key)
            if call is None and calls.replay_only:
                raise LookupError("a model call that the run did not make (replay only)")
            if call is None:
                start, load_before = time.monotonic(), load_average()
                result = super()._generate(messages, stop, run_manager, **kwargs)
                message = result.generations[0].message
                call = {
                    "text": message.text,
                    "usage": dict(message.usage_metadata or {}),
                    "meta": dict(message.response_metadata or {}),
                    "seconds": round(time.monotonic() - start, 2),
                    "load": [load_before, load_average()],
                }
                calls.put(key, call)
            message = AIMessage(
                content=call["text"], usage_metadata=call["usage"], response_metadata=call["meta"]
            )
            return ChatResult(generations=[ChatGeneration(message=message)])

    fields = {name: getattr(base, name) for name in cls.model_fields}
    return CachedModel(**{**fields, **update})


# ------------------------------------------------------------------------------------------ the results file


BASELINE_VARIANTS = ("raw", "samples", "tree", "revising")
"""What a run may take from a baseline run (`Results.baseline`): the variants its loop settings do not change, and
the baseline's own loop under the name `revising`."""


class Results:
    """Per-problem results in a JSON Lines file: one record per (run key, problem, variant), appended, flushed
    and synced as soon as it is known; a line cut by a kill is skipped when read back."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.records: dict[tuple[str, str, str], dict[str, Any]] = {}
        for record in read_jsonl(path):
            self.records[(record["run"], record["task_id"], record["variant"])] = record

    baseline: str | None = None
    """An earlier run whose records stand in for the variants that do not depend on the loop's settings
    (`BASELINE_VARIANTS`: raw, the samples and the tree), when this run has none; its loop is `revising`."""

    def get(self, run: str, task_id: str, variant: str) -> dict[str, Any] | None:
        found = self.records.get((run, task_id, variant))
        if found is None and self.baseline is not None and variant in BASELINE_VARIANTS:
            found = self.records.get((self.baseline, task_id, "loop" if variant == "revising" else variant))
        return found

    def put(self, record: dict[str, Any]) -> None:
        self.records[(record["run"], record["task_id"], record["variant"])] = record
        append_jsonl(self.path, record)


def run_key(identity: dict[str, Any]) -> str:
    """A short key for a model and its settings (what a cached record is valid for)."""
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:16]
