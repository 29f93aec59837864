"""Snapshots of the graph's shape (`draw_mermaid`) for each option combination that can change it."""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import pytest

from reflection_graph import create_reflection_graph
from tests.fakes import FakeCriticModel, RecordingChatModel, critique

SNAPSHOTS = Path(__file__).parent / "snapshots"
COMBOS = list(itertools.product([False, True], ["loop", "self_refine"], [None, 8.0], [False, True]))


@pytest.mark.parametrize("human_review, strategy, threshold, trigger", COMBOS)
def test_graph_shape_snapshot(
    human_review: bool, strategy: str, threshold: float | None, trigger: bool
) -> None:
    graph = create_reflection_graph(
        RecordingChatModel(),
        critic=FakeCriticModel(critiques=[critique(1)]),
        human_review=human_review,
        strategy=strategy,  # type: ignore[arg-type]
        score_threshold=threshold,
        should_refine=(lambda s: True) if trigger else None,
    )
    mermaid = graph.get_graph().draw_mermaid()
    name = f"review-{human_review}_{strategy}_threshold-{threshold is not None}_trigger-{trigger}.mmd"
    path = SNAPSHOTS / name
    if os.environ.get("UPDATE_SNAPSHOTS") == "1":
        SNAPSHOTS.mkdir(exist_ok=True)
        path.write_text(mermaid)
    assert path.exists(), (
        f"missing snapshot {path.name}: run UPDATE_SNAPSHOTS=1 pytest tests/test_graph_shape.py"
    )
    assert mermaid == path.read_text()
    for node in ("generate", "critique", "finalize"):
        assert node in mermaid
    assert ("review" in mermaid) is human_review
