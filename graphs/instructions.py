"""DocETL's map-then-glean with verifiable instructions: each record's output checked by `InstructionCritic`.

Input: `{"documents": ["...", {"text": "...", "id": "r2"}], "prompt": "Describe in one sentence ...: {document}"}`,
as the `documents` graph takes. Each record gets a draft (the map); then IFEval's checkers judge it against
`INSTRUCTIONS` (under 30 words, no commas) and a refinement follows while one fails, up to `NUM_ROUNDS`. The
checkers need no model: each result's `score` is 10 x the share of instructions followed, and its `stop_reason` is
`accepted` when all are. Output as the `documents` graph: `results` (one per record, in input order) and `usage`.

Configuration (Studio's panel, or a run's `context`): the fields of `reflection_graph.Context`; `max_iterations`
counts checks per record.
"""

from __future__ import annotations

from graphs import studio_model
from reflection_graph.critics import InstructionCritic
from reflection_graph.gleaning import create_gleaning_graph

__all__ = ["INSTRUCTIONS", "KWARGS", "NUM_ROUNDS", "graph"]

INSTRUCTIONS = ["length_constraints:number_words", "punctuation:no_comma"]
"""IFEval instruction ids every record's output must follow."""
KWARGS = [{"num_words": 30, "relation": "less than"}, {}]
"""Their arguments, one dict per instruction (IFEval's own argument names)."""
NUM_ROUNDS = 2

graph = create_gleaning_graph(
    studio_model(),
    validation_prompt=None,
    critic=InstructionCritic(INSTRUCTIONS, KWARGS),
    num_rounds=NUM_ROUNDS,
    max_concurrency=2,
    name="instructions",
)
