"""What one sandboxed run is asked to do, checked up front: files, command, limits, environment, descriptors.

`_validate` turns the arguments of `run_sandboxed` into a `_Plan` or raises a `ValueError` that says what to change,
before anything is written or started.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath

DEFAULT_MAX_OUTPUT_BYTES = 256 * 1024
"""How many bytes of stdout (and, separately, of stderr and of the result channel) are kept."""
DEFAULT_MAX_PROCESSES = 64
"""How many processes (and threads) the sandboxed command may have at once, where the OS can count them."""

_MIN_MEMORY_MB = 32
_PATH = "/usr/local/bin:/usr/bin:/bin"


@dataclass(frozen=True)
class _Plan:
    files: dict[str, str]
    argv: list[str]
    timeout_s: float
    memory_bytes: int
    cpu_s: int
    fsize_bytes: int
    env: dict[str, str]
    max_output_bytes: int
    backend: str | None
    channel_secret: bytes | None = None
    max_processes: int | None = DEFAULT_MAX_PROCESSES
    pass_fds: dict[str, int] = field(default_factory=dict)
    """Descriptors handed to the command (owned by the run: closed once it started): `"{name}"` in argv -> fd."""


def _check_numbers(
    timeout_s: float,
    memory_mb: int | None,
    cpu_s: int | None,
    max_output_bytes: int,
    max_file_mb: int,
    max_processes: int | None,
) -> None:
    if not timeout_s or timeout_s <= 0:
        raise ValueError(f"timeout_s must be a positive number of seconds, got {timeout_s!r}")
    if memory_mb is not None and memory_mb < _MIN_MEMORY_MB:
        raise ValueError(
            f"memory_mb must be at least {_MIN_MEMORY_MB} (or None for no limit), got {memory_mb!r}"
        )
    if cpu_s is not None and cpu_s <= 0:
        raise ValueError(f"cpu_s must be a positive number of seconds (or None), got {cpu_s!r}")
    if max_output_bytes <= 0:
        raise ValueError(f"max_output_bytes must be positive, got {max_output_bytes!r}")
    if max_file_mb <= 0:
        raise ValueError(f"max_file_mb must be positive, got {max_file_mb!r}")
    if max_processes is not None and (isinstance(max_processes, bool) or not 4 <= max_processes <= 100_000):
        raise ValueError(f"max_processes must be an int from 4 to 100000 (or None), got {max_processes!r}")


def _check_files(files: Mapping[str, str]) -> dict[str, str]:
    clean_files: dict[str, str] = {}
    for name, content in files.items():
        path = PurePosixPath(name)
        if not name or path.is_absolute() or ".." in path.parts or name.startswith("~"):
            raise ValueError(f"sandbox file names must be relative paths inside the sandbox, got {name!r}")
        if not isinstance(content, str):
            raise ValueError(f"sandbox file {name!r} must have str content, got {type(content).__name__}")
        clean_files[str(path)] = content
    return clean_files


def _find_program(program: str) -> str:
    if os.sep in program:
        return program
    found = shutil.which(program, path=_PATH) or shutil.which(program)
    if found is None:
        raise ValueError(f"cannot find the program {program!r}; pass an absolute path as argv[0]")
    return found


def _validate(
    files: Mapping[str, str],
    argv: Sequence[str],
    timeout_s: float,
    memory_mb: int | None,
    cpu_s: int | None,
    env: Mapping[str, str] | None,
    max_output_bytes: int,
    max_file_mb: int,
    backend: str | None,
    channel_secret: bytes | None = None,
    max_processes: int | None = DEFAULT_MAX_PROCESSES,
    pass_fds: Mapping[str, int] | None = None,
) -> _Plan:
    """Check the arguments of a run; the `ValueError` says what to change."""
    if isinstance(argv, str) or not argv or not all(isinstance(a, str) for a in argv):
        raise ValueError("argv must be a non-empty list of strings, e.g. [sys.executable, '-I', 'main.py']")
    _check_numbers(timeout_s, memory_mb, cpu_s, max_output_bytes, max_file_mb, max_processes)
    if channel_secret is not None and (
        not isinstance(channel_secret, bytes) or not 16 <= len(channel_secret) <= 4096
    ):
        raise ValueError("channel_secret must be 16 to 4096 random bytes, e.g. secrets.token_bytes(32)")
    fds = dict(pass_fds or {})
    if any(
        not isinstance(fd, int) or fd < 3 or name in ("secret_fd", "result_fd") for name, fd in fds.items()
    ):
        raise ValueError(
            f"pass_fds must map names (not secret_fd/result_fd) to open descriptors >= 3, got {fds}"
        )
    child_env = {"PATH": _PATH, "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}
    if env:
        child_env.update({str(k): str(v) for k, v in env.items()})
    return _Plan(
        files=_check_files(files),
        argv=[_find_program(argv[0]), *argv[1:]],
        timeout_s=float(timeout_s),
        memory_bytes=-1 if memory_mb is None else int(memory_mb) * 1024 * 1024,
        cpu_s=int(cpu_s) if cpu_s is not None else int(timeout_s) + 2,
        fsize_bytes=int(max_file_mb) * 1024 * 1024,
        env=child_env,
        max_output_bytes=int(max_output_bytes),
        backend=backend,
        channel_secret=channel_secret,
        max_processes=max_processes,
        pass_fds=fds,
    )
