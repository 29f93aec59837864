"""Tree search (`strategy="tree"`, LATS-style): the reflection graph's nodes plus a `select` node that picks the
most promising candidate so far to revise next, dropping dead ends, on the embedded model by default.

Input: `{"task": "Write a haiku about rain"}` (optionally `context`).
Output: `candidate`, `critique`, `trajectory`, `iterations`, `stop_reason`, `error`, `usage`.
Configuration (Studio's panel, or a run's `context`): the fields of `reflection_graph.Context`. With a test critic
(`CodeTestCritic`) the score that ranks the candidates is the share of tests they pass (see bench/README.md).
"""

from __future__ import annotations

from graphs import studio_model
from reflection_graph import create_reflection_graph

__all__ = ["graph"]

graph = create_reflection_graph(
    studio_model(), strategy="tree", n_drafts=2, n_revisions=2, max_iterations=3, name="tree"
)
