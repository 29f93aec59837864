"""The call options of the embedded model (`invoke(..., stop_repetition=False)`, `bind(...)`), validated as the
constructor validates the fields of the same names.

One validator serves both (`check_option`): a call option is refused exactly as the constructor refuses that value
(`stop_repetition="false"` too: a flag is True or False, never read by truthiness), in one line (`option_error`).
"""

from __future__ import annotations

import functools
import typing
from typing import Annotated, Any

from pydantic import BaseModel, Field, TypeAdapter, ValidationError
from pydantic.fields import FieldInfo

from reflection_graph.models.profile import BASE

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


def call_options(model_class: type[BaseModel], overrides: dict[str, Any]) -> dict[str, Any]:
    """A call's options (`invoke(..., stop_repetition=False)`, `bind(...)`), each validated as the constructor
    validates the field of that name (`check_option`), before anything is loaded or generated.

    An option set to None that the model's profile fills (`max_tokens`, `repeat_penalty`, `stop_repetition`) is
    not given, as in the constructor: the model's own value holds.

    Args:
        model_class: the model class whose fields validate the options (`EmbeddedChatModel` or a subclass).
        overrides: the call's options.

    Raises:
        TypeError: an option the model does not take.
        ValueError: an option's value the constructor would refuse too: one line naming it and what it allows.
    """
    unknown = set(overrides) - _CALL_OPTIONS
    if unknown:
        raise TypeError(f"EmbeddedChatModel does not take {sorted(unknown)} as call options")
    return {
        name: check_option(model_class, name, value)
        for name, value in overrides.items()
        if not (value is None and name in _PROFILE_FILLED)
    }


def check_call(
    model_class: type[BaseModel], overrides: dict[str, Any], stop: list[str] | None
) -> tuple[dict[str, Any], list[str] | None]:
    """A call's options (`call_options`) and stop sequences (`check_option`), validated as the fields of
    `model_class` are, before the model is loaded."""
    return call_options(model_class, overrides), check_option(model_class, "stop", stop)


def field_values(model: BaseModel) -> dict[str, Any]:
    """`model`'s own value of each call option that is one of its fields (`FIELD_OPTIONS`): a call's defaults."""
    return {name: getattr(model, name) for name in FIELD_OPTIONS}
