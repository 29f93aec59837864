"""DocETL-style gleaning over documents: order, bounded concurrency, isolation of failures, counting, validation."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from langchain_core.messages import BaseMessage
from langgraph.checkpoint.memory import InMemorySaver

from reflection_graph import Context
from reflection_graph.critics import BaseCritic, CritiqueRequest
from reflection_graph.critique import Critique
from reflection_graph.gleaning import create_gleaning_graph
from tests.fakes import FakeCriticModel, RecordingChatModel, critique


class InFlight:
    """Counts calls running at the same time (the peak is what max_concurrency must bound)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.now = 0
        self.peak = 0

    def __call__(self, seconds: float, then: Callable[[], object] | None = None) -> None:
        """One call: in flight for `seconds`, then until `then` (a barrier's wait, say) returns."""
        with self.lock:
            self.now += 1
            self.peak = max(self.peak, self.now)
        time.sleep(seconds)
        if then is not None:
            then()
        with self.lock:
            self.now -= 1


def _doc_of(messages: Sequence[BaseMessage]) -> str:
    """The document named in the prompt (documents here are 'doc-<n>')."""
    text = str(messages[-1].content)
    start = text.index("doc-")
    return text[start:].split()[0].rstrip(".:,")


def accept_all() -> FakeCriticModel:
    return FakeCriticModel(critiques=[critique(9, ok=True, issues=[])])


def test_results_keep_input_order_when_documents_finish_out_of_order() -> None:
    """doc-0 finishes after doc-3, doc-2 after doc-1 (each waits for the other's event, not for a sleep)."""
    docs = ["doc-0", "doc-1", "doc-2", "doc-3"]
    done = {doc: threading.Event() for doc in docs}
    waits_for = {"doc-0": "doc-3", "doc-2": "doc-1"}
    finished: list[str] = []

    def reply(messages: list[BaseMessage]) -> str:
        doc = _doc_of(messages)
        if doc in waits_for:
            assert done[waits_for[doc]].wait(timeout=60), f"{waits_for[doc]} never finished"
        finished.append(doc)
        done[doc].set()
        return f"summary of {doc}"

    graph = create_gleaning_graph(
        RecordingChatModel(replies=[reply]),
        critic=accept_all(),
        validation_prompt="one sentence",
        max_concurrency=4,
    )
    out = graph.invoke({"documents": docs, "prompt": "Summarize {document}."})
    assert finished.index("doc-0") > finished.index("doc-3") and finished.index("doc-2") > finished.index(
        "doc-1"
    )
    assert [r["index"] for r in out["results"]] == [0, 1, 2, 3]
    assert [r["output"] for r in out["results"]] == [f"summary of {d}" for d in docs]
    assert all(r["stop_reason"] == "accepted" and r["iterations"] == 1 for r in out["results"])


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_concurrency_is_bounded_and_used(mode: str) -> None:
    """Each call waits at a barrier for a second one: with fewer than 2 at a time it breaks (after its timeout),
    and the peak shows no more than 2 ever ran."""
    inflight = InFlight()
    pair = threading.Barrier(2, timeout=60)

    def reply(messages: list[BaseMessage]) -> str:
        inflight(0.0, pair.wait)
        return f"summary of {_doc_of(messages)}"

    graph = create_gleaning_graph(
        RecordingChatModel(replies=[reply]), critic=accept_all(), validation_prompt="short", max_concurrency=2
    )
    payload = {"documents": [f"doc-{i}" for i in range(6)], "prompt": "Summarize {document}."}
    out = graph.invoke(payload) if mode == "sync" else asyncio.run(graph.ainvoke(payload))
    assert [r["stop_reason"] for r in out["results"]] == ["accepted"] * 6, out["results"]
    assert inflight.peak == 2, f"peak concurrency {inflight.peak}, expected exactly max_concurrency=2"


def test_run_config_max_concurrency_wins() -> None:
    inflight = InFlight()

    def reply(messages: list[BaseMessage]) -> str:
        inflight(0.05)
        return "x"

    graph = create_gleaning_graph(
        RecordingChatModel(replies=[reply]), critic=accept_all(), validation_prompt="short", max_concurrency=4
    )
    graph.invoke(
        {"documents": [f"doc-{i}" for i in range(4)], "prompt": "p {document}"}, {"max_concurrency": 1}
    )
    assert inflight.peak == 1


def test_a_failing_document_does_not_lose_the_others() -> None:
    def reply(messages: list[BaseMessage]) -> str:
        if "doc-1" in str(messages[-1].content):
            raise RuntimeError("model crashed on doc-1")
        return f"summary of {_doc_of(messages)}"

    too_long = "doc-3 " + "x" * 200_001  # the reflection graph refuses the task itself (raises)
    graph = create_gleaning_graph(
        RecordingChatModel(replies=[reply]), critic=accept_all(), validation_prompt="short", retries=0
    )
    out = graph.invoke({"documents": ["doc-0", "doc-1", "doc-2", too_long], "prompt": "Summarize {document}"})
    results = out["results"]
    assert [r["index"] for r in results] == [0, 1, 2, 3]
    assert results[0]["output"] == "summary of doc-0" and results[0]["stop_reason"] == "accepted"
    assert results[2]["output"] == "summary of doc-2" and results[2]["stop_reason"] == "accepted"
    assert results[1]["stop_reason"] == "error" and "model crashed on doc-1" in (results[1]["error"] or "")
    assert results[3]["stop_reason"] == "error" and "200,000" in (results[3]["error"] or "")
    assert results[3]["output"] is None and results[3]["usage"] == {}
    # summed usage counts the documents that ran
    assert out["usage"]["total"]["calls"] == sum(r["usage"].get("total", {}).get("calls", 0) for r in results)


def test_num_rounds_counts_refinements_and_validation_prompt_reaches_the_critic() -> None:
    gen = RecordingChatModel(replies=[lambda m: f"version {len(m[-1].content)}"])
    scores = iter([2.0, 4.0, 6.0, 8.0])

    def rising(_: list[BaseMessage]) -> dict[str, Any]:
        score = next(scores)
        return critique(score, issues=[f"issue at score {score}"])  # new issues, rising scores: no plateau

    crit = FakeCriticModel(critiques=[rising])
    graph = create_gleaning_graph(
        gen, critic=crit, validation_prompt="Must mention the ACME-RULE.", num_rounds=2, max_concurrency=1
    )
    out = graph.invoke({"documents": ["doc-0"], "prompt": "Summarize {document}"})
    (result,) = out["results"]
    assert result["stop_reason"] == "max_iterations"
    assert result["iterations"] == 3  # num_rounds + 1 validations
    assert len(gen.received) == 3  # one draft + num_rounds refinements
    assert len(crit.received) == 3
    assert all("ACME-RULE" in p for p in crit.prompts)
    assert "doc-0" in gen.prompts[0]
    assert result["usage"]["revise"]["calls"] == 2 and result["usage"]["generate"]["calls"] == 1


def test_text_without_placeholder_goes_to_context_and_ids_are_echoed() -> None:
    gen = RecordingChatModel(replies=["ok"])
    graph = create_gleaning_graph(gen, critic=accept_all(), validation_prompt="short", max_concurrency=1)
    out = graph.invoke(
        {"documents": [{"text": "doc-7 body", "id": "a7"}], "prompt": "Summarize the context."}
    )
    assert out["results"][0]["id"] == "a7"
    assert "doc-7 body" in gen.prompts[0] and "Summarize the context." in gen.prompts[0]


def test_existing_candidate_is_gleaned_and_trigger_applies_per_document() -> None:
    gen = RecordingChatModel(replies=["revised"])
    crit = FakeCriticModel(critiques=[critique(3), critique(9, ok=True, issues=[])])
    graph = create_gleaning_graph(
        gen,
        critic=crit,
        validation_prompt="short",
        should_refine=lambda s: len(s["candidate"]) > 5,
        max_concurrency=1,
        include_trajectory=True,
    )
    out = graph.invoke(
        {
            "documents": [
                {"text": "doc-0", "candidate": "a long existing output"},
                {"text": "doc-1", "candidate": "ok"},
            ],
            "prompt": "Summarize {document}",
        }
    )
    first, second = out["results"]
    assert first["stop_reason"] == "accepted" and first["output"] == "revised"
    assert [r["candidate"] for r in first["trajectory"]] == ["a long existing output", "revised"]
    assert second["stop_reason"] == "not_triggered" and second["iterations"] == 0
    assert len(gen.received) == 1  # no draft for gleaned candidates, one revision for the first document


def test_a_raising_trigger_is_that_documents_error() -> None:
    def trigger(state: dict[str, Any]) -> bool:
        if "doc-1" in state["task"]:
            raise KeyError("boom")
        return True

    graph = create_gleaning_graph(
        RecordingChatModel(replies=["x"]), critic=accept_all(), validation_prompt="v", should_refine=trigger
    )
    out = graph.invoke(
        {
            "documents": [{"text": "doc-0", "candidate": "c"}, {"text": "doc-1", "candidate": "c"}],
            "prompt": "S {document}",
        }
    )
    assert out["results"][0]["stop_reason"] == "accepted"
    assert (
        out["results"][1]["stop_reason"] == "error"
        and "should_refine raised KeyError" in out["results"][1]["error"]
    )


def test_context_max_iterations_overrides_per_run() -> None:
    crit = FakeCriticModel(critiques=[lambda m: critique(1, issues=[f"i{id(m)}"])])
    graph = create_gleaning_graph(
        RecordingChatModel(replies=["x"]), critic=crit, validation_prompt="v", num_rounds=3, max_concurrency=1
    )
    out = graph.invoke(
        {"documents": ["doc-0", "doc-1"], "prompt": "S {document}"}, context=Context(max_iterations=1)
    )
    assert [r["iterations"] for r in out["results"]] == [1, 1]
    assert {r["stop_reason"] for r in out["results"]} == {"max_iterations"}


def test_second_run_on_a_thread_does_not_accumulate_results() -> None:
    graph = create_gleaning_graph(
        RecordingChatModel(replies=["x"]),
        critic=accept_all(),
        validation_prompt="v",
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": "t1"}}
    first = graph.invoke({"documents": ["doc-0", "doc-1"], "prompt": "S {document}"}, config)
    second = graph.invoke({"documents": ["doc-2"], "prompt": "S {document}"}, config)
    assert len(first["results"]) == 2
    assert [r["index"] for r in second["results"]] == [0]


def test_empty_document_list_returns_no_results() -> None:
    gen = RecordingChatModel(replies=["x"])
    graph = create_gleaning_graph(gen, critic=accept_all(), validation_prompt="v")
    assert graph.invoke({"documents": [], "prompt": "S"}) == {"results": [], "usage": {}}
    assert gen.received == []


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({"documents": "doc-0", "prompt": "S"}, "'documents' must be a list"),
        ({"documents": ["a", {"id": 1}], "prompt": "S"}, r"documents\[1\] must be a string or a mapping"),
        ({"documents": ["a"], "prompt": "  "}, "'prompt' must be a non-empty string"),
        ({"documents": [{"text": "a", "candidate": 3}], "prompt": "S"}, r"documents\[0\]\['candidate'\]"),
    ],
)
def test_bad_input_fails_early_with_a_clear_message(payload: dict[str, Any], message: str) -> None:
    gen = RecordingChatModel(replies=["x"])
    graph = create_gleaning_graph(gen, critic=accept_all(), validation_prompt="v")
    with pytest.raises(ValueError, match=message):
        graph.invoke(payload)
    assert gen.received == []


class _Never(BaseCritic):
    def critique(self, request: CritiqueRequest, config: Any = None) -> Critique:
        return Critique(issues=["no"], suggestions=[], is_acceptable=False, score=0, feedback="no")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"validation_prompt": "v", "num_rounds": 0}, "num_rounds must be an int between 1"),
        ({"validation_prompt": "v", "num_rounds": True}, "num_rounds must be an int"),
        ({"validation_prompt": "v", "max_concurrency": 0}, "max_concurrency must be an int >= 1"),
        ({"validation_prompt": " "}, "validation_prompt must be a non-empty string"),
        ({"validation_prompt": None}, "validation_prompt must be a non-empty string"),
        ({"validation_prompt": "v", "should_refine": "yes"}, "should_refine must be a callable"),
        ({"validation_prompt": "v", "critic": _Never()}, "validation_prompt is only used by a model critic"),
        ({"validation_prompt": "v", "select": "worst"}, "select must be 'best' or 'last'"),
    ],
)
def test_bad_arguments_fail_at_build_time(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        create_gleaning_graph(RecordingChatModel(replies=["x"]), **kwargs)


def test_a_critic_instance_works_without_validation_prompt() -> None:
    graph = create_gleaning_graph(
        RecordingChatModel(replies=["x", "x, refined"]), critic=_Never(), validation_prompt=None, num_rounds=1
    )
    out = graph.invoke({"documents": ["doc-0"], "prompt": "S {document}"})
    assert out["results"][0]["iterations"] == 2 and out["results"][0]["stop_reason"] == "max_iterations"


def test_a_verifier_critic_refines_each_document_as_gleaning_does(tmp_path: Any, monkeypatch: Any) -> None:
    """An InstructionCritic alone would make a graph draw fresh drafts (its default); gleaning keeps its own
    meaning: one refinement a round, shown what failed."""
    import nltk

    from reflection_graph.critics import InstructionCritic

    monkeypatch.setattr(nltk.data, "path", [str(tmp_path)])  # as on a machine with no NLTK data
    gen = RecordingChatModel(replies=["One, two.", "Three four."])
    graph = create_gleaning_graph(
        gen, critic=InstructionCritic(["punctuation:no_comma"]), validation_prompt=None, num_rounds=2
    )
    (result,) = graph.invoke({"documents": ["doc-0"], "prompt": "S {document}"})["results"]
    assert result["stop_reason"] == "accepted" and result["output"] == "Three four."
    assert result["usage"]["revise"]["calls"] == 1 and "punctuation:no_comma" in gen.prompts[1]


def test_graph_shape() -> None:
    graph = create_gleaning_graph(
        RecordingChatModel(replies=["x"]), critic=accept_all(), validation_prompt="v"
    )
    drawing = graph.get_graph()
    assert set(drawing.nodes) == {"__start__", "plan", "glean", "collect", "__end__"}
    edges = {(e.source, e.target, e.conditional) for e in drawing.edges}
    assert ("plan", "glean", True) in edges and ("glean", "collect", False) in edges
    assert graph.config is not None and graph.config["max_concurrency"] == 8
