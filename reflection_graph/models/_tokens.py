"""The embedded model's exact token bound of one call, and its token count of a text, for run budgets
(reflection_graph/_runtime/_budget.py, reflection_graph/_runtime/_estimate.py).

`EmbeddedChatModel.token_bound` asks this module: it counts the rendered prompt with the model's own tokenizer
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

from reflection_graph.models._structured import _TIGHTER


def count_tokens(llama: Any, text: str) -> int:
    """The tokens of `text` by `llama`'s own tokenizer (no BOS token)."""
    return len(llama.tokenize(text.encode("utf-8"), add_bos=False, special=False))


def token_bound(
    llama: Any, prompt: str, n_ctx: int, max_tokens: int, structured_max_tokens: int, options: dict[str, Any]
) -> int:
    """The most tokens (prompt and reply) that one call of the embedded model on the rendered `prompt` can report.

    Args:
        llama: the model's `llama_cpp.Llama` (its tokenizer).
        prompt: the call's prompt, as the model renders it (`EmbeddedChatModel.render_prompt`).
        n_ctx: the model's context window.
        max_tokens: the model's free-text reply limit, unless `options` give one.
        structured_max_tokens: the model's JSON reply limit, unless `options` give one.
        options: the call's options.
    """
    n_prompt = len(llama.tokenize(prompt.encode("utf-8"), add_bos=True, special=False))
    room = max(0, n_ctx - n_prompt)
    if options.get("logprobs") or options.get("top_logprobs") is not None:
        return n_prompt + 1
    if options.get("json_schema") is not None:
        reply = int(options.get("max_tokens") or structured_max_tokens)
        return len(_TIGHTER) * (n_prompt + min(reply, room))
    return n_prompt + min(int(options.get("max_tokens") or max_tokens), room)
