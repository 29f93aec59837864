"""Store I/O for the memory: plans driven through `BaseStore.batch` / `abatch`, and one writer at a time per store.

Every operation of the memory is a *plan*: a generator that yields lists of store ops and receives their results,
so the same code drives `InMemoryStore`, `SqliteStore` and `PostgresStore`, sync or async. Stores without an async
API (`SqliteStore`) run their sync `batch` in a worker thread from the async drivers.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import threading
import weakref
from collections.abc import AsyncIterator, Generator, Iterable, Iterator
from typing import Any, TypeVar

from langgraph.store.base import (
    BaseStore,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

T = TypeVar("T")
Plan = Generator[list[Op], list[Result], T]
PAGE = 1_000


def search_items(result: Result) -> list[SearchItem]:
    """The items of a `SearchOp` result (empty for anything else)."""
    if not isinstance(result, list):
        return []
    return [item for item in result if isinstance(item, SearchItem)]


def _namespaces(result: Result) -> list[tuple[str, ...]]:
    if not isinstance(result, list):
        return []
    return [ns for ns in result if isinstance(ns, tuple)]


def chunks(items: Iterable[T], size: int) -> Iterable[list[T]]:
    """`items` in lists of at most `size`."""
    chunk: list[T] = []
    for item in items:
        chunk.append(item)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def run_sync(store: BaseStore, plan: Plan[T]) -> T:
    """Drive `plan` through `store.batch`; return its result."""
    try:
        ops = next(plan)
        while True:
            ops = plan.send(store.batch(ops) if ops else [])
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]


async def _abatch(store: BaseStore, ops: list[Op]) -> list[Result]:
    try:
        return await store.abatch(ops)
    except NotImplementedError:  # SqliteStore: sync only; keep the event loop free
        return await asyncio.to_thread(store.batch, ops)


async def run_async(store: BaseStore, plan: Plan[T]) -> T:
    """Drive `plan` through `store.abatch` (or `batch` in a thread); return its result."""
    try:
        ops = next(plan)
        while True:
            ops = plan.send(await _abatch(store, ops) if ops else [])
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]


def clear_plan(namespace: tuple[str, ...]) -> Plan[int]:
    """Delete every item under `namespace` (all its sub-namespaces); return how many."""
    namespaces: list[tuple[str, ...]] = []
    offset = 0
    while True:
        condition = MatchCondition(match_type="prefix", path=namespace)
        page = yield [ListNamespacesOp(match_conditions=(condition,), limit=PAGE, offset=offset)]
        found = _namespaces(page[0])
        namespaces.extend(found)
        if len(found) < PAGE:
            break
        offset += PAGE
    deleted = 0
    for ns in namespaces:
        while True:
            page = yield [SearchOp(ns, limit=PAGE)]
            items = search_items(page[0])
            if not items:
                break
            yield [PutOp(item.namespace, item.key, None) for item in items]
            deleted += len(items)
    return deleted


def count_plan(namespace: tuple[str, ...]) -> Plan[int]:
    """How many items `namespace` itself holds."""
    total = 0
    offset = 0
    while True:
        page = yield [SearchOp(namespace, limit=PAGE, offset=offset)]
        found = len(search_items(page[0]))
        total += found
        if found < PAGE:
            return total
        offset += PAGE


# ---------------------------------------------------------------------- one writer at a time per store

try:
    import fcntl
except ImportError:  # Windows: saves are serialized within a process only
    fcntl = None  # type: ignore[assignment]


class SaveLock:
    """Serializes saves (and clears) on one store: a save reads counters and entries, then writes them back.

    Threads queue on a `threading.Lock`; coroutines of one event loop queue on an `asyncio.Lock` first, and then
    poll the thread lock without blocking their loop. For a `SqliteStore` on a file, the holder also takes an
    exclusive `flock` on `<file>.reflexion-lock`, so saves from other processes wait too.
    """

    def __init__(self, lock_file: str | None) -> None:
        self._thread = threading.Lock()
        self._loops: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
            weakref.WeakKeyDictionary()
        )
        self._lock_file = lock_file
        self._fd: int | None = None

    def _file_lock(self, *, blocking: bool) -> bool:
        """Take the cross-process lock (the thread lock must be held); False when busy and not blocking.

        The file is opened per hold, so a forked child never shares the parent's open lock.
        """
        if self._lock_file is None or fcntl is None:
            return True
        try:
            fd = os.open(self._lock_file, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError:  # e.g. a read-only directory: the database cannot be written there either
            return True
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        except BlockingIOError:
            os.close(fd)
            return False
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        return True

    def _file_unlock(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)  # closing the last descriptor releases the flock

    @contextlib.contextmanager
    def hold(self) -> Iterator[None]:
        with self._thread:
            self._file_lock(blocking=True)
            try:
                yield
            finally:
                self._file_unlock()

    @contextlib.asynccontextmanager
    async def ahold(self) -> AsyncIterator[None]:
        with _LOCKS_GUARD:
            gate = self._loops.setdefault(asyncio.get_running_loop(), asyncio.Lock())
        async with gate:
            delay = 0.0005
            while not self._thread.acquire(blocking=False):
                await asyncio.sleep(delay)
                delay = min(2 * delay, 0.02)
            try:
                delay = 0.0005
                while not self._file_lock(blocking=False):
                    await asyncio.sleep(delay)
                    delay = min(2 * delay, 0.05)
                try:
                    yield
                finally:
                    self._file_unlock()
            finally:
                self._thread.release()


_LOCKS_GUARD = threading.Lock()
_STORE_LOCKS: weakref.WeakKeyDictionary[BaseStore, SaveLock] = weakref.WeakKeyDictionary()
_FILE_LOCKS: dict[str, SaveLock] = {}  # SQLite files: every store object on one file shares its lock
_UNHASHABLE_LOCKS: dict[int, SaveLock] = {}


def _sqlite_file(store: BaseStore) -> str | None:
    """The database file of a `SqliteStore` (None for other stores and in-memory databases)."""
    from langgraph.store.sqlite import SqliteStore

    conn: Any = getattr(store, "conn", None)
    if not isinstance(conn, sqlite3.Connection) and not (isinstance(store, SqliteStore) and conn is not None):
        return None  # not SQLite (a SqliteStore may hold a pysqlite3 connection)
    store_lock = getattr(store, "lock", None)
    with store_lock if isinstance(store_lock, type(threading.Lock())) else contextlib.nullcontext():
        rows = conn.execute("PRAGMA database_list").fetchall()
    path = next((str(row[2]) for row in rows if row[1] == "main"), "")
    return os.path.realpath(path) if path else None


def save_lock(store: BaseStore) -> SaveLock:
    """The lock that orders saves on `store` (one per store object; one per database file for `SqliteStore`)."""
    with _LOCKS_GUARD:
        try:
            lock = _STORE_LOCKS.get(store)
        except TypeError:  # an unhashable store class: key it by identity
            lock = _UNHASHABLE_LOCKS.get(id(store))
        if lock is None:
            path = _sqlite_file(store)
            if path is None:
                lock = SaveLock(None)
            else:
                lock = _FILE_LOCKS.setdefault(path, SaveLock(path + ".reflexion-lock"))
            try:
                _STORE_LOCKS[store] = lock
            except TypeError:
                _UNHASHABLE_LOCKS[id(store)] = lock
        return lock


def setup_store(store: BaseStore) -> BaseStore:
    """Run the store's own `setup()` (its table migrations) once, safe across threads and processes.

    `SqliteStore.setup()` reads the migration version, then applies the missing migrations, with no lock across
    processes: several processes opening one fresh file at once fail with `UNIQUE constraint failed:
    store_migrations.v` or `duplicate column name`. Here the setup of a `SqliteStore` on a file runs under the
    same exclusive `flock` on `<file>.reflexion-lock` that orders saves, so one process migrates and the others
    find the tables made. Stores without a `setup()` (`InMemoryStore`) are returned as they are.

    Args:
        store: Any LangGraph store.

    Returns:
        `store`, set up.
    """
    setup = getattr(store, "setup", None)
    if callable(setup):
        with save_lock(store).hold():
            setup()
    return store


def together(*plans: Plan[Any]) -> Plan[list[Any]]:
    """Run `plans` side by side: each round trip carries the next ops of every plan not yet done.

    Returns:
        Each plan's result, in order.
    """
    results: list[Any] = [None] * len(plans)
    waiting: dict[int, list[Op]] = {}
    for i, plan in enumerate(plans):
        try:
            waiting[i] = next(plan)
        except StopIteration as stop:
            results[i] = stop.value
    while waiting:
        answers = yield [op for ops in waiting.values() for op in ops]
        start = 0
        following: dict[int, list[Op]] = {}
        for i, ops in waiting.items():
            part, start = answers[start : start + len(ops)], start + len(ops)
            try:
                following[i] = plans[i].send(part)
            except StopIteration as stop:
                results[i] = stop.value
        waiting = following
    return results
