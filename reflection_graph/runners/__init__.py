"""Runners around the loop: batch gleaning (local, shards, a LangGraph server), eval against ground truth, scorers.

`reflection_graph.runners.batch` runs a graph over a JSONL file, resumable and per-record isolated;
`reflection_graph.runners.eval` scores every round of it against ground truth; `reflection_graph.runners.scorers`
holds that ground truth's scorers.
"""

from reflection_graph.runners.batch import arun_batch, run_batch
from reflection_graph.runners.eval import aevaluate, evaluate

__all__ = ["aevaluate", "arun_batch", "evaluate", "run_batch"]
