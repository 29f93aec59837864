"""How one call of the embedded model is evaluated: its prompt's tokens and phases, llama.cpp's sampling
arguments, and the completion itself (its prompt evaluated in the phases `_reuse` plans, recorded by `_record`).

These are `EmbeddedChatModel`'s own methods, kept here so the class stays small: each function takes the model
first and is assigned in the class under its method name (`_complete = _completion.complete`). Beside them, the
one validator of call options and of the constructor's fields of the same names (`check_option`): a call option
(`invoke(..., stop_repetition=False)`, `bind(...)`) is refused exactly as the constructor refuses that value
(`stop_repetition="false"` too: a flag is True or False, never read by truthiness), in one line.
"""

from __future__ import annotations

import contextlib
import functools
import os
import time
import typing
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Annotated, Any

from langchain_core.messages import BaseMessage
from pydantic import BaseModel, Field, TypeAdapter, ValidationError
from pydantic.fields import FieldInfo

from reflection_graph.models import _logprobs, _lookup, _record, _repetition, _reuse
from reflection_graph.models._llama import _Loaded
from reflection_graph.models.profile import BASE

if TYPE_CHECKING:
    from reflection_graph.models.embedded import EmbeddedChatModel


FIELD_OPTIONS = (
    "temperature",
    "max_tokens",
    "seed",
    "top_p",
    "top_k",
    "min_p",
    "repeat_penalty",
    "stop",
    "prompt_lookup",
    "stop_repetition",
)
"""The call options that are also `EmbeddedChatModel` fields: a call option is validated by its field's own type
and bounds (`call_options`), and the constructor says what is wrong in the same words (`option_error`)."""


class _OtherOptions(BaseModel):
    """The call options that are no field of the model, declared as fields are (types, bounds, strictness)."""

    json_schema: dict[str, Any] | None = None
    logprobs: bool | None = Field(default=None, strict=True)
    top_logprobs: int | None = Field(default=None, ge=0, le=100)
    score_text: str | None = None
    # LangChain's own switch (`invoke(..., stream=False)`), read before a call is made
    stream: bool | None = Field(default=None, strict=True)


_CALL_OPTIONS = frozenset({*FIELD_OPTIONS, *_OtherOptions.model_fields})
_PROFILE_FILLED = frozenset(BASE.defaults()) & frozenset(FIELD_OPTIONS)
"""The options a profile fills when the constructor is given None (`profile.with_profile_defaults`)."""


@functools.lru_cache(maxsize=16)
def _option_fields(model_class: type[BaseModel]) -> dict[str, tuple[TypeAdapter[Any], str]]:
    """Each call option's validator (its declared type with its bounds and strictness, as a `TypeAdapter`) and the
    values it allows, in words; from `model_class`'s fields and `_OtherOptions`."""
    declared = {
        **{name: model_class.model_fields[name] for name in FIELD_OPTIONS},
        **_OtherOptions.model_fields,
    }
    found: dict[str, tuple[TypeAdapter[Any], str]] = {}
    for name, info in declared.items():
        kind: Any = Annotated[(info.annotation, *info.metadata)] if info.metadata else info.annotation
        found[name] = (TypeAdapter(kind), allowed_values(info))
    return found


def allowed_values(info: FieldInfo) -> str:
    """The values field `info` allows, in words ("a number > 0 and <= 1", "True, False or None")."""
    args = typing.get_args(info.annotation)
    optional = type(None) in args
    base: Any = next(a for a in args if a is not type(None)) if optional else info.annotation
    if base is bool:
        return "True, False or None" if optional else "True or False"
    names: dict[Any, str] = {int: "an int", float: "a number", str: "a string", list: "a list of strings"}
    names[dict] = "a dict"
    kind = names.get(base) or names.get(typing.get_origin(base), str(base))
    signs = (("gt", ">"), ("ge", ">="), ("lt", "<"), ("le", "<="))
    bounds = [f"{sign} {getattr(m, key)}" for m in info.metadata for key, sign in signs if hasattr(m, key)]
    said = f"{kind} {' and '.join(bounds)}" if bounds else kind
    return f"{said}, or None" if optional else said


def option_error(name: str, value: Any, allowed: str) -> str:
    """The one line that says option or field `name` cannot be `value`, and what it can be."""
    return f"{name} must be {allowed}, got {value!r}"


def check_option(model_class: type[BaseModel], name: str, value: Any) -> Any:
    """`value` for call option `name`, validated by the declared field of that name (its type, bounds and
    strictness, the very ones the constructor applies) and converted as pydantic converts it (0 -> 0.0 for a
    number).

    Raises:
        ValueError: one line naming the option and the values it allows (`option_error`).
    """
    adapter, allowed = _option_fields(model_class)[name]
    try:
        return adapter.validate_python(value)
    except ValidationError:
        raise ValueError(option_error(name, value, allowed)) from None


def call_options(model: EmbeddedChatModel, overrides: dict[str, Any]) -> dict[str, Any]:
    """A call's options (`invoke(..., stop_repetition=False)`, `bind(...)`), each validated as the constructor
    validates the field of that name (`check_option`), before anything is loaded or generated.

    An option set to None that the model's profile fills (`max_tokens`, `repeat_penalty`, `stop_repetition`) is
    not given, as in the constructor: the model's own value holds.

    Raises:
        TypeError: an option the model does not take.
        ValueError: an option's value the constructor would refuse too: one line naming it and what it allows.
    """
    unknown = set(overrides) - _CALL_OPTIONS
    if unknown:
        raise TypeError(f"EmbeddedChatModel does not take {sorted(unknown)} as call options")
    return {
        name: check_option(type(model), name, value)
        for name, value in overrides.items()
        if not (value is None and name in _PROFILE_FILLED)
    }


def next_token_logprobs(
    model: EmbeddedChatModel, prompt: str, top: int, tokens: tuple[str, ...], plan: _reuse.Plan
) -> dict[str, float]:
    loaded = model._loaded()
    ids = model._prompt_ids(loaded, prompt)
    bounds = model._bounds(loaded, plan, ids)
    return _logprobs.next_token_logprobs(loaded, ids, top, tokens, bounds, model._cache_bytes())


def continuation_logprobs(
    model: EmbeddedChatModel, prompt: str, continuation: str, max_tokens: int, plan: _reuse.Plan
) -> list[float]:
    loaded = model._loaded()
    head, full = model._prompt_ids(loaded, prompt), model._prompt_ids(loaded, prompt + continuation)
    bounds = model._bounds(loaded, plan, full)
    return _logprobs.continuation_logprobs(loaded, head, full, max_tokens, bounds, model._cache_bytes())


def cache_bytes(model: EmbeddedChatModel) -> int:
    return model.prefix_cache_mb * 2**20


def bounds(model: EmbeddedChatModel, loaded: _Loaded, plan: _reuse.Plan, ids: list[int]) -> tuple[int, ...]:
    """Where the phases of `ids` end (`_reuse.token_bounds`), tokenized as `_prompt_ids` tokenizes."""
    chat = model._formatter(loaded) is not None

    def tokenize(text: str) -> list[int]:
        out: list[int] = loaded.llama.tokenize(text.encode("utf-8"), add_bos=not chat, special=chat)
        return out

    return _reuse.token_bounds(plan.prefixes, ids, tokenize)


def plan(
    model: EmbeddedChatModel,
    loaded: _Loaded,
    messages: Sequence[BaseMessage],
    prompt: str,
    overrides: dict[str, Any],
) -> _reuse.Plan:
    """How a call on `messages` (rendered as `prompt`) is evaluated and generated (`_reuse.plan`): prompt lookup
    and the repetition stop apply to free text only (a JSON reply is bounded by its grammar); the stop lets
    through the copies the messages ask for (`_repetition.requested_copies` of every message but the model's own
    earlier replies)."""
    overrides = call_options(model, overrides)
    generation = not (overrides.get("logprobs") or overrides.get("top_logprobs") is not None)
    lookup = overrides.get("prompt_lookup", model.prompt_lookup)
    repetition = overrides.get("stop_repetition", model.stop_repetition)
    if overrides.get("json_schema") is not None:
        lookup, repetition = False, False
    planned = _reuse.plan(
        messages,
        prompt,
        model.render_prompt,
        chat=model._formatter(loaded) is not None,
        generation=generation,
        lookup=None if lookup is None else bool(lookup),
    )
    asked = "\n".join(m.text for m in messages if m.type != "ai")
    return replace(
        planned,
        stop_repetition=generation and repetition,
        requested_copies=_repetition.requested_copies(asked) if generation and repetition else 1,
    )


def prompt_ids(model: EmbeddedChatModel, loaded: _Loaded, prompt: str) -> list[int]:
    """The tokens of `prompt`: a chat-template prompt as llama-cpp-python's chat completion tokenizes it
    (its special tokens are tokens, the template adds any BOS), a completion prompt with a BOS, as text."""
    chat = model._formatter(loaded) is not None
    ids: list[int] = loaded.llama.tokenize(prompt.encode("utf-8"), add_bos=not chat, special=chat)
    if len(ids) + 16 > model.n_ctx:
        raise ValueError(
            f"the prompt has {len(ids)} tokens, too many for n_ctx={model.n_ctx}; raise n_ctx on "
            "EmbeddedChatModel or shorten the task/context"
        )
    return ids


def sampling(
    model: EmbeddedChatModel,
    stop: list[str] | None,
    overrides: dict[str, Any],
    loaded: _Loaded | None = None,
    messages: Sequence[BaseMessage] = (),
) -> dict[str, Any]:
    """llama.cpp's sampling arguments of a call (its options validated, `call_options`); with `loaded`, its stops
    begin with the model's own."""
    overrides, stop = call_options(model, overrides), check_option(type(model), "stop", stop)
    own = model._own_stops(loaded, messages) if loaded is not None else []
    stops = [*own, *(model.stop or []), *(stop or []), *(overrides.get("stop") or [])]
    params: dict[str, Any] = {
        "seed": overrides.get("seed", model.seed),
        "stop": list(dict.fromkeys(stops)),
    }
    for key, kind in (("temperature", float), ("max_tokens", int), ("top_p", float), ("top_k", int)):
        params[key] = kind(overrides.get(key, getattr(model, key)))
    for key in ("min_p", "repeat_penalty"):
        params[key] = float(overrides.get(key, getattr(model, key)))
    return params


def complete(
    model: EmbeddedChatModel,
    loaded: _Loaded,
    prompt: str,
    params: dict[str, Any],
    grammar: Any = None,
    plan: _reuse.Plan | None = None,
) -> dict[str, Any]:
    """One `create_completion` of `prompt`, its prompt evaluated first in the phases of `plan` (`_reuse`)."""
    plan = plan or _reuse.Plan()
    args = dict(params)
    chat = model._formatter(loaded) is not None
    # A chat prompt goes as its tokens (special tokens parsed), as llama-cpp-python's chat completion sends it;
    # llama.cpp ends a reply at the end-of-turn token itself. A completion prompt goes as its text, and its
    # tokens here are the ones `create_completion` makes of it (BOS added, special tokens parsed).
    ids = model._prompt_ids(loaded, prompt)
    if not chat:
        ids = loaded.llama.tokenize(prompt.encode("utf-8"), add_bos=True, special=True)
    args["max_tokens"] = min(args["max_tokens"], model.n_ctx - len(ids))
    if args["seed"] is None:
        args["seed"] = int.from_bytes(os.urandom(4), "little")
    text_or_ids: str | list[int] = ids if chat else prompt
    bounds = model._bounds(loaded, plan, ids)
    lookup = plan.lookup and grammar is None
    with loaded.lock:
        # The same phases whether a prefix state is saved or not (a prefix evaluated in other batches shifts
        # the logits a little, and so the sample): the same prompt and seed give the same text. The prompt is
        # then fully evaluated, so `create_completion` samples its first token at once.
        start = time.perf_counter()
        evaluated = _reuse.evaluate(
            loaded.llama, ids, bounds, loaded.states, model._cache_bytes(), keep_end=plan.keep_end
        )
        prompt_s = time.perf_counter() - start
        drafts = _lookup.prompt_lookup(loaded.llama, len(ids)) if lookup else contextlib.nullcontext()
        with drafts as stats:
            result: dict[str, Any] = loaded.llama.create_completion(text_or_ids, grammar=grammar, **args)
        generate_s = time.perf_counter() - start - prompt_s
    _record.add(
        loaded,
        _record.CallRecord(
            "completion",
            text_or_ids,
            ids,
            args=_replayable(args),
            grammar=grammar,
            evaluated=evaluated,
            prompt_s=prompt_s,
            generate_s=generate_s,
            completion_tokens=int((result.get("usage") or {}).get("completion_tokens", 0)),
            text=result["choices"][0]["text"],
            lookup=lookup,
            steps=stats.steps if stats is not None else 0,
            revision=plan.revision,
        ),
    )
    return result


def _replayable(args: dict[str, Any]) -> dict[str, Any]:
    """A completion's arguments as a replay takes them: of its stopping criteria only the `RepetitionStop`s, which
    end the completion where it ended (a streaming tap only listens)."""
    criteria = [c for c in args.get("stopping_criteria") or () if isinstance(c, _repetition.RepetitionStop)]
    recorded = {k: v for k, v in args.items() if k != "stopping_criteria"}
    if criteria:
        from llama_cpp import StoppingCriteriaList

        recorded["stopping_criteria"] = StoppingCriteriaList(criteria)
    return recorded


def end_of_turn(model: EmbeddedChatModel, loaded: _Loaded) -> list[str]:
    """The end-of-turn text a chat-template reply is cut at (none for a completion-style model)."""
    return [loaded.end_of_turn] if loaded.end_of_turn and model._formatter(loaded) is not None else []
