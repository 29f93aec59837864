"""The ``reflection-graph`` command line (typer), thin over `reflection_graph.runners`: ``run`` one task live, or ``batch`` glean a JSONL file.

``reflection-graph run "TASK"`` builds the graph with `create_reflection_graph` and streams it, printing every
round as it happens (the draft, then the critique: score, verdict, issues, feedback) and, at the end, the stop
reason, the chosen answer and the token/time usage per role. ``--json`` prints only the full final result as
JSON. ``reflection-graph batch IN.jsonl OUT.jsonl`` runs `reflection_graph.runners.batch.run_batch` with a progress bar
and prints its summary; it is resumable (see `reflection_graph.runners.batch`). ``--shard I/N`` runs one shard of the
input and ``reflection-graph merge OUT_0 ... OUT --input IN`` merges the shards' outputs; ``--server URL`` runs
every record on a LangGraph server instead of in this process. ``reflection-graph eval DATA.jsonl --out DIR``
scores every round of the loop against ground truth and reports the gain per round (see `reflection_graph.runners.eval`).

With no ``--model`` everything runs offline on the embedded model through llama.cpp (Qwen2.5-Coder-1.5B-Instruct,
or Gemma 3 270M where only it is installed or ``REFLECTION_GRAPH_EMBEDDED`` names it). Bad options
(an unknown model spec, a missing GGUF file, a threshold outside 0-10, ...) exit with code 2 and one line
``error: ...`` on stderr, never a traceback.

Layout: ``_graph`` builds the graph a command runs (`GraphOptions`, `build_graph`; ``_graph._resolve_model`` is the
seam tests replace with a fake); ``_options`` turns `Settings` into options; ``_run``, ``_batch`` (``batch``,
``merge``) and ``_eval`` hold the commands, ``_render`` what they print, ``_common`` the one-line errors and the
job flags ``batch`` and ``eval`` share (one `JobOptions`, `job_options`).
"""

from __future__ import annotations

from reflection_graph.cli._common import app
from reflection_graph.cli._graph import GraphOptions, build_graph

# the commands register themselves on `app` when they load, in the order `--help` lists them
from reflection_graph.cli import _run  # noqa: F401  # isort: skip

# isort: split
from reflection_graph.cli import _batch, _eval  # noqa: F401

__all__ = ["GraphOptions", "app", "build_graph", "main"]


def main() -> None:
    """Console-script entry point (``reflection-graph``)."""
    app()
