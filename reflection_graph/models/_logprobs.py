"""Token log-probabilities from the embedded model's llama.cpp session (`Readings`): the next token, and each token
of a continuation.

Scoring reads logits straight from llama.cpp. Every scoring pass evaluates its text in the same phases whatever
the model ran before (`_reuse.evaluate`: phases fixed by the call's own messages, a saved prefix state loaded
where one exists), so a text gets the same log-probabilities in any order: reusing whatever prefix happened to be
cached would split the batches differently, and llama.cpp's quantized matrix products then differ by a few
hundredths of a nat, enough to reorder close candidates (a judge must not depend on its history).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from reflection_graph.models import _record, _reuse
from reflection_graph.models._llama import _import_llama_cpp
from reflection_graph.models._session import LlamaSession

__all__ = ["Readings"]


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


@dataclass(frozen=True)
class Readings:
    """Log-probability readings of prompts in one llama.cpp session (no sampling, no stop sequences).

    Attributes:
        session: the llama.cpp session (`LlamaSession`): its prompts' tokens, phases and saved prefix states.
    """

    session: LlamaSession

    def _evaluate(self, ids: list[int], bounds: Sequence[int]) -> tuple[int, float]:
        """Evaluate `ids` in its phases (`LlamaSession.evaluate`); the tokens evaluated and the seconds it took."""
        start = time.perf_counter()
        evaluated = self.session.evaluate(ids, bounds)
        return evaluated, time.perf_counter() - start

    def next_token(
        self, prompt: str, top: int, tokens: Sequence[str] = (), plan: _reuse.Plan | None = None
    ) -> dict[str, float]:
        """The `top` most likely tokens after `prompt`, plus each single-token text of `tokens`, as natural logs.

        The prompt is evaluated in the phases of `plan` (`_reuse`), from a saved prefix state where one exists."""
        loaded, llama = self.session.loaded, self.session.llama
        ids = self.session.prompt_ids(prompt)
        bounds = self.session.bounds(plan or _reuse.Plan(), ids)
        with loaded.lock:
            evaluated, seconds = self._evaluate(ids, bounds)
            logprobs = _last_logprobs(llama)
        _record.add(loaded, _record.CallRecord("next_token", ids, ids, evaluated=evaluated, prompt_s=seconds))
        picks = [int(i) for i in logprobs.argsort()[::-1][:top]]
        out = {_piece(llama, i): float(logprobs[i]) for i in picks}
        for text in tokens:
            ids_of = llama.tokenize(text.encode("utf-8"), add_bos=False, special=False)
            if len(ids_of) == 1:
                out.setdefault(text, float(logprobs[ids_of[0]]))
        return out

    def continuation(
        self, prompt: str, continuation: str, max_tokens: int, plan: _reuse.Plan | None = None
    ) -> list[float]:
        """Log-probability of each token of `continuation` right after `prompt` (at most `max_tokens` tokens).

        The prompt's tokens are evaluated in the phases of `plan` inside them (`_reuse`)."""
        loaded = self.session.loaded
        head, full = self.session.prompt_ids(prompt), self.session.prompt_ids(prompt + continuation)
        bounds = self.session.bounds(plan or _reuse.Plan(), full)
        shared = 0
        for a, b in zip(head, full, strict=False):
            if a != b:
                break
            shared += 1
        shared = max(1, min(shared, len(full) - 1))  # tokens can merge across the boundary
        targets = full[shared : shared + max_tokens]
        inside = [b for b in bounds if b < shared]
        with loaded.lock:
            evaluated, seconds = self._evaluate(full[:shared], inside)
            start = time.perf_counter()
            out = _continuation_logprobs(loaded.llama, targets)
            seconds += time.perf_counter() - start
        record = _record.CallRecord(
            "continuation", full[:shared], full[:shared], targets=targets, prompt_s=seconds
        )
        record.evaluated = evaluated + len(targets) - 1
        _record.add(loaded, record)
        return out
