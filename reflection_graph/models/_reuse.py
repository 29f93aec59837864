"""Prefix reuse on the embedded model: a prompt is evaluated in phases fixed by its own content, and the context
state at the end of each phase is kept, so a later call that starts with the same phases loads it instead of
evaluating those tokens again.

Why phases. llama.cpp's logits depend slightly on how a prompt is split into batches (its quantized matrix
products sum in another order), so a call that reused whatever prefix happened to be cached would give figures
that depend on what ran before. Here every call evaluates its prompt in the same phases whether or not a state is
cached, and the state after each phase is always the *loaded* copy of the saved bytes (a phase computed now is
saved and loaded back before the next one). So a cached and an uncached call compute the very same thing: a
score, a greedy reply, depend only on the call's inputs.

Where the phases end (`prefixes`), from the call's own messages only:

- **turns**: the rendered conversation before each assistant message, i.e. the prompt that message answered (a
  revision, `[task, previous answer, review]`, starts with its first draft's prompt);
- **sections**: a message built like the package's judge prompts (`prompts.CHAT_VERDICT_PROMPT`,
  `CHAT_PREFERENCE_PROMPT`, `CHAT_CRITIQUE_PROMPT`: it starts with a `Task:` line) ends a phase before each
  `Answer:` / `Answer A:` / `Answer B:` line and before its closing paragraph, so the verdict and the written
  critique of one answer share the task and the answer, and every reading of a run shares the task.

A call with neither (a first draft: the task as the user wrote it) is one phase from an empty cache, exactly what
llama-cpp-python's own `create_completion` evaluates; its prompt's state is kept (`keep_end`) for the revisions
that start with it.

Memory: a state is the KV cache of its tokens, about 28 KB per token for Qwen2.5-Coder-1.5B (f16, 28 layers, 2 KV
heads of 128) and 18 KB per token for Gemma 3 270M: 6-12 MB for the README job's prompts. At most `MAX_STATES`
states are kept per loaded model, least recently used first out, within the model's `prefix_cache_mb`.
"""

from __future__ import annotations

import hashlib
import re
from array import array
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import BaseMessage

__all__ = [
    "MAX_STATES",
    "LlamaStateIO",
    "Plan",
    "PrefixStates",
    "evaluate",
    "plan",
    "section_offsets",
    "token_bounds",
]

MAX_STATES = 16
"""Saved states kept per loaded model (each also counts against the model's `prefix_cache_mb`)."""

_SECTIONED = "Task:\n"
_SECTION = re.compile(r"\n(?=Answer(?: [A-Z])?:\n)")


@dataclass(frozen=True)
class Plan:
    """How a call's prompt is evaluated: where its phases end, as texts its rendered prompt starts with.

    Attributes:
        prefixes: rendered texts the prompt starts with; a phase ends at each one's last token.
        keep_end: keep the state of the whole prompt too (a first turn, which later turns start with).
        lookup: generate with prompt-lookup decoding (`models._lookup`).
        revision: the call continues a conversation holding an earlier answer (what `lookup=None` turns it on for).
        stop_repetition: stop a free-text reply that repeats itself (`models._repetition`).
        requested_copies: the copies of one span the prompt asks for (`_repetition.requested_copies`), which the
            repetition stop lets through.
    """

    prefixes: tuple[str, ...] = ()
    keep_end: bool = False
    lookup: bool = False
    revision: bool = False
    stop_repetition: bool = False
    requested_copies: int = 1


def section_offsets(text: str) -> list[int]:
    """Where the phases inside one message end: before each `Answer...:` line and before the closing paragraph,
    for a message that starts with a `Task:` line (the package's judge prompts); none for any other message."""
    if not text.startswith(_SECTIONED):
        return []
    offsets = [m.end() for m in _SECTION.finditer(text)]
    closing = text.rfind("\n\n")
    if closing >= 0 and (not offsets or closing + 2 > offsets[-1]):
        offsets.append(closing + 2)
    return sorted({o for o in offsets if 0 < o < len(text)})


def plan(
    messages: Sequence[BaseMessage],
    prompt: str,
    render: Callable[[list[BaseMessage]], str],
    *,
    chat: bool,
    generation: bool,
    lookup: bool | None = None,
) -> Plan:
    """The plan of a call on `messages`, whose rendered prompt is `prompt` (`render` renders any messages).

    Args:
        chat: the model is prompted through a chat template (only then is a first turn's state kept).
        generation: the call generates text (a reading's whole prompt is never kept).
        lookup: prompt-lookup decoding: True or False, or None for the default, on for a call that continues a
            conversation holding an earlier answer (a revision), which it mostly copies.
    """
    prefixes: list[str] = []
    answers = [k for k, m in enumerate(messages) if k and m.type == "ai"]
    for k in answers:
        head = render(list(messages[:k]))
        if prompt.startswith(head):
            prefixes.append(head)
    if messages and messages[-1].type == "human" and messages[-1].text:
        content = messages[-1].text
        at = prompt.rfind(content)
        if at >= 0:
            prefixes += [prompt[: at + offset] for offset in section_offsets(content)]
    keep_end = chat and generation and not prefixes and bool(messages) and messages[-1].type == "human"
    return Plan(
        prefixes=tuple(prefixes),
        keep_end=keep_end,
        lookup=generation and (bool(answers) if lookup is None else lookup),
        revision=bool(answers),
    )


def _common(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def token_bounds(
    prefixes: Sequence[str], ids: Sequence[int], tokenize: Callable[[str], list[int]]
) -> tuple[int, ...]:
    """The token positions where the phases of `ids` end: for each prefix text, the length of its tokens' common
    prefix with `ids` (a token merged across the boundary ends the phase a token earlier), inside `ids` only."""
    bounds = {_common(tokenize(text), ids) for text in prefixes}
    return tuple(sorted(b for b in bounds if 0 < b < len(ids)))


class PrefixStates:
    """Saved context states of one loaded model, by the phases that computed them; least recently used out first.

    A key names every phase boundary up to the state and every token before it, so a state is only ever loaded
    by a call that would have computed the very same phases.
    """

    def __init__(self, max_states: int = MAX_STATES) -> None:
        if max_states < 0:
            raise ValueError(f"max_states must be >= 0, got {max_states}")
        self.max_states = max_states
        self._states: OrderedDict[bytes, Any] = OrderedDict()
        self.hits = 0
        self.misses = 0
        self.restored_tokens = 0

    def __len__(self) -> int:
        return len(self._states)

    @property
    def nbytes(self) -> int:
        """Bytes held by the saved states."""
        return sum(int(s.nbytes) for s in self._states.values())

    def lookup(self, keys: Sequence[bytes]) -> tuple[int, Any]:
        """The deepest saved state among `keys` (phase order) as (its index, the state), or (-1, None)."""
        for index in range(len(keys) - 1, -1, -1):
            state = self._states.get(keys[index])
            if state is not None:
                self._states.move_to_end(keys[index])
                self.hits += 1
                return index, state
        if keys:
            self.misses += 1
        return -1, None

    def put(self, key: bytes, state: Any, max_bytes: int) -> None:
        """Keep `state` under `key`, then drop the least recently used ones beyond `max_states` and `max_bytes`
        (a state larger than `max_bytes` on its own is not kept)."""
        if max_bytes <= 0 or self.max_states == 0 or int(state.nbytes) > max_bytes:
            return
        self._states[key] = state
        self._states.move_to_end(key)
        total = self.nbytes
        while self._states and (len(self._states) > self.max_states or total > max_bytes):
            _, dropped = self._states.popitem(last=False)
            total -= int(dropped.nbytes)

    def clear(self) -> None:
        """Drop every saved state (the counters stay)."""
        self._states.clear()


def phase_key(ids: Sequence[int], bounds: Sequence[int]) -> bytes:
    """The key of the state after the phases ending at `bounds` (the last one is the state's length)."""
    digest = hashlib.blake2b(digest_size=20)
    digest.update(array("i", bounds).tobytes())
    digest.update(b"|")
    digest.update(array("i", ids[: bounds[-1]]).tobytes())
    return digest.digest()


class _SavedState:
    """One llama.cpp sequence state (its KV cache), as llama.cpp serializes it."""

    __slots__ = ("buffer", "nbytes")

    def __init__(self, buffer: Any, nbytes: int) -> None:
        self.buffer = buffer
        self.nbytes = nbytes


class LlamaStateIO:
    """Save and load the KV cache of sequence 0 of a `llama_cpp.Llama` (llama.cpp's `llama_state_seq_*`).

    `Llama.save_state()` is not used: it also copies llama-cpp-python's logits buffer, up to `n_batch` rows of
    the whole vocabulary (311 MB for Qwen's 151,936 tokens), where the KV cache of a 200-token prefix is 6 MB.
    """

    def save(self, llama: Any) -> _SavedState:
        import llama_cpp

        ctx = llama.ctx
        size = int(llama_cpp.llama_state_seq_get_size(ctx, 0))
        buffer = (llama_cpp.ctypes.c_uint8 * size)()
        written = int(llama_cpp.llama_state_seq_get_data(ctx, buffer, size, 0))
        if written <= 0 or written > size:
            raise RuntimeError("llama.cpp could not save the prompt state")
        return _SavedState(buffer, written)

    def load(self, llama: Any, state: _SavedState, ids: Sequence[int]) -> None:
        import llama_cpp

        read = int(llama_cpp.llama_state_seq_set_data(llama.ctx, state.buffer, state.nbytes, 0))
        if read != state.nbytes:
            raise RuntimeError("llama.cpp could not load a saved prompt state")
        llama.input_ids[: len(ids)] = ids
        llama.n_tokens = len(ids)
        llama._requires_eval = True  # as after `Llama.load_state`: sample only after evaluating more tokens


def evaluate(
    llama: Any,
    ids: Sequence[int],
    bounds: Sequence[int],
    states: PrefixStates,
    max_bytes: int,
    *,
    keep_end: bool = False,
    io: Any = None,
) -> int:
    """Evaluate `ids` in phases ending at `bounds` (sorted, inside `ids`) and at its end; returns how many tokens
    were evaluated (the rest came from a saved state).

    The state after each boundary is loaded from `states` when saved there, else evaluated, saved and loaded back,
    so both ways leave the context with the same bytes. `max_bytes` 0 keeps nothing (the phases are the same).
    Afterwards the context holds `ids` with the last token's logits live, as after `Llama.eval(ids)`.
    """
    io = io or LlamaStateIO()
    keys = [phase_key(ids, bounds[: i + 1]) for i in range(len(bounds))]
    index, state = states.lookup(keys) if max_bytes > 0 else (-1, None)
    if state is not None:
        io.load(llama, state, ids[: bounds[index]])
        states.restored_tokens += bounds[index]
        start = bounds[index]
    else:
        llama.reset()
        start = 0
    for i in range(index + 1, len(bounds)):
        llama.eval(list(ids[start : bounds[i]]))
        saved = io.save(llama)
        io.load(llama, saved, ids[: bounds[i]])
        states.put(keys[i], saved, max_bytes)
        start = bounds[i]
    llama.eval(list(ids[start:]))
    if keep_end and max_bytes > 0:
        states.put(phase_key(ids, (*bounds, len(ids))), io.save(llama), max_bytes)
    return len(ids) - (bounds[index] if state is not None else 0)
