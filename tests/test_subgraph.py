"""Embedding the reflection graph in host graphs, three ways, and persistence pass-through."""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.managed import RemainingSteps
from langgraph.store.memory import InMemoryStore

from reflection_graph import create_reflection_graph
from reflection_graph.subgraph import as_messages_node, with_key_mapping
from tests.fakes import FakeCriticModel, RecordingChatModel, critique, numbered_drafts


def reflection() -> Any:
    return create_reflection_graph(
        RecordingChatModel(replies=[numbered_drafts()]),
        critic=FakeCriticModel(critiques=[critique(4, issues=["a"]), critique(9, ok=True, issues=[])]),
        max_iterations=3,
    )


class SharedState(TypedDict, total=False):
    task: str
    candidate: str
    stop_reason: str
    iterations: int
    log: Annotated[list[str], operator.add]


def test_add_node_compiled_in_parent_sharing_keys() -> None:
    parent = StateGraph(SharedState)
    parent.add_node("prepare", lambda s: {"log": ["prepared"]})
    parent.add_node("reflect", reflection())
    parent.add_node("after", lambda s: {"log": [f"got {s['candidate']} ({s['stop_reason']})"]})
    parent.add_edge(START, "prepare")
    parent.add_edge("prepare", "reflect")
    parent.add_edge("reflect", "after")
    parent.add_edge("after", END)
    out = parent.compile().invoke({"task": "write"})
    assert out["candidate"] == "draft 2" and out["stop_reason"] == "accepted" and out["iterations"] == 2
    assert out["log"] == ["prepared", "got draft 2 (accepted)"]
    assert not any(k.startswith("rg_") for k in out)


class OtherState(TypedDict, total=False):
    question: str
    answer: str
    why_stopped: str
    candidate: str  # a host key with the same name but unrelated meaning must stay untouched


def test_parent_with_different_schema_through_key_mapping() -> None:
    node = with_key_mapping(
        reflection(),
        inputs={"question": "task"},
        outputs={"candidate": "answer", "stop_reason": "why_stopped"},
    )
    parent = StateGraph(OtherState)
    parent.add_node("reflect", node)
    parent.add_edge(START, "reflect")
    parent.add_edge("reflect", END)
    out = parent.compile().invoke({"question": "write", "candidate": "host value"})
    assert out == {
        "question": "write",
        "answer": "draft 2",
        "why_stopped": "accepted",
        "candidate": "host value",
    }


def test_key_mapping_is_validated_when_built() -> None:
    with pytest.raises(ValueError, match="must map one host key to 'task'"):
        with_key_mapping(reflection(), inputs={"question": "context"}, outputs={})
    with pytest.raises(ValueError, match="unknown reflection output"):
        with_key_mapping(reflection(), inputs={"q": "task"}, outputs={"answer": "a"})


class AgentState(MessagesState):
    remaining_steps: RemainingSteps


def test_messages_based_parent_with_remaining_steps() -> None:
    parent = StateGraph(AgentState)
    parent.add_node("reflect", as_messages_node(reflection()))
    parent.add_edge(START, "reflect")
    parent.add_edge("reflect", END)
    out = parent.compile().invoke(
        {"messages": [HumanMessage("hi"), AIMessage("hello"), HumanMessage("Write a haiku")]}
    )
    last = out["messages"][-1]
    assert isinstance(last, AIMessage) and last.content == "draft 2"
    assert last.response_metadata["stop_reason"] == "accepted"
    assert len(out["messages"]) == 4


class AgentWithTask(AgentState):
    task: str
    candidate: str


def test_compiled_graph_in_messages_parent_does_not_touch_messages_or_remaining_steps() -> None:
    parent = StateGraph(AgentWithTask)
    parent.add_node("reflect", reflection())
    parent.add_node("reply", lambda s: {"messages": [AIMessage(s["candidate"])]})
    parent.add_edge(START, "reflect")
    parent.add_edge("reflect", "reply")
    parent.add_edge("reply", END)
    before = [HumanMessage("context message")]
    # an explicit recursion_limit is the caller's and LangGraph passes it to subgraphs: it must fit both graphs
    # (the parent's default limit is raised by the subgraph's own config; see the test below)
    out = parent.compile().invoke({"messages": before, "task": "Write a haiku"}, {"recursion_limit": 10})
    assert [m.content for m in out["messages"]] == ["context message", "draft 2"]
    assert out["candidate"] == "draft 2"


def test_sqlite_checkpointer_and_store_pass_through(tmp_path: Any) -> None:
    store = InMemoryStore()
    with SqliteSaver.from_conn_string(str(tmp_path / "ck.sqlite")) as saver:
        graph = create_reflection_graph(
            RecordingChatModel(replies=[numbered_drafts()]),
            critic=FakeCriticModel(critiques=[critique(4, issues=["a"]), critique(9, ok=True, issues=[])]),
            checkpointer=saver,
            store=store,
        )
        assert graph.checkpointer is saver and graph.store is store
        cfg = {"configurable": {"thread_id": "t1"}}
        out = graph.invoke({"task": "write"}, cfg)
        snapshot = graph.get_state(cfg)
        assert snapshot.values["candidate"] == out["candidate"] == "draft 2"
        assert len(snapshot.values["trajectory"]) == 2
        history = list(graph.get_state_history(cfg))
        assert len(history) >= 5  # input, generate, critique, generate, critique, finalize


def test_subgraph_runs_all_rounds_under_parent_default_recursion_limit() -> None:
    crit = FakeCriticModel(critiques=[lambda m: critique(1, issues=[f"issue {len(crit.received)}"])])
    inner = create_reflection_graph(
        RecordingChatModel(replies=[numbered_drafts()]), critic=crit, max_iterations=20, patience=None
    )
    parent = StateGraph(SharedState)
    parent.add_node("reflect", inner)
    parent.add_edge(START, "reflect")
    parent.add_edge("reflect", END)
    out = parent.compile().invoke({"task": "t"})  # LangGraph's default limit (25) < 41 steps of 20 rounds
    assert out["iterations"] == 20 and out["stop_reason"] == "max_iterations"
