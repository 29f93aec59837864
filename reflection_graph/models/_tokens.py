"""The embedded model's exact token bound of one call, and its token count of a text, for run budgets
(reflection_graph/_runtime/_budget.py, reflection_graph/_runtime/_estimate.py).

`EmbeddedChatModel.token_bound` is this function: it counts the rendered prompt with the model's own tokenizer
(the prompt a call sends, `render_prompt`, with a BOS token and special tokens as text: never fewer tokens
than llama.cpp reports) and adds the reply limit
of the kind of call:
- free text: `max_tokens` (the call's, else the model's), cut to what the context window leaves;
- grammar-constrained JSON: the model tries up to `len(_TIGHTER)` completions with tighter bounds, each with the
  prompt and `structured_max_tokens` (or the call's `max_tokens`);
- next-token log-probabilities (`LogprobCritic`): the prompt and one token, as the model reports them.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import BaseMessage

from reflection_graph.models._structured import _TIGHTER


def count_tokens(model: Any, text: str) -> int:
    """The tokens of `text` by the embedded `model`'s own tokenizer (no BOS token)."""
    return len(model._loaded().llama.tokenize(text.encode("utf-8"), add_bos=False, special=False))


def token_bound(model: Any, messages: list[BaseMessage], **options: Any) -> int:
    """The most tokens (prompt and reply) that one call of the embedded `model` on `messages` can report."""
    prompt = model.render_prompt(messages)
    llama = model._loaded().llama
    n_prompt = len(llama.tokenize(prompt.encode("utf-8"), add_bos=True, special=False))
    room = max(0, model.n_ctx - n_prompt)
    if options.get("logprobs") or options.get("top_logprobs") is not None:
        return n_prompt + 1
    if options.get("json_schema") is not None:
        reply = int(options.get("max_tokens") or model.structured_max_tokens)
        return len(_TIGHTER) * (n_prompt + min(reply, room))
    return n_prompt + min(int(options.get("max_tokens") or model.max_tokens), room)
