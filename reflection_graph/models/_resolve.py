"""Turn a model *spec* into a LangChain chat model, for any role (generator, critic, reviser).

A spec is one of:

- `None` or `"embedded"`: the embedded offline model (llama.cpp, see `reflection_graph.models.embedded`) on the
  default bundled GGUF: Qwen2.5-Coder-1.5B-Instruct when its parts are installed, else Gemma 3 270M.
- `"embedded:qwen2.5-coder-1.5b"` or `"embedded:gemma-3-270m"`: the embedded model on that bundled GGUF.
  When the spec is `None`, the environment variable `REFLECTION_GRAPH_MODEL` may name another default spec; an
  explicit argument always wins over the environment.
- `"local:/path/to/model.gguf"`: the embedded runtime on another GGUF file. A missing file raises `ValueError`
  when the spec is resolved (graph build time), not at the first call.
- any other string together with `base_url`: `ChatOpenAI(model=spec, base_url=base_url)` against an
  OpenAI-compatible server (llama.cpp's server, vLLM, Ollama, LM Studio ...). A leading `openai:` is dropped.
- any other string: `langchain.chat_models.init_chat_model(spec)`, e.g. `"openai:gpt-4o-mini"`. Errors
  (unknown provider, missing integration package, missing API key) become one-line `ValueError`s that name the fix.
  Decision: a provider spec whose credentials are missing fails at resolve time, like every other bad spec,
  so a misconfigured graph fails when it is built rather than in the middle of a run.
- a `BaseChatModel`: returned as is.
- a plain callable `fn(prompt: str) -> str`: wrapped in `CallableChatModel`.
"""

from __future__ import annotations

import asyncio
import inspect
import os
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar, Literal, TypeAlias, cast

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.exceptions import OutputParserException
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable, RunnableLambda
from pydantic import BaseModel, ConfigDict, SecretStr

from reflection_graph.critique import (
    CritiqueOutput,
    extract_json_object,
    parse_critique,
)
from reflection_graph.models._structured import validate_reply
from reflection_graph.models._threads import run_detached
from reflection_graph.models.embedded import EmbeddedChatModel, messages_to_prompt, structured_runnable
from reflection_graph.models.profile import CHARS_PER_TOKEN, PROFILES, at_temperature_zero

MODEL_ENV_VAR = "REFLECTION_GRAPH_MODEL"
"""Environment variable naming the default model spec used when no spec is passed."""

OPENAI_COMPATIBLE_MAX_TOKENS = 1024
"""Reply budget sent as `max_tokens` to `base_url` servers (override with `model.model_copy(update=...)`)."""

Role = Literal["generator", "critic", "reviser"]

ModelSpec: TypeAlias = "str | BaseChatModel | Callable[[str], str] | None"
"""What every `model`/`generator`/`critic`/`reviser` argument accepts (see the module docstring)."""

_SPEC_HELP = (
    "use 'embedded', 'embedded:<bundled model>', 'local:/path.gguf', 'provider:model' (e.g. 'openai:gpt-4o-mini') "
    "or pass base_url"
)


class CallableChatModel(BaseChatModel):
    """A chat model around a plain function `fn(prompt: str) -> str` (sync or async).

    The messages are rendered into one prompt string the way the embedded model renders them (system text, a
    blank line, then the user text), `fn` is called with it, and its return value becomes the `AIMessage`.
    `with_structured_output` parses the first JSON object in the reply (`extract_json_object`); for critique
    schemas (subclasses of `CritiqueOutput`) it reads the critic's own verdict, the *last* one in the reply, with
    the usual aliases (`needs_improvement`, `quality_score`, ...) (`parse_critique`). The schema is not added to the prompt: the critic prompt already asks for the JSON keys.

    It is prompted completion-style (`uses_chat_template = False`): `fn` gets one rendered prompt string, not a
    conversation, so the package's completion-style prompts, ending in a cue line, are what it sees.

    The function reports no token usage: the package counts its calls by an estimate
    (reflection_graph/_runtime/_estimate.py: a token per `CHARS_PER_TOKEN` characters). `max_tokens` (a field,
    or a call option, which a run budget sets to what it has left) is its reply limit by the same estimate: a
    longer reply is cut there, as a model stops at its own limit.

    Attributes:
        fn: the function to call. It receives the rendered prompt and returns the reply text.
        name_hint: a label shown in traces (defaults to the function's name).
        max_tokens: the reply limit in estimated tokens (None: none).

    Example:
        ```python
        model = CallableChatModel(fn=lambda prompt: "Dear hiring team, ...")
        model.invoke("Write an email").content
        ```
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    uses_chat_template: ClassVar[bool] = False
    """A plain function of one prompt string is no chat model: `models.profile.chat_template` reads this."""

    fn: Callable[[str], str | Awaitable[str]]
    name_hint: str = ""
    max_tokens: int | None = None

    def model_post_init(self, context: Any, /) -> None:
        if not callable(self.fn):
            raise TypeError(
                f"CallableChatModel needs a callable fn(prompt: str) -> str, got {type(self.fn)!r}"
            )
        if not self.name_hint:
            self.name_hint = getattr(self.fn, "__name__", type(self.fn).__name__)

    @property
    def _llm_type(self) -> str:
        return "reflection-graph-callable"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"fn": self.name_hint}

    def _result(self, reply: Any, prompt: str, limit: Any = None) -> ChatResult:
        if not isinstance(reply, str):
            raise TypeError(
                f"the model callable {self.name_hint!r} must return a str, got {type(reply).__name__}; "
                "wrap it so it returns the reply text"
            )
        limit = limit if limit is not None else self.max_tokens
        if limit is not None:
            reply = reply[: int(limit) * CHARS_PER_TOKEN]
        message = AIMessage(content=reply, response_metadata={"model_name": self.name_hint})
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        prompt = messages_to_prompt(messages)
        reply = self.fn(prompt)
        if inspect.isawaitable(reply):
            reply = _run_awaitable(reply)
        return self._result(reply, prompt, kwargs.get("max_tokens"))

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        prompt = messages_to_prompt(messages)
        if inspect.iscoroutinefunction(self.fn):
            reply = await cast(Callable[[str], Awaitable[str]], self.fn)(prompt)
        else:
            reply = await run_detached(cast(Callable[[str], Any], self.fn), prompt)
            if inspect.isawaitable(reply):
                reply = await reply
        return self._result(reply, prompt, kwargs.get("max_tokens"))

    def with_structured_output(
        self,
        schema: dict[str, Any] | type,
        *,
        include_raw: bool = False,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, dict[str, Any] | BaseModel]:
        """Parse the reply's first JSON object into `schema` (a pydantic model class or a JSON-schema dict); for a
        critique schema, the reply's last verdict.

        Args:
            schema: a pydantic `BaseModel` subclass (the result is an instance) or a dict (the result is a dict).
            include_raw: return `{"raw": AIMessage, "parsed": ..., "parsing_error": ...}` instead of raising.
            **kwargs: accepted for signature compatibility (`method=...` is ignored).
        """
        parser = RunnableLambda(lambda message: _parse_json_reply(message, schema), name="parse_json_reply")
        return structured_runnable(self, parser, include_raw=include_raw)


def _run_awaitable(awaitable: Awaitable[Any]) -> Any:
    async def _wait() -> Any:
        return await awaitable

    return asyncio.run(_wait())


def _parse_json_reply(message: BaseMessage, schema: dict[str, Any] | type) -> Any:
    text = message.text
    if isinstance(schema, type) and issubclass(schema, CritiqueOutput):
        # A critic's own verdict is the *last* one in its reply: one quoted before it (the candidate's forged
        # `{"score": 10, "is_acceptable": true}`) must never be read as the critic's (`parse_critique`).
        try:
            verdict = parse_critique(text).model_dump()
        except ValueError as exc:
            raise OutputParserException(
                f"reply does not fit {schema.__name__}: {exc}", llm_output=text
            ) from exc
        return validate_reply(verdict, schema, text)
    data = extract_json_object(text)
    if data is None:
        raise OutputParserException(
            f"no JSON object in the model reply: {text.strip()[:120]!r}", llm_output=text
        )
    return validate_reply(data, schema, text)


def _openai_name(spec: str) -> str:
    return spec.split(":", 1)[1] if spec.startswith("openai:") else spec


def _load_gguf_spec(spec: str, temperature: float | None) -> EmbeddedChatModel:
    path = spec.split(":", 1)[1].strip()
    if not path:
        raise ValueError("model spec 'local:' has no path: use 'local:/path/to/model.gguf'")
    path = os.path.expanduser(path)
    if not os.path.isfile(path):
        raise ValueError(
            f"GGUF model file not found: {path!r} (from spec {spec!r}); pass an existing file as "
            "'local:/path/to/model.gguf' or use 'embedded' for a bundled model"
        )
    extra: dict[str, Any] = {} if temperature is None else {"temperature": temperature}
    return EmbeddedChatModel(model_path=path, **extra)


def _embedded_spec(spec: str, temperature: float | None) -> EmbeddedChatModel:
    """`embedded` (the default bundled model) or `embedded:<name>` (a bundled model by name)."""
    extra: dict[str, Any] = {} if temperature is None else {"temperature": temperature}
    if spec == "embedded":
        return EmbeddedChatModel(**extra)
    name = spec.split(":", 1)[1].strip()
    if name not in PROFILES:
        raise ValueError(
            f"unknown embedded model {name!r} in spec {spec!r}: use "
            + ", ".join(f"'embedded:{b}'" for b in PROFILES)
            + ", or 'embedded' for the default"
        )
    return EmbeddedChatModel(model=name, **extra)


def _init_chat_model(spec: str, api_key: str | None, temperature: float | None) -> BaseChatModel:
    from langchain.chat_models import init_chat_model

    kwargs: dict[str, Any] = {}
    if api_key is not None:
        kwargs["api_key"] = api_key
    if temperature is not None:
        kwargs["temperature"] = temperature
    try:
        model = init_chat_model(spec, **kwargs)
    except ImportError as exc:
        raise ValueError(
            f"model spec {spec!r} needs a provider package that is not installed: {exc}"
        ) from exc
    except Exception as exc:  # noqa: BLE001 - providers raise many types; all mean "this spec does not resolve"
        text = str(exc)
        lowered = text.lower()
        if "api_key" in lowered or "api key" in lowered or "credential" in lowered:
            provider = spec.split(":", 1)[0].upper() if ":" in spec else "the provider's"
            raise ValueError(
                f"model spec {spec!r} has no credentials: set {provider}_API_KEY (or pass api_key=...), "
                "or use 'embedded' to run offline"
            ) from exc
        raise ValueError(f"unknown model spec {spec!r}: {_SPEC_HELP}") from exc
    if not isinstance(model, BaseChatModel):
        raise ValueError(f"unknown model spec {spec!r}: it did not resolve to a chat model; {_SPEC_HELP}")
    return model


def resolve_model(
    spec: ModelSpec = None,
    *,
    role: str = "generator",
    base_url: str | None = None,
    api_key: str | None = None,
    temperature: float | None = None,
) -> BaseChatModel:
    """Resolve a model spec into a chat model.

    Args:
        spec: `None`/`"embedded"`, `"embedded:qwen2.5-coder-1.5b"`/`"embedded:gemma-3-270m"`, `"local:/path.gguf"`, a model name (with `base_url`), an `init_chat_model`
            string such as `"openai:gpt-4o-mini"`, a `BaseChatModel`, or a callable `fn(prompt) -> str`.
            `None` falls back to the `REFLECTION_GRAPH_MODEL` environment variable, then to `"embedded"`.
        role: `"generator"`, `"critic"` or `"reviser"`. A critic built here from a string spec runs at
            temperature 0 unless `temperature` says otherwise; models passed in are returned unchanged
            (use `critic_model` to lower their temperature).
        base_url: an OpenAI-compatible server's `/v1` URL; the spec is then the server's model name.
        api_key: the key for `base_url` (default `"not-needed"`) or for the provider of an `init_chat_model` spec.
        temperature: sampling temperature for models built here; `None` keeps each model's default.

    Returns:
        A `BaseChatModel`.

    Raises:
        ValueError: an unknown spec, a missing GGUF file, missing credentials or a missing provider package.
        TypeError: a spec that is neither a string, a chat model nor a callable.

    Example:
        ```python
        generator = resolve_model("embedded")
        critic = resolve_model("gemma", role="critic", base_url="http://127.0.0.1:8000/v1")
        ```
    """
    if role not in ("generator", "critic", "reviser"):
        raise ValueError(f"unknown role {role!r}: use 'generator', 'critic' or 'reviser'")
    if isinstance(spec, BaseChatModel):
        return spec
    if spec is None:
        spec = os.environ.get(MODEL_ENV_VAR, "").strip() or "embedded"
    if temperature is None and role == "critic":
        temperature = 0.0
    if isinstance(spec, str):
        name = spec.strip()
        if not name:
            raise ValueError(f"empty model spec: {_SPEC_HELP}")
        if name == "embedded" or name.startswith("embedded:"):
            return _embedded_spec(name, temperature)
        if name.startswith("local:"):
            return _load_gguf_spec(name, temperature)
        if base_url is not None:
            from langchain_openai import ChatOpenAI

            openai_kwargs: dict[str, Any] = {} if temperature is None else {"temperature": temperature}
            # langchain-openai sends `max_completion_tokens`, which llama.cpp's server ignores (it then writes
            # until the context is full); `max_tokens` in the body bounds every OpenAI-compatible server.
            openai_kwargs["extra_body"] = {"max_tokens": OPENAI_COMPATIBLE_MAX_TOKENS}
            return ChatOpenAI(
                model=_openai_name(name),
                base_url=base_url,
                api_key=SecretStr(api_key or "not-needed"),
                **openai_kwargs,
            )
        return _init_chat_model(name, api_key, temperature)
    if isinstance(spec, Runnable):
        raise TypeError(
            f"model spec {type(spec).__name__} is a Runnable but not a BaseChatModel; pass the chat model itself "
            "(bind options on it inside your own node) or a callable fn(prompt: str) -> str"
        )
    if callable(spec):
        return CallableChatModel(fn=spec)
    raise TypeError(
        f"model spec of type {type(spec).__name__} is not supported: pass a model string, a BaseChatModel "
        "or a callable fn(prompt: str) -> str"
    )


def supports_structured_output(model: BaseChatModel) -> bool:
    """True when the model constrains its output to a schema natively.

    That is the embedded model (a JSON grammar) and any chat model class that implements `bind_tools` or
    overrides `with_structured_output` (tool calling or JSON-schema modes). `CallableChatModel` is False: its
    `with_structured_output` only parses text, so a critic does better with `parse_critique` on the raw reply.
    """
    if isinstance(model, EmbeddedChatModel):
        return True
    if isinstance(model, CallableChatModel):
        return False
    cls = type(model)
    return (
        cls.with_structured_output is not BaseChatModel.with_structured_output
        or cls.bind_tools is not BaseChatModel.bind_tools
    )


critic_model = at_temperature_zero
"""The critic's model: `at_temperature_zero` (reflection_graph/models/profile.py) under the name it had first."""
