"""The options of one batch or eval job, declared and checked once: `JobOptions`.

`run_batch` / `arun_batch` and `evaluate` / `aevaluate` take one `JobOptions` (``job=``) and/or its fields as
keyword arguments over it (`JobKwargs`); `chosen_job` makes the one object they run with. The CLI's `batch` and
`eval` build one from their flags and pass it as it is.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from typing_extensions import TypedDict

__all__ = ["JobKwargs", "JobOptions", "chosen_job"]


def _integer(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True, kw_only=True)
class JobOptions:
    """How a batch or an eval runs its records: validated once, when it is made.

    Args:
        concurrency: at most this many records run at the same time (>= 1); an eval scores with the same bound.
        timeout_s: time limit in seconds of one attempt of one record (> 0), or None for none. A record that runs
            out of time becomes an error entry with ``error_type == "timeout"``.
        retries: extra attempts within this run for a record that raised or timed out (>= 0).
        token_budget: the total tokens of all the records of this run (>= 1), or None; records not started once
            it is spent become resumable ``error_type == "budget"`` entries.
        progress: show a progress bar on stderr.

    Raises:
        ValueError: a field out of range or of the wrong type (a one-line message naming the field).

    Example:
        >>> job = JobOptions(concurrency=2, timeout_s=120)
        >>> (job.concurrency, job.timeout_s, job.retries)
        (2, 120, 0)
    """

    concurrency: int = 4
    timeout_s: float | None = None
    retries: int = 0
    token_budget: int | None = None
    progress: bool = True

    def __post_init__(self) -> None:
        if not _integer(self.concurrency) or self.concurrency < 1:
            raise ValueError(f"concurrency must be an integer >= 1, got {self.concurrency!r}")
        timeout_s = self.timeout_s
        number = isinstance(timeout_s, (int, float)) and not isinstance(timeout_s, bool)
        if timeout_s is not None and not (number and timeout_s > 0):
            raise ValueError(f"timeout_s must be a number > 0 or None (no timeout), got {timeout_s!r}")
        if not _integer(self.retries) or self.retries < 0:
            raise ValueError(f"retries must be an integer >= 0, got {self.retries!r}")
        budget = self.token_budget
        if budget is not None and (not _integer(budget) or budget < 1):
            raise ValueError(f"token_budget must be an integer >= 1 or None (no total), got {budget!r}")
        if not isinstance(self.progress, bool):
            raise ValueError(f"progress must be True or False, got {self.progress!r}")


class JobKwargs(TypedDict, total=False):
    """The fields of `JobOptions` as keyword arguments of the runners (their defaults are `JobOptions`')."""

    concurrency: int
    timeout_s: float | None
    retries: int
    token_budget: int | None
    progress: bool


def chosen_job(job: JobOptions | None, values: JobKwargs) -> JobOptions:
    """The options a runner was given: ``job`` as it is, with the keyword ``values`` over it.

    Args:
        job: a `JobOptions` made ahead (the CLI's), or None for the defaults.
        values: the runner's keyword job options.

    Raises:
        TypeError: ``job`` is not a `JobOptions`.
        ValueError: a value out of range (see `JobOptions`).
    """
    if job is None:
        return JobOptions(**values)
    if not isinstance(job, JobOptions):
        raise TypeError(f"job must be a JobOptions, got {type(job).__name__}")
    return dataclasses.replace(job, **values) if values else job
