"""`ReflexionMemory`: lessons drawn from critiques, saved per task in a LangGraph `BaseStore`, read back for
similar tasks.

After a run, `ReflexionMemory.lessons_from_critiques` turns the run's critiques into a few short lessons (no
model call) and `save` stores them keyed to the task text. Before the first draft of a later run, `search` returns
the lessons of *similar* earlier tasks, and `format_lessons` renders them for the `{lessons}` placeholder of
`GENERATE_PROMPT`.

Similarity is offline and needs no model: the Jaccard similarity of the two tasks' term sets (`task_tokens`,
`jaccard`), found through an inverted index kept as ordinary store items (`_index.py`), so a search never scans
the store. With `index=True` (a store created with an embedding `index` config that embeds the `task` field) the
store's own semantic search is used instead, `store.search(namespace, query=task)`, and `similarity_threshold`
applies to the score the store returns.

The same code drives every backend through `BaseStore.batch` / `abatch` (`_store.py`): `InMemoryStore`,
`SqliteStore` (persists across processes) and `PostgresStore`.

Concurrency: a save reads the counters and the task's entry, then writes them back, so saves (and `clear`) on one
store run one at a time: threads and the coroutines of any number of event loops share one lock per store (per
database file for `SqliteStore`), and on a `SqliteStore` file an exclusive `flock` on `<file>.reflexion-lock`
also orders saves from other processes (POSIX only; on Windows, within one process). Concurrent saves therefore
keep `max_entries` and every lesson. Saves to one PostgresStore from several *processes* are not ordered, so
those races remain possible there. Searches take no lock.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

from langchain_core.embeddings import Embeddings
from langgraph.store.base import BaseStore, Item, SearchOp

from reflection_graph.critique import Critique
from reflection_graph.memory._index import Layout, lexical_search_plan, save_plan
from reflection_graph.memory._lessons import (
    MAX_LESSONS_PER_RUN,
    Lesson,
    format_lessons,
    lessons_from_critiques,
    pick_lessons,
)
from reflection_graph.memory._semantic import fuse
from reflection_graph.memory._store import (
    Plan,
    chunks,
    clear_plan,
    count_plan,
    run_async,
    run_sync,
    save_lock,
    search_items,
    together,
)
from reflection_graph.memory._text import SURROGATE, clean_text, shorten

DEFAULT_NAMESPACE: tuple[str, ...] = ("reflection_graph", "lessons")
_CHUNK = 500  # tasks handled per write round in save_many


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
            or SURROGATE.search(label)
        ):
            raise ValueError(
                f"namespace labels must be non-empty strings without '.' (or NUL or lone surrogates), "
                f"got {label!r} in {labels!r}; use e.g. {DEFAULT_NAMESPACE!r}"
            )
    if labels[0] == "langgraph":
        raise ValueError(f"namespace may not start with 'langgraph' (reserved by LangGraph), got {labels!r}")
    return labels


def _check_task(task: Any) -> str:
    if not isinstance(task, str):
        raise ValueError(f"task must be a string, got {type(task).__name__}")
    return task


def _clean_records(records: Iterable[tuple[str, Sequence[str]]]) -> Iterable[tuple[str, list[str]]]:
    for task, lessons in records:
        _check_task(task)
        if isinstance(lessons, str):
            raise ValueError("lessons must be a list of strings, not one string; wrap it: [lesson]")
        cleaned = [shorten(clean_text(str(lesson))) for lesson in lessons if str(lesson).strip()]
        if cleaned:
            yield clean_text(task), cleaned


def _check_index(store: BaseStore, what: str) -> None:
    if hasattr(store, "index_config") and not getattr(store, "index_config", None):
        raise ValueError(
            f"{what} needs a store created with an embedding index, e.g. "
            "InMemoryStore(index=semantic_index(embeddings)) with semantic_index from reflection_graph.memory; "
            "or leave it out for the offline lexical index"
        )


def _check_unit(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= float(value) <= 1.0:
        raise ValueError(f"{name} must be a number in [0, 1], got {value!r}")
    return float(value)


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
        index: Use the store's embedding index (`store.search(namespace, query=task)`) *instead of* the lexical
            inverted index. The store must be created with an `index` config; its `fields` should include
            `"task"` (entries are embedded on their `task` field).
        embeddings: Combine the lexical index with the store's embedding index (semantic memory): any LangChain
            `Embeddings`, e.g. `E5SmallEmbeddings()` (offline, the `[semantic]` extra). The store must be created
            with `index=semantic_index(embeddings)`. Both indexes are searched in the same round trips and their
            rankings fused (reciprocal rank fusion, see `_semantic.py`); `Lesson.similarity` is then the fused
            score (1.0: first in both).
        semantic_threshold: Least cosine similarity for the embedding index's matches (with `embeddings`). By
            default `embeddings.similarity_threshold` when it has one (0.85 for `E5SmallEmbeddings`), else 0.5.

    Raises:
        ValueError: An argument is out of range, or `index=True` / `embeddings` with a store that has no index
            config.

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
        embeddings: Embeddings | None = None,
        semantic_threshold: float | None = None,
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
        if embeddings is not None and not isinstance(embeddings, Embeddings):
            raise ValueError(
                f"embeddings must be a LangChain Embeddings such as E5SmallEmbeddings(), got {type(embeddings).__name__}"
            )
        if embeddings is not None and index:
            raise ValueError(
                "give either index=True (embedding index alone) or embeddings= (combined), not both"
            )
        if semantic_threshold is None:
            semantic_threshold = getattr(embeddings, "similarity_threshold", 0.5)
        self.semantic_threshold = _check_unit("semantic_threshold", semantic_threshold)
        self.similarity_threshold = _check_unit("similarity_threshold", similarity_threshold)
        self.embeddings = embeddings
        self.store = store
        self.namespace = _validate_namespace(namespace)
        self.max_entries = max_entries
        self.top_k = top_k
        self.index = bool(index)
        self._layout = Layout(self.namespace)
        if store is not None:
            self._check_store(store)

    def __repr__(self) -> str:
        return (
            f"ReflexionMemory(store={type(self.store).__name__ if self.store else None}, "
            f"namespace={self.namespace!r}, max_entries={self.max_entries}, "
            f"similarity_threshold={self.similarity_threshold}, top_k={self.top_k}, index={self.index}, "
            f"embeddings={self.embeddings!r})"
        )

    def _check_store(self, store: BaseStore) -> None:
        if self.index:
            _check_index(store, "index=True")
        elif self.embeddings is not None:
            _check_index(store, "embeddings=")

    def _resolve_store(self, store: BaseStore | None) -> BaseStore:
        chosen = self.store if self.store is not None else store
        if chosen is None:
            raise ValueError(
                "ReflexionMemory has no store: pass one to ReflexionMemory(store) or call with store=..., "
                "or compile the graph with create_reflection_graph(..., store=InMemoryStore())"
            )
        if not isinstance(chosen, BaseStore):
            raise ValueError(f"store must be a langgraph BaseStore, got {type(chosen).__name__}")
        if chosen is not self.store:
            self._check_store(chosen)
        return chosen

    # ------------------------------------------------------------------ lessons

    @staticmethod
    def lessons_from_critiques(
        task: str, critiques: Iterable[Critique | Mapping[str, Any]], *, limit: int = MAX_LESSONS_PER_RUN
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
        return lessons_from_critiques(critiques, limit=limit)

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
        lock = save_lock(resolved)
        for chunk in chunks(_clean_records(records), self._chunk_size):
            with lock.hold():
                run_sync(resolved, self._save_plan(chunk))

    async def asave_many(
        self, records: Iterable[tuple[str, Sequence[str]]], *, store: BaseStore | None = None
    ) -> None:
        """Async `save_many`."""
        resolved = self._resolve_store(store)
        lock = save_lock(resolved)
        for chunk in chunks(_clean_records(records), self._chunk_size):
            async with lock.ahold():
                await run_async(resolved, self._save_plan(chunk))

    def search(self, task: str, *, store: BaseStore | None = None) -> list[Lesson]:
        """Return lessons from earlier tasks similar to `task`, best first, at most `top_k`.

        Args:
            task: The new task.
            store: Store to use when the memory was created without one (the graph passes `runtime.store`).

        Returns:
            Lessons from tasks with similarity >= `similarity_threshold`, most similar task first (newer entries
            first among equals), duplicates removed.
        """
        return run_sync(self._resolve_store(store), self._search_plan(_check_task(task)))

    async def asearch(self, task: str, *, store: BaseStore | None = None) -> list[Lesson]:
        """Async `search`."""
        return await run_async(self._resolve_store(store), self._search_plan(_check_task(task)))

    def clear(self, *, store: BaseStore | None = None) -> int:
        """Delete every item under the memory's namespace (entries, index, counters).

        Returns:
            How many items were deleted.
        """
        resolved = self._resolve_store(store)
        with save_lock(resolved).hold():
            return run_sync(resolved, clear_plan(self.namespace))

    async def aclear(self, *, store: BaseStore | None = None) -> int:
        """Async `clear`."""
        resolved = self._resolve_store(store)
        async with save_lock(resolved).ahold():
            return await run_async(resolved, clear_plan(self.namespace))

    def count(self, *, store: BaseStore | None = None) -> int:
        """Return how many task entries are stored (reads the entries namespace; meant for tests and tools)."""
        return run_sync(self._resolve_store(store), count_plan(self._layout.entries))

    # ------------------------------------------------------------------ plans (store-agnostic generators)

    @property
    def _chunk_size(self) -> int:
        # A chunk never holds more than max_entries tasks, so eviction only ever hits entries saved before it.
        return min(_CHUNK, self.max_entries)

    def _save_plan(self, records: list[tuple[str, list[str]]]) -> Plan[None]:
        semantic = self.index or self.embeddings is not None
        embed: Literal[False] | list[str] = ["task"] if semantic else False
        return save_plan(
            self._layout, records, max_entries=self.max_entries, embed=embed, postings=not self.index
        )

    def _search_plan(self, task: str) -> Plan[list[Lesson]]:
        lexical = lexical_search_plan(
            self._layout, task, threshold=self.similarity_threshold, top_k=self.top_k
        )
        if self.index:
            scored = yield from self._semantic_plan(task, self.similarity_threshold)
        elif self.embeddings is None:
            scored = yield from lexical
        else:
            both = yield from together(lexical, self._semantic_plan(task, self.semantic_threshold))
            scored = fuse(both)
        return pick_lessons(scored, self.top_k)

    def _semantic_plan(self, task: str, threshold: float) -> Plan[list[tuple[float, Item]]]:
        results = yield [
            SearchOp(self._layout.entries, query=clean_text(task), limit=max(4 * self.top_k, 10))
        ]
        return [
            (float(item.score), item)
            for item in search_items(results[0])
            if item.score is not None and item.score >= threshold
        ]
