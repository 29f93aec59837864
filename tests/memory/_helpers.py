"""Tasks and brute-force checks shared by the memory tests."""

from __future__ import annotations

from langgraph.store.base import BaseStore

from reflection_graph.memory import ReflexionMemory, jaccard, task_tokens

TASK_A = "Write a polite email declining a job offer for a data engineer role"
TASK_SIMILAR = "Write a polite email declining a job offer for a software engineer position"
TASK_UNRELATED = "Sort a list of integers in Python"


def _namespaces_with(store: BaseStore, label: str) -> list[tuple[str, ...]]:
    return [ns for ns in store.list_namespaces(prefix=("reflection_graph",), limit=10_000) if label in ns]


def _items_under(store: BaseStore, namespace: tuple[str, ...]) -> list[str]:
    return [item.key for item in store.search(namespace, limit=10_000)]


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
