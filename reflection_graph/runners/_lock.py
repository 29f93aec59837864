"""One run per output file, and one run per checkpointed thread: an exclusive ``flock`` on a lock file that names
its holder (``OUT.lock`` for a batch, ``CHECKPOINT.thread-<hash>.lock`` beside the checkpoint for ``run``).

Lock names come from the file's real path (symlinks resolved), so every spelling of one output or checkpoint
(a symlink to it, a path through a symlinked directory) takes the same lock."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import socket
from datetime import datetime, timezone
from pathlib import Path

from reflection_graph.runners._jsonl import write_error


class BatchLocked(RuntimeError):
    """Another batch run holds the lock on the same output file (the message names it: pid, host, start)."""


class ThreadBusy(RuntimeError):
    """Another run holds the checkpointed thread (the message names the thread and the run: pid, host, start)."""


def lock_path(out_path: str | os.PathLike[str]) -> Path:
    """The lock file of a batch writing ``out_path``: ``OUT`` + ``.lock`` beside the real file (symlinks resolved),
    naming the run holding it."""
    return Path(os.path.realpath(out_path) + ".lock")


def _describe_holder(text: str) -> str:
    try:
        info = json.loads(text)
        return f"pid {info['pid']} on host {info['host']}, started {info['started']}"
    except (ValueError, KeyError, TypeError):
        return "a run that is just starting" if not text.strip() else f"holder {text.strip()[:80]!r}"


def thread_lock_path(checkpoint: str | os.PathLike[str], thread_id: str) -> Path:
    """The lock file of a run on ``thread_id`` of the checkpoint file ``checkpoint``: beside the real file (symlinks
    resolved), named by a hash of the thread id (any id makes a valid file name)."""
    digest = hashlib.sha256(thread_id.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return Path(os.path.realpath(checkpoint) + f".thread-{digest}.lock")


class _FileLock:
    """An exclusive ``flock`` on a lock file for the whole run.

    The lock file holds the holder's pid, host and start time, for the refusal message. The kernel drops an
    ``flock`` when its process dies, so the lock of a killed run is simply taken over by the next one; `release`
    removes the file. On platforms without ``fcntl`` (Windows) there is no lock.
    """

    path: Path
    _fd: int | None = None
    previous: str | None = None

    def _busy(self, holder: str) -> RuntimeError:
        raise NotImplementedError

    def __enter__(self) -> _FileLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def acquire(self) -> None:
        """Take the lock, or raise the class's error naming the run that holds it."""
        try:
            import fcntl
        except ImportError:  # pragma: no cover - not POSIX
            return
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                text = os.pread(fd, 4096, 0).decode("utf-8", "replace")
                os.close(fd)
                if exc.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
                raise self._busy(_describe_holder(text)) from None
            if self._is_current(fd):
                self._claim(fd)
                return
            os.close(fd)  # the holder released (and removed) the file just before we locked it: try again

    def _is_current(self, fd: int) -> bool:
        try:
            current, mine = os.stat(self.path), os.fstat(fd)
        except FileNotFoundError:
            return False
        return (current.st_ino, current.st_dev) == (mine.st_ino, mine.st_dev)

    def _claim(self, fd: int) -> None:
        old = os.pread(fd, 4096, 0).decode("utf-8", "replace")
        if old.strip():  # a lock file whose process died without removing it: taken over
            self.previous = _describe_holder(old)
        info = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        }
        data = json.dumps(info).encode()
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, data, 0)
            os.fsync(fd)
        except OSError as exc:  # a full disk: say so, naming the lock file
            os.close(fd)
            raise write_error(self.path, len(data), exc) from None
        self._fd = fd

    def release(self) -> None:
        """Remove the lock file (while still locked: a waiter that opened it sees it gone and retries)."""
        if self._fd is None:
            return
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        os.close(self._fd)
        self._fd = None


class OutputLock(_FileLock):
    """The lock on ``OUT.lock`` of a batch writing ``OUT``, so two runs never write one ``OUT`` (`BatchLocked`)."""

    def __init__(self, out_path: Path) -> None:
        self.out_path = out_path
        self.path = lock_path(out_path)

    def _busy(self, holder: str) -> RuntimeError:
        return BatchLocked(
            f"{self.out_path} is being written by another batch run ({holder}); "
            "wait for it to finish, or write to another output file"
        )


class ThreadLock(_FileLock):
    """The lock of one checkpointed thread, beside its checkpoint file (`thread_lock_path`), so two runs never
    resume one thread at once (`ThreadBusy`).

    Example:
        ```python
        with ThreadLock("checkpoints.sqlite", "thread-1"):
            graph.invoke(None, {"configurable": {"thread_id": "thread-1"}})
        ```
    """

    def __init__(self, checkpoint: str | os.PathLike[str], thread_id: str) -> None:
        self.thread_id = thread_id
        self.path = thread_lock_path(checkpoint, thread_id)

    def _busy(self, holder: str) -> RuntimeError:
        return ThreadBusy(
            f"thread {self.thread_id!r} is being run by another process ({holder}); wait for it to finish, "
            "or use another thread id"
        )
