"""What a join of a bundled model file leaves beside it (`_bundled.py`): the stamp that spares a later process the
hash of a file already verified (its size, mtime, ctime and inode when it was verified, with its SHA-256), and the
partial files of joins that died, removed only when no process holds their lock."""

from __future__ import annotations

import json
import os
import re
import threading
import time
from pathlib import Path

__all__ = [
    "STALE_AFTER_S",
    "file_identity",
    "lock_exclusive",
    "remove_stale_partials",
    "same_file",
    "stamp_path",
    "stamped",
    "write_stamp",
]


def stamp_path(target: Path) -> Path:
    return target.with_name(target.name + ".verified")


def file_identity(stat: os.stat_result) -> dict[str, int]:
    """What a stamp records of a file: any write, `utime`, `chmod` or replacement changes one of these (ctime
    included, which no unprivileged process can set back)."""
    return {
        "size": stat.st_size,
        "mtime_ns": stat.st_mtime_ns,
        "ctime_ns": stat.st_ctime_ns,
        "inode": stat.st_ino,
    }


def stamped(target: Path, sha256: str) -> bool:
    """True when the stamp beside `target` says this very file (size, mtime, ctime, inode) was verified as `sha256`."""
    try:
        stamp = json.loads(stamp_path(target).read_text(encoding="utf-8"))
        return bool(stamp == {**file_identity(target.stat()), "sha256": sha256})
    except (OSError, ValueError):
        return False


def write_stamp(target: Path, identity: dict[str, int], sha256: str) -> None:
    stamp = stamp_path(target)
    partial = stamp.with_name(f"{stamp.name}.{os.getpid()}.{threading.get_ident()}.part")
    try:
        partial.write_text(json.dumps({**identity, "sha256": sha256}), encoding="utf-8")
        os.replace(partial, stamp)
    except OSError:
        pass  # no stamp: the next process hashes the file again, nothing worse
    finally:
        partial.unlink(missing_ok=True)


STALE_AFTER_S = 60.0
"""A partial join file untouched this long, and locked by no process, belongs to a join that died. (A live join
holds its lock from the file's creation to its rename; the age only covers the instant before it takes it.)"""


def _partial_pattern(target: Path) -> re.Pattern[str]:
    return re.compile(re.escape(target.name) + r"\.\d+\.\d+\.part")


def lock_exclusive(fd: int, *, blocking: bool) -> bool:
    """Take an exclusive `flock` on `fd`: True when taken, False when another open file holds it or the platform
    has no `flock` (then nothing here is locked, and no partial file is ever removed)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
    except BlockingIOError:
        return False
    return True


def same_file(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_ino, a.st_dev) == (b.st_ino, b.st_dev)


def remove_stale_partials(target: Path) -> list[Path]:
    """Remove the partial files beside `target` that joins killed by a signal or a power loss left (one per join,
    about as large as the model); return them.

    A partial file is removed only when no process holds its lock (every live join does, until its rename) and it
    is older than `STALE_AFTER_S`; the lock is taken before the file is unlinked, and only the file that was
    locked is, so a join starting under the same name meanwhile keeps its own file.
    """
    pattern = _partial_pattern(target)
    try:
        names = [name for name in os.listdir(target.parent) if pattern.fullmatch(name)]
    except OSError:
        return []
    removed = []
    for name in names:
        path = target.parent / name
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        except OSError:
            continue  # gone already (its join finished), or not a regular file we may read
        try:
            mine = os.fstat(fd)
            if time.time() - mine.st_mtime < STALE_AFTER_S or not lock_exclusive(fd, blocking=False):
                continue
            if same_file(os.lstat(path), mine):
                path.unlink()
                removed.append(path)
        except OSError:
            continue  # another process removed it first, or the directory is read-only: nothing worse
        finally:
            os.close(fd)
    return removed
