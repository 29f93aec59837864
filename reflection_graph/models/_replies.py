"""The embedded model's replies: free text (whole or streamed, stopped where it falls into a loop), grammar-
constrained JSON and next-token log-probabilities, as LangChain chat results with their usage and metadata.

`Replies` shapes what its parts give: the completions of `Completion`, the figures of `Readings`. The chat model
checks a call's options (`_options.check_call`) and hands the call over (`generate`, `stream`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.messages.ai import UsageMetadata
from langchain_core.outputs import ChatGeneration, ChatResult

from reflection_graph.models import _repetition, _reuse, _structured
from reflection_graph.models._completion import Completion
from reflection_graph.models._logprobs import Readings
from reflection_graph.models._prompting import _clean
from reflection_graph.models._session import LlamaSession
from reflection_graph.models._streaming import TextTap
from reflection_graph.models._threads import Emit

__all__ = ["Replies", "check_logprobs", "free_text"]

Reply = tuple[str, UsageMetadata, dict[str, Any]]
"""A reply's text, its usage and its response metadata."""


@dataclass(frozen=True)
class Replies:
    """The replies of one embedded model's calls.

    Attributes:
        completion: sampling and completion in the model's llama.cpp session (`Completion`).
        readings: log-probability readings in the same session (`Readings`).
        model_name: the name the replies' metadata give (`model_name`: the GGUF's file name).
        structured_max_tokens: a JSON reply's token budget, unless the call gives `max_tokens`.
    """

    completion: Completion
    readings: Readings
    model_name: str
    structured_max_tokens: int

    @property
    def session(self) -> LlamaSession:
        """The llama.cpp session the replies are made in."""
        return self.completion.session

    def generate(
        self, messages: Sequence[BaseMessage], stop: list[str] | None, options: dict[str, Any]
    ) -> ChatResult:
        """The reply to `messages`: log-probabilities when the options ask for them, else JSON under the options'
        `json_schema`, else free text."""
        prompt = self.session.render(messages)
        params = self.completion.sampling(stop, options, messages)
        plan = self.completion.plan(messages, prompt, options)
        if options.get("logprobs") or options.get("top_logprobs") is not None:
            top = int(options["top_logprobs"]) if options.get("top_logprobs") is not None else 1
            text, usage, meta = self.logprobs(prompt, top, options.get("score_text"), plan)
        elif options.get("json_schema") is not None:
            text, usage, meta = self.json(
                prompt, options["json_schema"], params, options.get("max_tokens"), plan
            )
        else:
            text, usage, meta = self.text(prompt, params, plan)
        message = AIMessage(content=text, usage_metadata=usage, response_metadata=meta)
        return ChatResult(
            generations=[ChatGeneration(message=message)], llm_output={"token_usage": dict(usage)}
        )

    def stream(
        self, messages: Sequence[BaseMessage], stop: list[str] | None, options: dict[str, Any], emit: Emit
    ) -> None:
        """Emit a free-text reply as `generate` makes it: the pieces a `TextTap` passes on while the very
        completion `generate` runs is written, then the whole reply (an `AIMessage`). The model's lock is held for
        the one completion, which stops at the next token once `emit` returns False."""
        prompt = self.session.render(messages)
        params = self.completion.sampling(stop, options, messages)
        plan = self.completion.plan(
            messages, prompt, options
        )  # the same phases as `generate`: the same figures
        text, usage, meta = self.text(prompt, params, plan, emit)
        emit(AIMessage(content=text, usage_metadata=usage, response_metadata=meta))

    def meta(self, finish_reason: str | None, attempts: int) -> dict[str, Any]:
        """A reply's response metadata."""
        return {
            "model_name": self.model_name,
            "model_provider": "llama-cpp",
            "finish_reason": finish_reason,
            "attempts": attempts,
        }

    def logprobs(
        self, prompt: str, top: int, score_text: str | None, plan: _reuse.Plan | None = None
    ) -> Reply:
        """One next token, reported the way OpenAI's chat completions report `logprobs=True, top_logprobs=K`.

        With `score_text` (a piece of the prompt, such as the answer under review) the reply's metadata also
        holds `prompt_logprobs`: the log-probability of each of its tokens (at most 128) where it last occurs.
        `top_logprobs=0` with `score_text` skips the next token (one forward pass instead of two).
        """
        at = check_logprobs(prompt, top, score_text)
        plan = plan or _reuse.Plan()
        scored = self.readings.continuation(prompt[:at], score_text, 128, plan) if score_text else None
        top_logprobs = self.readings.next_token(prompt, top, (), plan) if top else {"": 0.0}
        token, logprob = next(iter(top_logprobs.items()))
        n_prompt = len(self.session.prompt_ids(prompt))
        usage = UsageMetadata(input_tokens=n_prompt, output_tokens=1, total_tokens=n_prompt + 1)
        alternatives = [{"token": t, "logprob": lp} for t, lp in top_logprobs.items()] if top else []
        meta = self.meta("length", 1)
        del meta["attempts"]
        meta["logprobs"] = {"content": [{"token": token, "logprob": logprob, "top_logprobs": alternatives}]}
        if scored is not None:
            meta["prompt_logprobs"] = scored
        return token, usage, meta

    def text(
        self, prompt: str, params: dict[str, Any], plan: _reuse.Plan | None = None, emit: Emit | None = None
    ) -> Reply:
        """One completion of `prompt`, cleaned. An empty reply is retried (next seed, warmer) by the one retry
        layer, `reflection_graph._runtime._calls`, where every attempt is counted in `max_model_calls`.

        With `plan.stop_repetition` a `RepetitionStop` watches the tokens: a reply that falls into a loop (more
        copies of one span than the prompt asks for, `plan.requested_copies`) is stopped, keeps its text up to the
        end of the copies asked for (the first copy when none were) and reports `finish_reason` "repetition". With
        `emit` (streaming) a `TextTap` passes the text on as it is written, never beyond what such a cut would
        keep."""
        llama = self.session.llama
        plan = plan or _reuse.Plan()
        watch = _repetition.RepetitionStop(requested=plan.requested_copies) if plan.stop_repetition else None
        criteria: list[Any] = [watch] if watch is not None else []
        if emit is not None:  # after the watch: the tap reads what it has settled in the same call
            criteria.append(TextTap(llama, [*params["stop"], *self.session.end_of_turn()], emit, watch))
        if criteria:
            from llama_cpp import StoppingCriteriaList

            params = {**params, "stopping_criteria": StoppingCriteriaList(criteria)}
        result = self.completion.complete(prompt, params, plan=plan)
        choice = result["choices"][0]
        text, finish_reason = choice["text"], choice.get("finish_reason")
        generated = int((result.get("usage") or {}).get("completion_tokens", 0))
        # llama-cpp-python reports "stop" for a criterion's stop, with the text of every token generated; a loop
        # found beyond those tokens (only in its check after the loop, on prompt-lookup proposals never accepted)
        # is no loop
        if watch is not None and watch.loop is not None and watch.loop.end <= generated:
            text = llama.detokenize(watch.kept()).decode("utf-8", errors="ignore")
            finish_reason = _repetition.REPETITION
        for end_of_turn in self.session.end_of_turn():
            text = text.split(end_of_turn, 1)[0]
        text = _clean(text, truncated=finish_reason == "length")
        return text, _usage([result]), self.meta(finish_reason, 1)

    def json(
        self,
        prompt: str,
        json_schema: dict[str, Any],
        params: dict[str, Any],
        max_tokens: int | None,
        plan: _reuse.Plan | None = None,
    ) -> Reply:
        """A grammar-constrained JSON reply under `json_schema` (`_structured.generate_json`: a reply cut by its
        token budget is retried with tighter bounds)."""
        args = {**params, "stop": [], "max_tokens": int(max_tokens or self.structured_max_tokens)}
        text, results = _structured.generate_json(
            lambda grammar: self.completion.complete(prompt, args, grammar, plan), json_schema
        )
        return text, _usage(results), self.meta(results[-1]["choices"][0].get("finish_reason"), len(results))


def check_logprobs(prompt: str, top: int, score_text: str | None) -> int:
    """Where `score_text` last occurs in `prompt` (-1 without one), once `top` and `score_text` are checked.

    Raises:
        ValueError: `top` is outside 1..100 (0 is allowed only with `score_text`), or `score_text` is not a part of
            the prompt.
    """
    if top < 0 or top > 100 or (top == 0 and not score_text):
        raise ValueError(f"top_logprobs must be between 1 and 100 (0 only with score_text), got {top}")
    at = prompt.rfind(score_text) if score_text else -1
    if score_text and at < 0:
        raise ValueError("score_text must be a part of the prompt")
    return at


def free_text(options: dict[str, Any]) -> bool:
    """Whether a call's options ask for free text (which streams), not JSON or log-probabilities (which do not)."""
    wants_logprobs = options.get("logprobs") or options.get("top_logprobs") is not None
    return not wants_logprobs and options.get("json_schema") is None


def _usage(results: list[dict[str, Any]]) -> UsageMetadata:
    """Token counts summed over llama.cpp completion results."""
    counts = [r.get("usage") or {} for r in results]
    n_in = sum(int(c.get("prompt_tokens", 0)) for c in counts)
    n_out = sum(int(c.get("completion_tokens", 0)) for c in counts)
    return UsageMetadata(input_tokens=n_in, output_tokens=n_out, total_tokens=n_in + n_out)
