"""Unit tests for `reflection_graph.memory.ReflexionMemory` (offline, deterministic)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langgraph.store.base import BaseStore
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
from tests.memory._helpers import (
    TASK_A,
    TASK_SIMILAR,
    TASK_UNRELATED,
    _items_under,
    _namespaces_with,
    _scan,
)

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


def _check_roundtrip(memory: ReflexionMemory) -> None:
    """A lesson saved is found for a similar task, not an unrelated one, and evicted past `max_entries=2`."""
    memory.save(TASK_A, ["Thank the recruiter by name."])
    assert memory.search(TASK_SIMILAR)[0].text == "Thank the recruiter by name."
    assert memory.search(TASK_UNRELATED) == []
    memory.save("Summarize a court ruling", ["Name the parties."])
    memory.save("Compose a haiku about autumn rain", ["Count syllables."])
    assert memory.count() == 2 and memory.search(TASK_SIMILAR) == []


def test_sqlite_store_roundtrip_and_async_fallback(tmp_path: Path) -> None:
    with SqliteStore.from_conn_string(str(tmp_path / "memory.sqlite")) as store:
        store.setup()
        memory = ReflexionMemory(store, max_entries=2)
        _check_roundtrip(memory)

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
        _check_roundtrip(memory)
        assert memory.clear() > 0 and memory.count() == 0


def test_benchmark_smoke_indexed_agrees_with_scan(capsys: pytest.CaptureFixture[str]) -> None:
    from bench.bench_memory import main as bench_main

    argv = ["--n", "400", "--queries", "6", "--backends", "memory,sqlite", "--long-words", "1500"]
    code = bench_main([*argv, "--long-reps", "1"])
    out = capsys.readouterr().out
    assert code == 0, out  # exit 0 only when every query returned the same lessons both ways
    assert "InMemoryStore" in out and "SqliteStore" in out and "scan/indexed" in out
    assert "long task, term cap: " in out and f"({MAX_TASK_TERMS} terms;" in out and "no cap / cap" in out
