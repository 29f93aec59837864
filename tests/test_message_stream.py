"""The graph's `stream_mode="messages"`: the draft and each revision arrive as tokens while `generate` runs; the
critic's calls stay off the stream (tagged `nostream`), their critique comes in the `critique` node's update."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessageChunk
from langgraph.constants import TAG_NOSTREAM

from reflection_graph import create_reflection_graph
from tests.fakes import EOG, FakeCriticModel, RecordingChatModel, critique, scripted_embedded

DRAFTS = ["first draft of the note about rain", "second draft of the note about rain"]


def _graph() -> Any:
    generator = RecordingChatModel(replies=DRAFTS)  # a streaming fake: its replies come word by word
    critic = FakeCriticModel(critiques=[critique(3, issues=["too plain"]), critique(9, ok=True, issues=[])])
    return create_reflection_graph(generator, critic=critic, max_iterations=2)


def _by_node(events: list[tuple[str, Any]]) -> tuple[dict[str, list[str]], list[str]]:
    """The text of each streamed reply (by message id, in order) and the node of each message event."""
    replies: dict[str, list[str]] = defaultdict(list)
    nodes = []
    for mode, payload in events:
        if mode != "messages":
            continue
        message, meta = payload
        nodes.append(meta["langgraph_node"])
        assert isinstance(message, AIMessageChunk)
        replies[str(message.id)].append(message.text)
    return replies, nodes


def _check(events: list[tuple[str, Any]]) -> None:
    replies, nodes = _by_node(events)
    assert set(nodes) == {"generate"}, "only the draft and the revision are on the messages stream"
    assert ["".join(parts) for parts in replies.values()] == DRAFTS
    assert all(len(parts) >= 5 for parts in replies.values()), "each reply came in pieces"
    # each reply's tokens arrive before the update of the `generate` step that wrote it
    order = [
        "token" if mode == "messages" else next(iter(payload))
        for mode, payload in events
        if mode == "messages" or next(iter(payload)) == "generate"
    ]
    assert order[:2] == ["token", "token"] and order.index("generate") > 0
    final = next(payload for mode, payload in reversed(events) if mode == "values")
    assert final["candidate"] == DRAFTS[1] and final["stop_reason"] == "accepted"
    critiques = [p["critique"] for mode, p in events if mode == "updates" and "critique" in p]
    assert [c["trajectory"][0]["critique"]["score"] for c in critiques] == [3, 9]


def test_messages_stream_yields_the_tokens_of_the_draft_and_the_revision() -> None:
    events = list(_graph().stream({"task": "Write a note"}, stream_mode=["messages", "updates", "values"]))
    _check(events)


def test_async_messages_stream_yields_the_tokens_of_the_draft_and_the_revision() -> None:
    async def run() -> list[tuple[str, Any]]:
        stream = _graph().astream({"task": "Write a note"}, stream_mode=["messages", "updates", "values"])
        return [event async for event in stream]

    _check(asyncio.run(run()))


class _Tags(BaseCallbackHandler):
    """Records the node and the tags of each chat model call."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[str]]] = []

    def on_chat_model_start(self, serialized: Any, messages: Any, **kwargs: Any) -> None:
        self.calls.append(
            ((kwargs.get("metadata") or {}).get("langgraph_node", ""), list(kwargs.get("tags") or []))
        )


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_the_critics_calls_are_tagged_nostream_and_the_generators_are_not(mode: str) -> None:
    tags = _Tags()
    config: Any = {"callbacks": [tags]}
    if mode == "sync":
        _graph().invoke({"task": "Write a note"}, config)
    else:
        asyncio.run(_graph().ainvoke({"task": "Write a note"}, config))
    assert [node for node, _ in tags.calls] == ["generate", "critique", "generate", "critique"]
    assert all((TAG_NOSTREAM in t) == (node == "critique") for node, t in tags.calls), tags.calls


def test_the_embedded_model_streams_a_draft_through_the_graph(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The embedded model (over a scripted llama.cpp) in a real graph: its draft arrives in pieces that add up
    to the round's candidate, before the `generate` update."""
    pytest.importorskip("llama_cpp", reason='needs pip install "reflection-graph[local]"')
    script = [
        "Dear",
        " Sam",
        ",\n",
        "Thank",
        " you",
        " for",
        " the",
        " offer",
        ".",
        " I",
        " decline",
        ".",
        EOG,
    ]
    model = scripted_embedded(monkeypatch, tmp_path, script)
    critic = FakeCriticModel(critiques=[critique(9, ok=True, issues=[])])
    graph = create_reflection_graph(model, critic=critic, max_iterations=1)
    events = list(graph.stream({"task": "Decline the offer"}, stream_mode=["messages", "updates", "values"]))
    replies, nodes = _by_node(events)
    assert set(nodes) == {"generate"} and len(replies) == 1
    (pieces,) = replies.values()
    final = next(payload for mode, payload in reversed(events) if mode == "values")
    assert "".join(pieces) == final["candidate"] == "Dear Sam,\nThank you for the offer. I decline."
    assert len([p for p in pieces if p]) >= 3
    first_update = next(i for i, (mode, p) in enumerate(events) if mode == "updates" and "generate" in p)
    assert [mode for mode, _ in events[:first_update]].count("messages") == len(pieces)
    assert final["usage"]["generate"]["output_tokens"] == len(script) - 1  # the tokens llama.cpp reported
