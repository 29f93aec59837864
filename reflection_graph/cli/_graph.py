"""The graph a command builds: `GraphOptions` (the models, persistence and settings the options name) and
`build_graph`; ``_resolve_model`` is the seam tests replace with a fake. `_job_graph` and `_batch_job` open what a
job needs (the SQLite checkpointer and memory store) around it, and end a bad option in one line."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reflection_graph.cli._common import BadInput, _fail, _job_errors
from reflection_graph.critics.code_tests import CodeTestCritic
from reflection_graph.critics.sandbox import Isolation, IsolationUnavailableError
from reflection_graph.graph import create_reflection_graph
from reflection_graph.memory import ReflexionMemory, default_embeddings, sqlite_store
from reflection_graph.models import resolve_model
from reflection_graph.settings import Settings

__all__ = ["GraphOptions", "build_graph"]


PROMPT_LOOKUP: dict[str, bool | None] = {"revisions": None, "off": False, "all": True}
"""`--prompt-lookup`'s values, as `EmbeddedChatModel.prompt_lookup` takes them."""


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
        stop_repetition: stop a reply that repeats itself (`EmbeddedChatModel.stop_repetition`), or None for the
            model's default.
        prompt_lookup: the embedded model's prompt-lookup decoding (`EmbeddedChatModel.prompt_lookup`):
            ``revisions``, ``off`` or ``all``, or None for the model's default.
        checkpoint: SQLite file for a checkpointer, or None.
        memory: SQLite file for the Reflexion memory store, or None.
        memory_embeddings: ``auto`` (semantic memory with the `[semantic]` extra's offline embedder when it is
            installed, else words only) or ``none`` (words only).
        tests: test source (checked, importing from `solution`) that judges the candidates through a
            `CodeTestCritic` instead of a critic model, or None.
        isolation: how that critic isolates the generated code (`auto`, `required`, `off`).
        settings: the loop's settings (`reflection_graph.Settings`), one CLI option per field; it holds what was
            given on the command line (`Settings.given`) and is passed to the graph as it is.
    """

    model: str | None = None
    generator: str | None = None
    critic: str | None = None
    reviser: str | None = None
    base_url: str | None = None
    max_tokens: int | None = None
    seed: int | None = None
    stop_repetition: bool | None = None
    prompt_lookup: str | None = None
    checkpoint: Path | None = None
    memory: Path | None = None
    memory_embeddings: str = "auto"
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
        if self.prompt_lookup is not None and self.prompt_lookup not in PROMPT_LOOKUP:
            raise BadInput(
                f"--prompt-lookup must be one of {', '.join(PROMPT_LOOKUP)}, got {self.prompt_lookup!r}"
            )
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
        if self.memory_embeddings not in ("auto", "none"):
            raise BadInput(f"--memory-embeddings must be 'auto' or 'none', got {self.memory_embeddings!r}")
        for flag, path in (("--checkpoint", self.checkpoint), ("--memory", self.memory)):
            if path is not None and path.parent and not path.parent.exists():
                raise BadInput(f"{flag}: directory {path.parent} does not exist")


def _resolve_model(spec: str | None, options: GraphOptions, role: str) -> Any:
    """Turn a model spec into a chat model for one role (the seam tests replace with a fake)."""

    return resolve_model(spec, role=role, base_url=options.base_url)  # type: ignore[arg-type]


def _apply_sampling(model: Any, options: GraphOptions) -> Any:
    """Set ``--max-tokens``/``--seed``/``--[no-]stop-repetition``/``--prompt-lookup`` on a resolved model, or fail
    naming the option it does not support."""
    given = (
        ("max_tokens", options.max_tokens),
        ("seed", options.seed),
        ("stop_repetition", options.stop_repetition),
    )
    update: dict[str, int | bool | None] = {k: v for k, v in given if v is not None}
    if options.prompt_lookup is not None:
        update["prompt_lookup"] = PROMPT_LOOKUP[options.prompt_lookup]
    if not update:
        return model
    fields = getattr(type(model), "model_fields", {})
    for name in update:
        if name not in fields:
            given_off = getattr(options, name) is False  # a switch given as --no-...; a choice never is
            flag = "--" + ("no-" if given_off else "") + name.replace("_", "-")
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
    options: GraphOptions,
    *,
    checkpointer: Any = None,
    store: Any = None,
    memory: Any = None,
    roles: tuple[Any, Any, Any] | None = None,
) -> Any:
    """Build the compiled reflection graph the CLI runs.

    Args:
        options: the parsed CLI options (validated here).
        checkpointer: a LangGraph checkpointer, or None.
        store: a LangGraph store, or None.
        memory: a `ReflexionMemory`, or None.
        roles: the role models (generator, critic, reviser; None: derived from the generator) when the caller
            resolved them already (`run` loads the generator before drafting); None: resolved here from `options`.

    Returns:
        The `CompiledStateGraph` from `create_reflection_graph`.

    Raises:
        BadInput: an option is out of range.
        ValueError: the model spec or another factory argument is invalid (message says what to change).
    """
    options.validate()
    return _graph_of(options, roles or _role_models(options), checkpointer, store, memory)


def _graph_of(
    options: GraphOptions, roles: tuple[Any, Any, Any], checkpointer: Any, store: Any, memory: Any
) -> Any:
    """`build_graph`'s graph on role models already resolved (`_role_models`)."""

    generator, critic, reviser = roles
    if options.tests is not None:
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
        settings=options.settings,
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
        embeddings = default_embeddings() if options.memory_embeddings == "auto" else None
        try:
            try:  # set up once per file, even with several processes at once
                store = sqlite_store(options.memory, embeddings=embeddings)
            except ImportError:  # this sqlite3 cannot load sqlite-vec: words only
                embeddings = None
                store = sqlite_store(options.memory)
            stack.callback(store.conn.close)
        except sqlite3.Error as exc:
            raise BadInput(f"--memory: cannot use {options.memory} as a SQLite database: {exc}") from None
        memory = ReflexionMemory(store, embeddings=embeddings)
    return checkpointer, store, memory


def _job_graph(
    options: GraphOptions, stack: ExitStack, *, checkpoint: bool = False
) -> tuple[Any, tuple[Any, Any, Any]]:
    """The compiled graph of a command, with its SQLite persistence opened on `stack`, and its role models
    (generator, critic, reviser; None: derived from the generator); bad options exit in one line."""
    try:
        checkpointer, store, reflexion = _open_persistence(options, stack)  # the options validated first
        roles = _role_models(options)
        graph = build_graph(
            options,
            checkpointer=checkpointer if checkpoint else None,
            store=store,
            memory=reflexion,
            roles=roles,
        )
        return graph, roles
    except (ValueError, TypeError, ImportError, OSError, IsolationUnavailableError) as exc:
        _fail(str(exc))


@contextmanager
def _batch_job(options: GraphOptions) -> Iterator[Any]:
    """The graph of a `batch` or `eval` job, its persistence open while the job runs; errors end in one line."""
    with ExitStack() as stack:
        graph, _ = _job_graph(options, stack)
        with _job_errors():
            yield graph
