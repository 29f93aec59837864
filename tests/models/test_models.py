"""Model spec resolution: fast, offline, no model is loaded."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from langchain_core.exceptions import OutputParserException
from langchain_core.language_models import BaseChatModel
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_openai import ChatOpenAI
from pydantic import BaseModel

from reflection_graph.critique import CritiqueOutput
from reflection_graph.models import (
    MODEL_ENV_VAR,
    CallableChatModel,
    critic_model,
    resolve_model,
    supports_structured_output,
)
from reflection_graph.models.embedded import EmbeddedChatModel, bounded_json_schema, messages_to_prompt


@pytest.fixture(autouse=True)
def _no_env_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(MODEL_ENV_VAR, raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


@pytest.fixture
def fake_gguf(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.gguf"
    path.write_bytes(b"GGUF")  # never loaded: resolution only checks that the file exists
    return path


def test_none_and_embedded_resolve_to_the_embedded_model() -> None:
    for spec in (None, "embedded", "  embedded "):
        model = resolve_model(spec)
        assert isinstance(model, EmbeddedChatModel)
        # the suite pins Gemma (tests/conftest.py)
        assert model.model_path is None and model.model == "gemma-3-270m"


def test_critic_role_defaults_to_temperature_zero_but_explicit_wins() -> None:
    assert resolve_model("embedded", role="critic").temperature == 0.0
    assert resolve_model("embedded", role="generator").temperature == 0.7
    assert resolve_model("embedded", role="critic", temperature=0.3).temperature == 0.3


def test_unknown_role_is_rejected() -> None:
    with pytest.raises(ValueError, match="unknown role 'judge'"):
        resolve_model("embedded", role="judge")


def test_local_gguf_spec(fake_gguf: Path) -> None:
    model = resolve_model(f"local:{fake_gguf}")
    assert isinstance(model, EmbeddedChatModel)
    assert model.model_path == str(fake_gguf)


def test_missing_gguf_fails_at_resolve_time_naming_path_and_fix(tmp_path: Path) -> None:
    missing = tmp_path / "nope.gguf"
    with pytest.raises(ValueError) as info:
        resolve_model(f"local:{missing}")
    message = str(info.value)
    assert str(missing) in message
    assert "local:/path/to/model.gguf" in message and "'embedded'" in message


def test_empty_local_spec_is_rejected() -> None:
    with pytest.raises(ValueError, match="has no path"):
        resolve_model("local:")


def test_embedded_model_validates_its_path_at_construction(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="GGUF model file not found"):
        EmbeddedChatModel(model_path=str(tmp_path / "missing.gguf"))


def test_embedded_model_rejects_budgets_larger_than_context() -> None:
    with pytest.raises(ValueError, match="smaller than n_ctx"):
        EmbeddedChatModel(n_ctx=128, max_tokens=200)


def test_name_with_base_url_builds_chat_openai() -> None:
    model = resolve_model("gemma", base_url="http://127.0.0.1:9/v1", temperature=0.2)
    assert isinstance(model, ChatOpenAI)
    assert model.model_name == "gemma"
    assert model.openai_api_base == "http://127.0.0.1:9/v1"
    assert model.openai_api_key is not None and model.openai_api_key.get_secret_value() == "not-needed"
    assert model.temperature == 0.2


def test_openai_prefix_is_dropped_for_base_url_and_api_key_is_passed() -> None:
    model = resolve_model("openai:my-model", base_url="http://127.0.0.1:9/v1", api_key="k", role="critic")
    assert isinstance(model, ChatOpenAI)
    assert model.model_name == "my-model"
    assert model.openai_api_key is not None and model.openai_api_key.get_secret_value() == "k"
    assert model.temperature == 0.0


def test_provider_spec_goes_through_init_chat_model() -> None:
    model = resolve_model("openai:gpt-4o-mini", api_key="sk-test")
    assert isinstance(model, ChatOpenAI)
    assert model.model_name == "gpt-4o-mini"


def test_provider_spec_without_key_fails_at_resolve_time_with_the_fix() -> None:
    with pytest.raises(ValueError) as info:
        resolve_model("openai:gpt-4o-mini")
    message = str(info.value)
    assert "OPENAI_API_KEY" in message and "'embedded'" in message
    assert "\n" not in message


def test_provider_spec_reads_the_provider_key_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    model = resolve_model("openai:gpt-4o-mini")
    assert isinstance(model, ChatOpenAI) and model.model_name == "gpt-4o-mini"
    assert model.openai_api_key is not None and model.openai_api_key.get_secret_value() == "sk-from-env"
    monkeypatch.setenv("OPENAI_API_KEY", "sk-changed")  # read when the model is made, from the environment
    changed = resolve_model("openai:gpt-4o-mini")
    assert isinstance(changed, ChatOpenAI)
    assert changed.openai_api_key is not None and changed.openai_api_key.get_secret_value() == "sk-changed"


def test_unknown_spec_has_a_one_line_error() -> None:
    with pytest.raises(ValueError) as info:
        resolve_model("definitely-not-a-model")
    message = str(info.value)
    assert message.startswith("unknown model spec 'definitely-not-a-model'")
    assert "'local:/path.gguf'" in message and "base_url" in message
    assert "\n" not in message


def test_missing_provider_package_names_it() -> None:
    pytest.importorskip("langchain_openai")
    try:
        import langchain_anthropic  # noqa: F401
    except ImportError:
        with pytest.raises(ValueError, match="langchain-anthropic"):
            resolve_model("anthropic:claude-3-5-haiku-latest")
    else:
        pytest.skip("langchain-anthropic is installed here")


def test_empty_spec_is_rejected() -> None:
    with pytest.raises(ValueError, match="empty model spec"):
        resolve_model("   ")


def test_env_var_supplies_the_default(monkeypatch: pytest.MonkeyPatch, fake_gguf: Path) -> None:
    monkeypatch.setenv(MODEL_ENV_VAR, f"local:{fake_gguf}")
    model = resolve_model(None)
    assert isinstance(model, EmbeddedChatModel) and model.model_path == str(fake_gguf)


def test_explicit_argument_wins_over_env_var(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(MODEL_ENV_VAR, f"local:{tmp_path / 'missing.gguf'}")  # would fail if it were used
    model = resolve_model("embedded")
    assert isinstance(model, EmbeddedChatModel) and model.model_path is None
    fake = GenericFakeChatModel(messages=iter([AIMessage(content="x")]))
    assert resolve_model(fake) is fake
    # and the environment is only read when no spec is given
    with pytest.raises(ValueError, match="missing.gguf"):
        resolve_model(None)


def test_chat_model_is_returned_as_is() -> None:
    fake = GenericFakeChatModel(messages=iter([AIMessage(content="x")]))
    assert resolve_model(fake, role="critic") is fake


def test_runnable_that_is_not_a_chat_model_is_rejected() -> None:
    fake = GenericFakeChatModel(messages=iter([AIMessage(content="x")]))
    with pytest.raises(TypeError, match="not a BaseChatModel"):
        resolve_model(fake.bind(stop=["x"]))  # type: ignore[arg-type]


def test_non_callable_spec_is_rejected() -> None:
    with pytest.raises(TypeError, match="not supported"):
        resolve_model(42)  # type: ignore[arg-type]


def test_callable_becomes_a_chat_model_that_sees_the_rendered_prompt() -> None:
    seen: list[str] = []

    def echo(prompt: str) -> str:
        seen.append(prompt)
        return "Dear Acme, thank you for the offer."

    model = resolve_model(echo)
    assert isinstance(model, CallableChatModel)
    reply = model.invoke(
        [SystemMessage(content="Be brief."), HumanMessage(content="Task: decline\n\nDraft:\n")]
    )
    assert reply.content == "Dear Acme, thank you for the offer."
    assert seen == ["Be brief.\n\nTask: decline\n\nDraft:"]


def test_callable_model_async_and_batch() -> None:
    async def shout(prompt: str) -> str:
        return prompt.upper()

    model = CallableChatModel(fn=shout)
    assert asyncio.run(model.ainvoke("hello")).content == "HELLO"
    assert [m.content for m in model.batch(["a", "b"])] == ["A", "B"]


def test_callable_must_return_text() -> None:
    model = CallableChatModel(fn=lambda prompt: 3)  # type: ignore[arg-type,return-value]
    with pytest.raises(TypeError, match="must return a str"):
        model.invoke("x")


def test_callable_structured_output_parses_json_with_aliases() -> None:
    reply = 'Sure! ```json\n{"needs_improvement": true, "quality_score": 4, "problems": ["too long"]}\n```'
    model = CallableChatModel(fn=lambda prompt: reply)
    parsed = model.with_structured_output(CritiqueOutput).invoke("judge")
    assert isinstance(parsed, CritiqueOutput)
    assert parsed.is_acceptable is False and parsed.score == 4 and parsed.issues == ["too long"]


def test_callable_structured_output_with_plain_schema_and_include_raw() -> None:
    class Answer(BaseModel):
        value: int

    good = CallableChatModel(fn=lambda prompt: '{"value": 7}')
    assert good.with_structured_output(Answer).invoke("x") == Answer(value=7)
    assert good.with_structured_output({"type": "object"}).invoke("x") == {"value": 7}

    bad = CallableChatModel(fn=lambda prompt: "no json here")
    with pytest.raises(OutputParserException, match="no JSON object"):
        bad.with_structured_output(Answer).invoke("x")
    out = bad.with_structured_output(Answer, include_raw=True).invoke("x")
    assert out["parsed"] is None
    assert isinstance(out["parsing_error"], OutputParserException)
    assert out["raw"].content == "no json here"


def test_supports_structured_output() -> None:
    assert supports_structured_output(EmbeddedChatModel())
    assert supports_structured_output(ChatOpenAI(model="x", api_key="k", base_url="http://127.0.0.1:9/v1"))
    assert not supports_structured_output(CallableChatModel(fn=lambda p: p))
    assert not supports_structured_output(GenericFakeChatModel(messages=iter([])))


def test_critic_model_sets_temperature_zero_without_mutating() -> None:
    embedded = EmbeddedChatModel(temperature=0.9)
    critic = critic_model(embedded)
    assert isinstance(critic, EmbeddedChatModel)
    assert critic.temperature == 0.0 and embedded.temperature == 0.9

    openai = ChatOpenAI(model="gpt-4o-mini", api_key="k", temperature=0.8)
    openai_critic = critic_model(openai)
    assert isinstance(openai_critic, ChatOpenAI)
    assert openai_critic.temperature == 0.0 and openai.temperature == 0.8

    reasoning = ChatOpenAI(model="o3-mini", api_key="k")
    assert critic_model(reasoning) is reasoning

    callable_model = CallableChatModel(fn=lambda p: p)
    assert critic_model(callable_model) is callable_model


def test_embedded_rejects_unknown_call_options_early() -> None:
    with pytest.raises(TypeError, match="does not take"):
        EmbeddedChatModel().with_structured_output(CritiqueOutput, frobnicate=1)
    with pytest.raises(ValueError, match="unknown method"):
        EmbeddedChatModel().with_structured_output(CritiqueOutput, method="xml")


def test_messages_to_prompt_plain_and_conversation() -> None:
    assert messages_to_prompt([SystemMessage(content="S"), HumanMessage(content="H")]) == "S\n\nH"
    convo = messages_to_prompt(
        [HumanMessage(content="hi"), AIMessage(content="hello"), HumanMessage(content="q")]
    )
    assert convo == "User: hi\n\nAssistant: hello\n\nUser: q\n\nAssistant:"
    stub = 'def f(x):\n    """Double x."""\n'
    assert messages_to_prompt([HumanMessage(content=stub)]) == stub, "a lone message is continued as written"


def test_bounded_json_schema_caps_strings_lists_and_score() -> None:
    schema = CritiqueOutput.model_json_schema()
    bounded = bounded_json_schema(schema, max_string=50, max_items=2)
    props = bounded["properties"]
    assert props["issues"]["maxItems"] == 2 and props["issues"]["items"]["maxLength"] == 50
    assert props["feedback"]["maxLength"] == 50
    assert props["score"]["enum"] == list(range(11))
    assert set(bounded["required"]) == set(props)
    assert "maxItems" not in schema["properties"]["issues"]  # the original is untouched


def test_isinstance_base_chat_model() -> None:
    assert isinstance(CallableChatModel(fn=lambda p: p), BaseChatModel)


def test_json_grammar_strings_exclude_raw_control_characters() -> None:
    """A string in the JSON grammar must not hold a raw newline or other control character: `json.loads` rejects
    them, so a grammar that allows them lets a model write JSON that never parses."""
    pytest.importorskip("llama_cpp", reason='needs pip install "reflection-graph[local]"')
    from reflection_graph.models._structured import json_gbnf

    schema = bounded_json_schema(CritiqueOutput.model_json_schema())
    rules = dict(line.split(" ::= ", 1) for line in json_gbnf(json.dumps(schema)).splitlines())
    assert rules["char"].startswith(r'[^"\\\x7F\x00-\x1F] | "\\"'), rules["char"]
    assert "feedback" in rules and "char" in rules["feedback"]  # the strings are built from that rule
