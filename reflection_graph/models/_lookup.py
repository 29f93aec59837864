"""Prompt-lookup decoding for the embedded model: llama-cpp-python's `LlamaPromptLookupDecoding`, per call.

A revision copies most of the answer it revises. Prompt-lookup decoding proposes the tokens that followed the
last few generated tokens where they occur in the prompt, and llama.cpp checks the whole proposal in one batch:
every proposed token the model would have picked itself is accepted, the first other one is replaced by the
model's own pick. Each emitted token is still the sampler's choice at its position, so a greedy reply is the
same text (up to llama.cpp's batch-dependent rounding: checking a token inside a batch of proposals sums its
logits in another order than one token at a time; the real-model tests compare the text with and without it).

llama-cpp-python runs its draft model inside `Llama.generate`; switched on for one call here (under the model's
lock) by setting `Llama.draft_model`. Its own path for a draft model is not used as is: built with a draft model,
`Llama` asks llama.cpp for the logits of every prompt token too and copies each batch's logits into a buffer of
`n_batch` rows (so a prompt longer than `n_batch` does not fit; `logits_all=True` would make it `n_ctx` rows of the
vocabulary, 5 GB for Qwen at 8,192). `_eval_drafts` replaces `Llama.eval` for the call: the prompt (evaluated
before) is untouched, and only a generated token with its proposal asks for one row of logits per token, read by
the sampler inside llama.cpp. Memory cost: the logits of one proposal, `NUM_PRED_TOKENS + 1` rows of the vocabulary
(6.7 MB for Qwen), in llama.cpp's output buffer.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["MAX_NGRAM_SIZE", "NUM_PRED_TOKENS", "LookupStats", "prompt_lookup"]

MAX_NGRAM_SIZE = 2
"""The longest run of last tokens looked up in the prompt (llama-cpp-python's default)."""
NUM_PRED_TOKENS = 10
"""How many tokens one lookup proposes at most (llama-cpp-python's default)."""


@dataclass
class LookupStats:
    """What prompt lookup did in one call: `steps` decodes of generated tokens with their proposals."""

    steps: int = 0
    proposed: int = 0


def _eval_drafts(llama: Any, prompt_len: int, stats: LookupStats, tokens: Sequence[int]) -> None:
    """`Llama.eval` for a call with a draft model: the same decodes, with every token's logits asked for once the
    prompt is evaluated (the sampler checks each proposed token), and no copy of them into Python."""
    llama._ctx.kv_cache_seq_rm(-1, llama.n_tokens, -1)
    for i in range(0, len(tokens), llama.n_batch):
        batch = list(tokens[i : i + llama.n_batch])
        n_past = llama.n_tokens
        drafting = n_past >= prompt_len
        llama._batch.set_batch(batch=batch, n_past=n_past, logits_all=drafting)
        llama._ctx.decode(llama._batch)
        llama.input_ids[n_past : n_past + len(batch)] = batch
        llama.n_tokens += len(batch)
        llama._requires_eval = False
        if drafting:
            stats.steps += 1
            stats.proposed += len(batch) - 1


@contextlib.contextmanager
def prompt_lookup(llama: Any, prompt_len: int) -> Iterator[LookupStats]:
    """Within the block, `llama`'s generations use prompt-lookup decoding (hold the model's lock).

    Args:
        llama: a `llama_cpp.Llama` whose prompt of `prompt_len` tokens is already evaluated.
        prompt_len: where generated tokens start.
    """
    from llama_cpp.llama_speculative import LlamaPromptLookupDecoding

    stats = LookupStats()
    llama.draft_model = LlamaPromptLookupDecoding(
        max_ngram_size=MAX_NGRAM_SIZE, num_pred_tokens=NUM_PRED_TOKENS
    )
    llama.eval = lambda tokens: _eval_drafts(llama, prompt_len, stats, tokens)
    try:
        yield stats
    finally:
        llama.draft_model = None
        del llama.eval
