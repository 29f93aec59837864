"""How many tokens a model call uses: what the model reports, or an estimate, and the most it can use.

- **Reported**: a reply's `AIMessage.usage_metadata` (also inside a structured-output result's `raw`) is counted as
  it is.
- **Estimated**: a model that reports no usage (a plain callable `fn(prompt) -> str`, a LangChain model without
  `usage_metadata`) is counted by `estimate_usage`: the prompt and the reply text, each by the model's own
  tokenizer where the model has one (`models.profile.count_tokens`: the embedded model), else one token per
  `CHARS_PER_TOKEN` characters, rounded up. Such a call's tokens are also added to the usage's
  `estimated_tokens`, so a report says how much of it is an estimate.

  The character estimate's error (`ESTIMATE_ERROR`), measured against real tokenizers on text nobody here wrote:
  on HumanEval/40-163 (OpenAI's; each prompt with its canonical solution, 124 texts of Python and docstrings) it is
  low, by 26% on average for the Gemma 3 270M tokenizer and by 17% for Qwen2.5-Coder-1.5B's, by at most 54% on one
  text, and at most 10% high (tests/test_estimate.py checks these bounds with Gemma's tokenizer). On English prose
  (the 27 long paragraphs of CPython's LICENSE.txt) it is about right on average (+4% and +6%), from 45% low to
  33% high per paragraph. So a run counted by the estimate stays within its budget by the package's count, and
  may have used up to 1/(1 - 0.55), about 2.2 times, as many real tokens in the worst case measured (code in
  indented Python, which the estimate undercounts most), about 1.35 times on average for code.
- **Bound**: `call_bound(runnable, value, reply)` is the most tokens one call can use when its reply is limited to
  `reply` tokens: the model's own bound (`models.profile.token_bound`) where it has one (the embedded model counts
  the prompt with its tokenizer and knows how many completions a call may make), else the prompt's estimate plus
  `reply`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.prompt_values import PromptValue
from langchain_core.runnables import Runnable, RunnableParallel, RunnableSequence, RunnableWithFallbacks
from langchain_core.runnables.base import RunnableBindingBase
from pydantic import BaseModel

from reflection_graph.models.profile import CHARS_PER_TOKEN, REPLY_LIMITS, count_tokens, token_bound

__all__ = [
    "CHARS_PER_TOKEN",
    "ESTIMATE_ERROR",
    "REPLY_LIMITS",
    "call_bound",
    "chat_model",
    "estimate_usage",
    "prompt_messages",
    "reported_usage",
    "text_tokens",
    "with_option",
]

ESTIMATE_ERROR = (-0.55, 0.35)
"""The range of the character estimate's relative error, (estimate - true) / true, against the Gemma 3 and Qwen2.5
tokenizers on the texts named in the module doc (measured: -0.54 to +0.10 on code, -0.45 to +0.33 on prose)."""


def chat_model(runnable: Any) -> tuple[BaseChatModel | None, dict[str, Any]]:
    """The chat model inside `runnable` (bindings, structured-output chains, fallbacks) and its bound options."""
    options: dict[str, Any] = {}
    node = runnable
    for _ in range(16):
        if isinstance(node, BaseChatModel):
            return node, options
        if isinstance(node, RunnableBindingBase):
            options = {**node.kwargs, **options}
            node = node.bound
        elif isinstance(node, RunnableSequence):
            node = node.first
        elif isinstance(node, RunnableParallel) and node.steps__:
            node = next(iter(node.steps__.values()))
        elif isinstance(node, RunnableWithFallbacks):
            node = node.runnable
        else:
            break
    return None, options


def _binds_model(node: Any) -> bool:
    """A binding whose keyword arguments reach a chat model (possibly through other bindings)."""
    while isinstance(node, RunnableBindingBase):
        node = node.bound
    return isinstance(node, BaseChatModel)


def with_option(runnable: Runnable[Any, Any], key: str, value: Any) -> Runnable[Any, Any]:
    """`runnable` with the call option `key=value` given to the chat model inside it (on the outermost binding
    that reaches the model, so it wins over a value bound earlier); unchanged when there is no chat model."""
    node: Any = runnable
    if isinstance(node, BaseChatModel):
        return node.bind(**{key: value})
    if isinstance(node, RunnableBindingBase):
        if _binds_model(node):
            return node.model_copy(update={"kwargs": {**node.kwargs, key: value}})
        return node.model_copy(update={"bound": with_option(node.bound, key, value)})
    if isinstance(node, RunnableSequence):
        return node.model_copy(update={"first": with_option(node.first, key, value)})
    if isinstance(node, RunnableParallel) and node.steps__:
        steps = dict(node.steps__)
        first = next(iter(steps))
        steps[first] = with_option(steps[first], key, value)
        return node.model_copy(update={"steps__": steps})
    if isinstance(node, RunnableWithFallbacks):
        return node.model_copy(update={"runnable": with_option(node.runnable, key, value)})
    return runnable


def prompt_messages(value: Any) -> list[BaseMessage] | None:
    """The messages a call sends (a prompt value, a string or a list of messages), else None."""
    if isinstance(value, PromptValue):
        return value.to_messages()
    if isinstance(value, str):
        return [HumanMessage(value)]
    if isinstance(value, list) and all(isinstance(m, BaseMessage) for m in value):
        return value
    return None


def text_tokens(model: Any, text: str) -> int:
    """The tokens of `text`: the model's own count (`count_tokens`), else `CHARS_PER_TOKEN` characters a token."""
    counted = count_tokens(model, text)
    return counted if counted is not None else math.ceil(len(text) / CHARS_PER_TOKEN)


def _prompt_text(value: Any) -> str:
    messages = prompt_messages(value)
    return "\n".join(m.text for m in messages) if messages is not None else str(value)


def call_bound(runnable: Runnable[Any, Any], value: Any, reply: int | None, key: str | None = None) -> int:
    """The most tokens one call of `runnable` on `value` can use with its reply limited to `reply` tokens (set as
    option `key`; None: the limit bound already): the model's `token_bound`, else the prompt's estimate plus
    `reply`."""
    model, options = chat_model(runnable)
    if key is not None and reply is not None:
        options = {**options, key: reply}
    messages = prompt_messages(value)
    bound = token_bound(model, messages, **options) if messages is not None else None
    if bound is not None:
        return bound
    return text_tokens(model, _prompt_text(value)) + int(reply or 0)


def _message(result: Any) -> AIMessage | None:
    if isinstance(result, Mapping):
        result = result.get("raw")
    return result if isinstance(result, AIMessage) else None


def reported_usage(result: Any) -> Mapping[str, Any] | None:
    """The `usage_metadata` a reply reports (an `AIMessage`, or a structured-output result holding it as `raw`)."""
    message = _message(result)
    return message.usage_metadata if message is not None else None


def _reply_text(result: Any) -> str:
    message = _message(result)
    if message is not None:
        return message.text
    if isinstance(result, BaseModel):
        return result.model_dump_json()
    if isinstance(result, Mapping):
        return json.dumps(dict(result), default=str)
    return "" if result is None else str(result)


def estimate_usage(runnable: Runnable[Any, Any], value: Any, result: Any) -> dict[str, int]:
    """The tokens of a call that reported none: its prompt and (when it returned) its reply, estimated; all of
    them are `estimated_tokens`."""
    model, _ = chat_model(runnable)
    prompt = text_tokens(model, _prompt_text(value))
    reply = text_tokens(model, _reply_text(result)) if result is not None else 0
    total = prompt + reply
    return {"input_tokens": prompt, "output_tokens": reply, "total_tokens": total, "estimated_tokens": total}
