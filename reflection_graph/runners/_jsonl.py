"""JSON Lines on disk for the runners: the one reader, the one atomic writer and the one appender.

* `read_lines` yields each line of a file with its 1-based number, decoded as strict UTF-8 (a line that is not
  UTF-8 is yielded as None, never silently changed with U+FFFD), so callers can report it by line.
* `atomic_write` writes a whole file through a temporary file in the same directory, ``fsync``-ed, then
  ``os.replace``-d (and the directory ``fsync``-ed); when a write fails the temporary file is removed.
* `append_lines` and `AppendLog` append whole lines, ``fsync``-ed; an append that fails part-way (a full disk) is
  cut back to the last whole line, so a file never ends in a torn line by our doing. A torn tail left by a killed
  process is cut off before the next append.
* `same_file` says whether two paths are one file (the same path, a symlink or a hard link), so an output is
  never written over an input.
* A failed write raises `WriteError` (an `OSError`) whose message names the file and, on a full disk, the space
  needed and the space free.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

_NO_SPACE = (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC))
_CHUNK = 65536


def same_file(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    """True when `a` and `b` name one file: the same path, a symlink to it, or a hard link (device and inode
    compared through `os.stat`); a path that does not exist yet is one file with another only when both resolve
    to the same path."""
    try:
        first, second = os.stat(a), os.stat(b)
    except OSError:
        return Path(a).resolve() == Path(b).resolve()
    return (first.st_dev, first.st_ino) == (second.st_dev, second.st_ino)


class WriteError(OSError):
    """A file could not be written whole; the one-line message names it (and the space needed, if full).

    ``errno`` and ``filename`` are the failed write's; ``str()`` is the message alone.
    """

    def __init__(self, message: str, code: int | None = None, filename: str | None = None) -> None:
        super().__init__(message)
        self.errno = code  # type: ignore[assignment]
        self.filename = filename

    def __str__(self) -> str:
        return str(self.args[0])


def dumps(entry: Any, **kwargs: Any) -> str:
    """JSON text that can be written as UTF-8 (``kwargs`` go to `json.dumps`).

    A lone surrogate (valid JSON ``"\\ud800"``) has no UTF-8 form: such an entry is written ASCII-escaped
    instead, so it is still written and reads back to the same string.
    """
    text = json.dumps(entry, ensure_ascii=False, default=str, **kwargs)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(entry, ensure_ascii=True, default=str, **kwargs)
    return text


def read_lines(path: str | os.PathLike[str]) -> Iterator[tuple[int, str | bytes]]:
    """``(line number, text)`` for every line of ``path``; a line that is not valid UTF-8 comes as its bytes.

    Nothing is replaced with U+FFFD: the caller reports such a line (see `utf8_problem`) or skips it.
    """
    with open(path, "rb") as fh:
        for number, raw in enumerate(fh, start=1):
            try:
                yield number, raw.decode("utf-8")
            except UnicodeDecodeError:
                yield number, raw


def utf8_problem(raw: bytes) -> str:
    """Where ``raw`` stops being UTF-8, as ``byte 0xff at column 5``."""
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return f"byte 0x{raw[exc.start]:02x} at column {exc.start + 1}"
    return "valid UTF-8"


def read_objects(path: str | os.PathLike[str]) -> tuple[list[dict[str, Any]], int]:
    """The JSON objects of a JSONL file and how many non-blank lines were not one (a missing file: none)."""
    entries: list[dict[str, Any]] = []
    dropped = 0
    if not Path(path).exists():
        return entries, dropped
    for _, text in read_lines(path):
        if isinstance(text, str) and not text.strip():
            continue
        try:
            obj = json.loads(text) if isinstance(text, str) else None
        except json.JSONDecodeError:
            obj = None
        if isinstance(obj, dict):
            entries.append(obj)
        else:
            dropped += 1
    return entries, dropped


def write_error(path: Path, needed: int, exc: OSError) -> WriteError:
    """The `WriteError` of a failed write of ``needed`` bytes to ``path`` (on a full disk: the space free)."""
    if exc.errno in _NO_SPACE:
        try:
            stats = os.statvfs(path.parent)
            free = f", {stats.f_bavail * stats.f_frsize:,} free"
        except (OSError, AttributeError):
            free = ""
        message = (
            f"cannot write {path}: no space left on its device ({needed:,} bytes needed{free}); free some "
            "space and rerun the same command to resume (nothing written before is lost)"
        )
    else:
        message = f"cannot write {path}: {exc.strerror or exc}"
    return WriteError(message, exc.errno, str(path))


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def fsync_dir(path: Path) -> None:
    """``fsync`` a directory, so a file just created or renamed in it survives a crash (where supported)."""
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def lines_text(lines: Iterable[str]) -> str:
    """``lines`` as the text of a JSONL file: each followed by a newline."""
    return "".join(line + "\n" for line in lines)


def temporary_path(path: Path) -> Path:
    """The temporary file `atomic_write` fills before renaming it over ``path``: ``path`` + ``.tmp``."""
    return path.with_name(path.name + ".tmp")


def atomic_write(path: Path, data: str | bytes) -> None:
    """Replace ``path`` with ``data`` (text is written as UTF-8), all or nothing, ``fsync``-ed.

    Raises:
        WriteError: the file could not be written (the temporary file is removed, ``path`` is unchanged).
    """
    raw = data.encode("utf-8") if isinstance(data, str) else data
    tmp = temporary_path(path)
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            _write_all(fd, raw)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise write_error(path, len(raw), exc) from None
    fsync_dir(path.parent)


def _cut_torn_tail(fd: int) -> None:
    """Cut a last line that has no newline (left by a killed writer) back to the last whole line."""
    end = os.fstat(fd).st_size
    if end == 0 or os.pread(fd, 1, end - 1) == b"\n":
        return
    position = end
    while position > 0:
        start = max(0, position - _CHUNK)
        found = os.pread(fd, position - start, start).rfind(b"\n")
        if found >= 0:
            os.ftruncate(fd, start + found + 1)
            return
        position = start
    os.ftruncate(fd, 0)


def _open_append(path: Path) -> int:
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        _cut_torn_tail(fd)
    except OSError:
        os.close(fd)
        raise
    return fd


def _append(fd: int, path: Path, data: bytes) -> None:
    start = os.fstat(
        fd
    ).st_size  # one writer per file (the runs hold a lock): the end stays where we found it
    try:
        _write_all(fd, data)
        os.fsync(fd)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.ftruncate(fd, start)  # no torn line: back to the last whole line
        raise write_error(path, len(data), exc) from None


def append_lines(path: Path, lines: Iterable[str]) -> None:
    """Append whole lines to ``path``, ``fsync``-ed; on failure the file is cut back as it was.

    Raises:
        WriteError: the lines could not be written (none of them is left in the file).
    """
    data = lines_text(lines).encode("utf-8")
    fd = _open_append(path)
    try:
        _append(fd, path, data)
    finally:
        os.close(fd)


class AppendLog:
    """Append-only JSONL writer: each entry is written and ``fsync``-ed before its `aappend` returns.

    It group-commits: entries that arrive while an ``fsync`` is under way are written together and made durable
    by the next single ``fsync``, in a worker thread so the event loop never blocks on the disk. A group that
    fails part-way is cut back to the last whole line and every waiter of it gets the `WriteError`.
    """

    def __init__(self, path: Path) -> None:
        self._path = path
        self._fd: int | None = _open_append(path)
        self._pending: list[tuple[str, asyncio.Future[None]]] = []
        self._flusher: asyncio.Task[None] | None = None

    def _sync(self, lines: list[str]) -> None:
        if self._fd is None:
            raise WriteError(f"cannot write {self._path}: the log is closed", None, str(self._path))
        _append(self._fd, self._path, "".join(lines).encode("utf-8"))

    async def _flush_loop(self) -> None:
        while self._pending:
            group, self._pending = self._pending, []
            try:
                await asyncio.to_thread(self._sync, [line for line, _ in group])
            except Exception as exc:  # noqa: BLE001 - every waiter learns the write failed
                for _, future in group:
                    if not future.done():
                        future.set_exception(exc)
                continue
            for _, future in group:
                if not future.done():
                    future.set_result(None)

    async def aappend(self, entry: dict[str, Any]) -> None:
        """Write ``entry`` as one line; return once it is on disk."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._pending.append((dumps(entry) + "\n", future))
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush_loop())
        await future

    async def aclose(self) -> None:
        """Wait for the writes under way (their thread must not outlive the file), then close the file."""
        if self._flusher is not None:
            await asyncio.gather(asyncio.shield(self._flusher), return_exceptions=True)
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
