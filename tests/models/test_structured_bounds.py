"""The JSON grammar's bounds: a bound the schema declares stands on every pass (its strings are never cut shorter),
a retry lowers only the item count, and a retry whose grammar would not change is skipped."""

from __future__ import annotations

import json
from typing import Any

import pytest

from reflection_graph.critics.judge import WrittenCritique
from reflection_graph.critique import CritiqueOutput
from reflection_graph.models._structured import bounded_json_schema, generate_json


def _fault(schema: dict[str, Any]) -> dict[str, Any]:
    return dict(schema["$defs"]["Fault"]["properties"])


def test_declared_bounds_stand_and_a_retry_lowers_only_the_item_count() -> None:
    schema = WrittenCritique.model_json_schema()
    first = bounded_json_schema(schema)
    assert first["properties"]["faults"]["maxItems"] == 3
    assert {p["maxLength"] for p in _fault(first).values()} == {160}  # not the default 100
    retry = bounded_json_schema(schema, max_string=30, max_items=1, retry=True)
    assert retry["properties"]["faults"]["maxItems"] == 1
    assert {p["maxLength"] for p in _fault(retry).values()} == {160}  # a whole sentence still fits
    assert set(retry["$defs"]["Fault"]["required"]) == {"issue", "fix"}


def test_undeclared_bounds_still_tighten() -> None:
    retry = bounded_json_schema(CritiqueOutput.model_json_schema(), max_string=30, max_items=1, retry=True)
    assert (
        retry["properties"]["feedback"]["maxLength"] == 30 and retry["properties"]["issues"]["maxItems"] == 1
    )
    huge = bounded_json_schema({"type": "string", "maxLength": 100_000})
    assert huge["maxLength"] == 400  # a declared bound is kept only up to 400


def test_a_retry_with_the_same_grammar_is_skipped() -> None:
    pytest.importorskip("llama_cpp", reason='needs pip install "reflection-graph[local]"')
    grammars: list[Any] = []

    def complete(grammar: Any) -> dict[str, Any]:
        grammars.append(grammar)
        return {"choices": [{"text": '{"faults": [{"issue": "cut'}]}

    text, results = generate_json(complete, WrittenCritique.model_json_schema())
    # pass 1 (3 faults), pass 2 (1 fault); pass 3 would be pass 2 again (every string bound is declared)
    assert len(results) == len(grammars) == 2
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)
