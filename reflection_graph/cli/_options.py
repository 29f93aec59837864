"""The options every graph-building command takes: the models, and one option per setting of `Settings`."""

from __future__ import annotations

import functools
import inspect
import re
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from reflection_graph.cli import GraphOptions
from reflection_graph.cli._common import _fail
from reflection_graph.settings import Settings, default, setting_fields

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
    "memory_embeddings": (
        str,
        "auto",
        "Memory search: auto (by meaning too, with the [semantic] extra's offline embedder) or none (words only).",
    ),
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
