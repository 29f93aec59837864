"""Token streaming for the embedded model: watch a llama.cpp call's tokens as they are accepted, pass on the text
its cleanup will keep, and turn it into chat chunks.

The streamed call is the very call `invoke` makes (the same `create_completion`, prompt, sampling, stops and
cleanup): a `TextTap` rides along as its stopping criterion, and the whole reply the call returns closes the
stream. So the chunks add up to exactly the text, usage and `finish_reason` of `invoke`, and a piece once sent is
never taken back: the tap sends only what `_clean_prefix` says the cleanup keeps whatever follows (it holds back
the unfinished sentence and what may be a stop sequence, and with the repetition stop the repeats of a possible
loop), and the last chunk carries the rest. `stream_chunks` and `astream_chunks` run a reply's producer in a
thread of its own and turn what it emits into the chunks.
"""

from __future__ import annotations

import codecs
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.messages import AIMessage, AIMessageChunk
from langchain_core.outputs import ChatGenerationChunk

from reflection_graph.models._prompting import _clean_prefix
from reflection_graph.models._repetition import RepetitionStop
from reflection_graph.models._threads import Emit, astream_detached, stream_in_thread

__all__ = ["ReplyChunks", "TextTap", "astream_chunks", "stream_chunks"]


class TextTap:
    """A llama-cpp-python stopping criterion that streams a call's text and never ends the call by itself.

    llama-cpp-python calls it after each sampled token with the tokens accepted so far (prompt first, the newest
    token not yet among them). The first call is the prompt; each later one decodes the new tokens and emits
    what `_clean_prefix` newly allows (possibly ""). It ends the call (returns True) once `emit` returns False:
    nobody listens any more, so the model and its lock are free at the next token.

    With a `RepetitionStop` watching the same call (called before the tap), the tap passes on only the text of
    the tokens it has settled: a reply stopped in a loop keeps its text up to the end of the repeated span's first
    copy, so the repeats being written are held back until they break off (then they are sent) or make a loop
    (then they are dropped, and the stream ends with the kept text). A reply that does not loop streams as
    without it, a repeated run of its own held back while it lasts.

    Args:
        llama: the `llama_cpp.Llama` of the call (its `detokenize`).
        stops: what the reply is cut at: the call's stop sequences and, through a chat template, its
            end-of-turn text.
        emit: takes each new piece of text; returns False to stop the call.
        watch: the call's `RepetitionStop`, if any.
    """

    def __init__(
        self, llama: Any, stops: Sequence[str], emit: Emit, watch: RepetitionStop | None = None
    ) -> None:
        self._llama = llama
        self._stops = tuple(stops)
        self._emit = emit
        self._watch = watch
        self._start: int | None = None
        self._ends: list[int] = []  # the length of the decoded text after each generated token
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="ignore")
        self._raw = ""
        self._sent = ""

    def __call__(self, input_ids: Any, logits: Any) -> bool:
        if self._start is None:
            self._start = len(input_ids)
        for token in input_ids[self._start + len(self._ends) :]:
            self._raw += self._decoder.decode(self._llama.detokenize([int(token)]))
            self._ends.append(len(self._raw))
        raw = self._raw
        if self._watch is not None:
            settled = min(self._watch.settled, len(self._ends))
            raw = raw[: self._ends[settled - 1]] if settled else ""
        kept = _clean_prefix(raw, self._stops)
        piece = kept[len(self._sent) :] if len(kept) > len(self._sent) else ""
        self._sent += piece
        return not self._emit(piece)


class ReplyChunks:
    """The chat chunks of one streamed reply, from what its producer emits: text pieces, then the whole reply.

    The pieces become chunks as they are; the whole reply (an `AIMessage`) becomes the last chunk: the rest of its
    text, its usage and its response metadata (`finish_reason`), `chunk_position="last"`. A reply that arrives
    alone (JSON or log-probability calls, which do not stream) is that one chunk.
    """

    def __init__(self) -> None:
        self.sent = ""

    def chunk(self, item: str | AIMessage) -> ChatGenerationChunk | None:
        """The chunk of one emitted item (None for an empty piece)."""
        if isinstance(item, str):
            if not item:
                return None
            self.sent += item
            return ChatGenerationChunk(message=AIMessageChunk(content=item))
        text = item.text
        if not text.startswith(self.sent):
            raise RuntimeError(
                "the streamed text is not the start of the reply (a bug in reflection_graph.models._streaming): "
                f"sent {self.sent!r}, reply {text!r}"
            )
        return ChatGenerationChunk(
            message=AIMessageChunk(
                content=text[len(self.sent) :],
                usage_metadata=item.usage_metadata,
                response_metadata=dict(item.response_metadata),
                chunk_position="last",
            )
        )


def stream_chunks(
    produce: Callable[[Emit], None], run_manager: CallbackManagerForLLMRun | None = None
) -> Iterator[ChatGenerationChunk]:
    """The chunks of the reply `produce` emits (text pieces, then the whole reply), `produce` running in a thread of
    its own (`stream_in_thread`); each chunk also goes to `run_manager`'s `on_llm_new_token`."""
    chunks = ReplyChunks()
    for item in stream_in_thread(produce):
        chunk = chunks.chunk(item)
        if chunk is not None:
            if run_manager is not None:
                run_manager.on_llm_new_token(chunk.text, chunk=chunk)
            yield chunk


async def astream_chunks(
    produce: Callable[[Emit], None], run_manager: AsyncCallbackManagerForLLMRun | None = None
) -> AsyncIterator[ChatGenerationChunk]:
    """Async twin of `stream_chunks`; `produce` runs in its own thread, never on the event loop."""
    chunks = ReplyChunks()
    async for item in astream_detached(produce):
        chunk = chunks.chunk(item)
        if chunk is not None:
            if run_manager is not None:
                await run_manager.on_llm_new_token(chunk.text, chunk=chunk)
            yield chunk
