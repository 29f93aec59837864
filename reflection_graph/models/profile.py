"""What a model is and can do, for any model; and the profile of each embedded model.

**Any model** (`describe`): the package asks a model's facts here and nowhere else. `describe(model)` returns a
`ModelFacts`: is it prompted through its own chat template (its first draft is then the user's task as it is), does
it give next-token log-probabilities, can it score a prompt's own tokens, does it count tokens itself, what limits
its reply, can it run at temperature 0, and which critic judges with it by default. `at_temperature_zero(model)` is
the one way to get a model at temperature 0; `count_tokens` and `token_bound` are its own token counts, where it
has them. The facts come from the model object:
- `EmbeddedChatModel` answers from its profile (below);
- any other LangChain chat model from what it declares: its fields (`temperature`, a reply limit named as in
  `REPLY_LIMITS`, `logprobs` as `ChatOpenAI` has it), and the members a model class may define to say more:
  `uses_chat_template` (a bool: prompted through a chat template or not), `count_tokens(text) -> int`,
  `token_bound(messages, **options) -> int`, `structured_max_tokens`, `next_token_logprobs(prompt, ...)` and
  `continuation_logprobs(prompt, continuation)`. A chat model that does not declare `uses_chat_template` is
  prompted through a chat template (`ChatOpenAI`, `ChatAnthropic`, `ChatOllama`, an `init_chat_model` string ...
  send their messages as a conversation, which the provider or server puts through the model's template), so its
  first draft is the plain chat call of the task;
- a plain callable (`CallableChatModel`, which declares `uses_chat_template = False`: its function gets one
  rendered prompt string) or anything else from nothing: completion-style prompts, no probabilities, the
  character estimate of its tokens (`CHARS_PER_TOKEN`), an `LLMCritic`.

**An embedded model** (`ModelProfile`): one profile per bundled GGUF, one for any other file. A profile holds the
facts of the model (is it prompted through a chat template, can its next-token probabilities judge), the defaults of
its calls (context window, reply limits, repeat penalty) and, for a bundled model, where its GGUF is. A
completion-style profile's repeat penalty and repetition stop are for prose: `plain_completion(model)` sets them to
llama-cpp-python's own defaults for the loop's first draft of a code stub, the plain completion of the stub.
`EmbeddedChatModel` takes every default it is not given from its profile, so a setting the user passes always wins.

- `qwen2.5-coder-1.5b` (instruction-tuned, chat template): llama-cpp-python's own chat defaults where they matter,
  no repeat penalty (code and revisions copy text on purpose), a reply limit no normal answer reaches, and an 8,192
  token context (its GGUF allows 32,768; 8,192 keeps the KV cache near 230 MB).
- `gemma-3-270m` (a base model, completion-style): short replies and a repeat penalty, without which it loops.
- any other GGUF (`local:/path.gguf`): `INSTRUCT` when its metadata holds a chat template, else `BASE`.

Adding a bundled GGUF is one entry in `PROFILES` (its `gguf` says where the file is): `embedded:<name>`,
`EmbeddedChatModel(model=<name>)` and `REFLECTION_GRAPH_EMBEDDED=<name>` then run it with its defaults and its
default critic.

The profiles, the registry and the choice of the default bundled model are in `_profiles.py`; their names are
exported here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeVar

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage

from reflection_graph.models._profiles import (
    BASE,
    EMBEDDED_ENV_VAR,
    INSTRUCT,
    PROFILES,
    DefaultCritic,
    ModelProfile,
    bundled_model_path,
    bundled_names,
    default_embedded,
    default_model_path,
    profile_defaults,
)

__all__ = [
    "BASE",
    "CHARS_PER_TOKEN",
    "EMBEDDED_ENV_VAR",
    "INSTRUCT",
    "PLAIN_COMPLETION",
    "PROFILES",
    "REPLY_LIMITS",
    "DefaultCritic",
    "ModelFacts",
    "ModelProfile",
    "at_temperature_zero",
    "bundled_model_path",
    "bundled_names",
    "chat_template",
    "count_tokens",
    "default_embedded",
    "default_model_path",
    "describe",
    "plain_completion",
    "profile_defaults",
    "token_bound",
]

CHARS_PER_TOKEN = 4
"""The estimate of a model without a tokenizer of its own: one token per this many characters, rounded up."""
REPLY_LIMITS = ("max_tokens", "max_completion_tokens", "max_output_tokens", "num_predict")
"""The names chat models give their reply limit (OpenAI, Anthropic; OpenAI's newer name; Google; Ollama)."""
_NO_TEMPERATURE_PREFIXES = ("o1", "o3", "o4", "gpt-5")
"""OpenAI reasoning models refuse any temperature other than the default."""


@dataclass(frozen=True)
class ModelFacts:
    """What one model is and can do (`describe`).

    Attributes:
        chat_template: prompted through its own chat template (an instruction-tuned GGUF, any LangChain chat
            model that does not declare otherwise): its first draft is the user's task as it is, a revision
            continues the conversation. False (a base GGUF, a plain callable, a model declaring
            `uses_chat_template = False`): the package's completion-style prompts, ending in a cue line.
        logprobs: gives next-token log-probabilities (`logprobs=True, top_logprobs=K` as OpenAI reports them).
        prompt_scoring: scores the tokens of a text inside its prompt (`continuation_logprobs`, the `score_text`
            call option): `LogprobCritic`'s likelihood signal.
        counts_tokens: counts a text's tokens with its own tokenizer (`count_tokens`); else `CHARS_PER_TOKEN`.
        bounds_calls: knows the most tokens one call can use (`token_bound`); else a prompt estimate and the reply
            limit.
        reply_limit_option: the call option that limits a reply (one of `REPLY_LIMITS`), when the model has one.
        reply_limit: the model's own limit of a free-text reply, in tokens (None: none set).
        structured_reply_limit: its own limit of a grammar-constrained JSON reply (None: the free-text one).
        temperature_zero: it can run at temperature 0 (`at_temperature_zero` copies it so).
        default_critic: the critic it judges with when none is named.
    """

    chat_template: bool = False
    logprobs: bool = False
    prompt_scoring: bool = False
    counts_tokens: bool = False
    bounds_calls: bool = False
    reply_limit_option: str | None = None
    reply_limit: int | None = None
    structured_reply_limit: int | None = None
    temperature_zero: bool = False
    default_critic: DefaultCritic = "llm"


# -- any model ---------------------------------------------------------------------------------------------------


def _embedded_profile(model: Any) -> ModelProfile | None:
    """The profile an embedded model declares (`EmbeddedChatModel.embedded_profile`, a `ModelProfile`); None for
    any other model."""
    profile = getattr(model, "embedded_profile", None)
    return profile if isinstance(profile, ModelProfile) else None


def chat_template(model: Any) -> bool:
    """`describe(model).chat_template` without the rest of the facts: asked for every draft and revision.

    An `EmbeddedChatModel` answers from its profile; a model that declares `uses_chat_template` (a bool attribute
    or property) keeps its declaration; any other LangChain chat model is prompted through a chat template (a
    provider's chat API applies the model's own); anything that is not a chat model is not.
    """
    profile = _embedded_profile(model)
    if profile is not None:
        return profile.chat_template
    declared = getattr(model, "uses_chat_template", None)
    if isinstance(declared, bool):
        return declared
    return isinstance(model, BaseChatModel)


def describe(model: Any) -> ModelFacts:
    """What `model` is and can do: an `EmbeddedChatModel` from its profile, any other chat model from what it
    declares (see the module doc), anything else from nothing.

    Example:
        ```python
        describe(EmbeddedChatModel(model="gemma-3-270m")).default_critic  # "logprob"
        describe(ChatOpenAI(model="gpt-4o-mini")).reply_limit_option  # "max_tokens"
        ```
    """
    profile = _embedded_profile(model)
    if profile is not None:
        return ModelFacts(
            chat_template=profile.chat_template,
            logprobs=True,
            prompt_scoring=True,
            counts_tokens=True,
            bounds_calls=True,
            reply_limit_option="max_tokens",
            reply_limit=model.max_tokens,
            structured_reply_limit=model.structured_max_tokens,
            temperature_zero=True,
            default_critic=profile.default_critic,
        )
    fields = getattr(type(model), "model_fields", {})
    option = next((name for name in REPLY_LIMITS if name in fields), None)
    return ModelFacts(
        chat_template=chat_template(model),
        logprobs="logprobs" in fields or callable(getattr(model, "next_token_logprobs", None)),
        prompt_scoring=callable(getattr(model, "continuation_logprobs", None)),
        counts_tokens=callable(getattr(model, "count_tokens", None)),
        bounds_calls=callable(getattr(model, "token_bound", None)),
        reply_limit_option=option,
        reply_limit=_tokens_or_none(getattr(model, option, None)) if option else None,
        structured_reply_limit=_tokens_or_none(getattr(model, "structured_max_tokens", None)),
        temperature_zero=_temperature_zero(model),
    )


def _tokens_or_none(value: Any) -> int | None:
    return int(value) if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _temperature_zero(model: Any) -> bool:
    """A chat model with a `temperature` field, unless LangChain's profile of it (`BaseChatModel.profile`) says it
    takes no temperature, or it is an OpenAI reasoning model (which refuses one)."""
    if not isinstance(model, BaseChatModel) or "temperature" not in type(model).model_fields:
        return False
    if (model.profile or {}).get("temperature") is False:
        return False
    name = str(getattr(model, "model_name", "") or getattr(model, "model", "") or "")
    return not name.startswith(_NO_TEMPERATURE_PREFIXES)


Model = TypeVar("Model")


def at_temperature_zero(model: Model) -> Model:
    """`model` at temperature 0, where it allows it: the one way the package gets a greedy model (critics, the
    first draft).

    A chat model with a `temperature` field (the embedded model, `ChatOpenAI`, most provider classes) is copied
    with `temperature=0` (its stop rules, seed and reply limit kept); one already at 0 is returned as it is, and so
    are OpenAI reasoning models (`o1`, `o3`, `o4`, `gpt-5` ...), models without the field (`CallableChatModel`)
    and anything that is not a chat model. The input model is never mutated.
    """
    if not _temperature_zero(model) or getattr(model, "temperature", None) == 0:
        return model
    copied: Model = model.model_copy(update={"temperature": 0.0})  # type: ignore[attr-defined]
    return copied


PLAIN_COMPLETION: dict[str, Any] = {"repeat_penalty": 1.0, "stop_repetition": False}
"""What a completion-style profile sets for prose, at llama-cpp-python's own `create_completion` defaults: no
repeat penalty (code copies names on purpose) and no repetition stop (llama.cpp has none)."""


def plain_completion(model: Model) -> Model:
    """`model` as a plain completion of a code stub runs it: what a user of the bare model gets from
    `Llama.create_completion(stub, temperature=0, max_tokens=...)` (the loop's first draft of a stub).

    An `EmbeddedChatModel` prompted completion-style (a base model such as Gemma 3 270M) is copied with
    `PLAIN_COMPLETION` for each of those settings still at its profile's default (a value the user chose is kept);
    any other model (a chat-template model or a hosted chat model, whose first draft is the plain chat call
    already, a plain callable) is returned as it is. The input model is never mutated.

    Example:
        ```python
        plain_completion(EmbeddedChatModel(model="gemma-3-270m")).repeat_penalty  # 1.0 (its profile: 1.1)
        ```
    """
    profile = _embedded_profile(model)
    if profile is None or profile.chat_template:
        return model
    defaults = profile.defaults()
    update = {
        name: value
        for name, value in PLAIN_COMPLETION.items()
        if getattr(model, name) == defaults[name] and defaults[name] != value
    }
    copied: Model = model.model_copy(update=update) if update else model  # type: ignore[attr-defined]
    return copied


def count_tokens(model: Any, text: str) -> int | None:
    """The tokens of `text` by `model`'s own tokenizer; None when it has none (`ModelFacts.counts_tokens`)."""
    count = getattr(model, "count_tokens", None)
    return int(count(text)) if callable(count) else None


def token_bound(model: Any, messages: list[BaseMessage], **options: Any) -> int | None:
    """The most tokens (prompt and reply) one call of `model` on `messages` with `options` can use, by the model's
    own count; None when it cannot tell (`ModelFacts.bounds_calls`)."""
    bound = getattr(model, "token_bound", None)
    return int(bound(messages, **options)) if callable(bound) else None
