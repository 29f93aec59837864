"""What every command shares: the typer app, exit codes and one-line errors."""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape

from reflection_graph.runners import JobOptions
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


# The flags of the job options `batch` and `eval` share, by `JobOptions` field: (declarations, help). Their types
# and defaults are the fields'; `job_options` makes the one `JobOptions` the command gets.
_JOB_FLAGS: dict[str, tuple[tuple[str, ...], str]] = {
    "concurrency": (("--concurrency", "-c"), "Records run at once (>= 1)."),
    "timeout_s": (("--timeout",), "Seconds per record attempt (default: none)."),
    "retries": (("--retries",), "Extra attempts in this run for a failing record."),
    "token_budget": (
        ("--token-budget-total",),
        "Tokens of all records of this run together; records not started once they are spent are written as "
        "resumable 'budget' entries (rerun with more to finish them).",
    ),
    "progress": (("--progress/--no-progress",), "Show progress on stderr."),
}


def _job_parameters() -> list[inspect.Parameter]:
    hints = typing.get_type_hints(JobOptions)
    fields = JobOptions.__dataclass_fields__
    return [
        inspect.Parameter(
            name,
            inspect.Parameter.KEYWORD_ONLY,
            default=fields[name].default,
            annotation=Annotated[hints[name], typer.Option(*decls, help=text)],  # type: ignore[valid-type]
        )
        for name, (decls, text) in _JOB_FLAGS.items()
    ]


def from_flags(
    command: Callable[..., Any],
    name: str,
    flags: list[inspect.Parameter],
    make: Callable[[dict[str, Any]], Any],
) -> Callable[..., Any]:
    """``command`` as typer sees it: its parameter ``name`` replaced by the options ``flags``, whose values become
    that one argument.

    Args:
        command: the command function; its other parameters are kept as they are.
        name: the parameter typer does not fill itself.
        flags: the parameters typer fills instead (each with its ``typer.Option``).
        make: called with the keyword arguments typer passes; it pops the values of ``flags`` and returns the
            value of ``name``.

    Returns:
        The command to register with typer.
    """
    signature = inspect.signature(command)
    hints = typing.get_type_hints(command, include_extras=True)
    own = [p.replace(annotation=hints[p.name]) for p in signature.parameters.values() if p.name != name]

    @functools.wraps(command)
    def wrapper(**kwargs: Any) -> Any:
        value = make(kwargs)
        return command(**{name: value}, **kwargs)

    wrapper.__signature__ = signature.replace(parameters=own + flags)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {
        **{k: v for k, v in hints.items() if k != name},
        **{p.name: p.annotation for p in flags},
    }
    return wrapper


def job_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Give a command the job flags (--concurrency, --timeout, --retries, --token-budget-total, --progress),
    passed to it as one ``job: JobOptions``.

    The flags' types and defaults are the fields of `JobOptions`, which checks the values once, before the command
    runs; a bad one exits in one line naming its flag (exit code 2).

    Args:
        command: a command function with a ``job: JobOptions`` parameter.

    Returns:
        The command to register with typer (under `graph_options` when it takes both).
    """

    def make(kwargs: dict[str, Any]) -> JobOptions:
        try:
            return JobOptions(**{name: kwargs.pop(name) for name in _JOB_FLAGS})
        except ValueError as exc:
            field, _, rule = str(exc).partition(" ")  # "concurrency must be ...": the field, then the rule
            _fail(f"{_JOB_FLAGS[field][0][0].split('/')[0]} {rule}")

    return from_flags(command, "job", _job_parameters(), make)


def _fail(message: str, code: int = EXIT_BAD_INPUT) -> NoReturn:
    first_line = " ".join(str(message).split()) or "unknown error"
    Console(stderr=True, highlight=False, soft_wrap=True).print(f"error: {escape(first_line)}")
    raise typer.Exit(code)


def _printable(text: str) -> str:
    """`text` with lone surrogates (valid in JSON, not in UTF-8) escaped, so a terminal can show it."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")
