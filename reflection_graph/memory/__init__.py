"""Reflexion memory across runs: lessons drawn from critiques, kept in a LangGraph `BaseStore`.

`ReflexionMemory` (in `_reflexion.py`) drives three private rooms: `_index.py` (the items in the store and the
lexical inverted index), `_store.py` (store I/O: plans driven through `batch`/`abatch`, and the save lock),
`_lessons.py` (lessons drawn from critiques, merged, ranked and rendered) and `_text.py` (Unicode-safe terms,
Jaccard similarity and keys).
"""

from reflection_graph.memory._lessons import LESSONS_HEADER, Lesson, format_lessons
from reflection_graph.memory._reflexion import DEFAULT_NAMESPACE, ReflexionMemory
from reflection_graph.memory._store import setup_store
from reflection_graph.memory._text import MAX_TASK_TERMS, jaccard, task_tokens

__all__ = [
    "DEFAULT_NAMESPACE",
    "LESSONS_HEADER",
    "MAX_TASK_TERMS",
    "Lesson",
    "ReflexionMemory",
    "format_lessons",
    "jaccard",
    "setup_store",
    "task_tokens",
]
