"""The input side of a batch: records read from ``IN`` (JSON Lines), and the lines that are not valid records."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from dataclasses import dataclass, field
from typing import Any

from reflection_graph.loop import validate_input
from reflection_graph.runners._jsonl import read_lines, utf8_problem

_RESERVED_KEYS = ("id", "task", "candidate", "context")


def id_key(value: Any) -> str:
    """The identity of a record id: integers and strings stay distinct (``"3"`` vs ``3``)."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


@dataclass(frozen=True)
class BatchRecord:
    """One valid input record.

    Attributes:
        id: the record's ``id`` field, or its line number when it has none.
        line: 1-based line number in ``IN``.
        task: what to produce.
        candidate: an existing output to glean, if given.
        context: extra material for the task, if given.
        metadata: every other field of the input object.
    """

    id: str | int
    line: int
    task: str
    candidate: str | None = None
    context: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> str:
        """The identity used to match input records with output entries."""
        return id_key(self.id)

    def graph_input(self) -> dict[str, Any]:
        """The input mapping handed to the graph (``task`` plus ``candidate``/``context`` when given)."""
        data: dict[str, Any] = {"task": self.task}
        if self.candidate is not None:
            data["candidate"] = self.candidate
        if self.context is not None:
            data["context"] = self.context
        return data

    def as_dict(self) -> dict[str, Any]:
        """The record as it was given: ``id``, the graph input and the metadata (what scorers see)."""
        return {"id": self.id, **self.graph_input(), **self.metadata}

    @property
    def input_hash(self) -> str:
        """``sha256:<hex>`` of what the graph receives (`graph_input`): a stored result belongs to this input only."""
        canonical = json.dumps(self.graph_input(), ensure_ascii=True, sort_keys=True, separators=(",", ":"))
        return "sha256:" + hashlib.sha256(canonical.encode("ascii")).hexdigest()


@dataclass(frozen=True)
class InputError:
    """A line of ``IN`` that is not a valid record.

    Attributes:
        line: 1-based line number.
        message: a one-line explanation starting with ``line N:``.
        id: the line's ``id`` when one could be read (and is not a duplicate), else the line number. Input
            error entries are keyed by line, never merged with a record's entry.
    """

    line: int
    message: str
    id: str | int

    def entry(self) -> dict[str, Any]:
        """The error entry written to ``OUT`` for this line."""
        return {
            "id": self.id,
            "line": self.line,
            "status": "error",
            "error_type": "input",
            "error": self.message,
        }


def _text_field(obj: dict[str, Any], name: str, line: int, *, required: bool = False) -> str | None:
    value = obj.get(name)
    if value is None:
        if required:
            raise ValueError(f"line {line}: missing `{name}` (each record needs a non-empty string `{name}`)")
        return None
    if not isinstance(value, str):
        kind = "a string" if required else "a string or null"
        raise ValueError(f"line {line}: `{name}` must be {kind}, got {type(value).__name__}")
    if required and not value.strip():
        raise ValueError(f"line {line}: `{name}` is empty")
    return value


def _record_id(obj: dict[str, Any], line: int) -> str | int:
    raw_id = obj.get("id")
    if raw_id is None:
        return line
    if isinstance(raw_id, bool) or not isinstance(raw_id, (str, int)):
        raise ValueError(f"line {line}: `id` must be a string or an integer, got {type(raw_id).__name__}")
    if isinstance(raw_id, str) and not raw_id.strip():
        raise ValueError(f"line {line}: `id` is empty; give a non-empty id or leave it out")
    return raw_id


def _parse_line(text: str, line: int) -> BatchRecord:
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"line {line}: not valid JSON: {exc.msg} (column {exc.colno})") from None
    if not isinstance(obj, dict):
        raise ValueError(f"line {line}: expected a JSON object with a `task`, got {type(obj).__name__}")
    record_id = _record_id(obj, line)
    task = _text_field(obj, "task", line, required=True)
    assert task is not None
    record = BatchRecord(
        id=record_id,
        line=line,
        task=task,
        candidate=_text_field(obj, "candidate", line),
        context=_text_field(obj, "context", line),
        metadata={k: v for k, v in obj.items() if k not in _RESERVED_KEYS},
    )
    try:  # the graph's own check: what it would refuse (a lone surrogate, a task over its limit) never runs
        validate_input(record.graph_input())
    except ValueError as exc:
        raise ValueError(f"line {line}: {exc}") from None
    return record


def _guess_id(text: str, line: int) -> str | int:
    with contextlib.suppress(ValueError):
        obj = json.loads(text)
        if isinstance(obj, dict):
            raw = obj.get("id")
            if isinstance(raw, (str, int)) and not isinstance(raw, bool) and raw != "":
                return raw
    return line


def read_input(in_path: str | os.PathLike[str]) -> tuple[list[BatchRecord], list[InputError]]:
    """Parse ``IN`` into valid records and per-line input errors (never raises for bad lines).

    A line that is not valid UTF-8, not JSON, not an object, has no non-empty string ``task``, holds what the
    graph's own input check refuses (a lone surrogate, a task over its length limit), or repeats an earlier
    record's identity is an `InputError` naming its line; the other lines are read as usual.

    Args:
        in_path: the JSONL input file.

    Returns:
        ``(records, errors)`` in file order.

    Raises:
        FileNotFoundError: when ``in_path`` does not exist.
    """
    records: list[BatchRecord] = []
    errors: list[InputError] = []
    seen: dict[str, int] = {}
    for line_no, raw in read_lines(in_path):
        if isinstance(raw, bytes):
            message = f"line {line_no}: not valid UTF-8 ({utf8_problem(raw)}); save the file as UTF-8"
            errors.append(InputError(line=line_no, message=message, id=line_no))
            continue
        text = raw.strip()
        if not text:
            continue
        try:
            record = _parse_line(text, line_no)
        except ValueError as exc:
            errors.append(InputError(line=line_no, message=str(exc), id=_guess_id(text, line_no)))
            continue
        first = seen.get(record.key)
        if first is not None:
            hint = " (records without an `id` are identified by their line number)" if first else ""
            message = f"line {line_no}: duplicate id {record.key} (already used on line {first}){hint}"
            errors.append(InputError(line=line_no, message=message, id=line_no))
            continue
        seen[record.key] = line_no
        records.append(record)
    return records, errors
