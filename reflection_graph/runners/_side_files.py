"""The files a batch or merge run writes beside its output, and the one check that none of them is an input.

A run on ``OUT`` writes, truncates or removes more than ``OUT``:

* ``OUT.tmp``: the temporary file of every atomic rewrite of ``OUT`` (created empty, then renamed over ``OUT``);
* ``OUT.summary.json`` and its temporary file ``OUT.summary.json.tmp``;
* ``OUT.lock``: truncated when the run takes it, removed when it ends (`reflection_graph.runners._lock`);
* ``OUT.stale.jsonl`` (a batch, not a merge): appended to, a torn last line cut off first.

`check_inputs_spared` refuses a run where ``OUT`` or any of these is one of the run's inputs: the same path, a
symlink or a hard link (`same_file`). ``OUT`` is taken as resolved (`resolve_output`), as the runs write it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from reflection_graph.runners._jsonl import same_file, temporary_path
from reflection_graph.runners._lock import lock_path
from reflection_graph.runners._output import stale_path
from reflection_graph.runners._summary import summary_path


def resolve_output(out_path: str | os.PathLike[str]) -> Path:
    """``OUT`` with every symlink resolved: where a run writes (so a symlink named as ``OUT`` stays a symlink) and
    what its lock is named after (so two spellings of one file share one lock)."""
    return Path(os.path.realpath(out_path))


def written_files(out_path: str | os.PathLike[str], *, stale: bool = True) -> list[tuple[str, Path]]:
    """``(what it is, path)`` of every file a run on ``out_path`` writes, truncates or removes; ``stale=False``
    leaves out ``OUT.stale.jsonl`` (a merge never writes it)."""
    out = resolve_output(out_path)
    summary = summary_path(out)
    files = [
        ("the output", out),
        ("the output's temporary file", temporary_path(out)),
        ("the summary", summary),
        ("the summary's temporary file", temporary_path(summary)),
        ("the lock file", lock_path(out)),
    ]
    if stale:
        files.append(("the stale-entries file", stale_path(out)))
    return files


def check_inputs_spared(
    out_path: str | os.PathLike[str],
    inputs: Iterable[tuple[str, str | os.PathLike[str]]],
    *,
    stale: bool = True,
    error: type[ValueError] = ValueError,
) -> None:
    """Refuse a run on ``out_path`` that would write, truncate or remove one of its ``inputs``.

    Args:
        out_path: the run's output, as given.
        inputs: ``(what it is, path)`` of each file the run reads, e.g. ``("the input file", IN)``.
        stale: whether the run may write ``OUT.stale.jsonl`` (a batch does, a merge does not).
        error: the exception class to raise.

    Raises:
        ValueError: (or ``error``) one line naming the written file and the input it is.
    """
    inputs = list(inputs)
    for role, written in written_files(out_path, stale=stale):
        for what, path in inputs:
            if same_file(written, path):
                given = "" if Path(out_path) == written else f" (of {out_path})"
                raise error(
                    f"{role} {written}{given} is {what} {path} (the same path, a symlink or a hard link) and "
                    "would be overwritten or removed; write the output elsewhere"
                )
