"""Batch records as runs on a LangGraph server (`langgraph dev`, LangGraph Platform, a self-hosted Agent Server).

`ServerGraph` has the `ainvoke(input, config)` the batch engine calls, so `arun_batch` keeps its JSONL contract
(resume, one entry per record, the summary) and its bound on records in flight. Each record runs on its own
thread whose id is derived from the record (`thread_id_for`: a uuid5 of the graph name, the record id, its input
hash and the run's context), so a rerun finds the thread again. Before starting a run it looks at the thread's
latest run: one still running is joined, one that succeeded is read back from the thread's state (it finished
while the client was down), and only otherwise is a new background run created (`runs.create` + `runs.join`, so
a client that dies leaves its runs running). Server 5xx/429 answers, timeouts and dropped connections are
retried with exponential backoff (tenacity); each retry looks at the thread again, so a run is never started twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from typing import Any

from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt, wait_exponential

__all__ = ["ServerError", "ServerGraph", "thread_id_for"]

_NAMESPACE = uuid.UUID("5b0f3f5e-7a57-4c55-9a45-2f0e6c1d7b11")
_ACTIVE = ("pending", "running")


class ServerError(RuntimeError):
    """The server cannot be used: unreachable, or it does not serve the graph (the message says which)."""


def thread_id_for(graph: str, record_id: Any, input_hash: str, context: dict[str, Any] | None = None) -> str:
    """The deterministic thread id of one record's run: the same record, input and context give the same id."""
    key = json.dumps([graph, record_id, input_hash, context or {}], sort_keys=True, ensure_ascii=True)
    return str(uuid.uuid5(_NAMESPACE, key))


def _status(exc: BaseException) -> int | None:
    response = getattr(exc, "response", None)
    return getattr(response, "status_code", None)


def _transient(exc: BaseException) -> bool:
    import httpx

    if isinstance(exc, httpx.HTTPStatusError):
        return exc.response is not None and (
            exc.response.status_code >= 500 or exc.response.status_code == 429
        )
    return isinstance(exc, (httpx.TimeoutException, httpx.TransportError))


class ServerGraph:
    """Runs each batch record of `arun_batch` on a LangGraph server through `langgraph-sdk`.

    Args:
        url: the server's URL (``http://127.0.0.1:2024`` for ``langgraph dev``).
        graph: the graph name in the server's ``langgraph.json`` (or an assistant id).
        context: the run context sent with every run (e.g. ``{"max_iterations": 3}``).
        retries: attempts after a 5xx/429 answer, a timeout or a dropped connection (per record attempt).
        backoff: first wait in seconds between those attempts (doubled each time, at most 10 s).
        client: a ``langgraph_sdk`` async client (default: ``get_client(url=url)``).

    Example:
        ```python
        graph = ServerGraph("http://127.0.0.1:2024", "reflection")
        await graph.connect()
        summary = await arun_batch(graph, "in.jsonl", "out.jsonl", concurrency=32)
        ```
    """

    def __init__(
        self,
        url: str,
        graph: str,
        *,
        context: dict[str, Any] | None = None,
        retries: int = 5,
        backoff: float = 0.5,
        client: Any = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.graph = graph
        self.context = dict(context or {})
        self.retries = retries
        self.backoff = backoff
        self._client = client
        self.assistant_id: str | None = None
        self.reused = 0  # records whose finished or running run was found on the server instead of started

    @property
    def client(self) -> Any:
        if self._client is None:
            from langgraph_sdk import get_client

            self._client = get_client(url=self.url, api_key=None)
        return self._client

    async def connect(self) -> None:
        """Check the server answers and serves the graph; remember its assistant.

        Raises:
            ServerError: the server cannot be reached, or has no graph of that name (the message lists those it has).
        """
        try:
            try:
                found = await self.client.assistants.search(graph_id=self.graph, limit=1)
            except Exception as exc:  # langgraph dev answers 404 for a graph it does not serve
                if _status(exc) != 404:
                    raise
                found = []
            if not found:
                with contextlib.suppress(Exception):  # an assistant id instead of a graph name
                    found = [await self.client.assistants.get(self.graph)]
            if not found:
                served = await self.client.assistants.search(limit=100)
                names = ", ".join(sorted({a["graph_id"] for a in served})) or "none"
                raise ServerError(
                    f"unknown graph {self.graph!r} on the LangGraph server at {self.url}; it serves: {names}"
                )
        except ServerError:
            raise
        except Exception as exc:  # noqa: BLE001 - httpx/SDK errors: all mean "this server cannot be used"
            reason = " ".join(str(exc).split()) or type(exc).__name__
            raise ServerError(
                f"cannot reach a LangGraph server at {self.url} ({type(exc).__name__}: {reason}); "
                "start one (e.g. `langgraph dev`) or fix --server"
            ) from None
        self.assistant_id = found[0]["assistant_id"]

    async def ainvoke(self, input: Any, config: Any = None, **kwargs: Any) -> dict[str, Any]:
        """Run one record (``config["metadata"]`` holds ``batch_id`` and ``batch_input_hash``) and return its values.

        Raises:
            RuntimeError: the run failed on the server (the server's error type and message).
        """
        if self.assistant_id is None:
            await self.connect()
        metadata = (config or {}).get("metadata", {})
        thread_id = thread_id_for(
            self.graph, metadata.get("batch_id"), str(metadata.get("batch_input_hash")), self.context
        )
        retrying = AsyncRetrying(
            retry=retry_if_exception(_transient),
            stop=stop_after_attempt(self.retries + 1),
            wait=wait_exponential(multiplier=self.backoff, max=10.0),
            reraise=True,
        )
        async for attempt in retrying:  # each attempt looks at the thread again: a run is never started twice
            with attempt:
                return await self._run(thread_id, input, metadata)
        raise AssertionError("unreachable")  # pragma: no cover - reraise=True raises the last error

    async def _run(self, thread_id: str, input: dict[str, Any], metadata: dict[str, Any]) -> dict[str, Any]:
        client = self.client
        run_metadata = {
            "batch_id": metadata.get("batch_id"),
            "batch_input_hash": metadata.get("batch_input_hash"),
        }
        await client.threads.create(thread_id=thread_id, if_exists="do_nothing", metadata=run_metadata)
        latest = await client.runs.list(thread_id, limit=1)
        run = latest[0] if latest else None
        if run is not None and run["status"] == "success":
            self.reused += 1
            state = await client.threads.get_state(thread_id)
            return _values(state.get("values"))
        if run is not None and run["status"] in _ACTIVE:
            self.reused += 1
        else:  # no run yet, or the last one failed: start one (in the background, so it outlives this client)
            run = await client.runs.create(
                thread_id,
                self.assistant_id,
                input=input,
                context=self.context or None,
                metadata=run_metadata,
                multitask_strategy="reject",
            )
        try:
            values = await client.runs.join(thread_id, run["run_id"])
        except asyncio.CancelledError:  # the batch's --timeout: stop the server's run too
            with contextlib.suppress(Exception):
                await asyncio.shield(client.runs.cancel(thread_id, run["run_id"]))
            raise
        return _values(values)


def _values(values: Any) -> dict[str, Any]:
    if isinstance(values, dict) and isinstance(values.get("__error__"), dict):
        error = values["__error__"]
        raise RuntimeError(f"the run failed on the server: {error.get('error')}: {error.get('message')}")
    if not isinstance(values, dict):
        raise TypeError(
            f"the server returned {type(values).__name__} for the thread's values, expected a dict"
        )
    return values
