"""The ``reflection-graph`` command line: ``run`` one task live, or ``batch`` glean a JSONL file.

``reflection-graph run "TASK"`` builds the graph with `create_reflection_graph` and streams it, printing every
round as it happens (the draft, then the critique: score, verdict, issues, feedback) and, at the end, the stop
reason, the chosen answer and the token/time usage per role. ``--json`` prints only the full final result as
JSON. ``reflection-graph batch IN.jsonl OUT.jsonl`` runs `reflection_graph.runners.batch.run_batch` with a progress bar
and prints its summary; it is resumable (see `reflection_graph.runners.batch`). ``--shard I/N`` runs one shard of the
input and ``reflection-graph merge OUT_0 ... OUT --input IN`` merges the shards' outputs; ``--server URL`` runs
every record on a LangGraph server instead of in this process. ``reflection-graph eval DATA.jsonl --out DIR``
scores every round of the loop against ground truth and reports the gain per round (see `reflection_graph.runners.eval`).

With no ``--model`` everything runs offline on the embedded model (Gemma 3 270M through llama.cpp). Bad options
(an unknown model spec, a missing GGUF file, a threshold outside 0-10, ...) exit with code 2 and one line
``error: ...`` on stderr, never a traceback.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import json
import re
import sqlite3
import sys
import typing
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console, Group
from rich.markup import escape
from rich.panel import Panel
from rich.rule import Rule
from rich.table import Table
from rich.text import Text
from typer.core import TyperCommand

from reflection_graph.critics.sandbox import Isolation, IsolationUnavailableError
from reflection_graph.settings import Settings, default, setting_fields

__all__ = ["GraphOptions", "app", "build_graph", "main"]

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


@dataclass
class GraphOptions:
    """Everything the CLI needs to build a reflection graph.

    Attributes:
        model: model spec for every role (``embedded``, ``local:/path.gguf``, ``provider:model``); None means
            the embedded model.
        generator: model spec for drafting, overriding ``model``.
        critic: model spec for critiquing, overriding ``model``.
        reviser: model spec for revising, overriding ``model``.
        base_url: OpenAI-compatible server URL for string model names.
        max_tokens: most tokens per model reply, or None for the model's default.
        seed: sampling seed, or None.
        checkpoint: SQLite file for a checkpointer, or None.
        memory: SQLite file for the Reflexion memory store, or None.
        tests: test source (checked, importing from `solution`) that judges the candidates through a
            `CodeTestCritic` instead of a critic model, or None.
        isolation: how that critic isolates the generated code (`auto`, `required`, `off`).
        settings: the loop's settings (`reflection_graph.Settings`), one CLI option per field.
    """

    model: str | None = None
    generator: str | None = None
    critic: str | None = None
    reviser: str | None = None
    base_url: str | None = None
    max_tokens: int | None = None
    seed: int | None = None
    checkpoint: Path | None = None
    memory: Path | None = None
    tests: str | None = None
    isolation: Isolation = "auto"
    settings: Settings = field(default_factory=Settings)

    def validate(self) -> None:
        """Check the options that need no model, naming the flag to fix.

        Raises:
            BadInput: an option is out of range.
        """
        if self.max_tokens is not None and self.max_tokens < 1:
            raise BadInput(f"--max-tokens must be >= 1, got {self.max_tokens}")
        for flag, spec in (
            ("--model", self.model),
            ("--generator", self.generator),
            ("--critic", self.critic),
            ("--reviser", self.reviser),
        ):
            if spec is not None and not spec.strip():
                raise BadInput(
                    f"{flag} is empty; give a model spec such as 'embedded' or 'openai:gpt-4o-mini'"
                )
        for flag, path in (("--checkpoint", self.checkpoint), ("--memory", self.memory)):
            if path is not None and path.parent and not path.parent.exists():
                raise BadInput(f"{flag}: directory {path.parent} does not exist")


def _resolve_model(spec: str | None, options: GraphOptions, role: str) -> Any:
    """Turn a model spec into a chat model for one role (the seam tests replace with a fake)."""
    from reflection_graph.models import resolve_model

    return resolve_model(spec, role=role, base_url=options.base_url)  # type: ignore[arg-type]


def _apply_sampling(model: Any, options: GraphOptions) -> Any:
    """Set ``--max-tokens``/``--seed`` on a resolved model, or fail naming the option it does not support."""
    update = {k: v for k, v in (("max_tokens", options.max_tokens), ("seed", options.seed)) if v is not None}
    if not update:
        return model
    fields = getattr(type(model), "model_fields", {})
    for name in update:
        if name not in fields:
            flag = "--max-tokens" if name == "max_tokens" else "--seed"
            raise BadInput(
                f"{flag} is not supported by {type(model).__name__}; drop the option for this model"
            )
    return model.model_copy(update=update)


def _role_models(options: GraphOptions) -> tuple[Any, Any | None, Any | None]:
    """(generator, critic, reviser); None means "derived from the generator" (the critic at temperature 0)."""
    generator = _apply_sampling(
        _resolve_model(options.generator or options.model, options, "generator"), options
    )
    critic = reviser = None
    if options.critic:
        critic = _apply_sampling(_resolve_model(options.critic, options, "critic"), options)
    if options.reviser:
        reviser = _apply_sampling(_resolve_model(options.reviser, options, "reviser"), options)
    return generator, critic, reviser


def build_graph(
    options: GraphOptions, *, checkpointer: Any = None, store: Any = None, memory: Any = None
) -> Any:
    """Build the compiled reflection graph the CLI runs.

    Args:
        options: the parsed CLI options (validated here).
        checkpointer: a LangGraph checkpointer, or None.
        store: a LangGraph store, or None.
        memory: a `ReflexionMemory`, or None.

    Returns:
        The `CompiledStateGraph` from `create_reflection_graph`.

    Raises:
        BadInput: an option is out of range.
        ValueError: the model spec or another factory argument is invalid (message says what to change).
    """
    from reflection_graph.graph import create_reflection_graph

    options.validate()
    generator, critic, reviser = _role_models(options)
    if options.tests is not None:
        from reflection_graph.critics.tool import CodeTestCritic

        if critic is not None:
            raise BadInput("--tests and --critic cannot be combined: the tests are the critic")
        critic = CodeTestCritic(options.tests, isolation=options.isolation)
    return create_reflection_graph(
        generator,
        critic=critic,
        reviser=reviser,
        base_url=options.base_url,
        memory=memory,
        checkpointer=checkpointer,
        store=store,
        **options.settings.as_kwargs(),
    )


def _open_persistence(options: GraphOptions, stack: ExitStack) -> tuple[Any, Any, Any]:
    """Open the SQLite checkpointer and memory store the options ask for; ``stack`` closes them.

    Returns:
        ``(checkpointer, store, memory)``, each None when not asked for.

    Raises:
        BadInput: an option is invalid or a SQLite file cannot be opened.
    """
    options.validate()
    checkpointer = store = memory = None
    if options.checkpoint is not None:
        from langgraph.checkpoint.sqlite import SqliteSaver

        try:
            conn = sqlite3.connect(str(options.checkpoint), check_same_thread=False)
            stack.callback(conn.close)
            checkpointer = SqliteSaver(conn)
            checkpointer.setup()
        except sqlite3.Error as exc:
            raise BadInput(
                f"--checkpoint: cannot use {options.checkpoint} as a SQLite database: {exc}"
            ) from None
    if options.memory is not None:
        from langgraph.store.sqlite import SqliteStore

        from reflection_graph.memory import ReflexionMemory

        try:
            conn = sqlite3.connect(str(options.memory), check_same_thread=False, isolation_level=None)
            stack.callback(conn.close)
            store = SqliteStore(conn)
            store.setup()
        except sqlite3.Error as exc:
            raise BadInput(f"--memory: cannot use {options.memory} as a SQLite database: {exc}") from None
        memory = ReflexionMemory(store)
    return checkpointer, store, memory


def _job_graph(options: GraphOptions, stack: ExitStack, *, checkpoint: bool = False) -> Any:
    """The compiled graph of a command, with its SQLite persistence opened on `stack`; bad options exit in one line."""
    try:
        checkpointer, store, reflexion = _open_persistence(options, stack)
        return build_graph(
            options, checkpointer=checkpointer if checkpoint else None, store=store, memory=reflexion
        )
    except (ValueError, TypeError, ImportError, OSError, IsolationUnavailableError) as exc:
        _fail(str(exc))


@contextmanager
def _job_errors() -> Iterator[None]:
    """How `batch` and `eval` end on an error: one line; a locked output is bad input; a rerun resumes."""
    from reflection_graph.runners.batch import BatchLocked

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


def _fail(message: str, code: int = EXIT_BAD_INPUT) -> NoReturn:
    first_line = " ".join(str(message).split()) or "unknown error"
    Console(stderr=True, highlight=False, soft_wrap=True).print(f"error: {escape(first_line)}")
    raise typer.Exit(code)


# ----------------------------------------------------------------------------------------------- rendering


def _score_style(score: Any) -> str:
    if not isinstance(score, (int, float)):
        return "dim"
    return "green" if score >= 7 else "yellow" if score >= 4 else "red"


def _bullets(items: Any) -> Text:
    return Text("\n".join(f"  • {item}" for item in items or []))


def _critique_panel(critique: dict[str, Any] | None, title: str) -> Panel:
    if not critique:
        return Panel(Text("no critique", style="dim"), title=title, border_style="dim")
    score = critique.get("score")
    head = Text()
    head.append("score ", style="bold")
    head.append(f"{score:g}/10" if isinstance(score, (int, float)) else "-", style=_score_style(score))
    head.append("   verdict ", style="bold")
    accepted = bool(critique.get("is_acceptable"))
    head.append("acceptable" if accepted else "needs work", style="green" if accepted else "yellow")
    if critique.get("severity"):
        head.append("   severity ", style="bold")
        head.append(str(critique["severity"]))
    if critique.get("parsed") is False:
        head.append("   (unparsed reply)", style="red")
    parts: list[Any] = [head]
    if critique.get("issues"):
        parts += [Text("issues", style="bold"), _bullets(critique["issues"])]
    if critique.get("suggestions"):
        parts += [Text("suggestions", style="bold"), _bullets(critique["suggestions"])]
    if critique.get("feedback"):
        parts += [Text("feedback", style="bold"), Text(str(critique["feedback"]))]
    return Panel(Group(*parts), title=title, border_style=_score_style(score), title_align="left")


def _usage_table(usage: dict[str, Any] | None) -> Table:
    table = Table(title="usage", title_justify="left", show_edge=False)
    for column in ("role", "calls", "input tokens", "output tokens", "total tokens", "seconds"):
        table.add_column(column, justify="left" if column == "role" else "right")
    for role in ("generate", "critique", "revise", "total"):
        row = (usage or {}).get(role)
        if not row:
            continue
        table.add_row(
            role,
            str(row.get("calls", 0)),
            str(row.get("input_tokens", 0)),
            str(row.get("output_tokens", 0)),
            str(row.get("total_tokens", 0)),
            f"{float(row.get('seconds', 0.0)):.2f}",
            style="bold" if role == "total" else None,
        )
    return table


class _LiveRenderer:
    """Prints rounds from the graph's ``updates``/``tasks`` stream as they happen."""

    _ACTIVITY = {"generate": "drafting", "critique": "critiquing", "finalize": "choosing the answer"}

    def __init__(self, console: Console) -> None:
        self.console = console
        self.round = 0
        self.shown_draft: str | None = None

    def status_for(self, node: str) -> str:
        activity = self._ACTIVITY.get(node, f"running {node}")
        if node == "generate" and self.round >= 1:
            activity = "revising"
        return f"[bold]{activity}[/] (round {self.round + 1 if node == 'generate' else max(self.round, 1)})…"

    def _draft(self, candidate: str, iteration: int, title: str | None = None) -> None:
        title = title or ("draft" if iteration <= 1 else "revision")
        self.console.print(Rule(f"round {iteration}", style="cyan"))
        self.console.print(
            Panel(Text(candidate or "(empty)"), title=title, title_align="left", border_style="cyan")
        )
        self.shown_draft = candidate

    def update(self, node: str, update: Any) -> None:
        if not isinstance(update, dict):
            return
        if node == "generate":  # the round's candidates (`rg_pending`): drafted, revised or given
            pending = update.get("rg_pending")
            samples = pending.get("samples") if isinstance(pending, dict) else None
            if pending and samples and isinstance(samples[0].get("candidate"), str):
                title = "given candidate" if pending.get("job") == "glean" else None
                self._draft(samples[0]["candidate"], self.round + 1, title=title)
        elif node == "critique":
            for step in update.get("trajectory") or []:
                if not isinstance(step, dict):
                    continue
                self.round = int(step.get("iteration") or self.round + 1)
                candidate = step.get("candidate")
                if isinstance(candidate, str) and candidate != self.shown_draft:
                    self._draft(candidate, self.round)
                self.console.print(_critique_panel(step.get("critique"), f"critique (round {self.round})"))
                self.shown_draft = None

    def final(self, result: dict[str, Any], thread_id: str | None) -> None:
        console = self.console
        console.print(Rule("result", style="bold"))
        stop = result.get("stop_reason")
        line = Text()
        line.append("stop reason ", style="bold")
        line.append(
            str(stop), style="red" if stop == "error" else "green" if stop == "accepted" else "yellow"
        )
        line.append(f"   rounds {result.get('iterations', 0)}")
        critique = result.get("critique") or {}
        if isinstance(critique, dict) and isinstance(critique.get("score"), (int, float)):
            line.append("   final score ")
            line.append(f"{critique['score']:g}/10", style=_score_style(critique["score"]))
        if thread_id:
            line.append(f"   thread {thread_id}", style="dim")
        console.print(line)
        if result.get("error"):
            console.print(Text(f"error: {result['error']}", style="red"))
        console.print(
            Panel(
                Text(str(result.get("candidate") or "(empty)")),
                title="answer",
                title_align="left",
                border_style="green",
            )
        )
        console.print(_usage_table(result.get("usage")))


def _stream_with_display(
    graph: Any, inputs: dict[str, Any] | None, config: dict[str, Any], console: Console
) -> dict[str, Any]:
    renderer = _LiveRenderer(console)
    result: dict[str, Any] = {}
    # a slow refresh: on 2 cores a 12.5 Hz spinner thread measurably slows the embedded model's threads
    with console.status("[bold]starting[/]…", spinner="dots", refresh_per_second=2) as status:
        for mode, chunk in graph.stream(inputs, config, stream_mode=["updates", "values", "tasks"]):
            if mode == "tasks" and isinstance(chunk, dict) and "result" not in chunk and chunk.get("name"):
                status.update(renderer.status_for(str(chunk["name"])))
            elif mode == "updates" and isinstance(chunk, dict):
                for node, update in chunk.items():
                    renderer.update(node, update)
            elif mode == "values" and isinstance(chunk, dict):
                result = chunk
    renderer.final(result, config.get("configurable", {}).get("thread_id"))
    return result


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


def _json_default(value: Any) -> Any:
    if hasattr(value, "model_dump"):
        return value.model_dump()
    return str(value)


# -------------------------------------------------------------------------------------------------- options

_MODEL_OPTIONS: dict[str, tuple[Any, Any, str]] = {
    # name: (type, default, help) of the options every graph-building command takes besides the settings
    "model": (str | None, None, "Model for every role: embedded, local:/path.gguf or provider:model."),
    "generator": (str | None, None, "Model that drafts (overrides --model)."),
    "critic": (str | None, None, "Model that critiques (overrides --model)."),
    "reviser": (str | None, None, "Model that revises (overrides --model)."),
    "base_url": (str | None, None, "OpenAI-compatible server URL for string model names."),
    "max_tokens": (int | None, None, "Most tokens per model reply."),
    "seed": (int | None, None, "Sampling seed (where the model supports one)."),
    "memory": (Path | None, None, "SQLite file for Reflexion memory: lessons from past critiques."),
}


_PREFIX = (
    "setting_"  # the settings' parameter names, apart from a command's own (batch has its own --retries)
)


def _setting_parameters() -> list[inspect.Parameter]:
    """One typer option per CLI setting of `Settings`: its flag, default, description, min/max and choices."""
    hints = typing.get_type_hints(Settings)
    params = []
    for f in setting_fields(cli=True):
        flag = f.metadata["flag"] or "--" + f.name.replace("_", "-")
        decls = [f"{flag}/--no-{flag[2:]}"] if hints[f.name] is bool else [flag]
        if f.metadata["short"]:
            decls.append(f.metadata["short"])
        bounds = {k: f.metadata[k] for k in ("min", "max") if f.metadata[k] is not None}
        option = typer.Option(
            *decls, help=f.metadata["description"], rich_help_panel="Loop settings", **bounds
        )
        annotation = Annotated[hints[f.name], option]  # type: ignore[valid-type,name-defined]
        params.append(
            inspect.Parameter(
                _PREFIX + f.name,
                inspect.Parameter.KEYWORD_ONLY,
                default=default(f.name),
                annotation=annotation,
            )
        )
    return params


def _model_parameters() -> list[inspect.Parameter]:
    return [
        inspect.Parameter(
            name,
            inspect.Parameter.KEYWORD_ONLY,
            default=value,
            annotation=Annotated[kind, typer.Option(help=text, rich_help_panel="Models")],  # type: ignore[valid-type]
        )
        for name, (kind, value, text) in _MODEL_OPTIONS.items()
    ]


def graph_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Give a command the model options and one option per setting, passed to it as `options: GraphOptions`.

    The settings' flags, defaults, bounds and help all come from `reflection_graph.Settings`; a value typer's own
    min/max/choices let through but `Settings` rejects (e.g. --min-iterations above --max-iterations) is reported
    as a one-line error naming the flag.
    """
    signature = inspect.signature(command)
    hints = typing.get_type_hints(command, include_extras=True)
    own = [p.replace(annotation=hints[p.name]) for p in signature.parameters.values() if p.name != "options"]
    extra = _model_parameters() + _setting_parameters()
    names = {f.name for f in setting_fields(cli=True)}

    @functools.wraps(command)
    def wrapper(**kwargs: Any) -> Any:
        values = {name: kwargs.pop(_PREFIX + name) for name in names}
        models = {name: kwargs.pop(name) for name in _MODEL_OPTIONS}
        try:
            settings = Settings(**values)
        except ValueError as exc:
            _fail(_flagged(str(exc)))
        return command(options=GraphOptions(**models, settings=settings), **kwargs)

    wrapper.__signature__ = signature.replace(parameters=own + extra)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {
        **{k: v for k, v in hints.items() if k != "options"},
        **{p.name: p.annotation for p in extra},
    }
    return wrapper


def _flagged(message: str) -> str:
    """A `Settings` error message with each setting's name replaced by its CLI flag."""
    for f in setting_fields(cli=True):
        flag = f.metadata["flag"] or "--" + f.name.replace("_", "-")
        message = re.sub(rf"\b{f.name}\b", flag, message)
    return message


_UsageError: type[Exception] = typer.BadParameter.__mro__[1]  # typer's vendored click UsageError


class _OneLineErrors(TyperCommand):
    """Bad option values exit with code 2 and one line `error: ...` on stderr (typer's panel is many lines)."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except typer.BadParameter as exc:
            flag = exc.param.opts[0] if exc.param is not None and exc.param.opts else (exc.param_hint or "")
            message = exc.message.removeprefix("Value error, ").rstrip(".")
            for said, short in (
                ("Input should be less than or equal to", "must be <="),
                ("Input should be greater than or equal to", "must be >="),
            ):
                message = message.replace(said, short)
            _fail(f"{flag}: {message}" if message.startswith("'") else f"{flag} {message}")
        except _UsageError as exc:
            _fail(str(getattr(exc, "message", exc)))


# ------------------------------------------------------------------------------------------------- commands


def _read_tests(path: Path, task: str, entry_point: str | None) -> str:
    """The --tests file's source, checked (a test function, valid syntax, an import of the function)."""
    from reflection_graph._code import resolve_tests

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
    if not task.strip():
        _fail('TASK is empty; pass what to produce, e.g. reflection-graph run "Write a haiku about rain"')
    if entry_point is not None and tests is None:
        _fail("--entry-point needs --tests FILE")
    if isolation != "auto" and tests is None:
        _fail("--isolation needs --tests FILE")
    options.isolation = isolation
    if tests is not None:
        options.tests = _read_tests(tests, task, entry_point)
        if options.settings.focus == default("focus"):
            options.settings = dataclasses.replace(options.settings, focus="code")
    options.checkpoint = checkpoint
    inputs: dict[str, Any] = {"task": task}
    if candidate is not None:
        inputs["candidate"] = candidate
    if context is not None:
        inputs["context"] = context
    config: dict[str, Any] = {}
    if checkpoint is not None:
        config["configurable"] = {"thread_id": thread_id or uuid.uuid4().hex}
    elif thread_id is not None:
        _fail("--thread-id needs --checkpoint PATH (there is nothing to resume without a checkpointer)")

    with ExitStack() as stack:
        graph = _job_graph(options, stack, checkpoint=True)
        run_input: dict[str, Any] | None = inputs
        if graph.checkpointer is not None and thread_id is not None:
            run_input = _resume_input(graph, config, inputs, as_json)
        try:
            if as_json:
                result = graph.invoke(run_input, config)
            else:
                result = _stream_with_display(graph, run_input, config, Console(highlight=False))
        except KeyboardInterrupt:
            _fail("interrupted", 130)
        except Exception as exc:  # a model/server failure mid-run: one line, no traceback
            _fail(f"{type(exc).__name__}: {exc}", EXIT_FAILED)
    if as_json:
        sys.stdout.write(json.dumps(result, indent=2, ensure_ascii=False, default=_json_default) + "\n")
    if isinstance(result, dict) and result.get("stop_reason") == "error":
        raise typer.Exit(EXIT_FAILED)


_TOTAL_HELP = (
    "Tokens of all records of this run together; records not started once they are spent are written as "
    "resumable 'budget' entries (rerun with more to finish them)."
)


@app.command(cls=_OneLineErrors)
@graph_options
def batch(
    ctx: typer.Context,
    in_path: Annotated[Path, typer.Argument(metavar="IN.jsonl", help="Records with a `task` (JSON Lines).")],
    out_path: Annotated[Path, typer.Argument(metavar="OUT.jsonl", help="Results; rerun to resume.")],
    options: GraphOptions,
    concurrency: Annotated[int, typer.Option("--concurrency", "-c", help="Records run at once (>= 1).")] = 4,
    timeout: Annotated[float | None, typer.Option(help="Seconds per record attempt (default: none).")] = None,
    retries: Annotated[int, typer.Option(help="Extra attempts in this run for a failing record.")] = 0,
    progress: Annotated[bool, typer.Option("--progress/--no-progress", help="Show a progress bar.")] = True,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
    token_budget_total: Annotated[int | None, typer.Option(min=1, help=_TOTAL_HELP)] = None,
    shard: Annotated[
        str | None,
        typer.Option(
            metavar="I/N",
            help="Run only shard I of N (0-based; a stable hash of the record id picks it). "
            "Give each shard its own OUT, then `reflection-graph merge`.",
        ),
    ] = None,
    server: Annotated[
        str | None,
        typer.Option(
            metavar="URL",
            help="Run each record on this LangGraph server (langgraph dev, LangGraph Platform, an Agent Server) "
            "instead of in this process; loop settings given here become each run's context.",
            rich_help_panel="Server",
        ),
    ] = None,
    graph_name: Annotated[
        str,
        typer.Option(
            "--graph",
            help="The graph to run on --server (a name in its langgraph.json).",
            rich_help_panel="Server",
        ),
    ] = "reflection",
) -> None:
    """Glean every record of IN.jsonl into OUT.jsonl; records already done are skipped, failed ones retried."""
    from reflection_graph.runners.batch import parse_shard, run_batch

    if not in_path.is_file():
        _fail(f"input file not found: {in_path}")
    _check_job_limits(concurrency, timeout, retries)
    if in_path.resolve() == out_path.resolve():
        _fail("OUT.jsonl must be a different file from IN.jsonl")
    shard_pair = None
    if shard is not None:
        try:
            shard_pair = parse_shard(shard)
        except ValueError as exc:
            _fail(f"--{exc}")
    if server is not None:
        summary = _server_batch(
            ctx, options, server, graph_name, in_path, out_path,
            concurrency=concurrency, timeout=timeout, retries=retries, progress=progress, shard=shard_pair,
            token_budget=token_budget_total,
        )  # fmt: skip
        _report_batch(summary, as_json)
        return
    with ExitStack() as stack:
        graph = _job_graph(options, stack)
        with _job_errors():
            summary = run_batch(
                graph,
                in_path,
                out_path,
                concurrency=concurrency,
                timeout_s=timeout,
                retries=retries,
                progress=progress,
                shard=shard_pair,
                token_budget=token_budget_total,
            )
    _report_batch(summary, as_json)


def _report_batch(summary: Any, as_json: bool) -> None:
    if as_json:
        sys.stdout.write(json.dumps(summary.to_dict(), indent=2) + "\n")
    else:
        _print_summary(summary, Console(highlight=False))
    if summary.error:
        raise typer.Exit(EXIT_FAILED)


_CONTEXT_MODELS = {"model": "generator_model", "generator": "generator_model", "critic": "critic_model"}
_CONTEXT_MODELS.update(reviser="reviser_model", base_url="base_url")


def _server_context(ctx: typer.Context, options: GraphOptions) -> dict[str, Any]:
    """The run context for `batch --server`: the model and loop options given on the command line.

    Raises:
        BadInput: an option the server's graph cannot take per run (it was built with it).
    """
    from reflection_graph.context import Context

    def given(name: str) -> bool:
        source = ctx.get_parameter_source(name)
        return source is not None and source.name in ("COMMANDLINE", "ENVIRONMENT")

    per_run = set(Context.__dataclass_fields__)
    context: dict[str, Any] = {}
    for name in _MODEL_OPTIONS:
        if not given(name):
            continue
        if name not in _CONTEXT_MODELS:
            flag = "--" + name.replace("_", "-")
            raise BadInput(
                f"{flag} is not available with --server (the server's graph is built with its own)"
            )
        context[_CONTEXT_MODELS[name]] = getattr(options, name)
    for f in setting_fields(cli=True):
        if not given(_PREFIX + f.name):
            continue
        flag = f.metadata["flag"] or "--" + f.name.replace("_", "-")
        if f.name not in per_run:
            raise BadInput(f"{flag} cannot be set per run on a server (the server's graph is built with it)")
        context[f.name] = getattr(options.settings, f.name)
    return context


def _server_batch(
    ctx: typer.Context,
    options: GraphOptions,
    server: str,
    graph_name: str,
    in_path: Path,
    out_path: Path,
    **kwargs: Any,
) -> Any:
    """`batch --server`: every record runs on the LangGraph server (see `reflection_graph.runners._server`)."""
    import asyncio

    from reflection_graph.runners.batch import BatchLocked, ServerError, ServerGraph, arun_batch

    try:
        context = _server_context(ctx, options)
    except BadInput as exc:
        _fail(str(exc))
    if not server.startswith(("http://", "https://")):
        _fail(f"--server must be an http:// or https:// URL, got {server!r}")

    async def main() -> Any:
        graph = ServerGraph(server, graph_name, context=context)
        await graph.connect()  # before anything is read or written: a bad URL or graph name fails at once
        return await arun_batch(
            graph,
            in_path,
            out_path,
            concurrency=kwargs["concurrency"],
            timeout_s=kwargs["timeout"],
            retries=kwargs["retries"],
            progress=kwargs["progress"],
            shard=kwargs["shard"],
            token_budget=kwargs["token_budget"],
        )

    try:
        return asyncio.run(main())
    except KeyboardInterrupt:
        _fail(
            "interrupted; rerun the same command to resume (runs still going on the server are picked up)",
            130,
        )
    except (ServerError, BatchLocked) as exc:
        _fail(str(exc))
    except (OSError, ValueError) as exc:
        _fail(str(exc), EXIT_FAILED)


@app.command(cls=_OneLineErrors)
def merge(
    outputs: Annotated[
        list[Path],
        typer.Argument(
            metavar="OUT_0.jsonl ... OUT.jsonl", help="The shard outputs, then the merged output."
        ),
    ],
    input_path: Annotated[
        Path,
        typer.Option("--input", "-i", metavar="IN.jsonl", help="The input every shard ran on (required)."),
    ],
    shards: Annotated[
        int | None, typer.Option(min=1, help="The shard count N, if no shard output has entries to tell it.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
) -> None:
    """Merge the outputs of `batch --shard I/N` runs into OUT.jsonl; fail if a record or shard is missing or doubled."""
    from reflection_graph.runners.batch import BatchLocked, MergeError, merge_outputs

    if len(outputs) < 2:
        _fail("give at least one shard output and the merged output: merge OUT_0 ... OUT --input IN")
    *parts, out_path = outputs
    try:
        summary = merge_outputs(parts, input_path, out_path, shards=shards)
    except (MergeError, BatchLocked, FileNotFoundError) as exc:
        _fail(str(exc))
    if as_json:
        sys.stdout.write(json.dumps(summary.to_dict(), indent=2) + "\n")
    else:
        _print_summary(summary, Console(highlight=False))
    if summary.error:
        raise typer.Exit(EXIT_FAILED)


def _printable(text: str) -> str:
    """`text` with lone surrogates (valid in JSON, not in UTF-8) escaped, so a terminal can show it."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


@app.command("eval", cls=_OneLineErrors)
@graph_options
def eval_command(
    data: Annotated[
        Path, typer.Argument(metavar="DATA.jsonl", help="Records with a `task` and ground truth.")
    ],
    options: GraphOptions,
    out: Annotated[
        Path, typer.Option("--out", "-o", help="Directory for the report files; rerun to resume.")
    ],
    scorer: Annotated[
        str,
        typer.Option(
            help="Ground truth: exact, contains, regex, json-schema, tests, judge:<model> or module:function."
        ),
    ] = "contains",
    pass_mark: Annotated[
        float | None, typer.Option(help="A score at or above it passes (default: per scorer).", min=0, max=1)
    ] = None,
    field: Annotated[
        list[str] | None,
        typer.Option(
            "--field",
            help="KEY=FIELD: take a record key from another field (repeatable), e.g. --field task=prompt.",
        ),
    ] = None,
    concurrency: Annotated[int, typer.Option("--concurrency", "-c", help="Records run at once (>= 1).")] = 4,
    timeout: Annotated[float | None, typer.Option(help="Seconds per record attempt (default: none).")] = None,
    retries: Annotated[int, typer.Option(help="Extra attempts in this run for a failing record.")] = 0,
    progress: Annotated[bool, typer.Option("--progress/--no-progress", help="Show progress bars.")] = True,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    budget: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="Cap the per-round figures at this many tokens per record (as a --token-budget run would stop), "
            "and count the records it stops.",
        ),
    ] = None,
    token_budget_total: Annotated[int | None, typer.Option(min=1, help=_TOTAL_HELP)] = None,
) -> None:
    """Score every round of the loop on DATA.jsonl against ground truth: does reflection pay off?

    Writes rounds.jsonl, summary.csv, gain.png and report.html to --out, prints the per-round table and a
    recommendation for --max-iterations.
    """
    from reflection_graph.runners.eval import PLOT_INSTALL, _check_fields, evaluate
    from reflection_graph.runners.scorers import make_scorer

    if not data.is_file():
        _fail(f"data file not found: {data}")
    _check_job_limits(concurrency, timeout, retries)
    if out.exists() and not out.is_dir():
        _fail(f"--out {out} is a file; give a directory")
    fields: dict[str, str] = {}
    for item in field or []:
        key, eq, source = item.partition("=")
        if not eq or not key.strip() or not source.strip():
            _fail(f"--field expects KEY=FIELD (e.g. task=prompt), got {item!r}")
        fields[key.strip()] = source.strip()
    try:
        _check_fields(fields)
    except ValueError as exc:
        _fail(f"--field: {exc}")
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        _fail(f"the eval plot (gain.png) needs matplotlib: {PLOT_INSTALL}")
    for folder in (
        str(data.resolve().parent),
        str(Path.cwd()),
    ):  # `module:function` scorers: here or by the data
        if folder not in sys.path:
            sys.path.insert(0, folder)
    try:
        built = make_scorer(scorer, pass_mark=pass_mark)
    except (ValueError, TypeError, ImportError) as exc:
        _fail(f"--scorer: {exc}")
    _same_runs(out, options, fields)
    with ExitStack() as stack:
        graph = _job_graph(options, stack)
        with _job_errors():
            report = evaluate(
                data,
                out_dir=out,
                graph=graph,
                scorer=built,
                select=options.settings.select,
                fields=fields,
                concurrency=concurrency,
                timeout_s=timeout,
                retries=retries,
                progress=progress,
                budget=budget,
                token_budget=token_budget_total,
            )
    if as_json:
        sys.stdout.write(json.dumps(report.to_dict(), indent=2, ensure_ascii=False) + "\n")
    else:
        _print_eval(report, Console(highlight=False))
    if report.errors:
        raise typer.Exit(EXIT_FAILED)


def _same_runs(out: Path, options: GraphOptions, fields: dict[str, str]) -> None:
    """Resume only runs made with the same graph options: ``--out`` remembers them in ``eval_options.json``.

    Another ``--scorer`` or ``--pass-mark`` may re-score the stored runs (no model calls); other graph options may
    not, since the stored rounds would not be what those options produce.
    """
    current = json.loads(
        json.dumps(
            {
                "models": {k: getattr(options, k) for k in _MODEL_OPTIONS},
                "settings": options.settings.as_kwargs(),
                "fields": fields,
            },
            default=str,
            sort_keys=True,
        )
    )
    path = out / "eval_options.json"
    if path.is_file() and (out / "runs.jsonl").is_file():
        try:
            stored = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            stored = None
        if isinstance(stored, dict) and stored != current:
            changed = sorted(
                f"{group}.{key}"
                for group in current
                for key in set(current[group]) | set(stored.get(group) or {})
                if current[group].get(key) != (stored.get(group) or {}).get(key)
            )
            _fail(
                f"--out {out} holds runs made with other options ({', '.join(changed) or 'unknown'}); "
                "use a new --out, or the same options to resume"
            )
    out.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(current, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def _print_eval(report: Any, console: Console) -> None:
    from reflection_graph.runners.eval import RoundStats

    table = Table(
        title=f"eval per round ({report.scorer}, pass mark {report.pass_mark:g})", title_justify="left"
    )
    for column in RoundStats.COLUMNS:
        table.add_column(column, justify="right")
    for r in report.rounds:
        table.add_row(*r.cells())
    console.print(table)
    if report.budget is not None or report.budget_hits:
        cap = f"capped at {report.budget} tokens per record; " if report.budget is not None else ""
        hits = ", ".join(map(str, report.budget_hits)) or "none"
        console.print(f"budget: {cap}records a token budget stopped: {hits}")
    compare = Table(show_edge=False)
    for column in ("answer", "mean score", "pass share"):
        compare.add_column(column, justify="left" if column == "answer" else "right")
    for name, values in report.comparison.items():
        mean, share = values.get("mean_score"), values.get("pass_share")
        compare.add_row(
            name, "-" if mean is None else f"{mean:.3f}", "-" if share is None else f"{share:.0%}"
        )
    console.print(compare)
    flips, agree = report.flips, report.agreement

    def fmt(value: Any) -> str:
        return "n/a" if value is None else f"{value:.2f}"

    console.print(
        f"flips first -> selected: right->wrong {flips.get('right_to_wrong', 0)}, "
        f"wrong->right {flips.get('wrong_to_right', 0)}"
    )
    console.print(
        f"critic agreement: precision {fmt(agree.get('precision'))}, recall {fmt(agree.get('recall'))}"
    )
    if report.errors:
        kinds = ", ".join(f"{k} {v}" for k, v in report.errors_by_type.items())
        console.print(f"[red]{report.errors} error rows[/] ({kinds})")
        for sample in report.error_samples:
            console.print(Text(f"  {sample}", style="red"))
    console.print(Text(report.recommendation, style="bold"))
    console.print(f"report: {report.files.get('html')}")


def _print_summary(summary: Any, console: Console) -> None:
    table = Table(
        title=f"batch summary ({summary.out_path})", title_justify="left", show_header=False, show_edge=False
    )
    table.add_column("what", style="bold")
    table.add_column("value")
    errors = ", ".join(f"{k} {v}" for k, v in summary.errors_by_type.items()) or "none"
    gain = summary.mean_score_gain
    rows = [
        ("records", str(summary.records)),
        ("ok", f"[green]{summary.ok}[/]"),
        ("error", f"[red]{summary.error}[/] ({errors})" if summary.error else "0"),
        ("skipped (already ok)", str(summary.skipped)),
        ("run now", f"{summary.processed} ({summary.retried} retried)"),
        ("tokens", f"{summary.total_tokens} total, {summary.run_tokens} this run"),
        ("seconds", f"{summary.seconds:.1f}"),
        ("stop reasons", ", ".join(f"{k} {v}" for k, v in summary.stop_reasons.items()) or "-"),
        (
            "mean score gain",
            "-"
            if gain is None
            else f"{gain:+.2f} (first {summary.mean_first_score} -> final {summary.mean_final_score})",
        ),
    ]
    if summary.shard:
        rows.insert(0, ("shard", summary.shard))
    if summary.changed:
        rows.append(("input changed (redone)", f"[yellow]{summary.changed}[/]"))
    for what, value in rows:
        table.add_row(what, value)
    console.print(table)
    for sample in summary.error_samples:
        console.print(Text(f"  {_printable(sample)}", style="red"))
    for sample in summary.changed_samples:
        console.print(Text(f"  {_printable(sample)}", style="yellow"))
    if summary.stale_lock:
        console.print(f"[dim]took over the lock of a run that had died ({escape(summary.stale_lock)})[/]")
    if summary.error:
        console.print("[yellow]some records failed; rerun the same command to retry them[/]")


def main() -> None:
    """Console-script entry point (``reflection-graph``)."""
    app()


if __name__ == "__main__":
    main()
