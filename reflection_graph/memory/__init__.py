"""Reflexion memory across runs: lessons drawn from critiques, kept in a LangGraph `BaseStore`.

`ReflexionMemory` (in `_reflexion.py`) drives five private rooms: `_index.py` (the items in the store and the
lexical inverted index), `_store.py` (store I/O: plans driven through `batch`/`abatch`, and the save lock),
`_semantic.py` (the offline embedder, the store's index config and the rank fusion),
`_lessons.py` (lessons drawn from critiques, merged, ranked and rendered) and `_text.py` (Unicode-safe terms,
Jaccard similarity and keys).
"""

from reflection_graph.memory._lessons import LESSONS_HEADER, Lesson, format_lessons
from reflection_graph.memory._reflexion import DEFAULT_NAMESPACE, ReflexionMemory
from reflection_graph.memory._semantic import (
    E5SmallEmbeddings,
    default_embeddings,
    semantic_index,
    sqlite_store,
)
from reflection_graph.memory._store import setup_store
from reflection_graph.memory._text import MAX_TASK_TERMS, jaccard, task_tokens

__all__ = [
    "DEFAULT_NAMESPACE",
    "LESSONS_HEADER",
    "MAX_TASK_TERMS",
    "E5SmallEmbeddings",
    "Lesson",
    "ReflexionMemory",
    "default_embeddings",
    "format_lessons",
    "jaccard",
    "semantic_index",
    "setup_store",
    "sqlite_store",
    "task_tokens",
]
