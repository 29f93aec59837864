"""Token log-probabilities from a loaded llama.cpp model: the next token, and each token of a continuation.

Scoring reads logits straight from llama.cpp. Every scoring pass evaluates its text in the same phases whatever
the model ran before (`_reuse.evaluate`: phases fixed by the call's own messages, a saved prefix state loaded
where one exists), so a text gets the same log-probabilities in any order: reusing whatever prefix happened to be
cached would split the batches differently, and llama.cpp's quantized matrix products then differ by a few
hundredths of a nat, enough to reorder close candidates (a judge must not depend on its history).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from reflection_graph.models import _record, _reuse
from reflection_graph.models._llama import _import_llama_cpp, _Loaded


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


def _evaluate(loaded: _Loaded, ids: list[int], bounds: Sequence[int], max_bytes: int) -> tuple[int, float]:
    """Evaluate `ids` in its phases (`_reuse.evaluate`); the tokens evaluated and the seconds it took."""
    start = time.perf_counter()
    evaluated = _reuse.evaluate(loaded.llama, ids, bounds, loaded.states, max_bytes)
    return evaluated, time.perf_counter() - start


def next_token_logprobs(
    loaded: _Loaded,
    ids: list[int],
    top: int,
    tokens: tuple[str, ...],
    bounds: Sequence[int] = (),
    max_bytes: int = 0,
) -> dict[str, float]:
    """The `top` most likely tokens after `ids`, plus each single-token text of `tokens`, as natural logs.

    `ids` is evaluated in phases ending at `bounds` (`_reuse`), with saved states of up to `max_bytes`."""
    llama = loaded.llama
    with loaded.lock:
        evaluated, seconds = _evaluate(loaded, ids, bounds, max_bytes)
        logprobs = _last_logprobs(llama)
    _record.add(loaded, _record.CallRecord("next_token", ids, ids, evaluated=evaluated, prompt_s=seconds))
    picks = [int(i) for i in logprobs.argsort()[::-1][:top]]
    out = {_piece(llama, i): float(logprobs[i]) for i in picks}
    for text in tokens:
        ids_of = llama.tokenize(text.encode("utf-8"), add_bos=False, special=False)
        if len(ids_of) == 1:
            out.setdefault(text, float(logprobs[ids_of[0]]))
    return out


def continuation_logprobs(
    loaded: _Loaded,
    head: list[int],
    full: list[int],
    max_tokens: int,
    bounds: Sequence[int] = (),
    max_bytes: int = 0,
) -> list[float]:
    """Log-probability of each token of `full` past its common prefix with `head` (at most `max_tokens`).

    The prefix is evaluated in phases ending at those of `bounds` inside it (`_reuse`)."""
    shared = 0
    for a, b in zip(head, full, strict=False):
        if a != b:
            break
        shared += 1
    shared = max(1, min(shared, len(full) - 1))  # tokens can merge across the boundary
    targets = full[shared : shared + max_tokens]
    inside = [b for b in bounds if b < shared]
    with loaded.lock:
        evaluated, seconds = _evaluate(loaded, full[:shared], inside, max_bytes)
        start = time.perf_counter()
        out = _continuation_logprobs(loaded.llama, targets)
        seconds += time.perf_counter() - start
    record = _record.CallRecord(
        "continuation", full[:shared], full[:shared], targets=targets, prompt_s=seconds
    )
    record.evaluated = evaluated + len(targets) - 1
    _record.add(loaded, record)
    return out
