"""The generic reflection graph: draft -> critique -> revise, on the embedded model by default.

Input: `{"task": "Write a haiku about rain"}` (optionally `candidate` to glean an existing output, and `context`).
Output: `candidate`, `critique`, `trajectory`, `iterations`, `stop_reason`, `error`, `usage`.
Configuration (Studio's panel, or a run's `context`): the fields of `reflection_graph.Context`.
"""

from __future__ import annotations

from graphs import studio_model
from reflection_graph import create_reflection_graph

__all__ = ["graph"]

graph = create_reflection_graph(studio_model(), max_iterations=2, name="reflection")
