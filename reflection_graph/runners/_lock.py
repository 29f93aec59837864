"""One run per output file: an exclusive ``flock`` on ``OUT.lock`` that names its holder."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import socket
from datetime import datetime, timezone
from pathlib import Path

from reflection_graph.runners._jsonl import write_error


class BatchLocked(RuntimeError):
    """Another batch run holds the lock on the same output file (the message names it: pid, host, start)."""


def lock_path(out_path: str | os.PathLike[str]) -> Path:
    """The lock file of a batch writing ``out_path``: ``OUT`` + ``.lock`` (it names the run holding it)."""
    return Path(os.fspath(out_path) + ".lock")


def _describe_holder(text: str) -> str:
    try:
        info = json.loads(text)
        return f"pid {info['pid']} on host {info['host']}, started {info['started']}"
    except (ValueError, KeyError, TypeError):
        return "a run that is just starting" if not text.strip() else f"holder {text.strip()[:80]!r}"


class OutputLock:
    """An exclusive ``flock`` on ``OUT.lock`` for the whole run, so two runs never write one ``OUT``.

    The lock file holds the holder's pid, host and start time, for the refusal message. The kernel drops an
    ``flock`` when its process dies, so the lock of a killed run is simply taken over by the next one. On
    platforms without ``fcntl`` (Windows) there is no lock.
    """

    def __init__(self, out_path: Path) -> None:
        self.out_path = out_path
        self.path = lock_path(out_path)
        self._fd: int | None = None
        self.previous: str | None = None

    def acquire(self) -> None:
        """Take the lock, or raise `BatchLocked` naming the run that holds it."""
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
                raise BatchLocked(
                    f"{self.out_path} is being written by another batch run ({_describe_holder(text)}); "
                    "wait for it to finish, or write to another output file"
                ) from None
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
