"""The one progress bar of the runners (batch's records, eval's scoring): rich, on stderr, or nothing."""

from __future__ import annotations

from typing import Any


class ProgressBar:
    """A rich progress bar on stderr, or nothing when disabled or when there is nothing to do.

    Args:
        label: the bar's name (``glean``, ``score``).
        total: steps to do.
        enabled: show it at all.
        skipped: with ``counts``: records skipped before the bar started (shown beside the counts).
        counts: show ``ok``/``err`` counts (see `advance`) and the time remaining.
    """

    def __init__(
        self, label: str, total: int, *, enabled: bool, skipped: int = 0, counts: bool = False
    ) -> None:
        self._progress: Any = None
        self._task: Any = None
        if not enabled or total == 0:
            return
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            ProgressColumn,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        columns: list[str | ProgressColumn] = [
            TextColumn(f"[bold]{label}[/]"),
            BarColumn(),
            MofNCompleteColumn(),
        ]
        if counts:
            columns.append(
                TextColumn(
                    "ok [green]{task.fields[ok]}[/] err [red]{task.fields[err]}[/] skipped {task.fields[skip]}"
                )
            )
        columns.append(TimeElapsedColumn())
        if counts:
            columns.append(TimeRemainingColumn())
        self._progress = Progress(*columns, console=Console(stderr=True), transient=False)
        self._task = self._progress.add_task(label, total=total, ok=0, err=0, skip=skipped)
        self._progress.start()

    def advance(self, ok: int | None = None, err: int | None = None) -> None:
        """One step done; ``ok``/``err`` update the counts shown (with ``counts``)."""
        if self._progress is not None:
            fields = {k: v for k, v in (("ok", ok), ("err", err)) if v is not None}
            self._progress.update(self._task, advance=1, **fields)

    def stop(self) -> None:
        """Stop drawing (the last state stays on screen)."""
        if self._progress is not None:
            self._progress.stop()
