"""Structured output on llama.cpp: a JSON schema made safe for a token-limited grammar, and the parsing chain.

The schema is turned into a llama.cpp grammar with bounded string lengths and list sizes, so the JSON always
closes within the token budget; the reply is then validated with the real schema.

A string or list with no bound of its own gets the grammar's (`_MAX_STRING`, `_MAX_ITEMS`), tightened on a retry
when a reply does not close. A bound the schema declares itself (`maxLength`, `maxItems`, up to `_MAX_DECLARED`)
is the schema's promise that a whole item fits: it stands on every pass, and a retry only lowers the number of
items, so a declared string is never cut shorter than its author allowed (the `JudgeCritic`'s faults: one
sentence each, up to 160 characters).
"""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Callable
from operator import itemgetter
from typing import Any

from langchain_core.exceptions import OutputParserException
from langchain_core.language_models import LanguageModelInput
from langchain_core.messages import BaseMessage
from langchain_core.runnables import Runnable, RunnableLambda, RunnableMap, RunnablePassthrough
from pydantic import BaseModel, TypeAdapter

from reflection_graph.models._llama import _import_llama_cpp

# Grammar bounds: strings and lists are capped so the JSON closes within the token budget.
_MAX_STRING = 100
_MAX_ITEMS = 2
_TIGHTER = ((_MAX_STRING, _MAX_ITEMS), (60, 1), (30, 1))
_MAX_DECLARED = 400
"""A bound a schema declares itself is kept up to this many characters or items."""


def _bound(node: Any, max_string: int, max_items: int, fill_required: bool, first: bool = True) -> Any:
    if isinstance(node, list):
        return [_bound(item, max_string, max_items, fill_required, first) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: _bound(value, max_string, max_items, fill_required, first) for key, value in node.items()}
    kind = out.get("type")
    if kind == "string" and "enum" not in out and "pattern" not in out and "format" not in out:
        declared = out.get("maxLength")
        out["maxLength"] = min(int(declared), _MAX_DECLARED) if declared is not None else max_string
    if kind == "array":
        declared = out.get("maxItems")
        if declared is None:
            out["maxItems"] = max_items
        else:  # the schema's own count on the first pass; a retry lowers it like any other
            out["maxItems"] = min(int(declared), _MAX_DECLARED if first else max_items)
        out["minItems"] = min(int(out.get("minItems", 0)), out["maxItems"])
    if kind in ("number", "integer") and "enum" not in out:
        low, high = out.get("minimum"), out.get("maximum")
        # llama.cpp grammars ignore minimum/maximum: turn a small integer range into an enum instead.
        if isinstance(low, (int, float)) and isinstance(high, (int, float)) and 0 <= high - low <= 100:
            out = {k: v for k, v in out.items() if k not in ("minimum", "maximum", "type")}
            out["type"] = "integer"
            out["enum"] = list(range(int(-(-low // 1)), int(high // 1) + 1))
    if kind == "object" and fill_required and isinstance(out.get("properties"), dict):
        out["required"] = list(out["properties"])
    out.pop("default", None)
    return out


def bounded_json_schema(
    schema: dict[str, Any],
    *,
    max_string: int = _MAX_STRING,
    max_items: int = _MAX_ITEMS,
    retry: bool = False,
) -> dict[str, Any]:
    """A copy of a JSON schema made safe for a token-limited grammar.

    Every free string with no `maxLength` of its own gets `maxLength = max_string`, every array with no
    `maxItems` gets `maxItems = max_items`; a declared bound is kept (up to 400), except that on a `retry` a
    declared `maxItems` is lowered to `max_items` too (a declared `maxLength` never is: its strings stay whole).
    Every object lists all its properties as required (so the model fills them in), and a number with a small
    `minimum..maximum` range becomes an integer enum (llama.cpp grammars do not enforce numeric bounds).
    Validate the result with the real schema, not with this copy.
    """
    return _bound(copy.deepcopy(schema), max_string, max_items, True, not retry)


def _schema_of(schema: dict[str, Any] | type) -> dict[str, Any]:
    if isinstance(schema, dict):
        return schema
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        return schema.model_json_schema()
    try:
        return TypeAdapter(schema).json_schema()
    except Exception as exc:  # noqa: BLE001 - pydantic raises several types for unsupported schemas
        raise ValueError(
            f"with_structured_output needs a pydantic model class, a TypedDict or a JSON-schema dict, got {schema!r}"
        ) from exc


# llama-cpp-python's JSON-schema grammar lets a string hold any character but `"` and `\\`, raw control
# characters included (llama.cpp's own converter excludes them). A raw newline inside a string is not JSON
# (`json.loads` rejects it), so a model that writes one (Gemma 3 270M's critique feedback ran on into
# "...\n\nJSON reply:" under the grammar) produced text that never parsed, on every attempt.
_LOOSE_CHAR = r'char ::= [^"\\] |'
_JSON_CHAR = r'char ::= [^"\\\x7F\x00-\x1F] |'


def json_gbnf(schema_json: str) -> str:
    """The GBNF grammar of a JSON schema (llama-cpp-python's converter), whose strings hold only characters JSON
    allows unescaped: no raw control characters, as in llama.cpp's own converter."""
    _import_llama_cpp()
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    lines = json_schema_to_gbnf(schema_json).splitlines()
    return "\n".join(
        _JSON_CHAR + line[len(_LOOSE_CHAR) :] if line.startswith(_LOOSE_CHAR) else line for line in lines
    )


@functools.lru_cache(maxsize=32)
def _grammar(schema_json: str) -> Any:
    llama_cpp = _import_llama_cpp()
    return llama_cpp.LlamaGrammar.from_string(json_gbnf(schema_json), verbose=False)


def structured_runnable(
    llm: Runnable[LanguageModelInput, BaseMessage],
    parser: Runnable[BaseMessage, Any],
    *,
    include_raw: bool,
) -> Runnable[LanguageModelInput, Any]:
    """Chain `llm | parser`, or build the `include_raw` shape LangChain's own chat models return.

    With `include_raw=True` the result is `{"raw": AIMessage, "parsed": obj | None, "parsing_error": exc | None}`
    and a parsing failure is reported in `parsing_error` instead of raised.
    """
    if not include_raw:
        return llm | parser
    parser_assign = RunnablePassthrough.assign(
        parsed=itemgetter("raw") | parser, parsing_error=lambda _: None
    )
    parser_none = RunnablePassthrough.assign(parsed=lambda _: None)
    with_fallback = parser_assign.with_fallbacks([parser_none], exception_key="parsing_error")
    return RunnableMap(raw=llm) | with_fallback


def _parse_structured(message: BaseMessage, schema: dict[str, Any] | type) -> Any:
    text = message.text
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise OutputParserException(
            f"the embedded model's JSON did not close: {text[:120]!r}", llm_output=text
        ) from exc
    return validate_reply(data, schema, text)


def validate_reply(data: Any, schema: dict[str, Any] | type, text: str) -> Any:
    """`data` validated by a pydantic `schema` (a dict schema returns it as is); a mismatch is a parser error."""
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        try:
            return schema.model_validate(data)
        except ValueError as exc:
            raise OutputParserException(
                f"reply does not fit {schema.__name__}: {exc}", llm_output=text
            ) from exc
    return data


def generate_json(
    complete: Callable[[Any], dict[str, Any]], json_schema: dict[str, Any]
) -> tuple[str, list[dict[str, Any]]]:
    """Complete under the schema's grammar; a reply cut by `max_tokens` is retried with tighter bounds.

    `complete(grammar)` runs one llama.cpp completion. A retry whose grammar would be the same as the pass before
    (a schema whose every bound is declared) is skipped: at the same settings it would write the same reply.
    Returns the last reply's text and every completion result (for usage and the attempt count).
    """
    results: list[dict[str, Any]] = []
    text = ""
    tried: set[str] = set()
    for index, (max_string, max_items) in enumerate(_TIGHTER):
        bounded = bounded_json_schema(
            json_schema, max_string=max_string, max_items=max_items, retry=index > 0
        )
        key = json.dumps(bounded, sort_keys=False)
        if key in tried:
            continue
        tried.add(key)
        result = complete(_grammar(key))
        results.append(result)
        text = result["choices"][0]["text"].strip()
        try:
            json.loads(text)
        except json.JSONDecodeError:
            continue  # cut by max_tokens: try again with tighter bounds
        break
    return text, results


def parse_json_runnable(
    llm: Runnable[LanguageModelInput, BaseMessage], schema: dict[str, Any] | type, *, include_raw: bool
) -> Runnable[LanguageModelInput, Any]:
    """`llm` (bound to a JSON grammar) followed by a parser that validates the reply with `schema`."""
    parser = RunnableLambda(functools.partial(_parse_structured, schema=schema), name="parse_json_grammar")
    return structured_runnable(llm, parser, include_raw=include_raw)
