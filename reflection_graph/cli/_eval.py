"""``reflection-graph eval DATA.jsonl --out DIR``: score every round against ground truth."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from reflection_graph.cli._common import EXIT_FAILED, _fail, app, job_options
from reflection_graph.cli._graph import GraphOptions, _batch_job
from reflection_graph.cli._options import _MODEL_OPTIONS, _OneLineErrors, graph_options
from reflection_graph.cli._render import _print_eval
from reflection_graph.runners import JobOptions, atomic_write, require_matplotlib
from reflection_graph.runners.eval import _check_fields, evaluate
from reflection_graph.runners.scorers import make_scorer
from reflection_graph.settings import Settings

if TYPE_CHECKING:
    from reflection_graph.runners.scorers import Scorer


@app.command("eval", cls=_OneLineErrors)
@graph_options
@job_options
def eval_command(
    data: Annotated[
        Path, typer.Argument(metavar="DATA.jsonl", help="Records with a `task` and ground truth.")
    ],
    options: GraphOptions,
    job: JobOptions,
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
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    budget: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="Cap the per-round figures at this many tokens per record (as a --token-budget run would stop), "
            "and count the records it stops.",
        ),
    ] = None,
) -> None:
    """Score every round of the loop on DATA.jsonl against ground truth: does reflection pay off?

    Writes rounds.jsonl, summary.csv, gain.png and report.html to --out, prints the per-round table and a
    recommendation for --max-iterations.
    """

    if not data.is_file():
        _fail(f"data file not found: {data}")
    if out.exists() and not out.is_dir():
        _fail(f"--out {out} is a file; give a directory")
    fields = _parse_fields(field or [])
    try:
        require_matplotlib()
    except ImportError as exc:
        _fail(str(exc))
    built = _scorer(scorer, pass_mark, data)
    _same_runs(out, options, fields)
    with _batch_job(options) as graph:
        report = evaluate(
            data,
            out_dir=out,
            graph=graph,
            scorer=built,
            select=options.settings.select,
            fields=fields,
            job=job,
            budget=budget,
        )
    if as_json:
        sys.stdout.write(json.dumps(report.to_dict(), indent=2, ensure_ascii=False) + "\n")
    else:
        _print_eval(report, Console(highlight=False))
    if report.errors:
        raise typer.Exit(EXIT_FAILED)


def _parse_fields(items: list[str]) -> dict[str, str]:
    """The ``--field KEY=FIELD`` options as a mapping, checked (a bad one exits in one line)."""

    fields: dict[str, str] = {}
    for item in items:
        key, eq, source = item.partition("=")
        if not eq or not key.strip() or not source.strip():
            _fail(f"--field expects KEY=FIELD (e.g. task=prompt), got {item!r}")
        fields[key.strip()] = source.strip()
    try:
        _check_fields(fields)
    except ValueError as exc:
        _fail(f"--field: {exc}")
    return fields


def _scorer(spec: str, pass_mark: float | None, data: Path) -> Scorer:
    """The ``--scorer``; a ``module:function`` one is imported from the working directory or the data's."""

    for folder in (str(data.resolve().parent), str(Path.cwd())):
        if folder not in sys.path:
            sys.path.insert(0, folder)
    try:
        return make_scorer(spec, pass_mark=pass_mark)
    except (ValueError, TypeError, ImportError) as exc:
        _fail(f"--scorer: {exc}")


def _same_runs(out: Path, options: GraphOptions, fields: dict[str, str]) -> None:
    """Resume only runs made with the same graph options: ``--out`` remembers them in ``eval_options.json``.

    Another ``--scorer`` or ``--pass-mark`` may re-score the stored runs (no model calls); other graph options may
    not, since the stored rounds would not be what those options produce.
    """
    current = json.loads(
        json.dumps(
            {
                "models": {k: getattr(options, k) for k in _MODEL_OPTIONS},
                "settings": {f.name: getattr(options.settings, f.name) for f in dataclasses.fields(Settings)},
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
    atomic_write(path, json.dumps(current, indent=2, sort_keys=True) + "\n")
