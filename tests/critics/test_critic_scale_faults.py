"""Issue 13, faults 10 and 11 through the whole graph: critic scores outside 0-10 and huge critiques.

(`tests/test_settings.py` checks the parser and the `Critique` bounds directly; these run the loop.)
"""

from __future__ import annotations

import json

import pytest

from reflection_graph import create_reflection_graph
from tests.fakes import FakeCriticModel, RecordingChatModel


@pytest.mark.parametrize("score", ["11", "1e309", "-2", "150"])
def test_out_of_scale_scores_are_never_accepted_by_the_loop(score: str) -> None:
    """Fault 10: 11 was read as 1.1 on a 0-100 scale, and 1e309 became 10 and was accepted."""
    critic = FakeCriticModel(critiques=[f'{{"score": {score}, "is_acceptable": true}}'])
    result = create_reflection_graph(
        RecordingChatModel(), critic=critic, score_threshold=8, max_iterations=1, parse_retries=0
    ).invoke({"task": "t"})
    assert result["stop_reason"] != "accepted"
    assert result["critique"]["parsed"] is False and result["critique"]["score"] == 0.0


def test_a_critic_reply_with_100000_issues_keeps_the_revise_prompt_and_result_small() -> None:
    """Fault 11: 100,000 issues made a 2 MB revise prompt and a 6 MB result."""
    huge = json.dumps({"score": 2, "is_acceptable": False, "issues": [f"issue {i}" for i in range(100_000)]})
    generator = RecordingChatModel()
    result = create_reflection_graph(
        generator, critic=FakeCriticModel(critiques=[huge, huge]), max_iterations=2
    ).invoke({"task": "t"})
    assert result["iterations"] == 2
    revise_prompt = " ".join(str(m.content) for m in generator.received[-1])
    assert (
        "issue 0" in revise_prompt and "more not shown" in revise_prompt
    )  # the reviser saw the critique, cut
    assert len(revise_prompt) < 20_000
    assert len(json.dumps(result, default=str)) < 200_000
