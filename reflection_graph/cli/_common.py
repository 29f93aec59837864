"""What every command shares: the typer app, exit codes and one-line errors."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, NoReturn

import typer
from rich.console import Console
from rich.markup import escape

from reflection_graph.runners.batch import BatchLocked

EXIT_BAD_INPUT = 2
EXIT_FAILED = 1

app = typer.Typer(
    name="reflection-graph",
    help="Draft -> critique -> revise with LangGraph. Runs offline on an embedded model by default.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


class BadInput(ValueError):
    """A user error in the options: reported as one line, exit code 2."""


@contextmanager
def _job_errors() -> Iterator[None]:
    """How `batch` and `eval` end on an error: one line; a locked output is bad input; a rerun resumes."""

    try:
        yield
    except KeyboardInterrupt:
        _fail("interrupted; rerun the same command to resume", 130)
    except BatchLocked as exc:
        _fail(str(exc))
    except (OSError, ValueError) as exc:
        _fail(str(exc), EXIT_FAILED)


def _check_job_limits(concurrency: int, timeout: float | None, retries: int) -> None:
    """The limits `batch` and `eval` share, checked before any record runs."""
    if concurrency < 1:
        _fail(f"--concurrency must be >= 1, got {concurrency}")
    if timeout is not None and timeout <= 0:
        _fail(f"--timeout must be > 0 seconds, got {timeout:g}")
    if retries < 0:
        _fail(f"--retries must be >= 0, got {retries}")


# The job options `batch` and `eval` share, declared once (checked by `_check_job_limits`).
Concurrency = Annotated[int, typer.Option("--concurrency", "-c", help="Records run at once (>= 1).")]
RecordTimeout = Annotated[float | None, typer.Option(help="Seconds per record attempt (default: none).")]
RecordRetries = Annotated[int, typer.Option(help="Extra attempts in this run for a failing record.")]


def _fail(message: str, code: int = EXIT_BAD_INPUT) -> NoReturn:
    first_line = " ".join(str(message).split()) or "unknown error"
    Console(stderr=True, highlight=False, soft_wrap=True).print(f"error: {escape(first_line)}")
    raise typer.Exit(code)


def _printable(text: str) -> str:
    """`text` with lone surrogates (valid in JSON, not in UTF-8) escaped, so a terminal can show it."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


TOTAL_BUDGET_HELP = (
    "Tokens of all records of this run together; records not started once they are spent are written as "
    "resumable 'budget' entries (rerun with more to finish them)."
)
