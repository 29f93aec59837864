"""Call options are validated as the constructor validates the field of the same name, before anything is loaded
or generated: `stop_repetition="false"` is refused, never read by truthiness. Offline, over a scripted llama.cpp
(tests/fakes.py `scripted_embedded`); the real model's check is in tests/models/test_embedded.py (`embedded`)."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage

from reflection_graph.models._options import _CALL_OPTIONS, FIELD_OPTIONS, _option_fields
from reflection_graph.models._repetition import REPETITION
from reflection_graph.models.embedded import EmbeddedChatModel
from tests.fakes import scripted_embedded

ASK = [HumanMessage(content="Task: a list\n\nDraft:\n")]
LINE = ["zero", ",", " zero", ",", " zero", ",", " zero", ",", "\n"]
LOOPING = ["Rows", ":\n", *LINE * 12]  # one line repeated back to back: the repetition stop cuts it
BAD_FLAGS = ["false", "off", "no", "maybe", "sometimes", "True", 0, 1, ""]
BAD_VALUES: dict[str, list[Any]] = {
    "stop_repetition": BAD_FLAGS,
    "prompt_lookup": BAD_FLAGS,
    "temperature": [-0.5, "hot", None],
    "max_tokens": [0, -3, 2.5, "many"],
    "seed": ["lucky", 1.5],
    "top_p": [0, 1.5],
    "top_k": [-1],
    "min_p": [-0.1, 2],
    "repeat_penalty": [0, "high"],
    "stop": ["\n", [1, 2]],
}


@pytest.fixture
def scripted(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Callable[..., EmbeddedChatModel]:
    pytest.importorskip("llama_cpp", reason='needs pip install "reflection-graph[local]"')
    return functools.partial(scripted_embedded, monkeypatch, tmp_path)


def _constructor_error(name: str, value: Any) -> str:
    """The one line the constructor refuses `name=value` with."""
    with pytest.raises(ValueError) as refused:
        EmbeddedChatModel(model="gemma-3-270m", **{name: value})
    lines = [line.strip() for line in str(refused.value).splitlines()]
    (line,) = [line for line in lines if line.startswith("Value error, ")]
    return line.removeprefix("Value error, ").split(" [type=", 1)[0]


@pytest.mark.parametrize(("name", "value"), [(n, v) for n, values in BAD_VALUES.items() for v in values])
def test_a_bad_call_option_is_refused_as_the_constructor_refuses_it_before_any_token(
    scripted: Callable[..., EmbeddedChatModel], name: str, value: Any
) -> None:
    said = _constructor_error(name, value)
    assert said.startswith(f"{name} must be ") and said.endswith(f", got {value!r}")
    model = scripted(LOOPING, max_tokens=400, temperature=0)
    for call in (
        lambda: model.invoke(ASK, **{name: value}),
        lambda: model.bind(**{name: value}).invoke(ASK),
        lambda: list(model.stream(ASK, **{name: value})),
        lambda: model.with_structured_output({"type": "object"}, **{name: value}),
    ):
        with pytest.raises(ValueError) as refused:
            call()
        assert str(refused.value) == said
    assert model._loaded().llama.sampled == 0  # refused before any generation


@pytest.mark.parametrize("value", ["false", "off", "no"])
def test_a_flag_written_as_a_word_no_longer_leaves_the_repetition_stop_on(
    scripted: Callable[..., EmbeddedChatModel], value: str
) -> None:
    model = scripted(LOOPING, max_tokens=400, temperature=0)
    with pytest.raises(ValueError, match=re.escape(f"stop_repetition must be True or False, got {value!r}")):
        model.invoke(ASK, stop_repetition=value)
    with pytest.raises(ValueError, match="stop_repetition must be True or False"):
        model.bind(stop_repetition=value).invoke(ASK)


def test_a_valid_false_turns_the_stop_off_and_true_turns_it_on(
    scripted: Callable[..., EmbeddedChatModel],
) -> None:
    model = scripted(LOOPING, max_tokens=400, temperature=0)
    assert model.invoke(ASK).response_metadata["finish_reason"] == REPETITION
    whole = model.invoke(ASK, stop_repetition=False)
    assert whole.response_metadata["finish_reason"] != REPETITION
    assert whole.text == "".join(LOOPING).strip()
    assert model.bind(stop_repetition=False).invoke(ASK).text == whole.text
    off = scripted(LOOPING, max_tokens=400, temperature=0, stop_repetition=False)
    assert off.invoke(ASK, stop_repetition=True).response_metadata["finish_reason"] == REPETITION


def test_valid_call_options_are_taken_and_converted_as_the_fields_are(
    scripted: Callable[..., EmbeddedChatModel],
) -> None:
    model = scripted(LOOPING, max_tokens=400, temperature=0)
    params = model._sampling(None, {"temperature": 0, "top_k": 5, "seed": None, "stop": ("END",)})
    assert params["temperature"] == 0.0 and params["top_k"] == 5 and params["seed"] is None
    assert "END" in params["stop"]

    def plan(**options: Any) -> Any:
        return model._replies().completion.plan(ASK, model.render_prompt(ASK), options)

    assert plan(stop_repetition=False).stop_repetition is False
    # None is "not given", as in the constructor (a profile's default fills it): the model's own value
    assert plan(stop_repetition=None).stop_repetition is True
    assert EmbeddedChatModel(model="gemma-3-270m", stop_repetition=None).stop_repetition is True
    assert plan(max_tokens=None) == plan()
    for lookup in (True, False, None):
        plan(prompt_lookup=lookup)


def test_a_bad_call_option_is_refused_before_the_model_is_loaded() -> None:
    class Unloadable(EmbeddedChatModel):
        def _loaded(self) -> Any:
            raise AssertionError("the model was loaded for a call that is refused")

    model = Unloadable(model="gemma-3-270m")
    with pytest.raises(ValueError, match="stop_repetition must be True or False, got 'maybe'"):
        model.invoke("Task: t\n\nDraft:\n", stop_repetition="maybe")
    with pytest.raises(ValueError, match="prompt_lookup must be True, False or None, got 'sometimes'"):
        list(model.stream("Task: t\n\nDraft:\n", prompt_lookup="sometimes"))


def test_the_options_that_are_no_field_are_checked_too(scripted: Callable[..., EmbeddedChatModel]) -> None:
    model = scripted(LOOPING, max_tokens=400, temperature=0)
    for name, value, allowed in (
        ("logprobs", "yes", "True, False or None"),
        ("top_logprobs", 101, "an int >= 0 and <= 100, or None"),
        ("score_text", 5, "a string, or None"),
        ("json_schema", "object", "a dict, or None"),
    ):
        with pytest.raises(ValueError) as refused:
            model.invoke(ASK, **{name: value})
        assert str(refused.value) == f"{name} must be {allowed}, got {value!r}"
    with pytest.raises(TypeError, match=r"does not take \['colour'\]"):
        model.invoke(ASK, colour="red")


def test_every_call_option_is_a_declared_field_and_says_what_it_allows_in_words() -> None:
    """A new call option is declared as a field (the model's, or `_OtherOptions`'), so it is validated; and the
    words of its error come from its type, never a type's repr."""
    documented = EmbeddedChatModel.__doc__ or ""
    for name in FIELD_OPTIONS:
        assert name in EmbeddedChatModel.model_fields and f"`{name}`" in documented
    described = _option_fields(EmbeddedChatModel)
    assert set(described) == _CALL_OPTIONS
    for name, (_, allowed) in described.items():
        assert allowed[0].islower() or allowed.startswith("True"), (name, allowed)
        assert "<class" not in allowed and "typing" not in allowed and "|" not in allowed, (name, allowed)
