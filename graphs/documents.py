"""DocETL-style gleaning over a list of documents (`reflection_graph.gleaning.create_gleaning_graph`).

Input: `{"documents": ["...", {"text": "...", "id": "d2"}], "prompt": "Summarize in one sentence: {document}"}`.
Each document gets a draft (the map), then up to `NUM_ROUNDS` validate-and-refine rounds against
`VALIDATION_PROMPT`; documents run concurrently (at most 2 at once here: the embedded model serializes its calls
anyway). Output: `results` (one per document, in input order, with its own `output`, `score`, `stop_reason`,
`error` and `usage`) and the summed `usage`.

Configuration (Studio's panel, or a run's `context`): the fields of `reflection_graph.Context`; `max_iterations`
counts validations per document.
"""

from __future__ import annotations

from graphs import studio_model
from reflection_graph.gleaning import create_gleaning_graph

__all__ = ["NUM_ROUNDS", "VALIDATION_PROMPT", "graph"]

VALIDATION_PROMPT = "The output follows the prompt, states the document's main point, and adds nothing the document does not say."
NUM_ROUNDS = 1

graph = create_gleaning_graph(
    studio_model(),
    validation_prompt=VALIDATION_PROMPT,
    num_rounds=NUM_ROUNDS,
    max_concurrency=2,
    name="documents",
)
