"""Reflexion memory across runs: lessons drawn from critiques, kept in a LangGraph `BaseStore`.

After a run, `ReflexionMemory.lessons_from_critiques` turns the run's critiques into a few short lessons (no
model call) and `save` stores them keyed to the task text. Before the first draft of a later run, `search` returns
the lessons of *similar* earlier tasks, and `format_lessons` renders them for the `{lessons}` placeholder of
`GENERATE_PROMPT`.

Similarity is offline and needs no model: the Jaccard similarity of the two tasks' term sets, see `task_tokens`
and `jaccard`. Terms are Unicode-aware: NFKC-normalized, case-folded words ("café" stays "café"; English words
lose one suffix), and character bigrams for scripts written without spaces (Chinese, Japanese, Thai, ...). A task
keeps at most `MAX_TASK_TERMS` (64) terms, its most frequent, so a 10,000-word task costs a bounded number of
store operations to save and to search (a few times a short task; see `bench/bench_memory.py`). It stays fast
with 100,000 stored entries because a query never scans the store: every entry is also posted under each of its
terms in an inverted index kept as ordinary store items, and a query reads only the postings of a few of its own
terms. The items, under `namespace`:

- `(*namespace, "entries")`, key = digest of the task: `{"task", "lessons", "tokens", "seq", "saved_at"}`.
- `(*namespace, "index", "bNNNN")`, key = `WORD:ENTRY`: `{"t": WORD, "e": ENTRY, "w": the entry's words}`, one
  posting (it carries the entry's words, so similarity is computed without reading the entry); words are hashed into 1024 bucket namespaces and read with `store.search(bucket, filter={"t": WORD})`,
  so the number of namespaces stays bounded whatever the vocabulary (InMemoryStore walks all namespaces on every
  search; SQLite and Postgres use their prefix index).
- `(*namespace, "df")`, key = WORD: `{"n": entries holding the word}` (only used to read the rarest words first;
  a count off by a concurrent writer costs speed, never results).
- `(*namespace, "order")`, key = zero-padded sequence number: `{"key": entry key}` (save order, for eviction).
- `(*namespace, "meta")`, key `"state"`: `{"next_seq", "evicted_upto"}`.

Search returns exactly what a full scan would (same lessons, same order; a test checks this against a brute-force
scan): an entry D with Jaccard(Q, D) >= t shares at least ceil(t*|Q|) words with the query Q, so it holds one of
any |Q| - ceil(t*|Q|) + 1 words of Q (prefix filtering), and reading the rarest ones first keeps the postings
short. The bar t then rises to the similarity of the entry that completes `top_k` lessons, which lowers how many
words must be read (an adaptive top-k filter): a query with a near-duplicate earlier task reads two posting lists.
The one approximation: a word is read for at most 50,000 postings (it only matters when every word the query
must read is that common).

With `index=True` (a store created with an embedding `index` config that embeds the `task` field) the store's own
semantic search is used instead, `store.search(namespace, query=task)`, and `similarity_threshold` applies to the
score the store returns.

The same code drives every backend through `BaseStore.batch` / `abatch`: `InMemoryStore`, `SqliteStore` (persists
across processes) and `PostgresStore`. Stores without an async API (`SqliteStore`) run their sync `batch` in a
worker thread from the async methods.

Concurrency: a save reads the counters and the task's entry, then writes them back, so saves (and `clear`) on one
store run one at a time: threads and the coroutines of any number of event loops share one lock per store (per
database file for `SqliteStore`), and on a `SqliteStore` file an exclusive `flock` on `<file>.reflexion-lock`
also orders saves from other processes (POSIX only; on Windows, within one process). Concurrent saves therefore
keep `max_entries` and every lesson. Saves to one PostgresStore from several *processes* are not ordered, so
those races remain possible there. Searches take no lock.

Text is stored surrogate-safe: a lone UTF-16 surrogate (valid JSON `"\\ud800"`, but not encodable as UTF-8, so
SQLite and Postgres refuse it) is replaced by U+FFFD in the stored task and lessons, and in the task that keys the
entry; an escaped surrogate pair becomes the character it encodes.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import math
import os
import re
import sqlite3
import threading
import unicodedata
import weakref
from collections import Counter
from collections.abc import AsyncIterator, Generator, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, TypeVar

from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)
from pydantic import ValidationError

from reflection_graph.critique import Critique, parse_critique

__all__ = [
    "DEFAULT_NAMESPACE",
    "LESSONS_HEADER",
    "MAX_TASK_TERMS",
    "Lesson",
    "ReflexionMemory",
    "format_lessons",
    "jaccard",
    "task_tokens",
]

DEFAULT_NAMESPACE: tuple[str, ...] = ("reflection_graph", "lessons")
LESSONS_HEADER = "Lessons from earlier similar tasks:"

MAX_TASK_TERMS = 64  # most distinct terms per task (indexed per entry, and read per query)
_MAX_LESSON_CHARS = 160
_MAX_LESSONS_PER_RUN = 5
_MAX_LESSONS_PER_ENTRY = 8
_POSTINGS_LIMIT = (
    50_000  # postings read per word at most (such a common word is rarely among the rarest of Q)
)
_ROUND_POSTINGS = 256  # postings (by word count) read together in one round trip when the words are rare
_LOAD_CHUNK = 256  # most entries read per round, best similarity first (rounds start small and double)
_INDEX_BUCKETS = 1024  # posting namespaces; fixed for the life of a store (changing it needs clear())
_PAGE = 1_000
_CHUNK = 500  # tasks handled per write round in save_many

_STOP_WORDS = frozenset(
    """a about above after again against all am an and any are as at be been before being below between both but by
    can could did do does doing down during each few for from further had has have having he her here hers him his
    how i if in into is it its itself just me more most my no nor not now of off on once only or other our ours out
    over own same she should so some such than that the their theirs them then there these they this those through
    to too under until up very was we were what when where which while who whom why will with would you your yours
    please using use via make given""".split()
)
_WORD = re.compile(r"[^\W_]+")  # runs of Unicode letters and digits
# Scripts written without spaces between words (Thai, Lao, Myanmar, Khmer, Hangul, kana, CJK ideographs): a run of
# them is indexed as overlapping character bigrams, so "丁寧なメール" and "メールを丁寧に" share terms.
_NO_SPACE = (
    "\u0e00-\u0eff\u1000-\u109f\u1100-\u11ff\u1780-\u17ff\u3005-\u3007\u3040-\u30ff\u3130-\u318f"
    "\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\U00020000-\U0003134f"
)
_SCRIPT_RUN = re.compile(f"([{_NO_SPACE}]+)|([^{_NO_SPACE}]+)")
_SURROGATE = re.compile("[\ud800-\udfff]")

T = TypeVar("T")
_Plan = Generator[list[Op], list[Result], T]


def _stem(word: str) -> str:
    """Strip one common English suffix so that 'declining', 'declined' and 'decline' share a stem."""
    for suffix in ("ing", "ed", "es", "s", "e"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            if suffix == "s" and word.endswith("ss"):
                return word
            return word[: -len(suffix)]
    return word


def _clean_text(text: str) -> str:
    """`text` safe to store in any backend: a lone surrogate (valid JSON "\\ud800", not encodable as UTF-8)
    becomes U+FFFD; an escaped surrogate *pair* becomes the character it encodes."""
    if not _SURROGATE.search(text):
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def _normalize(text: str) -> str:
    return unicodedata.normalize("NFKC", _clean_text(text)).casefold()


def _terms(text: str) -> list[str]:
    """All terms of `text` in order, repeats included (see `task_tokens`)."""
    terms: list[str] = []
    for word in _WORD.findall(_normalize(text)):
        for no_space, spaced in _SCRIPT_RUN.findall(word):
            if no_space:
                pairs = [no_space[i : i + 2] for i in range(len(no_space) - 1)]
                terms.extend(pairs or [no_space])
            elif len(spaced) > 1 and spaced not in _STOP_WORDS:
                terms.append(_stem(spaced) if spaced.isascii() else spaced)
    return terms


def task_tokens(text: str) -> frozenset[str]:
    """Return the normalized term set used for task similarity.

    The text is NFKC-normalized and case-folded ("ＣＡＦÉ" and "café" agree). Words are runs of Unicode letters
    and digits; stop words and one-letter words are dropped, and English (ASCII) words lose one common suffix
    (`ing`, `ed`, `es`, `s`, `e`); other words are kept as they are ("café" stays "café"). Scripts written
    without spaces (Chinese, Japanese, Korean, Thai, ...) give overlapping character bigrams instead of words.
    A lone surrogate counts as U+FFFD (no word). At most `MAX_TASK_TERMS` terms are kept: the most frequent
    ones, earliest first among equals, so a 10,000-word task costs no more store operations than a paragraph.

    Args:
        text: Any text, usually a task.

    Returns:
        The set of terms (empty for text without content words).
    """
    counts = Counter(_terms(text))
    if len(counts) <= MAX_TASK_TERMS:
        return frozenset(counts)
    return frozenset(term for term, _ in counts.most_common(MAX_TASK_TERMS))  # ties: first seen first


def jaccard(a: frozenset[str] | set[str], b: frozenset[str] | set[str]) -> float:
    """Return |a & b| / |a | b| (0.0 when both are empty)."""
    if not a or not b:
        return 0.0
    inter = len(a & b)
    return inter / (len(a) + len(b) - inter)


def _task_key(task: str) -> str:
    normalized = " ".join(_clean_text(task).lower().split())
    return hashlib.sha256(normalized.encode("utf-8")).hexdigest()[:32]


def _lesson_key(text: str) -> str:
    return " ".join(_WORD.findall(_normalize(text)))


def _shorten(text: str, limit: int = _MAX_LESSON_CHARS) -> str:
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[: limit - 3].rsplit(" ", 1)[0].rstrip(",;:")
    return cut + "..."


@dataclass(frozen=True)
class Lesson:
    """One lesson returned by `ReflexionMemory.search`.

    Attributes:
        text: The lesson, one short sentence.
        task: The earlier task it was learned on.
        similarity: How similar that task is to the query (Jaccard of word sets, or the store's semantic score
            when the memory uses `index=True`).
        key: The key of the stored entry it comes from.
        saved_at: ISO timestamp of the save that stored it.
    """

    text: str
    task: str
    similarity: float
    key: str
    saved_at: str = ""

    def __str__(self) -> str:
        return self.text


def format_lessons(lessons: Sequence[Lesson | str]) -> str:
    """Render lessons as a short block for the `{lessons}` placeholder of `GENERATE_PROMPT`.

    Args:
        lessons: Lessons from `ReflexionMemory.search`, or plain strings.

    Returns:
        `""` when there are none, else `"Lessons from earlier similar tasks:\\n- ...\\n- ...\\n"`.
    """
    lines = [f"- {_shorten(str(lesson))}" for lesson in lessons if str(lesson).strip()]
    if not lines:
        return ""
    return LESSONS_HEADER + "\n" + "\n".join(lines) + "\n"


def _as_critique(critique: Critique | Mapping[str, Any]) -> Critique:
    if isinstance(critique, Critique):
        return critique
    if isinstance(critique, Mapping):
        try:
            return Critique.model_validate(dict(critique))
        except ValidationError:
            return parse_critique(dict(critique))
    raise TypeError(
        f"critiques must be Critique objects or dicts (Critique.model_dump()), got {type(critique).__name__}"
    )


def _validate_namespace(namespace: Any) -> tuple[str, ...]:
    if isinstance(namespace, str) or not isinstance(namespace, (tuple, list)) or not namespace:
        raise ValueError(
            f"namespace must be a non-empty tuple of strings such as {DEFAULT_NAMESPACE!r}, got {namespace!r}"
        )
    labels = tuple(namespace)
    for label in labels:
        if (
            not isinstance(label, str)
            or not label
            or "." in label
            or "\x00" in label
            or _SURROGATE.search(label)
        ):
            raise ValueError(
                f"namespace labels must be non-empty strings without '.' (or NUL or lone surrogates), "
                f"got {label!r} in {labels!r}; use e.g. {DEFAULT_NAMESPACE!r}"
            )
    if labels[0] == "langgraph":
        raise ValueError(f"namespace may not start with 'langgraph' (reserved by LangGraph), got {labels!r}")
    return labels


class ReflexionMemory:
    """Lessons learned from critiques, saved per task and read back for similar tasks.

    Args:
        store: The store to keep lessons in. `None` means the graph hands over its runtime store
            (`runtime.store`) on every call through the `store=` argument. When both exist, this one wins.
        namespace: Namespace prefix under which all memory items live.
        max_entries: Most tasks kept; saving beyond it evicts the entries saved least recently. Saving the same
            task again merges its lessons into the existing entry and makes it the newest.
        similarity_threshold: Least similarity (0..1) an earlier task needs for its lessons to be returned.
        top_k: Most lessons `search` returns.
        index: Use the store's embedding index (`store.search(namespace, query=task)`) instead of the lexical
            inverted index. The store must be created with an `index` config; its `fields` should include
            `"task"` (entries are embedded on their `task` field).

    Raises:
        ValueError: An argument is out of range, or `index=True` with a store that has no index config.

    Example:
        ```python
        from langgraph.store.memory import InMemoryStore

        memory = ReflexionMemory(InMemoryStore())
        memory.save("Write a polite email declining a job offer", ["Thank the recruiter by name."])
        memory.search("Write a polite email declining an offer for a job")[0].text
        # 'Thank the recruiter by name.'
        ```
    """

    def __init__(
        self,
        store: BaseStore | None = None,
        *,
        namespace: tuple[str, ...] = DEFAULT_NAMESPACE,
        max_entries: int = 1000,
        similarity_threshold: float = 0.25,
        top_k: int = 3,
        index: bool = False,
    ) -> None:
        if store is not None and not isinstance(store, BaseStore):
            raise ValueError(
                f"store must be a langgraph BaseStore (InMemoryStore, SqliteStore, PostgresStore) or None, "
                f"got {type(store).__name__}"
            )
        if isinstance(max_entries, bool) or not isinstance(max_entries, int) or max_entries < 1:
            raise ValueError(f"max_entries must be an int >= 1, got {max_entries!r}")
        if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
            raise ValueError(f"top_k must be an int >= 1, got {top_k!r}")
        if (
            isinstance(similarity_threshold, bool)
            or not isinstance(similarity_threshold, (int, float))
            or not 0.0 <= float(similarity_threshold) <= 1.0
        ):
            raise ValueError(f"similarity_threshold must be a number in [0, 1], got {similarity_threshold!r}")
        self.store = store
        self.namespace = _validate_namespace(namespace)
        self.max_entries = max_entries
        self.similarity_threshold = float(similarity_threshold)
        self.top_k = top_k
        self.index = bool(index)
        if self.index and store is not None:
            self._check_index(store)

    def __repr__(self) -> str:
        return (
            f"ReflexionMemory(store={type(self.store).__name__ if self.store else None}, "
            f"namespace={self.namespace!r}, max_entries={self.max_entries}, "
            f"similarity_threshold={self.similarity_threshold}, top_k={self.top_k}, index={self.index})"
        )

    # ------------------------------------------------------------------ helpers

    @property
    def _entries_ns(self) -> tuple[str, ...]:
        return (*self.namespace, "entries")

    @property
    def _df_ns(self) -> tuple[str, ...]:
        return (*self.namespace, "df")

    @property
    def _order_ns(self) -> tuple[str, ...]:
        return (*self.namespace, "order")

    @property
    def _meta_ns(self) -> tuple[str, ...]:
        return (*self.namespace, "meta")

    @property
    def _chunk_size(self) -> int:
        # A chunk never holds more than max_entries tasks, so eviction only ever hits entries saved before it.
        return min(_CHUNK, self.max_entries)

    def _posting_ns(self, token: str) -> tuple[str, ...]:
        bucket = int.from_bytes(hashlib.blake2b(token.encode("utf-8"), digest_size=4).digest(), "big")
        return (*self.namespace, "index", f"b{bucket % _INDEX_BUCKETS:04d}")

    def _posting_search(self, token: str) -> SearchOp:
        return SearchOp(self._posting_ns(token), filter={"t": token}, limit=_POSTINGS_LIMIT)

    @staticmethod
    def _check_index(store: BaseStore) -> None:
        if hasattr(store, "index_config") and not getattr(store, "index_config", None):
            raise ValueError(
                "index=True needs a store created with an embedding index, e.g. "
                "InMemoryStore(index={'dims': ..., 'embed': ..., 'fields': ['task']}); "
                "or use index=False for the offline lexical index"
            )

    def _resolve_store(self, store: BaseStore | None) -> BaseStore:
        chosen = self.store if self.store is not None else store
        if chosen is None:
            raise ValueError(
                "ReflexionMemory has no store: pass one to ReflexionMemory(store) or call with store=..., "
                "or compile the graph with create_reflection_graph(..., store=InMemoryStore())"
            )
        if not isinstance(chosen, BaseStore):
            raise ValueError(f"store must be a langgraph BaseStore, got {type(chosen).__name__}")
        if self.index and chosen is not self.store:
            self._check_index(chosen)
        return chosen

    # ------------------------------------------------------------------ lessons

    @staticmethod
    def lessons_from_critiques(
        task: str, critiques: Iterable[Critique | Mapping[str, Any]], *, limit: int = _MAX_LESSONS_PER_RUN
    ) -> list[str]:
        """Draw short lessons from the critiques of one run, deterministically and without a model call.

        Rounds are read in order (the first draft's critique is the closest to what a fresh draft will face);
        within a round, suggestions come first (they are actionable), then issues as "Avoid: ...". An
        unacceptable critique without either contributes its feedback. Unparsed critiques (raw text kept as
        feedback) are skipped. Near-duplicates are dropped and each lesson is cut to 160 characters.

        Args:
            task: The task of the run (kept for symmetry with `save`; lessons do not repeat it).
            critiques: The run's critiques, as `Critique` objects or dicts (`Critique.model_dump()`, or mappings
                with alias keys that `parse_critique` accepts).
            limit: Most lessons returned.

        Returns:
            Up to `limit` lesson strings, possibly none (for a run accepted at once without remarks).
        """
        del task
        candidates: list[str] = []
        for raw in critiques:
            critique = _as_critique(raw)
            if not critique.parsed:
                continue
            candidates.extend(critique.suggestions)
            issues = [*critique.issues, *(f.message for f in critique.findings)]
            candidates.extend(f"Avoid: {issue.strip().rstrip('.')}." for issue in issues if issue.strip())
            if not critique.suggestions and not issues and not critique.is_acceptable and critique.feedback:
                candidates.append(critique.feedback)
        lessons: list[str] = []
        kept_words: list[frozenset[str]] = []
        for text in candidates:
            text = _shorten(_clean_text(text))
            words = frozenset(_lesson_key(text.removeprefix("Avoid: ")).split())
            if len(text) < 3 or not words:
                continue
            if any(jaccard(words, other) >= 0.8 for other in kept_words):
                continue
            lessons.append(text)
            kept_words.append(words)
            if len(lessons) >= limit:
                break
        return lessons

    @staticmethod
    def format_lessons(lessons: Sequence[Lesson | str]) -> str:
        """Render lessons for the generate prompt; see the module-level `format_lessons`."""
        return format_lessons(lessons)

    # ------------------------------------------------------------------ public sync / async API

    def save(self, task: str, lessons: Sequence[str], *, store: BaseStore | None = None) -> None:
        """Store `lessons` for `task`, evicting the oldest entries beyond `max_entries`.

        Args:
            task: The task text the lessons were learned on.
            lessons: Lesson strings (empty ones are ignored; nothing is stored when none remain).
            store: Store to use when the memory was created without one (the graph passes `runtime.store`).

        Raises:
            ValueError: No store, or `task` is not a string.
        """
        self.save_many([(task, lessons)], store=store)

    async def asave(self, task: str, lessons: Sequence[str], *, store: BaseStore | None = None) -> None:
        """Async `save`."""
        await self.asave_many([(task, lessons)], store=store)

    def save_many(
        self, records: Iterable[tuple[str, Sequence[str]]], *, store: BaseStore | None = None
    ) -> None:
        """Store many `(task, lessons)` pairs with few store round trips (bulk import, benchmarks).

        Args:
            records: `(task, lessons)` pairs, saved in order (later ones are newer).
            store: Store to use when the memory was created without one.
        """
        resolved = self._resolve_store(store)
        lock = _save_lock(resolved)
        for chunk in _chunks(self._clean_records(records), self._chunk_size):
            with lock.hold():
                _run_sync(resolved, self._save_plan(chunk))

    async def asave_many(
        self, records: Iterable[tuple[str, Sequence[str]]], *, store: BaseStore | None = None
    ) -> None:
        """Async `save_many`."""
        resolved = self._resolve_store(store)
        lock = _save_lock(resolved)
        for chunk in _chunks(self._clean_records(records), self._chunk_size):
            async with lock.ahold():
                await _run_async(resolved, self._save_plan(chunk))

    def search(self, task: str, *, store: BaseStore | None = None) -> list[Lesson]:
        """Return lessons from earlier tasks similar to `task`, best first, at most `top_k`.

        Args:
            task: The new task.
            store: Store to use when the memory was created without one (the graph passes `runtime.store`).

        Returns:
            Lessons from tasks with similarity >= `similarity_threshold`, most similar task first (newer entries
            first among equals), duplicates removed.
        """
        return _run_sync(self._resolve_store(store), self._search_plan(_check_task(task)))

    async def asearch(self, task: str, *, store: BaseStore | None = None) -> list[Lesson]:
        """Async `search`."""
        return await _run_async(self._resolve_store(store), self._search_plan(_check_task(task)))

    def clear(self, *, store: BaseStore | None = None) -> int:
        """Delete every item under the memory's namespace (entries, index, counters).

        Returns:
            How many items were deleted.
        """
        resolved = self._resolve_store(store)
        with _save_lock(resolved).hold():
            return _run_sync(resolved, self._clear_plan())

    async def aclear(self, *, store: BaseStore | None = None) -> int:
        """Async `clear`."""
        resolved = self._resolve_store(store)
        async with _save_lock(resolved).ahold():
            return await _run_async(resolved, self._clear_plan())

    def count(self, *, store: BaseStore | None = None) -> int:
        """Return how many task entries are stored (reads the entries namespace; meant for tests and tools)."""
        return _run_sync(self._resolve_store(store), self._count_plan())

    # ------------------------------------------------------------------ plans (store-agnostic generators)

    @staticmethod
    def _clean_records(records: Iterable[tuple[str, Sequence[str]]]) -> Iterable[tuple[str, list[str]]]:
        for task, lessons in records:
            _check_task(task)
            if isinstance(lessons, str):
                raise ValueError("lessons must be a list of strings, not one string; wrap it: [lesson]")
            cleaned = [_shorten(_clean_text(str(lesson))) for lesson in lessons if str(lesson).strip()]
            if cleaned:
                yield _clean_text(task), cleaned

    def _save_plan(self, records: list[tuple[str, list[str]]]) -> _Plan[None]:
        now = datetime.now(timezone.utc).isoformat()
        # Merge records of the same task inside the chunk; the last save of a task decides its order.
        merged: dict[str, tuple[str, list[str]]] = {}
        for task, lessons in records:
            key = _task_key(task)
            if key in merged:
                lessons = _merge_lessons(lessons, merged.pop(key)[1])
            merged[key] = (task, lessons)
        keys = list(merged)
        results = yield [GetOp(self._meta_ns, "state"), *(GetOp(self._entries_ns, k) for k in keys)]
        meta_item = results[0]
        meta = dict(meta_item.value) if isinstance(meta_item, Item) else {}
        seq = int(meta.get("next_seq", 0))
        evicted_upto = int(meta.get("evicted_upto", 0))
        existing: dict[str, Item] = {
            k: r for k, r in zip(keys, results[1:], strict=True) if isinstance(r, Item)
        }

        puts: list[Op] = []
        df_delta: dict[str, int] = {}
        saved_seq: dict[str, int] = {}
        for key in keys:
            task, lessons = merged[key]
            old = existing.get(key)
            old_lessons = list(old.value.get("lessons", [])) if old is not None else []
            tokens = sorted(task_tokens(task))
            value = {
                "task": task,
                "lessons": _merge_lessons(lessons, old_lessons)[:_MAX_LESSONS_PER_ENTRY],
                "tokens": tokens,
                "seq": seq,
                "saved_at": now,
            }
            puts.append(PutOp(self._entries_ns, key, value, index=["task"] if self.index else False))
            puts.append(PutOp(self._order_ns, f"{seq:012d}", {"key": key}, index=False))
            saved_seq[key] = seq
            seq += 1
            if old is None and not self.index:
                for token in tokens:
                    posting = {"t": token, "e": key, "w": " ".join(tokens)}
                    puts.append(PutOp(self._posting_ns(token), f"{token}:{key}", posting, index=False))
                    df_delta[token] = df_delta.get(token, 0) + 1

        # Evict the least recently saved entries beyond max_entries (stale order slots just disappear).
        evict_end = seq - self.max_entries
        if evict_end > evicted_upto:
            slot_keys = [f"{s:012d}" for s in range(evicted_upto, evict_end)]
            slots: list[Result] = []
            for part in _chunks(slot_keys, _PAGE):
                slots.extend((yield [GetOp(self._order_ns, k) for k in part]))
            victims: dict[str, int] = {}
            for slot_key, slot in zip(slot_keys, slots, strict=True):
                puts.append(PutOp(self._order_ns, slot_key, None))
                if isinstance(slot, Item) and slot.value.get("key") not in saved_seq:
                    victims[str(slot.value["key"])] = int(slot_key)
            victim_keys = list(victims)
            entries: list[Result] = []
            for part in _chunks(victim_keys, _PAGE):
                entries.extend((yield [GetOp(self._entries_ns, k) for k in part]))
            for victim, entry in zip(victim_keys, entries, strict=True):
                if not isinstance(entry, Item) or int(entry.value.get("seq", -1)) != victims[victim]:
                    continue  # already gone, or saved again later (a newer slot owns it)
                puts.append(PutOp(self._entries_ns, victim, None))
                for token in entry.value.get("tokens", []):
                    puts.append(PutOp(self._posting_ns(token), f"{token}:{victim}", None))
                    df_delta[token] = df_delta.get(token, 0) - 1
            evicted_upto = evict_end

        if df_delta:
            tokens = sorted(df_delta)
            counts: list[Result] = []
            for part in _chunks(tokens, _PAGE):
                counts.extend((yield [GetOp(self._df_ns, t) for t in part]))
            for token, item in zip(tokens, counts, strict=True):
                current = int(item.value.get("n", 0)) if isinstance(item, Item) else 0
                new = current + df_delta[token]
                puts.append(
                    PutOp(self._df_ns, token, {"n": new}, index=False)
                    if new > 0
                    else PutOp(self._df_ns, token, None)
                )
        puts.append(
            PutOp(self._meta_ns, "state", {"next_seq": seq, "evicted_upto": evicted_upto}, index=False)
        )
        yield puts

    def _search_plan(self, task: str) -> _Plan[list[Lesson]]:
        if self.index:
            return (yield from self._semantic_search_plan(task))
        query = task_tokens(task)
        if not query:
            return []
        size_q = len(query)
        ordered = sorted(query)
        counts = yield [GetOp(self._df_ns, t) for t in ordered]
        df = {
            t: (int(c.value.get("n", 0)) if isinstance(c, Item) else 0)
            for t, c in zip(ordered, counts, strict=True)
        }
        rare_first = sorted(ordered, key=lambda t: (df[t], t))

        def words_needed(bar: float) -> int:
            # Prefix filter: an entry with Jaccard >= bar shares >= ceil(bar*|Q|) words with Q, so it holds one of
            # any |Q| - ceil(bar*|Q|) + 1 words of Q; the rarest ones have the shortest postings.
            return size_q - max(1, math.ceil(bar * size_q - 1e-9)) + 1

        bar = (
            self.similarity_threshold
        )  # rises to the similarity that completes top_k lessons (adaptive filter)
        floor = self.similarity_threshold - 1e-12
        fetched = 0
        similarity: dict[str, float] = {}  # exact, from the word list each posting carries
        loaded: dict[str, Item | None] = {}
        load_chunk = max(self.top_k, 8)
        while True:
            ranked = sorted(
                ((sim, key) for key, sim in similarity.items() if sim > 0 and sim >= floor),
                key=lambda c: (-c[0], c[1]),
            )
            # Load the best entries (their lessons) until they hold top_k distinct lessons; that entry's
            # similarity is the new bar. Entries tied with it are loaded too, since a newer one ranks first.
            todo: list[str] = []
            lessons_seen: set[str] = set()
            new_bar = None
            for sim, key in ranked:
                if new_bar is not None and sim < new_bar:
                    break
                if key not in loaded:
                    todo.append(key)
                    if len(todo) >= load_chunk:
                        break
                    continue
                entry = loaded[key]
                if entry is not None and new_bar is None and not todo:
                    lessons_seen.update(_lesson_key(str(t)) for t in entry.value.get("lessons", []))
                    if len(lessons_seen) >= self.top_k:
                        new_bar = sim
            if todo:
                entries = yield [GetOp(self._entries_ns, key) for key in todo]
                for key, result in zip(todo, entries, strict=True):
                    loaded[key] = result if isinstance(result, Item) else None  # None: evicted meanwhile
                load_chunk = min(2 * load_chunk, _LOAD_CHUNK)
                continue
            if new_bar is not None:
                bar = max(bar, new_bar)
            needed = words_needed(bar)
            if fetched >= needed:
                break
            # The bar often rises after the rarest words, so read one at a time; past the first 8 (only a long
            # query gets there), take words with short postings together, up to _ROUND_POSTINGS per round trip.
            step = 2 if fetched == 0 else 1
            budget = sum(df[t] for t in rare_first[fetched : fetched + step])
            while (
                (fetched >= 8 or size_q > 16)
                and fetched + step < needed
                and budget + df[rare_first[fetched + step]] <= _ROUND_POSTINGS
            ):
                budget += df[rare_first[fetched + step]]
                step += 1
            words = rare_first[fetched : fetched + step]
            postings = yield [self._posting_search(t) for t in words]
            fetched += len(words)
            for word, result in zip(words, postings, strict=True):
                for item in _search_items(result):
                    entry_key = item.value.get("e")
                    if (
                        item.value.get("t") == word
                        and isinstance(entry_key, str)
                        and entry_key not in similarity
                    ):
                        similarity[entry_key] = jaccard(
                            query, frozenset(str(item.value.get("w", "")).split())
                        )
        scored = [
            (similarity[key], entry)
            for key, entry in loaded.items()
            if entry is not None and similarity[key] > 0 and similarity[key] >= floor
        ]
        return self._pick(scored)

    def _semantic_search_plan(self, task: str) -> _Plan[list[Lesson]]:
        query = _clean_text(task)
        results = yield [SearchOp(self._entries_ns, query=query, limit=max(4 * self.top_k, 10))]
        scored: list[tuple[float, Item]] = []
        for item in _search_items(results[0]):
            score = item.score
            if score is not None and score >= self.similarity_threshold:
                scored.append((float(score), item))
        return self._pick(scored)

    def _pick(self, scored: list[tuple[float, Item]]) -> list[Lesson]:
        scored.sort(key=lambda s: (-s[0], -int(s[1].value.get("seq", 0)), s[1].key))
        lessons: list[Lesson] = []
        seen: set[str] = set()
        for similarity, entry in scored:
            for text in entry.value.get("lessons", []):
                marker = _lesson_key(str(text))
                if not marker or marker in seen:
                    continue
                seen.add(marker)
                lessons.append(
                    Lesson(
                        text=str(text),
                        task=str(entry.value.get("task", "")),
                        similarity=round(similarity, 6),
                        key=entry.key,
                        saved_at=str(entry.value.get("saved_at", "")),
                    )
                )
                if len(lessons) >= self.top_k:
                    return lessons
        return lessons

    def _clear_plan(self) -> _Plan[int]:
        namespaces: list[tuple[str, ...]] = []
        offset = 0
        while True:
            condition = MatchCondition(match_type="prefix", path=self.namespace)
            page = yield [ListNamespacesOp(match_conditions=(condition,), limit=_PAGE, offset=offset)]
            found = _namespaces(page[0])
            namespaces.extend(found)
            if len(found) < _PAGE:
                break
            offset += _PAGE
        deleted = 0
        for namespace in namespaces:
            while True:
                page = yield [SearchOp(namespace, limit=_PAGE)]
                items = _search_items(page[0])
                if not items:
                    break
                yield [PutOp(item.namespace, item.key, None) for item in items]
                deleted += len(items)
        return deleted

    def _count_plan(self) -> _Plan[int]:
        total = 0
        offset = 0
        while True:
            page = yield [SearchOp(self._entries_ns, limit=_PAGE, offset=offset)]
            found = len(_search_items(page[0]))
            total += found
            if found < _PAGE:
                return total
            offset += _PAGE


# ---------------------------------------------------------------------- drivers


def _search_items(result: Result) -> list[SearchItem]:
    if not isinstance(result, list):
        return []
    return [item for item in result if isinstance(item, SearchItem)]


def _namespaces(result: Result) -> list[tuple[str, ...]]:
    if not isinstance(result, list):
        return []
    return [ns for ns in result if isinstance(ns, tuple)]


def _check_task(task: Any) -> str:
    if not isinstance(task, str):
        raise ValueError(f"task must be a string, got {type(task).__name__}")
    return task


def _merge_lessons(newer: Sequence[str], older: Sequence[str]) -> list[str]:
    out: list[str] = []
    seen: set[str] = set()
    for text in [*newer, *older]:
        marker = _lesson_key(text)
        if marker and marker not in seen:
            seen.add(marker)
            out.append(text)
    return out


def _chunks(items: Iterable[T], size: int) -> Iterable[list[T]]:
    chunk: list[T] = []
    for item in items:
        chunk.append(item)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _run_sync(store: BaseStore, plan: _Plan[T]) -> T:
    try:
        ops = next(plan)
        while True:
            ops = plan.send(store.batch(ops) if ops else [])
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]


async def _abatch(store: BaseStore, ops: list[Op]) -> list[Result]:
    try:
        return await store.abatch(ops)
    except NotImplementedError:  # SqliteStore: sync only; keep the event loop free
        return await asyncio.to_thread(store.batch, ops)


async def _run_async(store: BaseStore, plan: _Plan[T]) -> T:
    try:
        ops = next(plan)
        while True:
            ops = plan.send(await _abatch(store, ops) if ops else [])
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]


# ---------------------------------------------------------------------- one writer at a time per store

try:
    import fcntl
except ImportError:  # Windows: saves are serialized within a process only
    fcntl = None  # type: ignore[assignment]


class _SaveLock:
    """Serializes saves (and clears) on one store: a save reads counters and entries, then writes them back.

    Threads queue on a `threading.Lock`; coroutines of one event loop queue on an `asyncio.Lock` first, and then
    poll the thread lock without blocking their loop. For a `SqliteStore` on a file, the holder also takes an
    exclusive `flock` on `<file>.reflexion-lock`, so saves from other processes wait too.
    """

    def __init__(self, lock_file: str | None) -> None:
        self._thread = threading.Lock()
        self._loops: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
            weakref.WeakKeyDictionary()
        )
        self._lock_file = lock_file
        self._fd: int | None = None

    def _file_lock(self, *, blocking: bool) -> bool:
        """Take the cross-process lock (the thread lock must be held); False when busy and not blocking.

        The file is opened per hold, so a forked child never shares the parent's open lock.
        """
        if self._lock_file is None or fcntl is None:
            return True
        try:
            fd = os.open(self._lock_file, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError:  # e.g. a read-only directory: the database cannot be written there either
            return True
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        except BlockingIOError:
            os.close(fd)
            return False
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        return True

    def _file_unlock(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)  # closing the last descriptor releases the flock

    @contextlib.contextmanager
    def hold(self) -> Iterator[None]:
        with self._thread:
            self._file_lock(blocking=True)
            try:
                yield
            finally:
                self._file_unlock()

    @contextlib.asynccontextmanager
    async def ahold(self) -> AsyncIterator[None]:
        with _LOCKS_GUARD:
            gate = self._loops.setdefault(asyncio.get_running_loop(), asyncio.Lock())
        async with gate:
            delay = 0.0005
            while not self._thread.acquire(blocking=False):
                await asyncio.sleep(delay)
                delay = min(2 * delay, 0.02)
            try:
                delay = 0.0005
                while not self._file_lock(blocking=False):
                    await asyncio.sleep(delay)
                    delay = min(2 * delay, 0.05)
                try:
                    yield
                finally:
                    self._file_unlock()
            finally:
                self._thread.release()


_LOCKS_GUARD = threading.Lock()
_STORE_LOCKS: weakref.WeakKeyDictionary[BaseStore, _SaveLock] = weakref.WeakKeyDictionary()
_FILE_LOCKS: dict[str, _SaveLock] = {}  # SQLite files: every store object on one file shares its lock
_UNHASHABLE_LOCKS: dict[int, _SaveLock] = {}


def _sqlite_file(store: BaseStore) -> str | None:
    """The database file of a `SqliteStore` (None for other stores and in-memory databases)."""
    conn = getattr(store, "conn", None)
    if not isinstance(conn, sqlite3.Connection):
        return None
    store_lock = getattr(store, "lock", None)
    with store_lock if isinstance(store_lock, type(threading.Lock())) else contextlib.nullcontext():
        rows = conn.execute("PRAGMA database_list").fetchall()
    path = next((str(row[2]) for row in rows if row[1] == "main"), "")
    return os.path.realpath(path) if path else None


def _save_lock(store: BaseStore) -> _SaveLock:
    with _LOCKS_GUARD:
        try:
            lock = _STORE_LOCKS.get(store)
        except TypeError:  # an unhashable store class: key it by identity
            lock = _UNHASHABLE_LOCKS.get(id(store))
        if lock is None:
            path = _sqlite_file(store)
            if path is None:
                lock = _SaveLock(None)
            else:
                lock = _FILE_LOCKS.setdefault(path, _SaveLock(path + ".reflexion-lock"))
            try:
                _STORE_LOCKS[store] = lock
            except TypeError:
                _UNHASHABLE_LOCKS[id(store)] = lock
        return lock
