"""Unit tests for `reflection_graph.memory.ReflexionMemory` (offline, deterministic)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import random
import sqlite3
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langgraph.store.base import BaseStore, Op, Result
from langgraph.store.memory import InMemoryStore
from langgraph.store.sqlite import SqliteStore

from reflection_graph.critique import Critique, Finding
from reflection_graph.memory import (
    LESSONS_HEADER,
    MAX_TASK_TERMS,
    Lesson,
    ReflexionMemory,
    format_lessons,
    jaccard,
    task_tokens,
)
from reflection_graph.prompts import GENERATE_PROMPT, render_prompt
from tests._postgres import pg_dsn

TASK_A = "Write a polite email declining a job offer for a data engineer role"
TASK_SIMILAR = "Write a polite email declining a job offer for a software engineer position"
TASK_UNRELATED = "Sort a list of integers in Python"


def _namespaces_with(store: BaseStore, label: str) -> list[tuple[str, ...]]:
    return [ns for ns in store.list_namespaces(prefix=("reflection_graph",), limit=10_000) if label in ns]


def _items_under(store: BaseStore, namespace: tuple[str, ...]) -> list[str]:
    return [item.key for item in store.search(namespace, limit=10_000)]


# --------------------------------------------------------------------------- similarity


def test_task_tokens_normalize_case_stop_words_and_suffixes() -> None:
    assert task_tokens("Declining the OFFERS, declined offer; decline!") == frozenset({"declin", "offer"})
    assert task_tokens("a the of") == frozenset()
    assert "class" in task_tokens("class") and "class" in task_tokens("classes")


def test_jaccard_values() -> None:
    assert jaccard(frozenset({"a", "b"}), frozenset({"b", "c"})) == pytest.approx(1 / 3)
    assert jaccard(frozenset(), frozenset({"a"})) == 0.0
    assert jaccard(task_tokens(TASK_A), task_tokens(TASK_SIMILAR)) > 0.5
    assert jaccard(task_tokens(TASK_A), task_tokens(TASK_UNRELATED)) == 0.0


# --------------------------------------------------------------------------- lessons from critiques


def test_lessons_from_critiques_orders_dedupes_and_limits() -> None:
    first = Critique(
        issues=["The email never thanks the recruiter.", "Too long"],
        suggestions=["Thank the recruiter by name.", "Keep it under 120 words."],
        is_acceptable=False,
        score=4,
    )
    second = Critique(
        issues=["too long!"],  # near-duplicate of an earlier issue
        suggestions=["thank the recruiter by name"],  # duplicate of an earlier suggestion
        is_acceptable=False,
        score=6,
    )
    lessons = ReflexionMemory.lessons_from_critiques(TASK_A, [first, second.model_dump()])
    assert lessons == [
        "Thank the recruiter by name.",
        "Keep it under 120 words.",
        "Avoid: The email never thanks the recruiter.",
        "Avoid: Too long.",
    ]
    assert ReflexionMemory.lessons_from_critiques(TASK_A, [first], limit=2) == lessons[:2]


def test_lessons_from_critiques_uses_findings_feedback_and_skips_unparsed() -> None:
    with_finding = Critique(
        is_acceptable=False,
        score=3,
        findings=[Finding(message="test_add failed: expected 3, got 4", severity="critical", source="tests")],
    )
    feedback_only = Critique(is_acceptable=False, score=5, feedback="State the deadline explicitly.")
    unparsed = Critique(is_acceptable=False, score=0, feedback="garbage reply {", parsed=False)
    accepted = Critique(is_acceptable=True, score=9, feedback="Great, nothing to change.")
    lessons = ReflexionMemory.lessons_from_critiques(
        "task",
        [with_finding, feedback_only, unparsed, accepted, {"needs_improvement": True, "issues": "Vague"}],
    )
    assert lessons == [
        "Avoid: test_add failed: expected 3, got 4.",
        "State the deadline explicitly.",
        "Avoid: Vague.",
    ]


def test_lessons_are_short() -> None:
    long_text = "word " * 200
    critique = Critique(suggestions=[long_text], is_acceptable=False, score=2)
    (lesson,) = ReflexionMemory.lessons_from_critiques("task", [critique])
    assert len(lesson) <= 160 and lesson.endswith("...")


def test_lessons_from_critiques_rejects_other_types() -> None:
    with pytest.raises(TypeError, match="Critique objects or dicts"):
        ReflexionMemory.lessons_from_critiques("task", ["not a critique"])  # type: ignore[list-item]


# --------------------------------------------------------------------------- formatting


def test_format_lessons_block_fits_generate_prompt() -> None:
    assert format_lessons([]) == ""
    lesson = Lesson(text="Thank the recruiter by name.", task=TASK_A, similarity=0.6, key="k")
    block = ReflexionMemory.format_lessons([lesson, "Keep it short."])
    assert block == f"{LESSONS_HEADER}\n- Thank the recruiter by name.\n- Keep it short.\n"
    prompt = render_prompt(GENERATE_PROMPT, {"task": TASK_SIMILAR, "context": "", "lessons": block})
    assert "- Thank the recruiter by name." in prompt
    assert prompt.index(LESSONS_HEADER) < prompt.index("Draft:")


# --------------------------------------------------------------------------- save / search


def test_docstring_example_runs() -> None:
    from langgraph.store.memory import InMemoryStore as Store

    memory = ReflexionMemory(Store())
    memory.save("Write a polite email declining a job offer", ["Thank the recruiter by name."])
    assert (
        memory.search("Write a polite email declining an offer for a job")[0].text
        == "Thank the recruiter by name."
    )


@pytest.fixture
def memory() -> ReflexionMemory:
    return ReflexionMemory(InMemoryStore())


def test_similar_task_retrieves_and_unrelated_does_not(memory: ReflexionMemory) -> None:
    memory.save(TASK_A, ["Thank the recruiter by name.", "Keep it under 120 words."])
    found = memory.search(TASK_SIMILAR)
    assert [lesson.text for lesson in found] == ["Thank the recruiter by name.", "Keep it under 120 words."]
    assert all(lesson.task == TASK_A for lesson in found)
    assert found[0].similarity == pytest.approx(jaccard(task_tokens(TASK_A), task_tokens(TASK_SIMILAR)))
    assert memory.search(TASK_UNRELATED) == []
    assert memory.search("") == []


def test_results_are_best_first_and_deduplicated(memory: ReflexionMemory) -> None:
    memory.save(
        "Write a polite email declining a job offer", ["Lesson from the close task.", "Shared lesson."]
    )
    memory.save("Write an email to a colleague about lunch", ["Lesson from the far task.", "shared lesson"])
    found = memory.search("Write a polite email declining a job offer for a manager role")
    texts = [lesson.text for lesson in found]
    assert texts[:2] == ["Lesson from the close task.", "Shared lesson."]
    assert sum(1 for t in texts if t.lower().startswith("shared lesson")) == 1
    assert [lesson.similarity for lesson in found] == sorted(
        (lesson.similarity for lesson in found), reverse=True
    )


def test_similarity_threshold_filters() -> None:
    strict = ReflexionMemory(InMemoryStore(), similarity_threshold=0.9)
    strict.save(TASK_A, ["Thank the recruiter by name."])
    assert strict.search(TASK_SIMILAR) == []  # Jaccard ~0.64 < 0.9
    assert [lesson.text for lesson in strict.search(TASK_A.upper())] == ["Thank the recruiter by name."]
    loose = ReflexionMemory(InMemoryStore(), similarity_threshold=0.1)
    loose.save(TASK_A, ["Thank the recruiter by name."])
    assert loose.search("Draft an email for a data team") != []  # shares 'email' and 'data': 2/10
    assert (
        ReflexionMemory(loose.store, similarity_threshold=0.25).search("Draft an email for a data team") == []
    )


def test_top_k_limits_lessons() -> None:
    memory = ReflexionMemory(InMemoryStore(), top_k=2)
    memory.save(TASK_A, ["one", "two", "three"])
    memory.save(TASK_A + " at a bank", ["four", "five"])
    found = memory.search(TASK_A)
    assert [lesson.text for lesson in found] == ["one", "two"]  # the identical task first
    assert len(ReflexionMemory(memory.store, top_k=5).search(TASK_A)) == 5


def test_saving_same_task_merges_lessons_newest_first(memory: ReflexionMemory) -> None:
    memory.save(TASK_A, ["Old lesson.", "Shared."])
    memory.save(TASK_A, ["New lesson.", "shared"])
    assert memory.count() == 1
    wide = ReflexionMemory(memory.store, top_k=10)
    assert [lesson.text for lesson in wide.search(TASK_A)] == ["New lesson.", "shared", "Old lesson."]


def test_nfc_and_nfd_forms_of_one_task_are_one_entry(any_store: BaseStore) -> None:
    """Issue 20 item 9: "é" as one code point (NFC) or as "e" + U+0301 (NFD) is one task, saved once."""
    nfc = "R\u00e9diger un courriel poli pour d\u00e9cliner l'offre d'emploi"
    nfd = "Re\u0301diger un courriel poli pour de\u0301cliner l'offre d'emploi"
    assert nfc != nfd and len(nfd) == len(nfc) + 2
    memory = ReflexionMemory(any_store, top_k=10)
    memory.save(nfc, ["Remercier le recruteur."])
    memory.save(nfd, ["Rester bref."])
    memory.save(nfd.upper(), ["Rester bref."])  # case and the fullwidth form agree as well
    memory.save(nfc.replace("R", "\uff32", 1), ["Signer de son nom."])
    assert memory.count() == 1
    found = memory.search(nfd)
    assert [lesson.text for lesson in found] == [
        "Signer de son nom.",
        "Rester bref.",
        "Remercier le recruteur.",
    ]
    assert {lesson.key for lesson in found} == {found[0].key}


def test_save_ignores_empty_lessons_and_validates(memory: ReflexionMemory) -> None:
    memory.save(TASK_A, [])
    memory.save(TASK_A, ["  "])
    assert memory.count() == 0
    with pytest.raises(ValueError, match="list of strings"):
        memory.save(TASK_A, "one lesson")
    with pytest.raises(ValueError, match="task must be a string"):
        memory.search(None)  # type: ignore[arg-type]


def test_max_entries_evicts_oldest_and_cleans_index() -> None:
    store = InMemoryStore()
    memory = ReflexionMemory(store, max_entries=2)
    memory.save("Translate a menu into French", ["Keep dish names."])
    memory.save("Summarize a court ruling", ["Name the parties."])
    memory.save("Translate a menu into French", ["Translate prices too."])  # refreshes the oldest entry
    memory.save("Compose a haiku about autumn rain", ["Count syllables."])  # evicts the court ruling
    assert memory.count() == 2
    assert memory.search("Summarize a court ruling") == []
    assert [lesson.text for lesson in memory.search("Translate a menu into French")] == [
        "Translate prices too.",
        "Keep dish names.",
    ]
    assert memory.search("Compose a haiku about autumn rain")[0].text == "Count syllables."
    # The evicted entry's postings and word counts are gone too; the index does not grow without bound.
    index_ns = ("reflection_graph", "lessons", "index")
    assert store.search(index_ns, filter={"t": "court"}, limit=100) == []
    assert len(store.search(index_ns, filter={"t": "haiku"}, limit=100)) == 1
    assert store.get(("reflection_graph", "lessons", "df"), "court") is None
    assert len(_items_under(store, ("reflection_graph", "lessons", "order"))) <= 3


def test_max_entries_with_bulk_save_larger_than_limit() -> None:
    memory = ReflexionMemory(InMemoryStore(), max_entries=3)
    memory.save_many((f"Describe the planet number {i} of system{i}", [f"lesson {i}"]) for i in range(10))
    assert memory.count() == 3
    assert memory.search("Describe the planet number 9 of system9")[0].text == "lesson 9"
    assert memory.search("Describe the planet number 2 of system2") == [] or all(
        lesson.text != "lesson 2" for lesson in memory.search("Describe the planet number 2 of system2")
    )


def test_clear_removes_everything(memory: ReflexionMemory) -> None:
    memory.save(TASK_A, ["Thank the recruiter by name."])
    other = ReflexionMemory(memory.store, namespace=("other", "lessons"))
    other.save(TASK_A, ["Kept in another namespace."])
    deleted = memory.clear()
    assert deleted > 3  # entry, postings, counters, order, meta
    assert memory.search(TASK_A) == [] and memory.count() == 0
    assert _items_under(memory.store, ("reflection_graph", "lessons")) == []  # type: ignore[arg-type]
    assert [lesson.text for lesson in other.search(TASK_A)] == ["Kept in another namespace."]
    memory.save(TASK_A, ["After clear."])
    assert [lesson.text for lesson in memory.search(TASK_SIMILAR)] == ["After clear."]


async def test_async_methods() -> None:
    memory = ReflexionMemory(InMemoryStore())
    await memory.asave(TASK_A, ["Thank the recruiter by name."])
    await memory.asave_many([(TASK_UNRELATED, ["Use sorted()."])])
    assert [lesson.text for lesson in await memory.asearch(TASK_SIMILAR)] == ["Thank the recruiter by name."]
    assert [lesson.text for lesson in await memory.asearch("Sort a list of integers in Python quickly")] == [
        "Use sorted()."
    ]
    assert await memory.aclear() > 0
    assert await memory.asearch(TASK_SIMILAR) == []


# --------------------------------------------------------------------------- store resolution and validation


def test_runtime_store_is_used_when_instance_has_none() -> None:
    memory = ReflexionMemory()
    store = InMemoryStore()
    with pytest.raises(ValueError, match="has no store"):
        memory.search(TASK_A)
    memory.save(TASK_A, ["Thank the recruiter by name."], store=store)
    assert memory.search(TASK_SIMILAR, store=store)[0].text == "Thank the recruiter by name."
    assert memory.search(TASK_SIMILAR, store=InMemoryStore()) == []


def test_bound_store_wins_over_call_store() -> None:
    bound = InMemoryStore()
    memory = ReflexionMemory(bound)
    memory.save(TASK_A, ["Lesson."], store=InMemoryStore())
    assert memory.search(TASK_A)[0].text == "Lesson."


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"max_entries": 0}, "max_entries"),
        ({"top_k": 0}, "top_k"),
        ({"similarity_threshold": 1.5}, "similarity_threshold"),
        ({"namespace": "lessons"}, "namespace"),
        ({"namespace": ("a.b",)}, "without '.'"),
        ({"namespace": ("lessons\ud800",)}, "without '.'"),
        ({"namespace": ("langgraph", "x")}, "reserved"),
        ({"store": object()}, "BaseStore"),
        ({"store": InMemoryStore(), "index": True}, "embedding index"),
    ],
)
def test_invalid_arguments_fail_at_construction(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        ReflexionMemory(**kwargs)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- semantic search through the store


def _bag_of_words_embed(texts: list[str]) -> list[list[float]]:
    vocabulary = ["email", "job", "offer", "declin", "polit", "sort", "integer", "python", "list", "engineer"]
    vectors = []
    for text in texts:
        tokens = task_tokens(text)
        vectors.append([1.0 if word in tokens else 0.0 for word in vocabulary] + [0.01])
    return vectors


def test_index_true_uses_store_semantic_search() -> None:
    store = InMemoryStore(index={"dims": 11, "embed": _bag_of_words_embed, "fields": ["task"]})
    memory = ReflexionMemory(store, index=True, similarity_threshold=0.5)
    memory.save(TASK_A, ["Thank the recruiter by name."])
    memory.save(TASK_UNRELATED, ["Use sorted()."])
    found = memory.search("Decline a job offer by email")
    assert [lesson.text for lesson in found] == ["Thank the recruiter by name."]
    assert 0.5 <= found[0].similarity <= 1.0
    assert [lesson.text for lesson in memory.search("python integer list sort")] == ["Use sorted()."]
    # No lexical index is written in this mode: only entries are embedded.
    assert _namespaces_with(store, "index") == []


# --------------------------------------------------------------------------- the index agrees with a full scan


_VOCAB = [f"w{i}" for i in range(24)]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    tasks=st.lists(st.lists(st.sampled_from(_VOCAB), min_size=1, max_size=7), min_size=1, max_size=30),
    query=st.lists(st.sampled_from(_VOCAB), min_size=1, max_size=7),
    threshold=st.sampled_from([0.1, 0.25, 0.4, 0.6, 1.0]),
)
def test_indexed_search_matches_brute_force(
    tasks: list[list[str]], query: list[str], threshold: float
) -> None:
    memory = ReflexionMemory(InMemoryStore(), similarity_threshold=threshold, top_k=100)
    records = [(" ".join(words), [f"lesson for {' '.join(words)}"]) for words in tasks]
    memory.save_many(records)
    query_tokens = task_tokens(" ".join(query))
    expected = {
        f"lesson for {task}"
        for task, _ in records
        if jaccard(query_tokens, task_tokens(task)) >= threshold - 1e-12
        and jaccard(query_tokens, task_tokens(task))
    }
    got = [lesson.text for lesson in memory.search(" ".join(query))]
    assert {text.lower() for text in got} == {text.lower() for text in expected}
    assert [lesson.similarity for lesson in memory.search(" ".join(query))] == sorted(
        (lesson.similarity for lesson in memory.search(" ".join(query))), reverse=True
    )


def _scan(memory: ReflexionMemory, task: str) -> list[str]:
    """What `search` must return, by brute force over every stored entry (same ranking rules)."""
    query = task_tokens(task)
    items = memory.store.search((*memory.namespace, "entries"), limit=100_000)  # type: ignore[union-attr]
    scored = []
    for item in items:
        sim = jaccard(query, frozenset(item.value["tokens"]))
        if sim > 0 and sim >= memory.similarity_threshold - 1e-12:
            scored.append((-sim, -item.value["seq"], item.key, item.value["lessons"]))
    out: list[str] = []
    seen: set[str] = set()
    for *_, lessons in sorted(scored):
        for text in lessons:
            marker = " ".join(text.lower().split())
            if marker not in seen and len(out) < memory.top_k:
                seen.add(marker)
                out.append(text)
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    tasks=st.lists(
        st.tuples(
            st.lists(st.sampled_from(_VOCAB), min_size=1, max_size=8),
            st.lists(st.sampled_from(["a", "b", "c", "d", "e", "f"]), min_size=1, max_size=3),
        ),
        min_size=1,
        max_size=40,
    ),
    query=st.lists(st.sampled_from(_VOCAB), min_size=1, max_size=8),
    threshold=st.sampled_from([0.0, 0.2, 0.25, 0.5, 0.75]),
    top_k=st.integers(min_value=1, max_value=4),
)
def test_adaptive_top_k_matches_full_scan_in_order(
    tasks: list[tuple[list[str], list[str]]], query: list[str], threshold: float, top_k: int
) -> None:
    """Shared lessons across entries, ties and merges: the early-stopping search still equals a full scan."""
    memory = ReflexionMemory(InMemoryStore(), similarity_threshold=threshold, top_k=top_k)
    memory.save_many((" ".join(words), [f"lesson {x}" for x in lessons]) for words, lessons in tasks)
    text = " ".join(query)
    assert [lesson.text for lesson in memory.search(text)] == _scan(memory, text)


def test_many_entries_still_exact_for_rare_words() -> None:
    rng = random.Random(7)
    common = ["write", "report", "email", "summary", "plan"]
    tasks = [f"{rng.choice(common)} {rng.choice(common)} item{i} topic{i % 97}" for i in range(3000)]
    memory = ReflexionMemory(InMemoryStore(), max_entries=5000)
    memory.save_many((task, [f"lesson {i}"]) for i, task in enumerate(tasks))
    found = memory.search(tasks[1234] + " quickly")
    assert found[0].text == "lesson 1234"
    assert found[0].similarity == pytest.approx(
        jaccard(task_tokens(tasks[1234]), task_tokens(tasks[1234] + " quickly"))
    )
    assert all(lesson.similarity < found[0].similarity for lesson in found[1:])


# --------------------------------------------------------------------------- other backends


def test_sqlite_store_roundtrip_and_async_fallback(tmp_path: Path) -> None:
    with SqliteStore.from_conn_string(str(tmp_path / "memory.sqlite")) as store:
        store.setup()
        memory = ReflexionMemory(store, max_entries=2)
        memory.save(TASK_A, ["Thank the recruiter by name."])
        assert memory.search(TASK_SIMILAR)[0].text == "Thank the recruiter by name."
        assert memory.search(TASK_UNRELATED) == []
        memory.save("Summarize a court ruling", ["Name the parties."])
        memory.save("Compose a haiku about autumn rain", ["Count syllables."])
        assert memory.count() == 2 and memory.search(TASK_SIMILAR) == []

        import asyncio

        async def run() -> list[Lesson]:
            await memory.asave(TASK_A, ["Again."])  # SqliteStore has no abatch: runs in a worker thread
            return await memory.asearch(TASK_SIMILAR)

        assert [lesson.text for lesson in asyncio.run(run())] == ["Again."]
        assert memory.clear() > 0 and memory.count() == 0


@pytest.mark.postgres
def test_postgres_store_roundtrip() -> None:
    uri = pg_dsn()
    from langgraph.store.postgres import PostgresStore

    with PostgresStore.from_conn_string(uri) as store:
        store.setup()
        memory = ReflexionMemory(store, namespace=("reflection_graph", "test_memory_pg"), max_entries=2)
        memory.clear()
        memory.save(TASK_A, ["Thank the recruiter by name."])
        assert memory.search(TASK_SIMILAR)[0].text == "Thank the recruiter by name."
        assert memory.search(TASK_UNRELATED) == []
        memory.save("Summarize a court ruling", ["Name the parties."])
        memory.save("Compose a haiku about autumn rain", ["Count syllables."])
        assert memory.count() == 2 and memory.search(TASK_SIMILAR) == []
        assert memory.clear() > 0 and memory.count() == 0


def test_benchmark_smoke_indexed_agrees_with_scan(capsys: pytest.CaptureFixture[str]) -> None:
    from bench.bench_memory import main as bench_main

    argv = ["--n", "400", "--queries", "6", "--backends", "memory,sqlite", "--long-words", "1500"]
    code = bench_main([*argv, "--long-reps", "1"])
    out = capsys.readouterr().out
    assert code == 0, out  # exit 0 only when every query returned the same lessons both ways
    assert "InMemoryStore" in out and "SqliteStore" in out and "scan/indexed" in out
    assert "long task, term cap: " in out and f"({MAX_TASK_TERMS} terms;" in out and "no cap / cap" in out


# --------------------------------------------------------------------------- probe faults (issue 13)


@pytest.fixture(params=["memory", "sqlite"])
def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BaseStore]:
    if request.param == "memory":
        yield InMemoryStore()
    else:
        with SqliteStore.from_conn_string(str(tmp_path / "memory.sqlite")) as store:
            store.setup()
            yield store


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


async def test_concurrent_graph_runs_on_sqlite_keep_the_cap_and_every_lesson(tmp_path: Path) -> None:
    """Concurrent `ainvoke` runs of the graph (as a batch runs them) save through one SqliteStore."""
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

    with _sqlite(tmp_path) as store:
        store.setup()
        memory = ReflexionMemory(store, max_entries=10, top_k=20)
        graph = create_reflection_graph(
            RecordingChatModel(replies=[lambda _: f"draft number {next(drafts)}"]),
            critic=FakeCriticModel(critiques=[critique]),
            max_iterations=1,
            memory=memory,
        )
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
    import re

    from reflection_graph.graph import create_reflection_graph
    from reflection_graph.runners.batch import arun_batch
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

    async def run_batch(name: str, records: list[dict[str, str]]) -> dict[str, dict[str, Any]]:
        in_path, out_path = tmp_path / f"{name}.jsonl", tmp_path / f"{name}.out.jsonl"
        in_path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
        summary = await arun_batch(graph, in_path, out_path, concurrency=16, progress=False)
        assert summary.ok == len(records) and summary.error == 0
        return {e["id"]: e for e in map(json.loads, out_path.read_text(encoding="utf-8").splitlines())}

    with _sqlite(tmp_path) as store:
        store.setup()
        memory = ReflexionMemory(store, max_entries=10, top_k=20)
        graph = create_reflection_graph(
            RecordingChatModel(replies=[lambda _: f"draft number {next(drafts)}"]),
            critic=FakeCriticModel(critiques=[critique]),
            max_iterations=1,
            memory=memory,
        )
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
