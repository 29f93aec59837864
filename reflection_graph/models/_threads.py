"""Run a blocking call from async code without tying the event loop's shutdown to it.

`asyncio.to_thread` runs the call in the loop's default executor, and `asyncio.run` joins that executor when it
ends: a call the run has abandoned (a time budget or a timeout ran out, the task was cancelled) then keeps
`asyncio.run(graph.ainvoke(...))` waiting until the call returns by itself. `run_detached` runs the call in its
own daemon thread instead and hands the result back through a future with `loop.call_soon_threadsafe`, so
cancelling the awaiting task abandons the call at once: nothing joins the thread, neither the loop at shutdown nor
the interpreter at exit. Use it for calls of user code (plain callables, sync critics) and of the embedded model,
which may run longer than the run wants to wait.

`stream_in_thread` and `astream_detached` do the same for a producer that hands over items one at a time (the
embedded model's streamed text): it runs in its own daemon thread, and its items are yielded to a sync or async
consumer as they come. A consumer that stops listening (the generator is closed, or its task cancelled) is told to
the producer, which stops early (the embedded model at its next token, so its lock is free again at once).
"""

from __future__ import annotations

import asyncio
import contextvars
import queue
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any, TypeVar

__all__ = ["Emit", "astream_detached", "run_detached", "stream_in_thread"]

T = TypeVar("T")


async def run_detached(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """`fn(*args, **kwargs)` in a new daemon thread (with the caller's context variables), awaited.

    Cancelling the awaiting task leaves the thread to finish on its own; its result is then dropped.
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()
    context = contextvars.copy_context()

    def deliver(result: Any, error: BaseException | None) -> None:
        if future.done():  # the caller gave up (cancelled)
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)

    def target() -> None:
        result: Any = None
        error: BaseException | None = None
        try:
            result = context.run(fn, *args, **kwargs)
        except StopIteration as exc:  # a future cannot hold StopIteration
            error = RuntimeError(f"{getattr(fn, '__name__', 'the call')} raised StopIteration")
            error.__cause__ = exc
        except BaseException as exc:  # handed to the awaiting task
            error = exc
        try:
            loop.call_soon_threadsafe(deliver, result, error)
        except RuntimeError:  # the loop is closed: nobody waits for this call any more
            pass

    threading.Thread(target=target, name="reflection-graph-detached", daemon=True).start()
    return await future


Emit = Callable[[Any], bool]
"""What a producer hands its items to: `emit(item)` returns False once nobody listens (the producer should stop)."""

_END = object()


def _producer_thread(produce: Callable[[Emit], None], emit: Emit, finish: Callable[[Any], Any]) -> None:
    """Start `produce(emit)` in a daemon thread (with the caller's context variables); `finish` gets the end marker
    and the producer's exception, if any."""
    context = contextvars.copy_context()

    def target() -> None:
        error: BaseException | None = None
        try:
            context.run(produce, emit)
        except BaseException as exc:  # handed to the consumer
            error = exc
        finish((_END, error))

    threading.Thread(target=target, name="reflection-graph-stream", daemon=True).start()


def _unpacked(entry: tuple[Any, BaseException | None]) -> Any:
    """The item of a queue entry; at the end marker, the producer's exception is raised (or the marker returned)."""
    item, error = entry
    if item is _END and error is not None:
        raise error
    return item


def stream_in_thread(produce: Callable[[Emit], None]) -> Iterator[Any]:
    """Yield the items `produce(emit)` emits, in order, while it runs in its own daemon thread.

    The producer starts at the first `next()`. An exception it raises is raised here after the items emitted
    before it. Closing the generator (or leaving it to be collected) makes `emit` return False from then on, and
    drops what the producer still emits.

    Args:
        produce: called once with `emit`; returns when it is done.
    """
    items: queue.SimpleQueue[tuple[Any, BaseException | None]] = queue.SimpleQueue()
    listening = threading.Event()
    listening.set()

    def emit(item: Any) -> bool:
        if not listening.is_set():
            return False
        items.put((item, None))
        return True

    _producer_thread(produce, emit, items.put)
    try:
        while (item := _unpacked(items.get())) is not _END:
            yield item
    finally:
        listening.clear()


async def astream_detached(produce: Callable[[Emit], None]) -> AsyncIterator[Any]:
    """Async twin of `stream_in_thread`: the event loop never waits on the producer.

    Cancelling the consuming task (or closing the generator) makes `emit` return False from then on; the
    producer's thread is never joined, so an abandoned producer keeps neither the loop nor the process waiting.
    """
    loop = asyncio.get_running_loop()
    items: asyncio.Queue[tuple[Any, BaseException | None]] = asyncio.Queue()
    listening = threading.Event()
    listening.set()

    def put(entry: tuple[Any, BaseException | None]) -> bool:
        try:
            loop.call_soon_threadsafe(items.put_nowait, entry)
        except RuntimeError:  # the loop is closed: nobody listens any more
            listening.clear()
            return False
        return True

    def emit(item: Any) -> bool:
        return listening.is_set() and put((item, None))

    _producer_thread(produce, emit, put)
    try:
        while (item := _unpacked(await items.get())) is not _END:
            yield item
    finally:
        listening.clear()
