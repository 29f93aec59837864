"""Reflexion memory across runs: lessons drawn from critiques, kept in a LangGraph `BaseStore`."""

from reflection_graph.memory._memory import (
    DEFAULT_NAMESPACE,
    LESSONS_HEADER,
    MAX_TASK_TERMS,
    Lesson,
    ReflexionMemory,
    format_lessons,
    jaccard,
    task_tokens,
)

__all__ = [
    "DEFAULT_NAMESPACE",
    "LESSONS_HEADER",
    "MAX_TASK_TERMS",
    "Lesson",
    "ReflexionMemory",
    "format_lessons",
    "jaccard",
    "task_tokens",
]
