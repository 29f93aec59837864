"""The options every graph-building command takes: the models, and one option per setting of `Settings`.

The settings a command gets are one `Settings` holding only what was given on the command line (its `given`),
so the setup's defaults under them (the code focus's with --tests) apply as they do in Python, and the graph
is built from that object as it is (`create_reflection_graph(settings=...)`). A setting whose values are
registered (`--strategy`) takes its choices and help from the registry each time a command is parsed, so a
strategy registered before the CLI runs is offered, listed and accepted.
"""

from __future__ import annotations

import inspect
import re
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperCommand

from reflection_graph.cli._common import _fail, from_flags
from reflection_graph.cli._graph import GraphOptions
from reflection_graph.settings import Settings, allowed_values, default, setting_fields

_MODEL_OPTIONS: dict[str, tuple[Any, Any, str]] = {
    # name: (type, default, help) of the options every graph-building command takes besides the settings
    "model": (str | None, None, "Model for every role: embedded, local:/path.gguf or provider:model."),
    "generator": (str | None, None, "Model that drafts (overrides --model)."),
    "critic": (str | None, None, "Model that critiques (overrides --model)."),
    "reviser": (str | None, None, "Model that revises (overrides --model)."),
    "base_url": (str | None, None, "OpenAI-compatible server URL for string model names."),
    "max_tokens": (int | None, None, "Most tokens per model reply."),
    "seed": (int | None, None, "Sampling seed (where the model supports one)."),
    "stop_repetition": (
        bool | None,
        None,
        "Stop a reply that repeats one span back to back beyond the copies the task asks for (the embedded "
        "model's default: on); --no-stop-repetition lets every reply run to its limit.",
    ),
    "prompt_lookup": (
        str | None,
        None,
        "The embedded model's prompt-lookup decoding: revisions (its default), off, or all replies.",
    ),
    "memory": (Path | None, None, "SQLite file for Reflexion memory: lessons from past critiques."),
    "memory_embeddings": (
        str,
        "auto",
        "Memory search: auto (by meaning too, with the [semantic] extra's offline embedder) or none (words only).",
    ),
}


_PREFIX = (
    "setting_"  # the settings' parameter names, apart from a command's own (batch has its own --retries)
)
_CONTEXT = "graph_options_context"  # the click context, to tell what was given on the command line


def given_on_command_line(ctx: typer.Context, name: str) -> bool:
    """Whether parameter `name` was given on the command line (or in its environment variable), not defaulted."""
    source = ctx.get_parameter_source(name)
    return source is not None and source.name in ("COMMANDLINE", "ENVIRONMENT")


def _registered(name: str) -> bool:
    """Whether setting `name` takes its values from a registry (not its `Literal` type)."""
    return bool(Settings.__dataclass_fields__[name].metadata.get("allowed"))


def _help(name: str) -> str:
    """A setting's help: its description, and for a registered one each value with its line, as registered now."""
    text = Settings.__dataclass_fields__[name].metadata["description"]
    if _registered(name):
        listed = "; ".join(f"'{value}' {line}".strip() for value, line in allowed_values(name).items())
        text = f"{text} {listed}."
    return text


def _metavar(name: str) -> str:
    return "<" + "|".join(allowed_values(name)) + ">"


def refresh_registered(params: list[Any]) -> None:
    """Give the options of registered settings (`--strategy`) their help and choices as registered now."""
    for param in params:
        name = (param.name or "").removeprefix(_PREFIX)
        if param.name != name and name in Settings.__dataclass_fields__ and _registered(name):
            param.help = _help(name)
            param.metavar = _metavar(name)


def _setting_parameters() -> list[inspect.Parameter]:
    """One typer option per CLI setting of `Settings`: its flag, default, description, min/max and choices."""
    hints = typing.get_type_hints(Settings)
    params = []
    for f in setting_fields(cli=True):
        flag = f.metadata["flag"] or "--" + f.name.replace("_", "-")
        decls = [f"{flag}/--no-{flag[2:]}"] if hints[f.name] is bool else [flag]
        if f.metadata["short"]:
            decls.append(f.metadata["short"])
        bounds: dict[str, Any] = {k: f.metadata[k] for k in ("min", "max") if f.metadata[k] is not None}
        if _registered(f.name):
            bounds["metavar"] = _metavar(f.name)  # checked by `Settings` against the registry, as in Python
        option = typer.Option(*decls, help=_help(f.name), rich_help_panel="Loop settings", **bounds)
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

    The settings' flags, defaults, bounds and help all come from `reflection_graph.Settings`; the command gets one
    `Settings` of the settings given on the command line (the others are its defaults, not counted as set). A value
    typer's own min/max/choices let through but `Settings` rejects (e.g. --min-iterations above
    --max-iterations, a --strategy nobody registered) is reported as a one-line error naming the flag.
    """
    hints = typing.get_type_hints(command, include_extras=True)
    # typer passes its context to one parameter: the command's own (`batch` has one), else one added here
    own_context = next((name for name, hint in hints.items() if hint is typer.Context), None)
    extra = [*_model_parameters(), *_setting_parameters()]
    if own_context is None:
        extra.append(inspect.Parameter(_CONTEXT, inspect.Parameter.KEYWORD_ONLY, annotation=typer.Context))
    names = {f.name for f in setting_fields(cli=True)}

    def make(kwargs: dict[str, Any]) -> GraphOptions:
        ctx = kwargs[own_context] if own_context else kwargs.pop(_CONTEXT)
        values = {name: kwargs.pop(_PREFIX + name) for name in names}
        given = {name: value for name, value in values.items() if given_on_command_line(ctx, _PREFIX + name)}
        models = {name: kwargs.pop(name) for name in _MODEL_OPTIONS}
        try:
            settings = Settings(**given)
        except ValueError as exc:
            _fail(_flagged(str(exc)))
        return GraphOptions(**models, settings=settings)

    return from_flags(command, "options", extra, make)


def _flagged(message: str) -> str:
    """A `Settings` error message with each setting's name replaced by its CLI flag."""
    for f in setting_fields(cli=True):
        flag = f.metadata["flag"] or "--" + f.name.replace("_", "-")
        message = re.sub(rf"\b{f.name}\b", flag, message)
    return message


_UsageError: type[Exception] = typer.BadParameter.__mro__[1]  # typer's vendored click UsageError


class _OneLineErrors(TyperCommand):
    """Bad option values exit with code 2 and one line `error: ...` on stderr (typer's panel is many lines).

    The options of registered settings (`--strategy`) are given the registry's values and lines whenever the
    command's parameters are read (to parse or to show help), so a strategy registered after this module was
    imported is listed too.
    """

    def get_params(self, ctx: Any) -> list[Any]:
        params: list[Any] = super().get_params(ctx)
        refresh_registered(params)
        return params

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
