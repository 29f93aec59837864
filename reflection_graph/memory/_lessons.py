"""Lesson shaping: lessons drawn from critiques (no model call), merged per task, ranked and rendered."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langgraph.store.base import Item
from pydantic import ValidationError

from reflection_graph.critique import Critique, parse_critique
from reflection_graph.memory._text import clean_text, jaccard, lesson_key, shorten

LESSONS_HEADER = "Lessons from earlier similar tasks:"
MAX_LESSONS_PER_RUN = 5
MAX_LESSONS_PER_ENTRY = 8


@dataclass(frozen=True)
class Lesson:
    """One lesson returned by `ReflexionMemory.search`.

    Attributes:
        text: The lesson, one short sentence.
        task: The earlier task it was learned on.
        similarity: How similar that task is to the query: the Jaccard similarity of word sets for the lexical
            index, the store's semantic score with `index=True`, or the fused score when the memory has
            `embeddings` (see `ReflexionMemory`).
        key: The key of the stored entry it comes from.
        saved_at: ISO timestamp of the save that stored it.
    """

    text: str
    task: str
    similarity: float
    key: str
    saved_at: str = ""

    def __str__(self) -> str:
        return self.text


def format_lessons(lessons: Sequence[Lesson | str]) -> str:
    """Render lessons as a short block for the `{lessons}` placeholder of `GENERATE_PROMPT`.

    Args:
        lessons: Lessons from `ReflexionMemory.search`, or plain strings.

    Returns:
        `""` when there are none, else `"Lessons from earlier similar tasks:\\n- ...\\n- ...\\n"`.
    """
    lines = [f"- {shorten(str(lesson))}" for lesson in lessons if str(lesson).strip()]
    if not lines:
        return ""
    return LESSONS_HEADER + "\n" + "\n".join(lines) + "\n"


def _as_critique(critique: Critique | Mapping[str, Any]) -> Critique:
    if isinstance(critique, Critique):
        return critique
    if isinstance(critique, Mapping):
        try:
            return Critique.model_validate(dict(critique))
        except ValidationError:
            return parse_critique(dict(critique))
    raise TypeError(
        f"critiques must be Critique objects or dicts (Critique.model_dump()), got {type(critique).__name__}"
    )


def lessons_from_critiques(
    critiques: Iterable[Critique | Mapping[str, Any]], *, limit: int = MAX_LESSONS_PER_RUN
) -> list[str]:
    """Draw short lessons from the critiques of one run; see `ReflexionMemory.lessons_from_critiques`."""
    candidates: list[str] = []
    for raw in critiques:
        critique = _as_critique(raw)
        if not critique.parsed:
            continue
        candidates.extend(critique.suggestions)
        issues = [*critique.issues, *(f.message for f in critique.findings)]
        candidates.extend(f"Avoid: {issue.strip().rstrip('.')}." for issue in issues if issue.strip())
        if not critique.suggestions and not issues and not critique.is_acceptable and critique.feedback:
            candidates.append(critique.feedback)
    lessons: list[str] = []
    kept_words: list[frozenset[str]] = []
    for text in candidates:
        text = shorten(clean_text(text))
        words = frozenset(lesson_key(text.removeprefix("Avoid: ")).split())
        if len(text) < 3 or not words:
            continue
        if any(jaccard(words, other) >= 0.8 for other in kept_words):
            continue
        lessons.append(text)
        kept_words.append(words)
        if len(lessons) >= limit:
            break
    return lessons


def merge_lessons(newer: Sequence[str], older: Sequence[str]) -> list[str]:
    """`newer` then `older`, without near-duplicates (same normalized words)."""
    out: list[str] = []
    seen: set[str] = set()
    for text in [*newer, *older]:
        marker = lesson_key(text)
        if marker and marker not in seen:
            seen.add(marker)
            out.append(text)
    return out


def pick_lessons(scored: list[tuple[float, Item]], top_k: int) -> list[Lesson]:
    """The first `top_k` distinct lessons of the best entries (most similar first, newer first among equals)."""
    scored.sort(key=lambda s: (-s[0], -int(s[1].value.get("seq", 0)), s[1].key))
    lessons: list[Lesson] = []
    seen: set[str] = set()
    for similarity, entry in scored:
        for text in entry.value.get("lessons", []):
            marker = lesson_key(str(text))
            if not marker or marker in seen:
                continue
            seen.add(marker)
            lessons.append(
                Lesson(
                    text=str(text),
                    task=str(entry.value.get("task", "")),
                    similarity=round(similarity, 6),
                    key=entry.key,
                    saved_at=str(entry.value.get("saved_at", "")),
                )
            )
            if len(lessons) >= top_k:
                return lessons
    return lessons
