"""Memory under faults found by probes (issue 13): lone surrogates, concurrent saves from threads, event loops
and graph runs, non-ASCII tasks and very long tasks."""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import random
import sqlite3
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langgraph.store.base import BaseStore, Op, Result
from langgraph.store.memory import InMemoryStore
from langgraph.store.sqlite import SqliteStore

from reflection_graph.memory import (
    MAX_TASK_TERMS,
    ReflexionMemory,
    jaccard,
    task_tokens,
)
from tests.memory._helpers import TASK_A, _items_under, _namespaces_with, _scan

# --------------------------------------------------------------------------- probe faults (issue 13)


# Fault 4: lone surrogates (valid JSON "\ud800") are stored surrogate-safe, with U+FFFD in their place.


def test_lone_surrogates_in_task_and_lessons_are_saved_not_raised(any_store: BaseStore) -> None:
    memory = ReflexionMemory(any_store, top_k=5)
    task = "Write a haiku about \ud800 autumn rain"
    memory.save(task, ["Avoid: the word \udfff twice.", "Count syllables."])
    assert memory.count() == 1
    found = memory.search(task)
    assert [lesson.text for lesson in found] == ["Avoid: the word \ufffd twice.", "Count syllables."]
    assert found[0].task == "Write a haiku about \ufffd autumn rain"
    assert memory.search("Write a haiku about autumn rain")[0].text == "Avoid: the word \ufffd twice."
    # The same task saved again merges into one entry (the key is computed on the stored text).
    memory.save(task, ["Use a seasonal word."])
    assert memory.count() == 1
    assert memory.search(task)[0].text == "Use a seasonal word."


def _surrogate_graph(store: BaseStore) -> tuple[Any, ReflexionMemory]:
    from reflection_graph.graph import create_reflection_graph
    from tests.fakes import FakeCriticModel, RecordingChatModel

    # The critic replies with JSON text that escapes a lone surrogate (valid JSON, as a model may write it).
    critiques = [
        '{"issues": ["Bad byte \\ud800 in line 2"], "suggestions": [], "is_acceptable": false, "score": 4}',
        {"issues": [], "suggestions": [], "is_acceptable": True, "score": 9},
    ]
    memory = ReflexionMemory(store)
    generator = RecordingChatModel(replies=["first draft", "second draft"])
    graph = create_reflection_graph(
        generator, critic=FakeCriticModel(critiques=critiques), max_iterations=2, memory=memory
    )
    return graph, memory


def test_graph_with_surrogate_task_and_critique_returns_result_and_saves(any_store: BaseStore) -> None:
    graph, memory = _surrogate_graph(any_store)
    result = graph.invoke({"task": "Write a haiku about rain"})  # a surrogate task is refused (issue 20)
    assert result["candidate"] == "second draft"
    assert result["stop_reason"] == "accepted"
    assert not result.get("error")  # the lesson was saved, not dropped with an error
    found = memory.search("Write a haiku about rain")
    assert [lesson.text for lesson in found] == ["Avoid: Bad byte \ufffd in line 2."]


async def test_graph_async_with_surrogate_returns_result_and_saves(any_store: BaseStore) -> None:
    graph, memory = _surrogate_graph(any_store)
    result = await graph.ainvoke({"task": "Write a haiku about rain"})
    assert result["candidate"] == "second draft" and not result.get("error")
    assert memory.count() == 1


# Fault 6: concurrent saves on one store (threads, asyncio.gather) keep the cap and every lesson.


def _check_consistent(memory: ReflexionMemory, cap: int) -> None:
    """At most `cap` entries; each kept entry is found by its own task; no posting points at a missing entry."""
    store = memory.store
    assert store is not None
    entries = store.search((*memory.namespace, "entries"), limit=100_000)
    assert 0 < len(entries) <= cap
    for entry in entries:
        assert memory.search(entry.value["task"])[0].key == entry.key
    keys = {entry.key for entry in entries}
    postings = [item for ns in _namespaces_with(store, "index") for item in store.search(ns, limit=100_000)]
    assert {item.value["e"] for item in postings} == keys
    assert len(_items_under(store, (*memory.namespace, "order"))) <= cap


def _sqlite(tmp_path: Path) -> Any:
    return SqliteStore.from_conn_string(str(tmp_path / "memory.sqlite"))


def test_threaded_saves_keep_max_entries_and_still_evict(tmp_path: Path) -> None:
    with _sqlite(tmp_path) as store:
        store.setup()
        memory = ReflexionMemory(store, max_entries=50)
        tasks = [f"Describe planet number {i} orbiting star{i}" for i in range(200)]
        with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
            list(pool.map(lambda t: memory.save(t, [f"lesson for {t}"]), tasks))
        assert memory.count() <= 50
        _check_consistent(memory, 50)
        for i in range(200, 260):  # later saves still evict
            memory.save(f"Describe planet number {i} orbiting star{i}", [f"late lesson {i}"])
        assert memory.count() == 50
        _check_consistent(memory, 50)
        assert memory.search("Describe planet number 259 orbiting star259")[0].text == "late lesson 259"


def test_threaded_saves_of_one_task_keep_every_lesson(tmp_path: Path) -> None:
    with _sqlite(tmp_path) as store:
        store.setup()
        memory = ReflexionMemory(store, top_k=20)
        lessons = [f"Distinct lesson number {i}." for i in range(8)]
        with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
            list(pool.map(lambda lesson: memory.save(TASK_A, [lesson]), lessons))
        assert memory.count() == 1
        assert sorted(lesson.text for lesson in memory.search(TASK_A)) == sorted(lessons)


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
async def test_gathered_async_saves_keep_max_entries_and_every_lesson(backend: str, tmp_path: Path) -> None:
    with _sqlite(tmp_path) as sqlite_store:
        sqlite_store.setup()
        store: BaseStore = InMemoryStore() if backend == "memory" else sqlite_store
        memory = ReflexionMemory(store, max_entries=50, top_k=20)
        tasks = [f"Describe planet number {i} orbiting star{i}" for i in range(200)]
        await asyncio.gather(*(memory.asave(t, [f"lesson for {t}"]) for t in tasks))
        assert memory.count() <= 50
        _check_consistent(memory, 50)
        for i in range(200, 230):
            await memory.asave(f"Describe planet number {i} orbiting star{i}", [f"late lesson {i}"])
        assert memory.count() == 50
        _check_consistent(memory, 50)

        lessons = [f"Distinct lesson number {i}." for i in range(8)]
        await asyncio.gather(*(memory.asave(TASK_A, [lesson]) for lesson in lessons))
        assert sorted(lesson.text for lesson in await memory.asearch(TASK_A)) == sorted(lessons)


def _lesson_graph(memory: ReflexionMemory) -> Any:
    """A one-round graph on `memory` whose drafts are numbered (`draft number N`) and whose critique of each
    suggests `Improve draft number N further.`: every run saves a lesson of its own."""
    import re

    from reflection_graph.graph import create_reflection_graph
    from tests.fakes import FakeCriticModel, RecordingChatModel

    drafts = itertools.count()

    def critique(messages: list[Any]) -> dict[str, Any]:
        draft = re.findall(r"draft number \d+", str(messages[-1].content))[-1]
        return {
            "issues": [],
            "suggestions": [f"Improve {draft} further."],
            "is_acceptable": False,
            "score": 5,
        }

    return create_reflection_graph(
        RecordingChatModel(replies=[lambda _: f"draft number {next(drafts)}"]),
        critic=FakeCriticModel(critiques=[critique]),
        max_iterations=1,
        memory=memory,
    )


async def test_concurrent_graph_runs_on_sqlite_keep_the_cap_and_every_lesson(tmp_path: Path) -> None:
    """Concurrent `ainvoke` runs of the graph (as a batch runs them) save through one SqliteStore."""
    with _sqlite(tmp_path) as store:
        store.setup()
        memory = ReflexionMemory(store, max_entries=10, top_k=20)
        graph = _lesson_graph(memory)
        results = await asyncio.gather(
            *(graph.ainvoke({"task": f"Describe planet number {i} orbiting star{i}"}) for i in range(30))
        )
        assert all(r["candidate"].startswith("draft number") and not r.get("error") for r in results)
        _check_consistent(memory, 10)
        results = await asyncio.gather(*(graph.ainvoke({"task": TASK_A}) for _ in range(8)))
        expected = sorted(f"Improve {r['candidate']} further." for r in results)
        assert sorted(lesson.text for lesson in memory.search(TASK_A)) == expected
        _check_consistent(memory, 10)


async def test_batch_with_memory_on_sqlite_keeps_the_cap_and_every_lesson(
    tmp_path: Path,
) -> None:
    """`arun_batch` runs records concurrently through one graph whose memory is on a SqliteStore."""
    import json

    from reflection_graph.runners.batch import arun_batch

    async def run_batch(name: str, records: list[dict[str, str]]) -> dict[str, dict[str, Any]]:
        in_path, out_path = tmp_path / f"{name}.jsonl", tmp_path / f"{name}.out.jsonl"
        in_path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
        summary = await arun_batch(graph, in_path, out_path, concurrency=16, progress=False)
        assert summary.ok == len(records) and summary.error == 0
        return {e["id"]: e for e in map(json.loads, out_path.read_text(encoding="utf-8").splitlines())}

    with _sqlite(tmp_path) as store:
        store.setup()
        memory = ReflexionMemory(store, max_entries=10, top_k=20)
        graph = _lesson_graph(memory)
        await run_batch(
            "planets", [{"id": f"p{i}", "task": f"Describe planet {i} of star{i}"} for i in range(30)]
        )
        assert memory.count() == 10
        _check_consistent(memory, 10)

        records = [{"id": f"a{i}", "task": TASK_A} for i in range(8)]
        entries = await run_batch("same", records)
        assert sorted(lesson.text for lesson in memory.search(TASK_A)) == sorted(
            f"Improve {entries[f'a{i}']['candidate']} further." for i in range(8)
        )
        _check_consistent(memory, 10)


def test_threads_and_event_loops_share_one_lock(tmp_path: Path) -> None:
    """Sync saves in threads and async saves in two event loops, all on one SqliteStore at once."""
    with _sqlite(tmp_path) as store:
        store.setup()
        memory = ReflexionMemory(store, max_entries=30, top_k=20)
        # TASK_A is saved last by all three, so no later save evicts it
        others_done = threading.Barrier(3, timeout=120)

        def sync_part() -> None:
            for i in range(40):
                memory.save(f"Sync task {i} about topic{i}", [f"sync lesson {i}"])
            others_done.wait()
            memory.save(TASK_A, ["From the thread."])

        def async_part(label: str) -> None:
            async def run() -> None:
                await asyncio.gather(
                    *(memory.asave(f"{label} task {i} about topic{i}", [f"{label} {i}"]) for i in range(40))
                )
                await asyncio.to_thread(others_done.wait)
                await memory.asave(TASK_A, [f"From loop {label}."])

            asyncio.run(run())

        with concurrent.futures.ThreadPoolExecutor(max_workers=3) as pool:
            futures = [
                pool.submit(sync_part),
                pool.submit(async_part, "Alpha"),
                pool.submit(async_part, "Beta"),
            ]
            for future in futures:
                future.result()
        _check_consistent(memory, 30)
        assert sorted(lesson.text for lesson in memory.search(TASK_A)) == [
            "From loop Alpha.",
            "From loop Beta.",
            "From the thread.",
        ]


# Fault 7: non-ASCII tasks get tokens and match.


def test_task_tokens_are_unicode_aware() -> None:
    assert "café" in task_tokens("Un café au lait")
    assert task_tokens("ＡＢＣ Ｃａｆé") == task_tokens("abc café")  # NFKC: full-width forms fold
    assert task_tokens("STRASSE") == task_tokens("straße")  # casefold
    assert task_tokens("Привет мир") == {"привет", "мир"}
    assert task_tokens("丁寧なメール") == {"丁寧", "寧な", "なメ", "メー", "ール"}  # CJK: character bigrams
    assert task_tokens("猫") == {"猫"}
    assert task_tokens("snake_case") == task_tokens("snake case") == {"snak", "cas"}  # English suffixes go


@pytest.mark.parametrize(
    ("task", "similar", "unrelated"),
    [
        (
            "求人を丁寧に断るメールを書いてください",
            "求人を丁寧に断るメールを作成してください",
            "整数のリストを並べ替えるコードを書く",
        ),
        ("写一封礼貌的邮件拒绝工作邀请", "写一封礼貌的邮件来拒绝这份工作邀请", "用Python对整数列表排序"),
        (
            "Напишите вежливое письмо с отказом от предложения работы",
            "Напишите вежливое письмо с отказом от работы",
            "Отсортируйте список целых чисел на Python",
        ),
        (
            "Écrire un courriel poli pour refuser une offre d'emploi",
            "Écrire un courriel très poli pour refuser l'offre d'emploi",
            "Trier une liste d'entiers en Python",
        ),
    ],
)
def test_non_ascii_tasks_match(any_store: BaseStore, task: str, similar: str, unrelated: str) -> None:
    memory = ReflexionMemory(any_store)
    memory.save(task, ["礼儀正しく書く。", "Réponds poliment."])
    found = memory.search(similar)
    assert [lesson.text for lesson in found] == ["礼儀正しく書く。", "Réponds poliment."]
    assert found[0].similarity == pytest.approx(jaccard(task_tokens(task), task_tokens(similar)), abs=1e-6)
    assert memory.search(unrelated) == []


_MIXED = [
    "猫",
    "犬",
    "が",
    "好き",
    "メール",
    "丁寧",
    "кот",
    "собака",
    "café",
    "naïve",
    "ＡＢＣ",
    "abc",
    "straße",
]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    tasks=st.lists(
        st.tuples(st.lists(st.sampled_from(_MIXED), min_size=1, max_size=6), st.sampled_from(["", " "])),
        min_size=1,
        max_size=25,
    ),
    query=st.tuples(st.lists(st.sampled_from(_MIXED), min_size=1, max_size=6), st.sampled_from(["", " "])),
    top_k=st.integers(min_value=1, max_value=4),
)
def test_mixed_script_search_matches_full_scan(
    tasks: list[tuple[list[str], str]], query: tuple[list[str], str], top_k: int
) -> None:
    """Bigrams across words, NFKC and case folding: the indexed search still equals a full scan."""
    memory = ReflexionMemory(InMemoryStore(), top_k=top_k, similarity_threshold=0.2)
    memory.save_many((sep.join(words), [f"lesson {i}"]) for i, (words, sep) in enumerate(tasks))
    text = query[1].join(query[0])
    assert [lesson.text for lesson in memory.search(text)] == _scan(memory, text)


def test_non_ascii_critiques_give_lessons() -> None:
    critique = {"issues": ["敬語が足りない"], "suggestions": ["Используйте вежливую форму."], "score": 4}
    assert ReflexionMemory.lessons_from_critiques("t", [critique]) == [
        "Используйте вежливую форму.",
        "Avoid: 敬語が足りない.",
    ]


# Fault 8: a 10,000-word task costs a bounded number of store operations (counted, not timed).


class _CountingSqliteStore(SqliteStore):
    """A SqliteStore that counts the operations it is asked to run."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.ops = 0
        self.round_trips = 0

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        self.ops += len(ops)
        self.round_trips += 1
        return super().batch(ops)


def _long_task(words: int, seed: int) -> str:
    rng = random.Random(seed)
    vocabulary = [f"{a}{b}{c}" for a in "bcdfgklmnprst" for b in "aeiou" for c in "dklmnrstxz"]
    weights = [1 / rank for rank in range(1, len(vocabulary) + 1)]  # Zipf, as words occur in prose
    return "Summarize this report: " + " ".join(rng.choices(vocabulary, weights, k=words))


def test_long_task_costs_bounded_store_operations(tmp_path: Path) -> None:
    long_task = _long_task(10_000, seed=1)
    assert len(set(long_task.split())) > 500  # hundreds of distinct words
    tokens = task_tokens(long_task)
    assert len(tokens) == MAX_TASK_TERMS
    assert tokens == task_tokens(long_task)  # the selection is deterministic
    conn = sqlite3.connect(str(tmp_path / "memory.sqlite"), check_same_thread=False, isolation_level=None)
    store = _CountingSqliteStore(conn)
    store.setup()
    memory = ReflexionMemory(store)
    memory.save_many((_long_task(10_000, seed=s), [f"lesson {s}"]) for s in range(2, 6))
    store.ops = store.round_trips = 0
    memory.save(long_task, ["Lead with the conclusion."])
    # entry + order slot + one posting, one count read and one count write per term, meta
    assert store.ops <= 4 * MAX_TASK_TERMS + 10
    store.ops = store.round_trips = 0
    found = memory.search(long_task)
    assert found[0].text == "Lead with the conclusion."
    assert store.ops <= 3 * MAX_TASK_TERMS + 10 and store.round_trips <= 20
    store.ops = 0
    other = _long_task(10_000, seed=99)  # same word distribution: similar to every stored task
    found = memory.search(other)
    assert store.ops <= 3 * MAX_TASK_TERMS + 10
    assert len(found) == 3 and [lesson.text for lesson in found] == _scan(memory, other)
    conn.close()
