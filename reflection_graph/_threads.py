"""Run a blocking call from async code without tying the event loop's shutdown to it.

`asyncio.to_thread` runs the call in the loop's default executor, and `asyncio.run` joins that executor when it
ends: a call the run has abandoned (a time budget or a timeout ran out, the task was cancelled) then keeps
`asyncio.run(graph.ainvoke(...))` waiting until the call returns by itself. `run_detached` runs the call in its
own daemon thread instead and hands the result back through a future with `loop.call_soon_threadsafe`, so
cancelling the awaiting task abandons the call at once: nothing joins the thread, neither the loop at shutdown nor
the interpreter at exit. Use it for calls of user code (plain callables, sync critics) and of the embedded model,
which may run longer than the run wants to wait.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["run_detached"]

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
