"""Token streaming of the embedded model, offline: `EmbeddedChatModel` over a scripted stand-in for `llama_cpp.Llama`
whose `create_completion` follows llama-cpp-python's own non-streamed loop (stop sequences on the bytes so far,
the end-of-generation token, `max_tokens`, and `stopping_criteria` called after each sampled token with the tokens
accepted so far). The real model's streaming is tested in tests/models/test_embedded_streaming.py (`embedded`)."""

from __future__ import annotations

import asyncio
import functools
import random
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage, SystemMessage

from reflection_graph.models._prompting import DEFAULT_STOP, _clean, _clean_prefix
from reflection_graph.models.embedded import EmbeddedChatModel
from tests.fakes import EOG, EmbeddedWholeReplies, ScriptedLlama, scripted_embedded

pytest.importorskip("llama_cpp", reason='needs pip install "reflection-graph[local]"')


@pytest.fixture
def scripted(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Callable[..., EmbeddedChatModel]:
    """`scripted(script, gate=None, cls=EmbeddedChatModel, **fields)`: the embedded model over a `ScriptedLlama`."""
    return functools.partial(scripted_embedded, monkeypatch, tmp_path)


def _llama(model: EmbeddedChatModel) -> ScriptedLlama:
    llama: ScriptedLlama = model._loaded().llama
    return llama


def _lock(model: EmbeddedChatModel) -> threading.Lock:
    return model._loaded().lock


PROMPT = [SystemMessage(content="You write."), HumanMessage(content="Task: a note\n\nDraft:\n")]

SCRIPTS = {
    "ends at its end-of-generation token": ([" Dear", " Sam", ",\n", "Thanks", " a lot", ".", EOG], {}),
    "a stop sequence cuts it": (["One", " line", ".\n", "Two", ".", "\nTa", "sk:", " more"], {}),
    "cut by its reply limit": (
        ["A", " whole", " one", ".", " Then", " half", " of", " another"],
        {"max_tokens": 7},
    ),
    "a short reply cut by its limit": (["x", "\n"], {"max_tokens": 2}),
    "debris and trailing marks": (["\n\n", "Fine", " text", "!", " --", " *", "<eos>", "junk", EOG], {}),
    "a marker split over tokens": (["Ok", ".", " <end", "_of", "_turn>", "after", EOG], {}),
    "a line per token": ([f"line {i}\n" for i in range(6)], {"max_tokens": 6}),
    "non-ASCII text": ([" Ça", " va", " très", " bien", ".", " ✓", EOG], {}),
}


def _assert_same_reply(streamed: AIMessage | AIMessageChunk, whole: AIMessage) -> None:
    assert streamed.text == whole.text
    assert streamed.usage_metadata == whole.usage_metadata
    for key in ("finish_reason", "model_name", "model_provider", "attempts"):
        assert streamed.response_metadata.get(key) == whole.response_metadata[key], key


@pytest.mark.parametrize("name", list(SCRIPTS))
def test_streamed_chunks_add_up_to_the_invoke_reply(
    scripted: Callable[..., EmbeddedChatModel], name: str
) -> None:
    script, fields = SCRIPTS[name]
    model = scripted(script, **fields)
    whole = model.invoke(PROMPT)
    chunks = list(model.stream(PROMPT))
    assert "".join(c.text for c in chunks) == whole.text
    aggregate = chunks[0]
    for chunk in chunks[1:]:
        aggregate += chunk
    _assert_same_reply(aggregate, whole)
    # usage and the finish reason come once, on the last chunk
    assert [c.usage_metadata is not None for c in chunks] == [False] * (len(chunks) - 1) + [True]
    assert chunks[-1].chunk_position == "last"


@pytest.mark.parametrize("name", list(SCRIPTS))
def test_async_stream_adds_up_to_the_ainvoke_reply(
    scripted: Callable[..., EmbeddedChatModel], name: str
) -> None:
    script, fields = SCRIPTS[name]
    model = scripted(script, **fields)

    async def run() -> tuple[AIMessage, list[AIMessageChunk]]:
        whole = await model.ainvoke(PROMPT)
        return whole, [chunk async for chunk in model.astream(PROMPT)]

    whole, chunks = asyncio.run(run())
    assert "".join(c.text for c in chunks) == whole.text
    aggregate = chunks[0]
    for chunk in chunks[1:]:
        aggregate += chunk
    _assert_same_reply(aggregate, whole)


def test_a_long_reply_streams_in_many_pieces(scripted: Callable[..., EmbeddedChatModel]) -> None:
    model = scripted([f"Sentence {i}. " for i in range(20)] + [EOG])
    chunks = [c.text for c in model.stream(PROMPT)]
    assert len(chunks) >= 15 and chunks[0] == "Sentence 0."


def test_the_first_piece_arrives_while_the_call_is_still_running(
    scripted: Callable[..., EmbeddedChatModel],
) -> None:
    got_first = threading.Event()

    def gate(index: int) -> None:  # the model waits at token 5 until the first piece has been received
        if index == 5:
            assert got_first.wait(10), "the first piece did not arrive while the call was running"

    model = scripted(["Hello", " there", ".\n", "More", " text", ".", EOG], gate=gate)
    stream = model.stream(PROMPT)
    first = next(stream)
    assert first.text == "Hello there." and not _llama(model).ended.is_set()
    got_first.set()
    assert "".join([first.text, *(c.text for c in stream)]) == "Hello there.\nMore text."


def test_an_abandoned_stream_stops_the_call_and_frees_the_model(
    scripted: Callable[..., EmbeddedChatModel],
) -> None:
    endless = [f"word {i}.\n" for i in range(10_000)]

    def slow(index: int) -> None:
        time.sleep(0.001)

    model = scripted(endless, gate=slow, max_tokens=12_000, n_ctx=16_000)
    stream = model.stream(PROMPT)
    next(stream)
    assert _lock(model).locked()  # held for the whole call
    stream.close()
    assert _llama(model).ended.wait(5), "the call went on after its stream was closed"
    assert _lock(model).acquire(timeout=5)
    _lock(model).release()
    assert _llama(model).sampled < 1_000


def test_a_cancelled_async_stream_stops_the_call_and_frees_the_model(
    scripted: Callable[..., EmbeddedChatModel],
) -> None:
    endless = [f"word {i}.\n" for i in range(10_000)]
    model = scripted(endless, gate=lambda index: time.sleep(0.001), max_tokens=12_000, n_ctx=16_000)

    async def run() -> int:
        received = 0

        async def consume() -> None:
            nonlocal received
            async for _ in model.astream(PROMPT):
                received += 1

        task = asyncio.ensure_future(consume())
        while received < 3:
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return received

    assert asyncio.run(run()) >= 3
    assert _llama(model).ended.wait(5), "the call went on after its task was cancelled"
    assert _lock(model).acquire(timeout=5)
    _lock(model).release()
    assert _llama(model).sampled < 1_000


def test_an_error_in_the_call_reaches_the_consumer_after_the_pieces_sent(
    scripted: Callable[..., EmbeddedChatModel],
) -> None:
    def fail(index: int) -> None:
        if index == 6:
            raise RuntimeError("llama.cpp failed")

    model = scripted(["One", ".", " Two", ".", " Three", ".", " Four", EOG], gate=fail)
    got: list[str] = []
    with pytest.raises(RuntimeError, match="llama.cpp failed"):
        for chunk in model.stream(PROMPT):
            got.append(chunk.text)
    assert got == ["One.", " Two."]

    async def run() -> None:
        async for _ in model.astream(PROMPT):
            pass

    with pytest.raises(RuntimeError, match="llama.cpp failed"):
        asyncio.run(run())
    assert not _lock(model).locked()


def test_the_event_loop_runs_while_the_model_streams(scripted: Callable[..., EmbeddedChatModel]) -> None:
    model = scripted([f"Line {i}.\n" for i in range(40)] + [EOG], gate=lambda index: time.sleep(0.01))

    async def run() -> tuple[int, int]:
        ticks = 0
        done = False

        async def tick() -> None:
            nonlocal ticks
            while not done:
                ticks += 1
                await asyncio.sleep(0.005)

        ticker = asyncio.ensure_future(tick())
        pieces = [chunk async for chunk in model.astream(PROMPT)]
        done = True
        await ticker
        return ticks, len(pieces)

    ticks, pieces = asyncio.run(run())
    assert pieces >= 30 and ticks >= 20  # the loop kept ticking through a 0.4 s call


@pytest.mark.parametrize("options", [{"json_schema": {"type": "object"}}, {"top_logprobs": 5}])
def test_json_and_logprob_calls_come_as_one_chunk(
    scripted: Callable[..., EmbeddedChatModel], options: dict[str, Any]
) -> None:
    model = scripted(["unused", EOG], cls=EmbeddedWholeReplies)
    chunks = list(model.stream(PROMPT, **options))
    whole = model.invoke(PROMPT, **options)
    assert len(chunks) == 1 and chunks[0].text == whole.text == '{"score": 7, "note": "a whole reply"}'
    assert chunks[0].usage_metadata == whole.usage_metadata
    assert chunks[0].response_metadata["logprobs"] == {"content": []}
    assert _llama(model).sampled == 0  # no free-text completion ran


class _Tokens(BaseCallbackHandler):
    def __init__(self) -> None:
        self.tokens: list[str] = []

    def on_llm_new_token(self, token: str, **kwargs: Any) -> None:
        self.tokens.append(token)


def test_langchains_stream_switch_is_taken(scripted: Callable[..., EmbeddedChatModel]) -> None:
    """`invoke(..., stream=True)` streams (its callbacks see the pieces) and `stream=False` does not; both give
    the same reply."""
    model = scripted(["One", ".", " Two", ".", " Three", ".", EOG])
    streamed, whole = _Tokens(), _Tokens()
    a = model.invoke(PROMPT, stream=True, config={"callbacks": [streamed]})
    b = model.invoke(PROMPT, stream=False, config={"callbacks": [whole]})
    assert a.text == b.text == "One. Two. Three."
    assert [t for t in streamed.tokens if t] == ["One.", " Two.", " Three."] and whole.tokens == []


def test_unknown_call_options_are_refused_by_the_stream_too(
    scripted: Callable[..., EmbeddedChatModel],
) -> None:
    model = scripted(["x", EOG])
    with pytest.raises(TypeError, match="does not take"):
        list(model.stream(PROMPT, frobnicate=1))


# -- the hold-back rule itself: a streamed prefix is always the start of the cleaned reply ----------------------

PIECES = ["a", "b", " ", "\n", "\t", "\u00a0", ".", "-", "*", "#", "|", ":", "!", ")", '"', "é", "x.", ":\n"]
PIECES += ["<eos>", "<end", "_of_turn>", "Task:", "\nDraft", "<|im_end|>"]
STOPS = [*DEFAULT_STOP, "<|im_end|>", "\nRevised answer:\n"]


def test_clean_prefix_is_always_the_start_of_the_cleaned_reply_and_only_grows() -> None:
    """Every prefix of random replies, whether the reply then stops (at its first stop sequence, as llama.cpp cuts
    it) or runs into its reply limit: what `_clean_prefix` lets through is the start of what `_clean` returns."""
    rng = random.Random(36)
    for _ in range(3000):
        raw = "".join(rng.choice(PIECES) for _ in range(rng.randint(0, 18)))
        found = [s for s in STOPS if s in raw]
        reply = raw[: raw.index(found[0])] if found else raw
        finals = (_clean(reply, truncated=False), _clean(reply, truncated=True))
        sent = ""
        for end in range(len(raw) + 1):
            kept = _clean_prefix(raw[:end], STOPS)
            assert all(final.startswith(kept) for final in finals), (raw, end, kept, finals)
            assert kept.startswith(sent), (raw, end, sent, kept)
            sent = kept


def test_clean_prefix_holds_back_the_unfinished_sentence_and_a_possible_stop() -> None:
    assert _clean_prefix("Dear Sam,\nThanks for the offer. I am", STOPS) == "Dear Sam,\nThanks for the offer."
    assert _clean_prefix("  One.\nTwo.\nTa", STOPS) == "One.\nTwo."  # "\nTa" may become "\nTask:"
    assert _clean_prefix("Done. <end_of", STOPS) == "Done."
    assert _clean_prefix("no sentence end yet", STOPS) == ""
