"""How one call of the embedded model is evaluated: its prompt's tokens and phases, llama.cpp's sampling
arguments, and the completion itself (its prompt evaluated in the phases `_reuse` plans, recorded by `_record`).

These are `EmbeddedChatModel`'s own methods, kept here so the class stays small: each function takes the model
first and is assigned in the class under its method name (`_complete = _completion.complete`). A call's options
are validated by `_options`.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from langchain_core.messages import BaseMessage

from reflection_graph.models import _logprobs, _lookup, _record, _repetition, _reuse
from reflection_graph.models._llama import _Loaded
from reflection_graph.models._options import call_options, check_call

if TYPE_CHECKING:
    from reflection_graph.models.embedded import EmbeddedChatModel


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
    overrides = call_options(type(model), overrides)
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
    overrides, stop = check_call(type(model), overrides, stop)
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
