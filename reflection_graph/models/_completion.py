"""Sampling and completion of the embedded model's calls: llama.cpp's sampling arguments of a call (`sampling`),
how its prompt is evaluated and generated (`Completion.plan`), and the completion itself (`Completion.complete`:
its prompt evaluated in the phases `_reuse` plans, generated with prompt lookup where planned, recorded by
`_record`). A call's options are validated by `_options`.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from langchain_core.messages import BaseMessage
from pydantic import BaseModel

from reflection_graph.models import _lookup, _record, _repetition, _reuse
from reflection_graph.models._options import call_options, check_call
from reflection_graph.models._session import LlamaSession

__all__ = ["Completion", "sampling"]


def sampling(
    defaults: Mapping[str, Any],
    model_class: type[BaseModel],
    stop: list[str] | None,
    overrides: dict[str, Any],
    own: Sequence[str] = (),
) -> dict[str, Any]:
    """llama.cpp's sampling arguments of a call.

    Args:
        defaults: the model's own value of each call option that is a field (`_options.FIELD_OPTIONS`).
        model_class: the model class whose fields validate the call's options (`_options.check_call`).
        stop: the call's stop sequences.
        overrides: the call's options.
        own: the model's own stop sequences (`LlamaSession.own_stops`), which the stops begin with.
    """
    overrides, stop = check_call(model_class, overrides, stop)
    stops = [*own, *(defaults["stop"] or []), *(stop or []), *(overrides.get("stop") or [])]
    params: dict[str, Any] = {
        "seed": overrides.get("seed", defaults["seed"]),
        "stop": list(dict.fromkeys(stops)),
    }
    for key, kind in (("temperature", float), ("max_tokens", int), ("top_p", float), ("top_k", int)):
        params[key] = kind(overrides.get(key, defaults[key]))
    for key in ("min_p", "repeat_penalty"):
        params[key] = float(overrides.get(key, defaults[key]))
    return params


@dataclass(frozen=True)
class Completion:
    """Sampling and completion of one embedded model's calls, in its llama.cpp session.

    Attributes:
        session: the llama.cpp session (`LlamaSession`).
        defaults: the model's own value of each call option that is a field (`_options.FIELD_OPTIONS`).
        model_class: the model class whose fields validate call options.
    """

    session: LlamaSession
    defaults: Mapping[str, Any]
    model_class: type[BaseModel]

    def sampling(
        self, stop: list[str] | None, overrides: dict[str, Any], messages: Sequence[BaseMessage] = ()
    ) -> dict[str, Any]:
        """llama.cpp's sampling arguments of a call on `messages` (`sampling`), its stops beginning with the
        model's own."""
        return sampling(self.defaults, self.model_class, stop, overrides, self.session.own_stops(messages))

    def plan(self, messages: Sequence[BaseMessage], prompt: str, overrides: dict[str, Any]) -> _reuse.Plan:
        """How a call on `messages` (rendered as `prompt`) is evaluated and generated (`_reuse.plan`): prompt
        lookup and the repetition stop apply to free text only (a JSON reply is bounded by its grammar); the stop
        lets through the copies the messages ask for (`_repetition.requested_copies` of every message but the
        model's own earlier replies)."""
        overrides = call_options(self.model_class, overrides)
        generation = not (overrides.get("logprobs") or overrides.get("top_logprobs") is not None)
        lookup = overrides.get("prompt_lookup", self.defaults["prompt_lookup"])
        repetition = overrides.get("stop_repetition", self.defaults["stop_repetition"])
        if overrides.get("json_schema") is not None:
            lookup, repetition = False, False
        planned = _reuse.plan(
            messages,
            prompt,
            self.session.render,
            chat=self.session.chat,
            generation=generation,
            lookup=None if lookup is None else bool(lookup),
        )
        asked = "\n".join(m.text for m in messages if m.type != "ai")
        return replace(
            planned,
            stop_repetition=generation and repetition,
            requested_copies=_repetition.requested_copies(asked) if generation and repetition else 1,
        )

    def complete(
        self, prompt: str, params: dict[str, Any], grammar: Any = None, plan: _reuse.Plan | None = None
    ) -> dict[str, Any]:
        """One `create_completion` of `prompt`, its prompt evaluated first in the phases of `plan` (`_reuse`)."""
        session, loaded = self.session, self.session.loaded
        plan = plan or _reuse.Plan()
        args = dict(params)
        # A chat prompt goes as its tokens (special tokens parsed), as llama-cpp-python's chat completion sends it;
        # llama.cpp ends a reply at the end-of-turn token itself. A completion prompt goes as its text, and its
        # tokens here are the ones `create_completion` makes of it (BOS added, special tokens parsed).
        ids = session.prompt_ids(prompt)
        if not session.chat:
            ids = loaded.llama.tokenize(prompt.encode("utf-8"), add_bos=True, special=True)
        args["max_tokens"] = min(args["max_tokens"], session.n_ctx - len(ids))
        if args["seed"] is None:
            args["seed"] = int.from_bytes(os.urandom(4), "little")
        text_or_ids: str | list[int] = ids if session.chat else prompt
        bounds = session.bounds(plan, ids)
        lookup = plan.lookup and grammar is None
        with loaded.lock:
            # The same phases whether a prefix state is saved or not (a prefix evaluated in other batches shifts
            # the logits a little, and so the sample): the same prompt and seed give the same text. The prompt is
            # then fully evaluated, so `create_completion` samples its first token at once.
            start = time.perf_counter()
            evaluated = session.evaluate(ids, bounds, keep_end=plan.keep_end)
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
