"""Benchmark: ReflexionMemory.search (store-backed inverted index) vs a plain scan of the same store.

Fills a store with `--n` synthetic tasks (100,000 by default) holding `--lessons-per-task` lessons each (3 by
default, as a run's critiques give; 1 is the worst case for the adaptive filter), made by a small built-in
generator (no downloads), then times the same queries two ways, side by side in one run:

- indexed: `ReflexionMemory.search(task)`: reads the word counts of the query's words, the postings of its
  rarest words, and the few best entries.
- scan: lists every entry of the memory's namespace (`store.search(entries namespace)`, paged), scores each
  with the same Jaccard similarity on its stored word set, filters by the threshold and keeps the top lessons.

Before timing, every query runs both ways through a counting store: both must return the same lessons (the
table's `agree`), and the store round trips and operations each way makes are reported. The timed loop then
alternates the two query by query, in a shuffled order, so machine load hits both alike. The table reports the
per-query times (median and mean, milliseconds) and the ratio scan / indexed. Backends: `InMemoryStore` and
`SqliteStore` (a temp file).

Long tasks (`--long-words`, 10,000 by default; 0 skips): on a SqliteStore, one step saves a new task and searches
another of the same kind; steps with 10,000-word tasks and with short tasks alternate (shuffled order), and the
ratio long / short is printed. The same long step then runs with the term cap lifted (`MAX_TASK_TERMS` patched:
every distinct word indexed, as before the cap) on a store filled the same way, for the ratio no cap / cap.

Semantic memory (`--semantic`, issue 21): the 121 rewordings of `datasets/paraphrases.jsonl` (40 tasks, one lesson
each, stored among `--distractors` synthetic tasks) are searched three ways on one store: words only (the lexical
index), the store's vector index alone (`index=True`, cosine >= the embedder's threshold) and combined
(`embeddings=`, reciprocal rank fusion). Printed: recall@1 and recall@3 (the task's lesson is first / in the
first 3), split by English and other languages, and how often lessons of *other* tasks came back. Then the time per
search, words only vs combined (query embedding included), interleaved, at each of `--sizes` stored tasks.

Usage:
    python bench/bench_memory.py                  # 100,000 tasks x 3 lessons, both backends, 12 queries
    python bench/bench_memory.py --semantic --sizes 1000,10000 --queries 30
    python bench/bench_memory.py --n 20000 --queries 30 --backends memory --lessons-per-task 1
    python bench/bench_memory.py --n 2000 --long-words 10000 --long-reps 5

Queries: half are stored tasks with one word swapped (a similar earlier task exists), half are fresh tasks.
"""

from __future__ import annotations

import argparse
import functools
import gc
import itertools
import json
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from langchain_core.embeddings import Embeddings  # noqa: E402
from langgraph.store.base import BaseStore, Op, Result  # noqa: E402
from langgraph.store.memory import InMemoryStore  # noqa: E402
from langgraph.store.sqlite import SqliteStore  # noqa: E402

from reflection_graph.memory import (  # noqa: E402
    ReflexionMemory,
    default_embeddings,
    jaccard,
    semantic_index,
    sqlite_store,
    task_tokens,
)
from reflection_graph.memory import _text as memory_module  # noqa: E402

# --------------------------------------------------------------------------- synthetic tasks

VERBS = (
    "write draft compose summarize translate review refactor explain outline create design debug optimize plan "
    "analyze document test rewrite shorten proofread critique prepare propose evaluate compare convert "
    "implement sketch brainstorm answer"
).split()
ARTIFACTS = (
    "email report essay function class query poem proposal memo readme script letter tweet abstract "
    "changelog tutorial checklist schedule budget contract invoice survey slogan headline speech story "
    "recipe review agenda summary policy guide faq postmortem roadmap spec benchmark parser migration "
    "dashboard pipeline endpoint regex dockerfile workflow notebook lecture quiz"
).split()
QUALIFIERS = (
    "polite concise formal friendly detailed short persuasive technical neutral urgent humorous careful "
    "structured annotated typed async secure fast minimal robust accessible bilingual"
).split()
TOPICS = (
    "job offer, data engineer role, customer complaint, quarterly earnings, product launch, server outage, "
    "pricing change, team offsite, security incident, hiring plan, onboarding process, refund request, "
    "conference talk, research grant, marketing campaign, supply chain, climate policy, school trip, "
    "wedding invitation, apartment lease, medical appointment, tax return, bug bounty, open source release, "
    "sorting integers, binary search, linked list, rate limiter, csv parsing, date formatting, cache eviction, "
    "json schema, unit conversion, password hashing, image resizing, log rotation, retry logic, "
    "database index, graph traversal, matrix multiplication, text tokenization, prime numbers, "
    "inventory tracking, flight booking, restaurant menu, gardening tips, chess opening, poetry contest, "
    "football match, music festival, volunteer program, museum exhibit, city council, river cleanup"
).split(", ")
AUDIENCES = (
    "for a recruiter, for the board, for new hires, for a customer, for students, for a landlord, for the CFO, "
    "for beginners, for experts, for a doctor, for the press, for investors, for a teacher, for a manager, "
    "for the team, for a client in Berlin, for a python developer, for a rust developer, for a small shop, "
    "for a nonprofit"
).split(", ")
SYLLABLES = "ka lo mi ne ru sa ti vo ze ba do fi gu ha jo ku le mo na pe ri so tu va wi xa yo zu".split()
LESSON_TEMPLATES = (
    "Mention the {w} explicitly.",
    "Keep the {w} part under 100 words.",
    "Avoid: vague claims about the {w}.",
    "State the {w} in the first sentence.",
    "Check edge cases around the {w}.",
)


@functools.lru_cache(maxsize=4)
def _vocabulary(size: int, seed: int = 12345) -> list[str]:
    """Deterministic pseudo-words (2-4 syllables) standing in for the long tail of real task vocabulary."""
    rng = random.Random(seed)
    words: dict[str, None] = {}
    while len(words) < size:
        words["".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4))) + rng.choice("nrstlkm")] = None
    return list(words)


VOCABULARY_SIZE = 30_000
ZIPF_S = 1.1


@functools.lru_cache(maxsize=1)
def _zipf_vocabulary() -> tuple[list[str], list[float]]:
    vocabulary = _vocabulary(VOCABULARY_SIZE)
    weights = [1.0 / (rank**ZIPF_S) for rank in range(1, len(vocabulary) + 1)]
    return vocabulary, list(itertools.accumulate(weights))


def synthetic_tasks(n: int, seed: int = 0) -> Iterator[str]:
    """Yield `n` varied task texts.

    Each task is a template part (verb, qualifier, artifact: a few dozen choices each, so their posting lists are
    long), one of 56 fixed topics, and 2-4 content words drawn from a 30,000-word vocabulary with Zipf(1.1)
    frequencies, as words are distributed in natural text (a few very common, most rare).
    """
    rng = random.Random(seed)
    vocabulary, cumulative = _zipf_vocabulary()
    for _ in range(n):
        content = rng.choices(vocabulary, cum_weights=cumulative, k=rng.randint(2, 4))
        parts = [rng.choice(VERBS), "a", rng.choice(QUALIFIERS), rng.choice(ARTIFACTS), "about"]
        parts += [rng.choice(TOPICS), "and", *content]
        if rng.random() < 0.5:
            parts.append(rng.choice(AUDIENCES))
        yield " ".join(parts)


def lessons_for(task: str, rng: random.Random, count: int) -> list[str]:
    """`count` distinct short lessons mentioning words of the task, as `lessons_from_critiques` would give."""
    words = sorted(task_tokens(task)) or ["task"]
    templates = rng.sample(LESSON_TEMPLATES, k=min(count, len(LESSON_TEMPLATES)))
    return [template.format(w=rng.choice(words)) for template in templates]


def make_queries(tasks: list[str], count: int, seed: int = 1) -> list[str]:
    """Half near-duplicates of stored tasks (one word swapped), half fresh tasks from the same generator."""
    rng = random.Random(seed)
    queries = []
    for i in range(count):
        if i % 2 == 0:
            words = rng.choice(tasks).split()
            words[rng.randrange(len(words))] = rng.choice(QUALIFIERS + ARTIFACTS)
            queries.append(" ".join(words))
        else:
            queries.append(next(synthetic_tasks(1, seed=seed * 100_003 + i)))
    return queries


# --------------------------------------------------------------------------- the plain scan baseline


def scan_search(memory: ReflexionMemory, store: BaseStore, task: str, page: int = 50_000) -> list[str]:
    """List every stored entry, score each with the same Jaccard, and pick lessons the way `search` does."""
    query = task_tokens(task)
    if not query:
        return []
    scored = []
    offset = 0
    entries_ns = (*memory.namespace, "entries")
    while True:
        items = store.search(entries_ns, limit=page, offset=offset)
        for item in items:
            similarity = jaccard(query, frozenset(item.value["tokens"]))
            if similarity > 0 and similarity >= memory.similarity_threshold - 1e-12:
                scored.append((similarity, int(item.value["seq"]), item.key, item.value["lessons"]))
        if len(items) < page:
            break
        offset += page
    scored.sort(key=lambda s: (-s[0], -s[1], s[2]))
    out: list[str] = []
    seen: set[str] = set()
    for _, _, _, lessons in scored:
        for text in lessons:
            marker = " ".join(text.lower().split())
            if marker not in seen:
                seen.add(marker)
                out.append(text)
            if len(out) >= memory.top_k:
                return out
    return out


# --------------------------------------------------------------------------- runner


class CountingStore(BaseStore):
    """Passes every batch to `inner` and counts round trips and operations (used only outside the timed loop)."""

    def __init__(self, inner: BaseStore) -> None:
        self.inner = inner
        self.calls = 0
        self.ops = 0

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        self.calls += 1
        self.ops += len(ops)
        return self.inner.batch(ops)

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        self.calls += 1
        self.ops += len(ops)
        return await self.inner.abatch(ops)

    def take(self) -> tuple[int, int]:
        counts = (self.calls, self.ops)
        self.calls = self.ops = 0
        return counts


def _time_ms(fn: Callable[[], object]) -> tuple[float, object]:
    """Time one call with the garbage collector paused (as `timeit` does), after a full collection, so a
    collection of the 100,000-entry store's objects never lands in one variant's timing by chance."""
    gc.collect()
    gc.disable()
    try:
        start = time.perf_counter()
        result = fn()
        return (time.perf_counter() - start) * 1000, result
    finally:
        gc.enable()


def run_backend(
    name: str, store: BaseStore, n: int, queries_count: int, seed: int, per_task: int
) -> dict[str, object]:
    memory = ReflexionMemory(store, max_entries=max(n, 1))
    rng = random.Random(seed + 7)
    tasks = list(synthetic_tasks(n, seed=seed))
    start = time.perf_counter()
    memory.save_many((task, lessons_for(task, rng, per_task)) for task in tasks)
    fill_s = time.perf_counter() - start
    stored = memory.count()
    queries = make_queries(tasks, queries_count, seed=seed + 1)

    # Before timing: both ways must return the same lessons; count what each asks of the store.
    counting = CountingStore(store)
    counted = ReflexionMemory(counting, max_entries=max(n, 1))
    agree = hits = 0
    calls = {"indexed": [0, 0], "scan": [0, 0]}
    for query in queries:
        got = [lesson.text for lesson in counted.search(query)]
        c, o = counting.take()
        calls["indexed"] = [calls["indexed"][0] + c, calls["indexed"][1] + o]
        want = scan_search(counted, counting, query)
        c, o = counting.take()
        calls["scan"] = [calls["scan"][0] + c, calls["scan"][1] + o]
        agree += int(got == want)
        hits += int(bool(want))

    # Timed: the two ways alternate query by query, in a shuffled order, so load hits both alike.
    variants: dict[str, Callable[[str], object]] = {
        "indexed": lambda q: memory.search(q),
        "scan": lambda q: scan_search(memory, store, q),
    }
    times: dict[str, list[float]] = {"indexed": [], "scan": []}
    order_rng = random.Random(seed + 11)
    for query in queries:
        names = list(variants)
        order_rng.shuffle(names)
        for variant in names:
            times[variant].append(_time_ms(lambda v=variant, q=query: variants[v](q))[0])  # type: ignore[misc]
    indexed_ms, scan_ms = times["indexed"], times["scan"]
    return {
        "backend": name,
        "entries": stored,
        "fill_s": fill_s,
        "queries": len(queries),
        "with_hits": hits,
        "agree": agree,
        "indexed_calls": calls["indexed"][0] / len(queries),
        "indexed_ops": calls["indexed"][1] / len(queries),
        "scan_calls": calls["scan"][0] / len(queries),
        "scan_ops": calls["scan"][1] / len(queries),
        "indexed_p50": statistics.median(indexed_ms),
        "indexed_mean": statistics.fmean(indexed_ms),
        "scan_p50": statistics.median(scan_ms),
        "scan_mean": statistics.fmean(scan_ms),
        "indexed_similar": statistics.fmean(indexed_ms[0::2]),
        "indexed_fresh": statistics.fmean(indexed_ms[1::2]) if len(indexed_ms) > 1 else float("nan"),
    }


# --------------------------------------------------------------------------- long tasks


def long_task(words: int, seed: int) -> str:
    """A task of `words` words drawn from the Zipf vocabulary (a pasted report with an instruction on top)."""
    rng = random.Random(seed)
    vocabulary, cumulative = _zipf_vocabulary()
    return "Summarize this report for the board: " + " ".join(
        rng.choices(vocabulary, cum_weights=cumulative, k=words)
    )


def run_long(words: int, reps: int, background: int, seed: int) -> dict[str, float]:
    """Save + search a `words`-word task vs a short one on SqliteStore, interleaved; then without the term cap.

    Each store holds `background` short tasks and 10 earlier long tasks. One step = save a new task, then search
    another task of the same kind. The no-cap variant patches `MAX_TASK_TERMS` (every distinct word indexed, as
    before the cap) on a store filled the same way; it runs `min(reps, 2)` steps since it is slow.
    """
    out: dict[str, float] = {"words": words, "distinct": len(set(long_task(words, seed).split()))}

    def fill(memory: ReflexionMemory) -> None:
        rng = random.Random(seed)
        shorts = list(synthetic_tasks(background, seed=seed + 3))
        memory.save_many((task, lessons_for(task, rng, 2)) for task in shorts)
        memory.save_many((long_task(words, seed + 100 + i), [f"long lesson {i}"]) for i in range(10))

    texts = {  # (task to save, task to search) per step, made before any timing
        "long": [
            (long_task(words, seed + 1000 + i), long_task(words, seed + 2000 + i)) for i in range(reps + 1)
        ],
        "short": [
            (next(synthetic_tasks(1, seed=seed + 3000 + i)), next(synthetic_tasks(1, seed=seed + 4000 + i)))
            for i in range(reps + 1)
        ],
    }

    def step(memory: ReflexionMemory, kind: str, i: int) -> object:
        task, query = texts[kind][i]
        memory.save(task, [f"new {kind} lesson {i}"])
        return memory.search(query)

    with tempfile.TemporaryDirectory() as tmp:
        with SqliteStore.from_conn_string(str(Path(tmp) / "capped.sqlite")) as store:
            store.setup()
            counting = CountingStore(store)
            memory = ReflexionMemory(counting)
            fill(memory)
            counting.take()
            times: dict[str, list[float]] = {"long": [], "short": []}
            order_rng = random.Random(seed + 5)
            for i in range(reps):
                kinds = ["long", "short"]
                order_rng.shuffle(kinds)
                for kind in kinds:
                    times[kind].append(_time_ms(lambda k=kind, i=i: step(memory, k, i))[0])  # type: ignore[misc]
            step(memory, "long", reps)
            out["capped_calls"], out["capped_ops"] = counting.take()
            out["terms"] = len(task_tokens(long_task(words, seed)))
        out["long_ms"] = statistics.fmean(times["long"])
        out["short_ms"] = statistics.fmean(times["short"])
        with SqliteStore.from_conn_string(str(Path(tmp) / "uncapped.sqlite")) as store:
            store.setup()
            saved_cap = memory_module.MAX_TASK_TERMS
            memory_module.MAX_TASK_TERMS = 10**9
            try:
                counting = CountingStore(store)
                memory = ReflexionMemory(counting)
                fill(memory)
                counting.take()
                uncapped = [_time_ms(lambda i=i: step(memory, "long", i))[0] for i in range(min(reps, 2))]
                step(memory, "long", reps)
                out["uncapped_calls"], out["uncapped_ops"] = counting.take()
                out["uncapped_terms"] = len(task_tokens(long_task(words, seed)))
            finally:
                memory_module.MAX_TASK_TERMS = saved_cap
        out["uncapped_ms"] = statistics.fmean(uncapped)
    return out


# --------------------------------------------------------------------------- semantic memory (issue 21)

PARAPHRASES = ROOT / "datasets" / "paraphrases.jsonl"


class FillCache(Embeddings):
    """Wraps an embedder; while `filling`, remembers document vectors so a second store of the same entries does
    not embed them again. Outside filling (every timed search) each text is embedded afresh."""

    def __init__(self, inner: Embeddings) -> None:
        self.inner = inner
        self.dims = getattr(inner, "dims", None)
        self.similarity_threshold = getattr(inner, "similarity_threshold", 0.5)
        self.filling = False
        self.cache: dict[str, list[float]] = {}

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        if not self.filling:
            return self.inner.embed_documents(texts)
        todo = [t for t in dict.fromkeys(texts) if t not in self.cache]
        for part in _batches(todo, 64):
            self.cache.update(zip(part, self.inner.embed_documents(part), strict=True))
        return [self.cache[t] for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self.inner.embed_query(text)


def _batches(items: list[str], size: int) -> Iterator[list[str]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


def _semantic_store(backend: str, embeddings: Embeddings, tmp: str) -> BaseStore:
    if backend == "memory":
        return InMemoryStore(index=semantic_index(embeddings))  # type: ignore[arg-type]
    return sqlite_store(Path(tmp) / f"semantic-{time.monotonic_ns()}.sqlite", embeddings=embeddings)


def _fill_semantic(
    store: BaseStore, embeddings: FillCache, rows: list[dict], distractors: int, seed: int
) -> None:
    """The paraphrase set's tasks (one lesson each) among `distractors` synthetic tasks (one lesson each)."""
    rng = random.Random(seed)
    records = [(t, lessons_for(t, rng, 1)) for t in synthetic_tasks(distractors, seed=seed + 7)]
    records += [(str(r["task"]), [str(r["lesson"])]) for r in rows]
    rng.shuffle(records)
    embeddings.filling = True
    try:
        ReflexionMemory(store, embeddings=embeddings, max_entries=len(records) + 1).save_many(records)
    finally:
        embeddings.filling = False


def run_recall(
    backend: str, embeddings: FillCache, distractors: int, seed: int
) -> dict[str, dict[str, float]]:
    """Recall@1 and @3 of every rewording in the paraphrase set: words only, the vector index only, combined."""
    rows = [json.loads(line) for line in PARAPHRASES.read_text(encoding="utf-8").splitlines() if line.strip()]
    out: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        store = _semantic_store(backend, embeddings, tmp)
        _fill_semantic(store, embeddings, rows, distractors, seed)
        threshold = embeddings.similarity_threshold
        memories = {
            "lexical": ReflexionMemory(store),
            "semantic": ReflexionMemory(store, index=True, similarity_threshold=threshold),
            "combined": ReflexionMemory(store, embeddings=embeddings),
        }
        for name, memory in memories.items():
            hits1 = hits3 = others = 0
            per_lang: dict[str, list[int]] = {}
            queries = [(str(r["lesson"]), w) for r in rows for w in r["rewordings"]]
            for lesson, wording in queries:
                found = [x.text for x in memory.search(wording["text"])]
                hits1 += found[:1] == [lesson]
                hits3 += lesson in found[:3]
                others += any(text != lesson for text in found)
                per_lang.setdefault("en" if wording["lang"] == "en" else "other", []).append(
                    lesson in found[:3]
                )
            n = len(queries)
            out[name] = {
                "r1": hits1 / n,
                "r3": hits3 / n,
                "en3": statistics.fmean(per_lang["en"]),
                "other3": statistics.fmean(per_lang["other"]),
                "others": others / n,
                "n": n,
            }
        getattr(getattr(store, "conn", None), "close", lambda: None)()
    return out


def run_semantic_timing(
    backend: str, embeddings: FillCache, size: int, queries: int, seed: int
) -> dict[str, float]:
    """Mean ms per search, words only vs combined, on `size` tasks; the rewordings as queries, interleaved."""
    rows = [json.loads(line) for line in PARAPHRASES.read_text(encoding="utf-8").splitlines() if line.strip()]
    wordings = [w["text"] for r in rows for w in r["rewordings"]]
    rng = random.Random(seed)
    picked = rng.sample(wordings, k=min(queries, len(wordings)))
    with tempfile.TemporaryDirectory() as tmp:
        store = _semantic_store(backend, embeddings, tmp)
        start = time.perf_counter()
        _fill_semantic(store, embeddings, rows, size, seed)
        fill_s = time.perf_counter() - start
        lexical, combined = ReflexionMemory(store), ReflexionMemory(store, embeddings=embeddings)
        times: dict[str, list[float]] = {"lexical": [], "combined": []}
        for query in picked:
            order = ["lexical", "combined"]
            rng.shuffle(order)
            for name in order:
                memory = lexical if name == "lexical" else combined
                times[name].append(_time_ms(lambda m=memory, q=query: m.search(q))[0])  # type: ignore[misc]
        getattr(getattr(store, "conn", None), "close", lambda: None)()
    return {
        "fill_s": fill_s,
        "lexical": statistics.fmean(times["lexical"]),
        "combined": statistics.fmean(times["combined"]),
        "lexical_p50": statistics.median(times["lexical"]),
        "combined_p50": statistics.median(times["combined"]),
    }


def semantic_main(args: argparse.Namespace, backends: list[str]) -> int:
    """Print the recall table and the time per search at each size (`--semantic`)."""
    inner = default_embeddings()
    if inner is None:
        print(
            "the [semantic] extra is not installed (pip install 'reflection-graph[semantic]'): nothing to measure"
        )
        return 1
    embeddings = FillCache(inner)
    print(
        f"paraphrase set: {PARAPHRASES.name} (40 tasks, 121 rewordings, 40 of them in another language; written "
        f"for this project); the embedder's threshold {embeddings.similarity_threshold} was chosen on this set"
    )
    for backend in backends:
        print(
            f"\nrecall, {backend}: the 40 tasks among {args.distractors:,} synthetic tasks, one lesson each"
        )
        res = run_recall(backend, embeddings, args.distractors, args.seed)
        print(
            f"{'method':<10}{'recall@1':>10}{'recall@3':>10}{'@3 English':>12}{'@3 other':>10}{'other lessons':>15}"
        )
        for name, r in res.items():
            print(
                f"{name:<10}{r['r1']:>10.3f}{r['r3']:>10.3f}{r['en3']:>12.3f}{r['other3']:>10.3f}"
                f"{r['others']:>15.3f}"
            )
    sizes = [int(x) for x in args.sizes.split(",") if x.strip()]
    print(
        f"\ntime per search (mean / p50 ms over {args.queries} rewordings, interleaved), query embedding included"
    )
    print(f"{'backend':<14}{'tasks':>9}{'fill s':>9}{'lexical':>18}{'combined':>18}{'combined/lexical':>18}")
    for backend in backends:
        for size in sizes:
            t = run_semantic_timing(backend, embeddings, size, args.queries, args.seed)
            print(
                f"{backend:<14}{size:>9,}{t['fill_s']:>9.1f}{t['lexical']:>10.1f} / {t['lexical_p50']:>5.1f}"
                f"{t['combined']:>10.1f} / {t['combined_p50']:>5.1f}{t['combined'] / t['lexical']:>17.2f}x",
                flush=True,
            )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="ReflexionMemory.search vs a plain scan, side by side.")
    parser.add_argument("--n", type=int, default=100_000, help="tasks to store (default 100000)")
    parser.add_argument("--queries", type=int, default=12, help="queries timed per backend (default 12)")
    parser.add_argument(
        "--backends", default="memory,sqlite", help="comma-separated: memory, sqlite (default both)"
    )
    parser.add_argument(
        "--lessons-per-task", type=int, default=3, help="lessons saved per task (a run saves 1-5; default 3)"
    )
    parser.add_argument(
        "--long-words",
        type=int,
        default=10_000,
        help="words in the long-task check (0 skips it; default 10000)",
    )
    parser.add_argument("--long-reps", type=int, default=3, help="interleaved long/short steps (default 3)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--semantic",
        action="store_true",
        help="semantic memory instead: recall and time per search (issue 21)",
    )
    parser.add_argument("--sizes", default="1000,10000", help="with --semantic: stored tasks to time at")
    parser.add_argument(
        "--distractors", type=int, default=1000, help="with --semantic: tasks besides the set"
    )
    args = parser.parse_args(argv)
    if args.n < 1 or args.queries < 1 or args.lessons_per_task < 1 or args.long_reps < 1:
        parser.error("--n, --queries, --lessons-per-task and --long-reps must be >= 1")
    if args.long_words < 0:
        parser.error("--long-words must be >= 0")
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    unknown = set(backends) - {"memory", "sqlite"}
    if unknown:
        parser.error(f"unknown backends {sorted(unknown)}; choose from memory, sqlite")
    if args.semantic:
        return semantic_main(args, backends)

    rows = []
    for backend in backends:
        print(
            f"filling {backend}: {args.n:,} tasks x {args.lessons_per_task} lessons "
            f"= {args.n * args.lessons_per_task:,} lessons ...",
            flush=True,
        )
        if backend == "memory":
            rows.append(
                run_backend(
                    "InMemoryStore", InMemoryStore(), args.n, args.queries, args.seed, args.lessons_per_task
                )
            )
        else:
            with tempfile.TemporaryDirectory() as tmp:
                with SqliteStore.from_conn_string(str(Path(tmp) / "bench.sqlite")) as store:
                    store.conn.execute("PRAGMA journal_mode=WAL")
                    store.conn.execute("PRAGMA synchronous=NORMAL")
                    store.setup()
                    rows.append(
                        run_backend(
                            "SqliteStore", store, args.n, args.queries, args.seed, args.lessons_per_task
                        )
                    )

    header = (
        f"{'backend':<14}{'entries':>9}{'fill s':>8}{'queries':>9}{'w/ hits':>9}{'agree':>7}"
        f"{'indexed p50':>13}{'mean':>8}{'scan p50':>10}{'mean':>9}{'scan/indexed':>14}"
    )
    print()
    print(header)
    print("-" * len(header))
    for r in rows:
        ratio = float(r["scan_mean"]) / max(float(r["indexed_mean"]), 1e-9)  # type: ignore[arg-type]
        print(
            f"{r['backend']:<14}{r['entries']:>9,}{r['fill_s']:>8.1f}{r['queries']:>9}{r['with_hits']:>9}"
            f"{r['agree']:>7}{r['indexed_p50']:>11.2f}ms{r['indexed_mean']:>6.2f}ms"
            f"{r['scan_p50']:>8.1f}ms{r['scan_mean']:>7.1f}ms{ratio:>13.1f}x"
        )
    print("\nratio = mean scan time / mean indexed time per query, same queries, same store, same run.")
    for r in rows:
        print(
            f"{r['backend']}: indexed mean {r['indexed_similar']:.2f} ms for queries with a near-duplicate "
            f"earlier task, {r['indexed_fresh']:.2f} ms for fresh tasks; per query, indexed made "
            f"{r['indexed_calls']:.1f} store round trips ({r['indexed_ops']:.0f} operations), the scan "
            f"{r['scan_calls']:.1f} ({r['scan_ops']:.0f} operations)."
        )

    if args.long_words:
        print(f"\nlong task: {args.long_words:,} words, SqliteStore, {args.long_reps} interleaved steps ...")
        lo = run_long(args.long_words, args.long_reps, background=min(args.n, 2000), seed=args.seed)
        print(
            f"one step = save a new task + search another of the same kind "
            f"({lo['distinct']:,.0f} distinct words in a long task)\n"
            f"  short task:            {lo['short_ms']:9.1f} ms\n"
            f"  long task, term cap:   {lo['long_ms']:9.1f} ms  ({lo['terms']:.0f} terms; one more step: "
            f"{lo['capped_calls']:.0f} round trips, {lo['capped_ops']:,.0f} operations)\n"
            f"  long task, no cap:     {lo['uncapped_ms']:9.1f} ms  ({lo['uncapped_terms']:,.0f} terms; one more "
            f"step: {lo['uncapped_calls']:.0f} round trips, {lo['uncapped_ops']:,.0f} operations)\n"
            f"  ratio long/short with the cap: {lo['long_ms'] / lo['short_ms']:.1f}x; "
            f"no cap / cap for the long task: {lo['uncapped_ms'] / lo['long_ms']:.1f}x"
        )
    return 0 if all(r["agree"] == r["queries"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
