"""``reflection-graph batch`` (in this process, one shard, or on a LangGraph server) and ``merge``."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from reflection_graph.cli._common import EXIT_FAILED, _fail, app, job_options
from reflection_graph.cli._graph import BadInput, GraphOptions, _batch_job
from reflection_graph.cli._options import _MODEL_OPTIONS, _OneLineErrors, given_on_command_line, graph_options
from reflection_graph.cli._render import _print_summary
from reflection_graph.context import Context
from reflection_graph.runners import JobOptions, check_inputs_spared
from reflection_graph.runners.batch import (
    BatchLocked,
    MergeError,
    ServerError,
    ServerGraph,
    arun_batch,
    merge_outputs,
    parse_shard,
    run_batch,
)
from reflection_graph.settings import setting_fields


@app.command(cls=_OneLineErrors)
@graph_options
@job_options
def batch(
    ctx: typer.Context,
    in_path: Annotated[Path, typer.Argument(metavar="IN.jsonl", help="Records with a `task` (JSON Lines).")],
    out_path: Annotated[Path, typer.Argument(metavar="OUT.jsonl", help="Results; rerun to resume.")],
    options: GraphOptions,
    job: JobOptions,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
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

    if not in_path.is_file():
        _fail(f"input file not found: {in_path}")
    try:  # before a model is built or a server called (run_batch checks it again, for the Python API)
        check_inputs_spared(out_path, [("the input file", in_path)])
    except ValueError as exc:
        _fail(str(exc))
    shard_pair = None
    if shard is not None:
        try:
            shard_pair = parse_shard(shard)
        except ValueError as exc:
            _fail(f"--{exc}")
    if server is not None:
        summary = _server_batch(
            ctx, options, server, graph_name, in_path, out_path, job=job, shard=shard_pair
        )
        _report_batch(summary, as_json)
        return
    with _batch_job(options) as graph:
        summary = run_batch(graph, in_path, out_path, job=job, shard=shard_pair)
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

    per_run = set(Context.__dataclass_fields__)
    context: dict[str, Any] = {}
    for name in _MODEL_OPTIONS:
        if not given_on_command_line(ctx, name):
            continue
        if name not in _CONTEXT_MODELS:
            flag = "--" + name.replace("_", "-")
            raise BadInput(
                f"{flag} is not available with --server (the server's graph is built with its own)"
            )
        context[_CONTEXT_MODELS[name]] = getattr(options, name)
    for f in setting_fields(cli=True):
        if f.name not in options.settings.given:  # what the server's graph was built with holds
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
    *,
    job: JobOptions,
    shard: tuple[int, int] | None,
) -> Any:
    """`batch --server`: every record runs on the LangGraph server (see `reflection_graph.runners._server`)."""
    import asyncio

    try:
        context = _server_context(ctx, options)
    except BadInput as exc:
        _fail(str(exc))
    if not server.startswith(("http://", "https://")):
        _fail(f"--server must be an http:// or https:// URL, got {server!r}")

    async def main() -> Any:
        graph = ServerGraph(server, graph_name, context=context)
        await graph.connect()  # before anything is read or written: a bad URL or graph name fails at once
        return await arun_batch(graph, in_path, out_path, job=job, shard=shard)

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

    if len(outputs) < 2:
        _fail("give at least one shard output and the merged output: merge OUT_0 ... OUT --input IN")
    *parts, out_path = outputs
    try:
        summary = merge_outputs(parts, input_path, out_path, shards=shards)
    except (MergeError, BatchLocked, FileNotFoundError) as exc:
        _fail(str(exc))
    _report_batch(summary, as_json)
