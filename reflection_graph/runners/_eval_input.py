"""What `evaluate` hands the batch engine: the input file (the data itself, or a copy with fields taken from
other keys, `fields`), and the graph wrapped so that a record the scorer cannot score is refused before it runs."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from reflection_graph.runners._jsonl import atomic_write, dumps, lines_text, read_lines
from reflection_graph.runners._records import id_key
from reflection_graph.runners._running import resolve_graph
from reflection_graph.runners.scorers import ScorerError

__all__ = ["SCORER_PREFIX", "CheckedGraph", "check_fields", "input_file"]

SCORER_PREFIX = "ScorerError: "
"""How an error the scorer raised inside the graph's run starts, in the batch engine's error row."""


class CheckedGraph:
    """Refuses, before the graph runs, the records the scorer cannot score; builds the graph on first use."""

    def __init__(self, graph_or_factory: Any, problems: Mapping[str, str]) -> None:
        self._source = graph_or_factory
        self._graph: Any = None
        self._problems = problems

    def _resolve(self) -> Any:
        if self._graph is None:
            self._graph = resolve_graph(self._source)
        return self._graph

    async def ainvoke(self, input: Any, config: Any = None, **kwargs: Any) -> Any:
        problem = self._problems.get(id_key(((config or {}).get("metadata") or {}).get("batch_id")))
        if problem is not None:
            raise ScorerError(problem)
        return await self._resolve().ainvoke(input, config, **kwargs)


_FIELDS = ("id", "task", "candidate", "context", "reference", "tests", "schema")


def check_fields(fields: Mapping[str, str] | None) -> dict[str, str]:
    mapping = dict(fields or {})
    for key, source in mapping.items():
        if key not in _FIELDS:
            raise ValueError(f"fields: unknown record key {key!r}; map one of {', '.join(_FIELDS)}")
        if not isinstance(source, str) or not source:
            raise ValueError(f"fields: the source of {key!r} must be a field name, got {source!r}")
    return mapping


def _mapped(obj: dict[str, Any], mapping: Mapping[str, str]) -> dict[str, Any]:
    for key, source in mapping.items():
        if source in obj:
            obj[key] = obj[source]
    return obj


def _mapped_copy(src: Path, dst: Path, mapping: Mapping[str, str]) -> Path:
    """A copy of ``src`` with the mapped fields added; other lines (not JSON objects, not UTF-8) are kept as
    they are, so the batch engine reports them on the same line number."""
    chunks: list[bytes] = []
    for _, text in read_lines(src):
        if isinstance(text, bytes):
            chunks.append(text.rstrip(b"\n") + b"\n")
            continue
        line = text.rstrip("\n")
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            obj = None
        out = dumps(_mapped(obj, mapping)) if isinstance(obj, dict) else line
        chunks.append((out + "\n").encode("utf-8"))
    atomic_write(dst, b"".join(chunks))
    return dst


def input_file(
    data: str | os.PathLike[str] | Sequence[Mapping[str, Any]], out: Path, mapping: Mapping[str, str]
) -> Path:
    """The JSONL file the batch engine reads: ``data`` itself, or its mapped copy / its records in ``out``."""
    if isinstance(data, (str, os.PathLike)):
        in_path = Path(data)
        if not in_path.is_file():
            raise FileNotFoundError(f"data file not found: {in_path}")
        return _mapped_copy(in_path, out / "input.jsonl", mapping) if mapping else in_path
    in_path = out / "input.jsonl"
    atomic_write(in_path, lines_text(dumps(_mapped(dict(r), mapping)) for r in data))
    return in_path
