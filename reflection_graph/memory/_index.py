"""The memory's items in a store, and its lexical inverted index (exact top-k Jaccard search, no scan).

Under a memory's `namespace`:

- `(*namespace, "entries")`, key = digest of the task: `{"task", "lessons", "tokens", "seq", "saved_at"}`.
- `(*namespace, "index", "bNNNN")`, key = `WORD:ENTRY`: `{"t": WORD, "e": ENTRY, "w": the entry's words}`, one
  posting (it carries the entry's words, so similarity is computed without reading the entry); words are hashed
  into 1024 bucket namespaces and read with `store.search(bucket, filter={"t": WORD})`, so the number of
  namespaces stays bounded whatever the vocabulary (InMemoryStore walks all namespaces on every search; SQLite and
  Postgres use their prefix index).
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
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Literal

from langgraph.store.base import GetOp, Item, Op, PutOp, Result, SearchOp

from reflection_graph.memory._lessons import MAX_LESSONS_PER_ENTRY, merge_lessons
from reflection_graph.memory._store import PAGE, Plan, chunks, search_items
from reflection_graph.memory._text import jaccard, lesson_key, task_key, task_tokens

_POSTINGS_LIMIT = (
    50_000  # postings read per word at most (such a common word is rarely among the rarest of Q)
)
_ROUND_POSTINGS = 256  # postings (by word count) read together in one round trip when the words are rare
_LOAD_CHUNK = 256  # most entries read per round, best similarity first (rounds start small and double)
_INDEX_BUCKETS = 1024  # posting namespaces; fixed for the life of a store (changing it needs clear())


@dataclass(frozen=True)
class Layout:
    """Where a memory's items live under its `namespace` (see the module docstring): the entries, the word counts
    (`df`), the save order and the state (`meta`) each in the namespace below it named for them."""

    namespace: tuple[str, ...]
    entries: tuple[str, ...] = field(init=False)
    df: tuple[str, ...] = field(init=False)
    order: tuple[str, ...] = field(init=False)
    meta: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        for kind in ("entries", "df", "order", "meta"):
            object.__setattr__(self, kind, (*self.namespace, kind))

    def posting_ns(self, token: str) -> tuple[str, ...]:
        bucket = int.from_bytes(hashlib.blake2b(token.encode("utf-8"), digest_size=4).digest(), "big")
        return (*self.namespace, "index", f"b{bucket % _INDEX_BUCKETS:04d}")

    def posting_search(self, token: str) -> SearchOp:
        return SearchOp(self.posting_ns(token), filter={"t": token}, limit=_POSTINGS_LIMIT)


def save_plan(
    layout: Layout,
    records: list[tuple[str, list[str]]],
    *,
    max_entries: int,
    embed: Literal[False] | list[str] = False,
    postings: bool = True,
) -> Plan[None]:
    """Save `(task, lessons)` records (merged into existing entries), then evict beyond `max_entries`.

    Args:
        layout: Where the items live.
        records: Cleaned `(task, lessons)` pairs, later ones newer; at most `max_entries` of them.
        max_entries: Most entries kept; the least recently saved go first.
        embed: The `index` of each entry's `PutOp`: the fields the store embeds (`["task"]`), or False.
        postings: Whether to keep the lexical index (postings and word counts) up to date.
    """
    now = datetime.now(timezone.utc).isoformat()
    # Merge records of the same task inside the chunk; the last save of a task decides its order.
    merged: dict[str, tuple[str, list[str]]] = {}
    for task, lessons in records:
        key = task_key(task)
        if key in merged:
            lessons = merge_lessons(lessons, merged.pop(key)[1])
        merged[key] = (task, lessons)
    keys = list(merged)
    results = yield [GetOp(layout.meta, "state"), *(GetOp(layout.entries, k) for k in keys)]
    meta = dict(results[0].value) if isinstance(results[0], Item) else {}
    seq = int(meta.get("next_seq", 0))
    evicted_upto = int(meta.get("evicted_upto", 0))
    existing = {k: r for k, r in zip(keys, results[1:], strict=True) if isinstance(r, Item)}

    puts: list[Op] = []
    df_delta: dict[str, int] = {}
    saved: set[str] = set()
    for key in keys:
        task, lessons = merged[key]
        old = existing.get(key)
        tokens = sorted(task_tokens(task))
        value = {
            "task": task,
            "lessons": merge_lessons(lessons, old.value.get("lessons", []) if old else [])[
                :MAX_LESSONS_PER_ENTRY
            ],
            "tokens": tokens,
            "seq": seq,
            "saved_at": now,
        }
        puts.append(PutOp(layout.entries, key, value, index=embed))
        puts.append(PutOp(layout.order, f"{seq:012d}", {"key": key}, index=False))
        saved.add(key)
        seq += 1
        if old is None and postings:
            for token in tokens:
                posting = {"t": token, "e": key, "w": " ".join(tokens)}
                puts.append(PutOp(layout.posting_ns(token), f"{token}:{key}", posting, index=False))
                df_delta[token] = df_delta.get(token, 0) + 1

    evict_end = seq - max_entries
    if evict_end > evicted_upto:
        yield from _evict(layout, range(evicted_upto, evict_end), saved, puts, df_delta)
        evicted_upto = evict_end
    if df_delta:
        yield from _count_words(layout, df_delta, puts)
    puts.append(PutOp(layout.meta, "state", {"next_seq": seq, "evicted_upto": evicted_upto}, index=False))
    yield puts


def _evict(
    layout: Layout, slots: range, saved: set[str], puts: list[Op], df_delta: dict[str, int]
) -> Plan[None]:
    """Add the deletes of the entries saved in `slots` (and their postings) to `puts`; stale slots just go."""
    slot_keys = [f"{s:012d}" for s in slots]
    found: list[Result] = []
    for part in chunks(slot_keys, PAGE):
        found.extend((yield [GetOp(layout.order, k) for k in part]))
    victims: dict[str, int] = {}
    for slot_key, slot in zip(slot_keys, found, strict=True):
        puts.append(PutOp(layout.order, slot_key, None))
        if isinstance(slot, Item) and slot.value.get("key") not in saved:
            victims[str(slot.value["key"])] = int(slot_key)
    victim_keys = list(victims)
    entries: list[Result] = []
    for part in chunks(victim_keys, PAGE):
        entries.extend((yield [GetOp(layout.entries, k) for k in part]))
    for victim, entry in zip(victim_keys, entries, strict=True):
        if not isinstance(entry, Item) or int(entry.value.get("seq", -1)) != victims[victim]:
            continue  # already gone, or saved again later (a newer slot owns it)
        puts.append(PutOp(layout.entries, victim, None))
        for token in entry.value.get("tokens", []):
            puts.append(PutOp(layout.posting_ns(token), f"{token}:{victim}", None))
            df_delta[token] = df_delta.get(token, 0) - 1


def _count_words(layout: Layout, df_delta: dict[str, int], puts: list[Op]) -> Plan[None]:
    """Add the updated word counts (`df`) to `puts`."""
    tokens = sorted(df_delta)
    counts: list[Result] = []
    for part in chunks(tokens, PAGE):
        counts.extend((yield [GetOp(layout.df, t) for t in part]))
    for token, item in zip(tokens, counts, strict=True):
        new = (int(item.value.get("n", 0)) if isinstance(item, Item) else 0) + df_delta[token]
        puts.append(
            PutOp(layout.df, token, {"n": new}, index=False) if new > 0 else PutOp(layout.df, token, None)
        )


def _words_needed(bar: float, size_q: int) -> int:
    # Prefix filter: an entry with Jaccard >= bar shares >= ceil(bar*|Q|) words with Q, so it holds one of any
    # |Q| - ceil(bar*|Q|) + 1 words of Q; the rarest ones have the shortest postings.
    return size_q - max(1, math.ceil(bar * size_q - 1e-9)) + 1


def _to_load(
    similarity: dict[str, float], loaded: dict[str, Item | None], floor: float, top_k: int, chunk: int
) -> tuple[list[str], float | None]:
    """Entries to read next (best first), or, when none, the similarity of the entry completing `top_k` lessons.

    Entries tied with that one are loaded too, since a newer one ranks first.
    """
    ranked = sorted(
        ((sim, key) for key, sim in similarity.items() if sim > 0 and sim >= floor),
        key=lambda c: (-c[0], c[1]),
    )
    todo: list[str] = []
    lessons_seen: set[str] = set()
    new_bar = None
    for sim, key in ranked:
        if new_bar is not None and sim < new_bar:
            break
        if key not in loaded:
            todo.append(key)
            if len(todo) >= chunk:
                break
            continue
        entry = loaded[key]
        if entry is not None and new_bar is None and not todo:
            lessons_seen.update(lesson_key(str(t)) for t in entry.value.get("lessons", []))
            if len(lessons_seen) >= top_k:
                new_bar = sim
    return todo, new_bar


def _next_words(rare_first: list[str], df: dict[str, int], fetched: int, needed: int) -> list[str]:
    """The words whose postings to read in the next round trip.

    The bar often rises after the rarest words, so read one at a time; past the first 8 (only a long query gets
    there), take words with short postings together, up to `_ROUND_POSTINGS` per round trip.
    """
    step = 2 if fetched == 0 else 1
    budget = sum(df[t] for t in rare_first[fetched : fetched + step])
    while (
        (fetched >= 8 or len(rare_first) > 16)
        and fetched + step < needed
        and budget + df[rare_first[fetched + step]] <= _ROUND_POSTINGS
    ):
        budget += df[rare_first[fetched + step]]
        step += 1
    return rare_first[fetched : fetched + step]


def lexical_search_plan(
    layout: Layout, task: str, *, threshold: float, top_k: int
) -> Plan[list[tuple[float, Item]]]:
    """The entries (with their Jaccard similarity) that hold the `top_k` best lessons for `task`, unsorted."""
    query = task_tokens(task)
    if not query:
        return []
    ordered = sorted(query)
    counts = yield [GetOp(layout.df, t) for t in ordered]
    df = {
        t: (int(c.value.get("n", 0)) if isinstance(c, Item) else 0)
        for t, c in zip(ordered, counts, strict=True)
    }
    rare_first = sorted(ordered, key=lambda t: (df[t], t))
    bar = threshold  # rises to the similarity that completes top_k lessons (adaptive filter)
    floor = threshold - 1e-12
    fetched = 0
    similarity: dict[str, float] = {}  # exact, from the word list each posting carries
    loaded: dict[str, Item | None] = {}
    load_chunk = max(top_k, 8)
    while True:
        todo, new_bar = _to_load(similarity, loaded, floor, top_k, load_chunk)
        if todo:
            entries = yield [GetOp(layout.entries, key) for key in todo]
            for key, result in zip(todo, entries, strict=True):
                loaded[key] = result if isinstance(result, Item) else None  # None: evicted meanwhile
            load_chunk = min(2 * load_chunk, _LOAD_CHUNK)
            continue
        if new_bar is not None:
            bar = max(bar, new_bar)
        needed = _words_needed(bar, len(query))
        if fetched >= needed:
            break
        words = _next_words(rare_first, df, fetched, needed)
        postings = yield [layout.posting_search(t) for t in words]
        fetched += len(words)
        for word, result in zip(words, postings, strict=True):
            for item in search_items(result):
                entry_key = item.value.get("e")
                if item.value.get("t") == word and isinstance(entry_key, str) and entry_key not in similarity:
                    similarity[entry_key] = jaccard(query, frozenset(str(item.value.get("w", "")).split()))
    return [
        (similarity[key], entry)
        for key, entry in loaded.items()
        if entry is not None and similarity[key] > 0 and similarity[key] >= floor
    ]
