"""One run per output file, and one run per checkpointed thread: exclusive ``flock`` locks, so any path to the
same file (a symlink, a hard link, a bind mount, a ``..`` detour) meets the same lock.

* A batch writing ``OUT`` locks ``OUT.lock`` beside the real file (symlinks resolved; the file names its holder)
  and, with ``flock``, the file ``OUT`` itself: the one it finds and the one its first compaction puts in its
  place (a compaction replaces the file), held to the end (the first is let go once no name reaches it). Every
  name of those files, a hard link included, meets that lock.
* A run on thread ``T`` of the checkpoint file ``CHECKPOINT`` locks ``checkpoint-<inode>.thread-<hash>.lock``
  beside the real file: named by the file's identity (its inode, created empty first when it does not exist),
  not by its name, so a hard link to it in the same directory, or its directory reached by a bind mount, meets
  the same lock file. On Linux it also locks one byte of the checkpoint file itself, chosen by the thread, so a
  hard link in another directory meets the lock too.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import socket
import struct
from datetime import datetime, timezone
from pathlib import Path

from reflection_graph.runners._jsonl import write_error


class BatchLocked(RuntimeError):
    """Another batch run holds the lock on the same output file (the message names it: pid, host, start)."""


class ThreadBusy(RuntimeError):
    """Another run holds the checkpointed thread (the message names the thread and the run: pid, host, start)."""


def lock_path(out_path: str | os.PathLike[str]) -> Path:
    """The lock file of a batch writing ``out_path``: ``OUT`` + ``.lock`` beside the real file (symlinks resolved),
    naming the run holding it (`OutputLock` also locks the file ``OUT`` itself)."""
    return Path(os.path.realpath(out_path) + ".lock")


def _describe_holder(text: str) -> str:
    try:
        info = json.loads(text)
        return f"pid {info['pid']} on host {info['host']}, started {info['started']}"
    except (ValueError, KeyError, TypeError):
        return "a run that is just starting" if not text.strip() else f"holder {text.strip()[:80]!r}"


def file_inode(path: str | os.PathLike[str]) -> int:
    """The inode of the file at ``path``, which is created empty first when it does not exist.

    ``O_CREAT`` without ``O_EXCL``: of two runs creating it at once, one creates it and the other opens the file
    the first made, so both read one inode.
    """
    fd = os.open(path, os.O_RDONLY | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
    try:
        return os.fstat(fd).st_ino
    finally:
        os.close(fd)


def thread_lock_path(checkpoint: str | os.PathLike[str], thread_id: str) -> Path:
    """The lock file of a run on ``thread_id`` of the checkpoint file ``checkpoint`` (created empty when it does not
    exist: an empty file is an empty SQLite database).

    It lies beside the real file (symlinks resolved) and is named by the file's inode and a hash of the thread id
    (any id makes a valid file name), so every name of the file in that directory meets it. The device number is
    left out: every file of one directory is on its filesystem, and hosts sharing a network filesystem number its
    device each their own way.
    """
    real = Path(os.path.realpath(checkpoint))
    digest = hashlib.sha256(thread_id.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return real.parent / f"checkpoint-{file_inode(real)}.thread-{digest}.lock"


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
    """The lock of a batch writing ``OUT``, so two runs never write one ``OUT`` (`BatchLocked`), whatever name each
    gives it: ``OUT.lock`` beside the real file (naming the holder) and an ``flock`` on the file ``OUT`` itself,
    taken again by `cover` on the file a compaction puts in its place; each is held until `release`, or until no
    name reaches it any more."""

    def __init__(self, out_path: Path) -> None:
        self.out_path = out_path
        self.path = lock_path(out_path)
        self._held: list[int] = []

    def _busy(self, holder: str) -> RuntimeError:
        return BatchLocked(
            f"{self.out_path} is being written by another batch run ({holder}); "
            "wait for it to finish, or write to another output file"
        )

    def acquire(self) -> None:
        """Take ``OUT.lock`` and the lock of the file ``OUT`` (when it exists), or raise `BatchLocked`."""
        super().acquire()
        try:
            self.cover()
        except BaseException:
            self.release()
            raise

    def cover(self) -> None:
        """Lock the file now at ``OUT`` too (call it after replacing ``OUT``), or raise `BatchLocked`: another
        run, through another name of the file (a hard link), writes it."""
        try:
            import fcntl
        except ImportError:  # pragma: no cover - not POSIX
            return
        try:
            fd = os.open(self.out_path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        except FileNotFoundError:  # nothing written yet: no other name can reach it
            return
        if _identity(fd) in {_identity(held) for held in self._held}:  # not replaced since: locked already
            os.close(fd)
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno not in (errno.EAGAIN, errno.EACCES):
                raise
            raise self._busy(_holder_by_inode(self.out_path)) from None
        # a replaced OUT that no name reaches any more is let go (and its space freed)
        for old in list(self._held):
            if os.fstat(old).st_nlink == 0:
                self._held.remove(old)
                os.close(old)
        self._held.append(fd)

    def release(self) -> None:
        """Remove ``OUT.lock`` and unlock every file ``OUT`` was during the run."""
        while self._held:
            os.close(self._held.pop())
        super().release()


def _identity(fd: int) -> tuple[int, int]:
    status = os.fstat(fd)
    return status.st_dev, status.st_ino


def _same(entry: os.DirEntry[str], mine: os.stat_result) -> bool:
    try:
        theirs = entry.stat(follow_symlinks=False)
    except OSError:
        return False
    return (theirs.st_dev, theirs.st_ino) == (mine.st_dev, mine.st_ino)


def _holder_by_inode(out_path: Path) -> str:
    """The holder named by the lock file of another name of ``out_path``'s file in its directory (a hard link),
    or, when there is none to read, that it writes the file under another name."""
    try:
        mine = os.stat(out_path)
        with os.scandir(out_path.parent) as entries:
            names = [e.name for e in entries if e.name != out_path.name and _same(e, mine)]
        for name in names:
            with contextlib.suppress(OSError):
                text = lock_path(out_path.parent / name).read_text(encoding="utf-8", errors="replace")
                return f"{_describe_holder(text)}, writing it as {out_path.parent / name}"
    except OSError:
        pass
    return "a run writing the same file under another name"


class ThreadLock(_FileLock):
    """The lock of one checkpointed thread, beside its checkpoint file (`thread_lock_path`), so two runs never
    resume one thread at once (`ThreadBusy`), whatever name each gives the file. The checkpoint file is created
    empty when it does not exist.

    Example:
        ```python
        with ThreadLock("checkpoints.sqlite", "thread-1"):
            graph.invoke(None, {"configurable": {"thread_id": "thread-1"}})
        ```
    """

    def __init__(self, checkpoint: str | os.PathLike[str], thread_id: str) -> None:
        self.thread_id = thread_id
        self.path = thread_lock_path(checkpoint, thread_id)
        self._checkpoint = Path(os.path.realpath(checkpoint))
        self._checkpoint_fd: int | None = None

    def _busy(self, holder: str) -> RuntimeError:
        return ThreadBusy(
            f"thread {self.thread_id!r} is being run by another process ({holder}); wait for it to finish, "
            "or use another thread id"
        )

    def acquire(self) -> None:
        """Take the thread's lock file and its byte of the checkpoint file, or raise `ThreadBusy`."""
        super().acquire()
        try:
            self._lock_byte()
        except BaseException:
            self.release()
            raise

    def _lock_byte(self) -> None:
        """Lock the thread's byte of the checkpoint file itself, which a run through a hard link in another
        directory (where the lock file is not) meets too. Linux only; a checkpoint this process may not write
        keeps the lock file alone."""
        try:
            fd = os.open(self._checkpoint, os.O_RDWR | getattr(os, "O_CLOEXEC", 0))
        except OSError:
            return
        digest = hashlib.sha256(self.thread_id.encode("utf-8", "surrogatepass")).digest()
        taken = _byte_lock(fd, _THREAD_BYTES + int.from_bytes(digest[:5], "big"))
        if taken is False:
            os.close(fd)
            raise self._busy("a run reaching the checkpoint file under another name")
        if taken is None:
            os.close(fd)
            return
        self._checkpoint_fd = fd

    def release(self) -> None:
        """Unlock the thread's byte of the checkpoint file and remove the lock file."""
        if self._checkpoint_fd is not None:
            os.close(self._checkpoint_fd)
            self._checkpoint_fd = None
        super().release()


_THREAD_BYTES = 1 << 62
"""Where the threads' bytes of a checkpoint file start: far past the bytes SQLite locks (about 1 GiB in)."""


def _byte_lock(fd: int, offset: int) -> bool | None:
    """Write-lock one byte of ``fd`` at ``offset`` with an open-file-description lock (``F_OFD_SETLK``, Linux):
    True when taken, False when another open file holds it, None where the system or file system has no such
    lock. It is not an ``fcntl`` process lock, so SQLite closing its own descriptors never drops it."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        return None
    command = getattr(fcntl, "F_OFD_SETLK", None)
    if command is None or struct.calcsize("P") != 8:  # struct flock below is the 64-bit layout
        return None
    request = struct.pack("hhqqi4x", fcntl.F_WRLCK, os.SEEK_SET, offset, 1, 0)
    try:
        fcntl.fcntl(fd, command, request)
    except OSError as exc:
        if exc.errno in (errno.EAGAIN, errno.EACCES):
            return False
        if exc.errno in (errno.EINVAL, errno.ENOLCK, errno.EOPNOTSUPP, errno.EBADF):
            return None
        raise
    return True
