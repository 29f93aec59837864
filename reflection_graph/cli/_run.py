"""``reflection-graph run TASK``: one task, each round shown as it happens (or ``--json``)."""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from reflection_graph.cli._common import EXIT_FAILED, _fail, app
from reflection_graph.cli._graph import GraphOptions, _job_graph
from reflection_graph.cli._options import _OneLineErrors, graph_options
from reflection_graph.cli._render import _stream_with_display
from reflection_graph.critics.sandbox import Isolation
from reflection_graph.loop import resolve_tests, validate_input
from reflection_graph.runners import ThreadBusy, ThreadLock


def _resume_input(
    graph: Any, config: dict[str, Any], inputs: dict[str, Any], quiet: bool
) -> dict[str, Any] | None:
    """The input for a run on an explicit checkpoint thread: None resumes an unfinished run.

    Raises:
        typer.Exit: the thread belongs to another task, or its run already finished.
    """
    thread = config["configurable"]["thread_id"]
    snapshot = graph.get_state(config)
    values = snapshot.values or {}
    if not values and not snapshot.next:
        return inputs  # a new thread
    if values.get("task") not in (None, inputs["task"]):
        _fail(f"thread {thread!r} was started with another task; repeat that task or use a new --thread-id")
    if not snapshot.next:
        _fail(
            f"thread {thread!r} already finished (stop reason {values.get('stop_reason')}); "
            "use a new --thread-id (or omit it) to run again"
        )
    if not quiet:
        Console(stderr=True, highlight=False).print(
            f"resuming thread {thread!r} at {', '.join(snapshot.next)} (round {int(values.get('iterations') or 0) + 1})"
        )
    return None


def _local_loader(roles: tuple[Any, ...]) -> Callable[[], None] | None:
    """What loads the role models that read a local file now (`warm_up()`: an embedded GGUF, otherwise loaded by
    its first call, so the live view can say "loading the model" instead of "drafting"), or None when none does."""
    loads = [model.warm_up for model in roles if callable(getattr(model, "warm_up", None))]
    if not loads:
        return None

    def load() -> None:
        for warm_up in loads:
            warm_up()

    return load


def _json_default(value: Any) -> Any:
    if hasattr(value, "model_dump"):
        return value.model_dump()
    return str(value)


_FLAGS = {"'task'": "TASK", "'candidate'": "--candidate", "'context'": "--context"}


def _run_inputs(task: str, candidate: str | None, context: str | None) -> dict[str, Any]:
    """The graph input of ``run``, checked by the graph's own input check before anything is built.

    A byte that is not UTF-8 in an argument reaches Python as a lone surrogate, which no model can be sent:
    it is refused here, naming the argument (TASK, --candidate, --context) and the position.
    """

    if not task.strip():
        _fail('TASK is empty; pass what to produce, e.g. reflection-graph run "Write a haiku about rain"')
    inputs: dict[str, Any] = {"task": task}
    if candidate is not None:
        inputs["candidate"] = candidate
    if context is not None:
        inputs["context"] = context
    try:
        validate_input(inputs)
    except ValueError as exc:
        message = str(exc)
        for name, flag in _FLAGS.items():
            message = message.replace(name, flag)
        _fail(message)
    return inputs


def _code_options(
    options: GraphOptions, task: str, tests: Path | None, entry_point: str | None, isolation: Isolation
) -> None:
    """Apply ``--tests``/``--entry-point``/``--isolation`` to ``options`` (the tests file is read and checked)."""
    if entry_point is not None and tests is None:
        _fail("--entry-point needs --tests FILE")
    if isolation != "auto" and tests is None:
        _fail("--isolation needs --tests FILE")
    options.isolation = isolation
    if tests is not None:
        options.tests = _read_tests(tests, task, entry_point)
        options.settings = options.settings.with_defaults({"focus": "code"})  # unless --focus was given


def _read_tests(path: Path, task: str, entry_point: str | None) -> str:
    """The --tests file's source, checked (a test function, valid syntax, an import of the function)."""

    try:
        source = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        _fail(f"--tests: cannot read {path}: {exc.strerror if isinstance(exc, OSError) else exc}")
    try:
        return resolve_tests(task, source, entry_point)
    except ValueError as exc:
        _fail(f"--tests {path}: {exc}".replace("\\n", " ").replace("'entry_point'", "--entry-point"))


@app.command(cls=_OneLineErrors)
@graph_options
def run(
    task: Annotated[str, typer.Argument(metavar="TASK", help="What to produce.")],
    options: GraphOptions,
    candidate: Annotated[
        str | None, typer.Option(help="An existing output to glean instead of drafting.")
    ] = None,
    context: Annotated[str | None, typer.Option(help="Extra material for every role.")] = None,
    checkpoint: Annotated[
        Path | None, typer.Option(help="SQLite file to checkpoint the run in (see --thread-id).")
    ] = None,
    thread_id: Annotated[
        str | None,
        typer.Option(
            help="Checkpoint thread id (default: a new one, printed at the end). "
            "An unfinished run on this thread is resumed."
        ),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print only the full final result as JSON.")
    ] = False,
    tests: Annotated[
        Path | None,
        typer.Option(
            help="Python file of plain-assert test functions: the candidates' code is run against them "
            "(a CodeTestCritic instead of a critic model; sets --focus code unless another focus is given).",
            rich_help_panel="Code",
        ),
    ] = None,
    entry_point: Annotated[
        str | None,
        typer.Option(
            help="The function the --tests call, imported from `solution` when they do not import it "
            "(default: the function stub in TASK).",
            rich_help_panel="Code",
        ),
    ] = None,
    isolation: Annotated[
        Isolation,
        typer.Option(
            help="Isolate the code run by --tests: auto (where the OS allows it, else warn), required (fail "
            "where it cannot), off.",
            rich_help_panel="Code",
        ),
    ] = "auto",
) -> None:
    """Run the draft -> critique -> revise loop on one TASK and show each round live."""
    inputs = _run_inputs(task, candidate, context)
    _code_options(options, task, tests, entry_point, isolation)
    options.checkpoint = checkpoint
    config: dict[str, Any] = {}
    if checkpoint is not None:
        config["configurable"] = {"thread_id": thread_id or uuid.uuid4().hex}
    elif thread_id is not None:
        _fail("--thread-id needs --checkpoint PATH (there is nothing to resume without a checkpointer)")

    with ExitStack() as stack:
        graph, roles = _job_graph(options, stack, checkpoint=True)
        if checkpoint is not None:  # one run per checkpointed thread: a second one is refused, not run twice
            try:
                stack.enter_context(ThreadLock(checkpoint, config["configurable"]["thread_id"]))
            except ThreadBusy as exc:
                _fail(str(exc))
        run_input: dict[str, Any] | None = inputs
        if graph.checkpointer is not None and thread_id is not None:
            run_input = _resume_input(graph, config, inputs, as_json)
        try:
            if as_json:
                result = graph.invoke(run_input, config)
            else:
                console = Console(highlight=False)
                result = _stream_with_display(graph, run_input, config, console, load=_local_loader(roles))
        except KeyboardInterrupt:
            _fail("interrupted", 130)
        except Exception as exc:  # a model/server failure mid-run: one line, no traceback
            _fail(f"{type(exc).__name__}: {exc}", EXIT_FAILED)
    if as_json:
        sys.stdout.write(json.dumps(result, indent=2, ensure_ascii=False, default=_json_default) + "\n")
    if isinstance(result, dict) and result.get("stop_reason") == "error":
        raise typer.Exit(EXIT_FAILED)
