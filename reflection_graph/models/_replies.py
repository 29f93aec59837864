"""The embedded model's replies: free text (whole or streamed), grammar-constrained JSON and next-token
log-probabilities, as LangChain chat results with their usage and metadata.

Each function here is a method of `EmbeddedChatModel` moved out whole (the model is its first argument); the
class assigns it under the method's name, e.g. `_generate = _replies.generate`.
"""

from __future__ import annotations

import functools
import os
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.messages.ai import UsageMetadata
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult

from reflection_graph._runtime._threads import Emit, astream_detached, stream_in_thread
from reflection_graph.models import _repetition, _reuse, _structured
from reflection_graph.models._options import check_call
from reflection_graph.models._prompting import _clean
from reflection_graph.models._streaming import ReplyChunks, TextTap

if TYPE_CHECKING:
    from reflection_graph.models.embedded import EmbeddedChatModel


def _checked(
    model: EmbeddedChatModel, kwargs: dict[str, Any], stop: list[str] | None
) -> tuple[dict[str, Any], list[str] | None]:
    """A call's options and stop sequences, validated as the model's fields are (`_options.check_call`),
    before the model is loaded."""
    return check_call(type(model), kwargs, stop)


def generate(
    model: EmbeddedChatModel,
    messages: list[BaseMessage],
    stop: list[str] | None = None,
    run_manager: CallbackManagerForLLMRun | None = None,
    **kwargs: Any,
) -> ChatResult:
    kwargs, stop = _checked(model, kwargs, stop)
    prompt = model.render_prompt(messages)
    loaded = model._loaded()
    params = model._sampling(stop, kwargs, loaded, messages)
    plan = model._plan(loaded, messages, prompt, kwargs)
    if kwargs.get("logprobs") or kwargs.get("top_logprobs") is not None:
        top = int(kwargs["top_logprobs"]) if kwargs.get("top_logprobs") is not None else 1
        text, usage, meta = model._generate_logprobs(prompt, top, kwargs.get("score_text"), plan)
    elif kwargs.get("json_schema") is not None:
        text, usage, meta = model._generate_json(
            prompt, kwargs["json_schema"], params, kwargs.get("max_tokens"), plan
        )
    else:
        text, usage, meta = model._generate_text(prompt, params, plan)
    message = AIMessage(content=text, usage_metadata=usage, response_metadata=meta)
    return ChatResult(generations=[ChatGeneration(message=message)], llm_output={"token_usage": dict(usage)})


def stream(
    model: EmbeddedChatModel,
    messages: list[BaseMessage],
    stop: list[str] | None = None,
    run_manager: CallbackManagerForLLMRun | None = None,
    **kwargs: Any,
) -> Iterator[ChatGenerationChunk]:
    """The reply of `_generate` as it is written: text pieces, then a last chunk with the rest of the text,
    the usage and `finish_reason` (JSON and log-probability calls: that one chunk). See `_produce`."""
    kwargs, stop = _checked(model, kwargs, stop)
    chunks = ReplyChunks()
    for item in stream_in_thread(functools.partial(model._produce, messages, stop, kwargs)):
        chunk = chunks.chunk(item)
        if chunk is not None:
            if run_manager is not None:
                run_manager.on_llm_new_token(chunk.text, chunk=chunk)
            yield chunk


async def astream(
    model: EmbeddedChatModel,
    messages: list[BaseMessage],
    stop: list[str] | None = None,
    run_manager: AsyncCallbackManagerForLLMRun | None = None,
    **kwargs: Any,
) -> AsyncIterator[ChatGenerationChunk]:
    """Async twin of `_stream`; the model runs in its own thread, never on the event loop."""
    kwargs, stop = _checked(model, kwargs, stop)
    chunks = ReplyChunks()
    async for item in astream_detached(functools.partial(model._produce, messages, stop, kwargs)):
        chunk = chunks.chunk(item)
        if chunk is not None:
            if run_manager is not None:
                await run_manager.on_llm_new_token(chunk.text, chunk=chunk)
            yield chunk


def produce(
    model: EmbeddedChatModel,
    messages: list[BaseMessage],
    stop: list[str] | None,
    kwargs: dict[str, Any],
    emit: Emit,
) -> None:
    """Emit a call's reply as `_generate` makes it: for free text, the pieces a `TextTap` passes on while the
    very completion `_generate` runs is written, then the whole reply (an `AIMessage`); for JSON and
    log-probability calls, the whole reply only. Runs in a thread of its own (`stream_in_thread`); the model's
    lock is held for the one completion, which stops at the next token once `emit` returns False."""
    if not _free_text(kwargs):
        emit(model._generate(messages, stop, **kwargs).generations[0].message)
        return
    prompt, loaded = model.render_prompt(messages), model._loaded()
    params = model._sampling(stop, kwargs, loaded, messages)
    plan = model._plan(loaded, messages, prompt, kwargs)  # the same phases as `_generate`: the same figures
    text, usage, meta = model._generate_text(prompt, params, plan, emit)
    emit(AIMessage(content=text, usage_metadata=usage, response_metadata=meta))


def meta(model: EmbeddedChatModel, finish_reason: str | None, attempts: int) -> dict[str, Any]:
    return {
        "model_name": os.path.basename(model.resolved_model_path),
        "model_provider": "llama-cpp",
        "finish_reason": finish_reason,
        "attempts": attempts,
    }


def generate_logprobs(
    model: EmbeddedChatModel, prompt: str, top: int, score_text: str | None, plan: _reuse.Plan | None = None
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
    scored = model._continuation_logprobs(prompt[:at], score_text, 128, plan) if score_text else None
    top_logprobs = model._next_token_logprobs(prompt, top, (), plan) if top else {"": 0.0}
    token, logprob = next(iter(top_logprobs.items()))
    n_prompt = len(model._prompt_ids(model._loaded(), prompt))
    usage = UsageMetadata(input_tokens=n_prompt, output_tokens=1, total_tokens=n_prompt + 1)
    alternatives = [{"token": t, "logprob": lp} for t, lp in top_logprobs.items()] if top else []
    meta = model._meta("length", 1)
    del meta["attempts"]
    meta["logprobs"] = {"content": [{"token": token, "logprob": logprob, "top_logprobs": alternatives}]}
    if scored is not None:
        meta["prompt_logprobs"] = scored
    return token, usage, meta


def generate_text(
    model: EmbeddedChatModel,
    prompt: str,
    params: dict[str, Any],
    plan: _reuse.Plan | None = None,
    emit: Emit | None = None,
) -> tuple[str, UsageMetadata, dict[str, Any]]:
    """One completion of `prompt`, cleaned. An empty reply is retried (next seed, warmer) by the one retry
    layer, `reflection_graph._runtime._calls`, where every attempt is counted in `max_model_calls`.

    With `plan.stop_repetition` a `RepetitionStop` watches the tokens: a reply that falls into a loop (more copies
    of one span than the prompt asks for, `plan.requested_copies`) is stopped, keeps its text up to the end of the
    copies asked for (the first copy when none were) and reports `finish_reason` "repetition". With
    `emit` (streaming) a `TextTap` passes the text on as it is written, never beyond what such a cut would keep."""
    loaded = model._loaded()
    plan = plan or _reuse.Plan()
    watch = _repetition.RepetitionStop(requested=plan.requested_copies) if plan.stop_repetition else None
    criteria: list[Any] = [watch] if watch is not None else []
    if emit is not None:  # after the watch: the tap reads what it has settled in the same call
        criteria.append(TextTap(loaded.llama, [*params["stop"], *model._end_of_turn(loaded)], emit, watch))
    if criteria:
        from llama_cpp import StoppingCriteriaList

        params = {**params, "stopping_criteria": StoppingCriteriaList(criteria)}
    result = model._complete(loaded, prompt, params, plan=plan)
    choice = result["choices"][0]
    text, finish_reason = choice["text"], choice.get("finish_reason")
    generated = int((result.get("usage") or {}).get("completion_tokens", 0))
    # llama-cpp-python reports "stop" for a criterion's stop, with the text of every token generated; a loop found
    # beyond those tokens (only in its check after the loop, on prompt-lookup proposals never accepted) is no loop
    if watch is not None and watch.loop is not None and watch.loop.end <= generated:
        text = loaded.llama.detokenize(watch.kept()).decode("utf-8", errors="ignore")
        finish_reason = _repetition.REPETITION
    for end_of_turn in model._end_of_turn(loaded):
        text = text.split(end_of_turn, 1)[0]
    text = _clean(text, truncated=finish_reason == "length")
    return text, _usage([result]), model._meta(finish_reason, 1)


def generate_json(
    model: EmbeddedChatModel,
    prompt: str,
    json_schema: dict[str, Any],
    params: dict[str, Any],
    max_tokens: int | None,
    plan: _reuse.Plan | None = None,
) -> tuple[str, UsageMetadata, dict[str, Any]]:
    loaded = model._loaded()
    args = {**params, "stop": [], "max_tokens": int(max_tokens or model.structured_max_tokens)}
    text, results = _structured.generate_json(
        lambda grammar: model._complete(loaded, prompt, args, grammar, plan), json_schema
    )
    return text, _usage(results), model._meta(results[-1]["choices"][0].get("finish_reason"), len(results))


def _free_text(options: dict[str, Any]) -> bool:
    """Whether a call's options ask for free text (which streams), not JSON or log-probabilities (which do not)."""
    wants_logprobs = options.get("logprobs") or options.get("top_logprobs") is not None
    return not wants_logprobs and options.get("json_schema") is None


def _usage(results: list[dict[str, Any]]) -> UsageMetadata:
    """Token counts summed over llama.cpp completion results."""
    counts = [r.get("usage") or {} for r in results]
    n_in = sum(int(c.get("prompt_tokens", 0)) for c in counts)
    n_out = sum(int(c.get("completion_tokens", 0)) for c in counts)
    return UsageMetadata(input_tokens=n_in, output_tokens=n_out, total_tokens=n_in + n_out)
