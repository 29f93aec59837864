"""Runners around the loop: batch gleaning (local, shards, a LangGraph server), eval against ground truth, scorers.

`reflection_graph.runners.batch` runs a graph over a JSONL file, resumable and per-record isolated (locally, or
each record as a run on a LangGraph server); `reflection_graph.runners.shards` splits it over machines and merges
the outputs; `reflection_graph.runners.eval` scores every round of it against ground truth, with the scorers of
`reflection_graph.runners.scorers`. Both runners take one `JobOptions` (concurrency, time and retry limits, a token
total, the progress bar; `_job`), and the CLI builds one. Private modules hold the pieces: the JSON Lines reader
and writers (`_jsonl`), records (`_records`), output entries and compaction (`_output`), the summary (`_summary`),
the output lock and the lock of a checkpointed thread (`_lock`; `ThreadLock` is public), the progress bar
(`_progress`), running a batch's pending records (`_running`), server runs (`_server`), eval's input file and
checked graph (`_eval_input`), its steps after the batch run (`_eval_steps`), its rounds and figures (`_rounds`)
and its report files (`_report`).
"""

from reflection_graph.runners._job import JobOptions
from reflection_graph.runners._jsonl import atomic_write
from reflection_graph.runners._lock import ThreadBusy, ThreadLock
from reflection_graph.runners._report import require_matplotlib
from reflection_graph.runners._side_files import check_inputs_spared
from reflection_graph.runners.batch import arun_batch, run_batch
from reflection_graph.runners.eval import aevaluate, evaluate

__all__ = [
    "JobOptions",
    "ThreadBusy",
    "ThreadLock",
    "aevaluate",
    "arun_batch",
    "atomic_write",
    "check_inputs_spared",
    "evaluate",
    "require_matplotlib",
    "run_batch",
]
