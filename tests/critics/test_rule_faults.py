"""The rule-based fault detectors beside the model: each fires on its fault with a concrete edit that quotes the
answer, stays silent on good answers (also where a requirement is scoped, negated or offered as an alternative),
never names a fault the critique sets do not hold, and `JudgeCritic` shows their faults with the critic that named
each (`Critique.named_by`)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from reflection_graph.critics import CritiqueRequest, JudgeCritic
from reflection_graph.critics._faults import Fault, WrittenCritique, usable
from reflection_graph.critics._rule_faults import (
    RULE_FACTS,
    RULE_PLACEHOLDER,
    RULE_REQUIRED,
    RULE_SCRIPT,
    facts_faults,
    placeholder_faults,
    required_faults,
    rule_faults,
    script_faults,
)
from reflection_graph.critique import Critique
from tests.fakes import LogprobModel

DATASETS = Path(__file__).resolve().parents[2] / "datasets"

EMAIL_TASK = "Write a short email to my team, with a subject line, telling them the launch moves to Monday. Sign it as Priya."
EMAIL_BODY = "Hi all,\n\nThe launch we planned for Friday moves to Monday at 9 am.\n\nThanks,\n"
EMAIL_GOOD = "Subject: Launch moved to Monday\n\n" + EMAIL_BODY + "Priya"

# (task, answer, the rule's attribution, words its issue holds, words its fix quotes from the answer or task)
FAULTY = [
    (EMAIL_TASK, EMAIL_BODY + "Priya", RULE_REQUIRED, "no subject line", '"Hi all,"'),
    (
        EMAIL_TASK,
        "Subject: Launch moved\n\n" + EMAIL_BODY + "Sam",
        RULE_REQUIRED,
        "not signed as Priya",
        '"Sam"',
    ),
    (
        "Explain what DNS does in 12 words or fewer.",
        "DNS turns names such as example.com into the numeric addresses that computers use to reach each other.",
        RULE_REQUIRED,
        "over the task's limit of 12",
        '"DNS turns names',
    ),
    (
        "Explain what DNS does in under 5 words.",
        "It maps names to addresses.",
        RULE_REQUIRED,
        "limit of 4",
        '"It maps names',
    ),
    (
        "Write at least 20 words about tea.",
        "Tea is a drink.",
        RULE_REQUIRED,
        "fewer than the 20",
        '"Tea is a drink."',
    ),
    (
        "List the planets nearest the sun in 2 bullet points.",
        "- Mercury\n- Venus\n- Earth",
        RULE_REQUIRED,
        "3 bullet points, where the task asks for 2",
        '"- Earth"',
    ),
    (
        "Give 3 bullet points on sleep.",
        "Sleep restores the body. It also helps memory.",
        RULE_REQUIRED,
        "no bullet points",
        '"Sleep restores the body."',
    ),
    (
        'Write a slogan for a bakery that includes the word "fresh".',
        "Baked with love every morning.",
        RULE_REQUIRED,
        'does not include "fresh"',
        '"fresh"',
    ),
    (
        'Write a note to a runner. End it with the phrase "Go get them!"',
        "You trained hard. Trust your legs.",
        RULE_REQUIRED,
        'does not end with "Go get them!"',
        '"You trained hard. Trust your legs."',
    ),
    (
        'Start your reply with "Dear customer".',
        "Thank you for writing to us.",
        RULE_REQUIRED,
        'does not start with "Dear customer"',
        '"Thank you for writing to us."',
    ),
    (
        "Write a haiku about snow, all in lowercase.",
        "white snow on the hill\nSilent fields under the moon\nthe crow does not call",
        RULE_REQUIRED,
        "not lowercase",
        '"Silent fields under the moon" with "silent fields under the moon"',
    ),
    (
        "Write a warning sign in all capital letters.",
        "DANGER: Keep out",
        RULE_REQUIRED,
        "not capital",
        '"DANGER: KEEP OUT"',
    ),
    (
        "Describe the sea without using any commas.",
        "The sea is wide, grey and loud.",
        RULE_REQUIRED,
        "uses commas",
        '"The sea is wide, grey and loud."',
    ),
    (
        "Describe a cat in one paragraph.",
        "Cats are small hunters with soft fur and sharp claws.\n\nThey sleep for most of the day and play at night.",
        RULE_REQUIRED,
        "2 paragraphs, where the task asks for one",
        '"They sleep for most of the day',
    ),
    (
        "Write three paragraphs about rivers.",
        "Rivers carry water to the sea. They shape valleys and feed farms.",
        RULE_REQUIRED,
        "where the task asks for 3",
        '"They shape valleys and feed farms."',
    ),
    (
        "Explain in one sentence why we sleep.",
        "We sleep to restore the body. Sleep also helps the brain store memories.",
        RULE_REQUIRED,
        "2 sentences, where the task asks for 1",
        '"Sleep also helps the brain store memories."',
    ),
    (
        "Write a short thank-you note to a colleague.",
        "Спасибо за помощь с отчётом, ты очень выручил!",
        RULE_SCRIPT,
        "Cyrillic script",
        '"Спасибо за помощь',
    ),
    (
        "Напишите короткое приглашение на ужин.",
        "Please come to dinner at our place on Friday at seven.",
        RULE_SCRIPT,
        "Latin script",
        '"Please come to dinner',
    ),
    # facts: a value the task gives, said otherwise; a list count announced and missed
    (
        EMAIL_TASK,
        "Subject: Launch moved\n\nHi all,\n\nThe launch moves to Tuesday.\n\nPriya",
        RULE_FACTS,
        '"Tuesday" where the task gives "Monday"',
        'Replace "Tuesday" with "Monday".',
    ),
    (
        "Remind Jo that the dentist appointment is at 4 p.m. on Thursday.",
        "Hi Jo, your dentist visit is at 5 p.m. on Thursday.",
        RULE_FACTS,
        '"5 p.m." where the task gives "4 p.m."',
        '"4 p.m."',
    ),
    (
        "Announce that the office closes on 24 December.",
        "The office closes on December 23rd.",
        RULE_FACTS,
        "December 23rd",
        '"24 December"',
    ),
    (
        "Tell customers prices rise by 5% in June.",
        "Prices go up by 7 percent in June.",
        RULE_FACTS,
        '"7 percent"',
        '"5%"',
    ),
    (
        "Give me reasons to learn Go.",
        "Here are three reasons:\n- It is fast.\n- It is simple.",
        RULE_FACTS,
        'announces "three reasons" but lists 2',
        '"- It is simple."',
    ),
]

GOOD = [
    (EMAIL_TASK, EMAIL_GOOD),
    (EMAIL_TASK, "**Subject:** Launch moved\n\n" + EMAIL_BODY + "Priya Shah"),
    ("Write an essay with a subject of your choice.", "Gardens teach patience. Seeds take weeks to sprout."),
    ("Write an email without a subject line to Tom.", "Hi Tom,\n\nSee you at noon.\n\nBest,\nAna"),
    ("Sign it as the team lead and thank Bo.", "Thank you, Bo.\n\nThe team lead"),
    ("Explain what DNS does in 12 words or fewer.", "DNS turns names into the addresses computers use."),
    (
        "Give it a title of at most 3 words, then explain DNS.",
        "DNS Explained\n\nDNS turns names into numbers.",
    ),
    ("Write 3 bullet points of no more than 5 words each.", "- Sleep well\n- Eat well\n- Walk daily"),
    (
        "Give exactly 3 bullet points on tea.",
        "Tea facts:\n- It is old.\n  - Very old.\n- It is cheap.\n- It calms.",
    ),
    ("Give 2 sections, each with 3 bullet points.", "Tea\n- a\n- b\n\nCoffee\n- c"),
    ("List at most 3 bullet points on tea.", "- It is old."),
    ('Write a tagline that mentions "fresh".', "Fresh bread, every morning."),
    ('Write a tagline. Do not use the word "cheap".', "Good bread at a fair price."),
    ('Write a tagline with the word "fresh" or "warm".', "Warm bread, every morning."),
    ('Write a function that returns True when s contains "abc".', "def has(s, sub):\n    return sub in s"),
    ('End your email with "Best regards".', "Hi Tom,\n\nSee you soon.\n\nBest regards,\nAna"),
    (
        "Write a haiku about snow, all in lowercase except names.",
        "snow falls on Kyoto\nquiet roofs\nthe crow sleeps",
    ),
    (
        "Write a two-line poem about rain, all in lowercase.",
        "soft rain on the pane,\nthe street shines again.",
    ),
    ("Rewrite this sentence, avoiding comma splices.", "I came home, and I slept."),
    ("Describe a cat in one paragraph.", "## Cats\n\nCats are small hunters with soft fur and sharp claws."),
    (
        "Write a one-paragraph email to Bo about lunch.",
        "Hi Bo,\n\nShall we have lunch at noon on Friday at the usual place?\n\nBest,\nAna",
    ),
    ("Summarise the following two paragraphs in a sentence.", "Both say that tea is old."),
    ("Explain in one sentence what Dr. Smith found at 3 p.m. Monday.", "Dr. Smith found the U.S. Army maps."),
    ("Translate 'thank you' into Japanese.", "ありがとうございます"),
    ("Reply in Russian: how are you?", "У меня всё хорошо, спасибо!"),
    ("Напишите одно предложение о чтении.", "Чтение развивает ум."),
    (
        "Write a Python function greet() returning 'こんにちは'.",
        "```python\ndef greet():\n    return 'こんにちは'\n```",
    ),
    ("Write a short thank-you note.", "Thanks!"),
    (
        "Tell the team the meeting on Monday at 9 am moves; propose another time.",
        "We move Monday's 9 am meeting to Wednesday at 2 pm.",
    ),
    ("Remind Sam of the 9 am call on Friday.", "Hi Sam, a reminder of our call on Friday at 9:00."),
    ("Two tickets cost $150 each. Write the receipt line.", "2 tickets: $300 in all."),
    ("Confirm the booking for 14 March.", "Your booking for March 14th is confirmed. We open on Monday."),
    ("List the steps.", "Here are the three steps:\n1. Open it.\n2. Fill it.\n3. Close it."),
]


@pytest.mark.parametrize(
    ("task", "answer", "by", "issue", "quoted"), FAULTY, ids=[f"{f[2]}-{i}" for i, f in enumerate(FAULTY)]
)
def test_each_rule_fires_on_its_fault_with_an_edit_that_quotes_the_text(
    task: str, answer: str, by: str, issue: str, quoted: str
) -> None:
    faults = rule_faults(answer, task=task)
    assert len(faults) == 1, faults
    fault = faults[0]
    assert fault.by == by and issue in fault.issue and quoted in fault.fix, fault
    assert re.search(r"[.!?][\"'”’)]*$", fault.issue) and re.search(r"[.!?][\"'”’)]*$", fault.fix)


@pytest.mark.parametrize(("task", "answer"), GOOD, ids=[str(i) for i in range(len(GOOD))])
def test_no_rule_fires_on_a_good_answer(task: str, answer: str) -> None:
    assert rule_faults(answer, task=task) == []


def test_the_facts_rule_leaves_a_task_of_many_figures_to_the_judge() -> None:
    figures = ", ".join(f"${n}" for n in range(100, 200))
    assert facts_faults("The total is $5.", task=f"Prices: {figures}.") == []
    assert facts_faults("The total is $5.", task="The price is $4.")[0].fix == 'Replace "$5" with "$4".'


def test_a_context_in_another_script_allows_that_script() -> None:
    answer = "Здравствуйте! Ваш заказ отправлен сегодня."
    assert script_faults(answer, task="Reply to this customer.") != []
    assert script_faults(answer, task="Reply to this customer.", context="Где мой заказ?") == []
    assert required_faults(answer, task="Reply to this customer.", context='Include "4471".') == []


def test_the_placeholder_rule_is_attributed_and_its_fix_is_the_placeholder_edits() -> None:
    task = "Write a polite email declining a job offer at Acme"
    answer = "Dear [Recruiter's Name],\n\nThank you for the offer. I must decline it.\n\nBest regards,\nTom"
    (fault,) = placeholder_faults(answer, task=task)
    assert fault.by == RULE_PLACEHOLDER and "[Recruiter's Name]" in fault.issue
    assert 'Replace the line "Dear [Recruiter\'s Name],"' in fault.fix
    assert (
        placeholder_faults(answer, task="Write a template email declining a job offer, with placeholders")
        == []
    )


def _cases() -> list[dict[str, object]]:
    rows = []
    for name in (
        "critique_cases.jsonl",
        "critique_cases_new.jsonl",
        "critique_cases_3.jsonl",
        "critique_cases_4.jsonl",
        "critique_cases_5.jsonl",
    ):  # not the sixth: one of its answers breaks its task's word limit, a real fault its keywords do not list
        rows += [
            json.loads(line) for line in (DATASETS / name).read_text(encoding="utf-8").splitlines() if line
        ]
    return rows


def test_on_the_critique_sets_every_rule_fault_is_a_real_one_and_good_answers_get_none() -> None:
    named = 0
    for case in _cases():
        faults = rule_faults(str(case["answer"]), task=str(case["task"]))
        real = case["faults"]
        assert isinstance(real, list)
        if not real:
            assert faults == [], (case["id"], faults)
        for fault in faults:  # each names one of the case's real faults (the set's own keyword rules)
            assert any(re.search(r["match"], f"{fault.issue} {fault.fix}", re.I) for r in real), (
                case["id"],
                fault,
            )
        named += len(faults)
    # the rules name faults: placeholders, missed requirements, changed facts, other scripts and languages
    assert named >= 31


def test_on_the_judged_pairs_no_rule_fires_on_a_good_answer() -> None:
    for name in ("pairs.jsonl", "pairs_holdout.jsonl"):
        for line in (DATASETS / name).read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            assert required_faults(row["good"], task=row["task"]) == [], row["task"]
            assert facts_faults(row["good"], task=row["task"]) == [], row["task"]
            assert script_faults(row["good"], task=row["task"]) == [], row["task"]


# -- attribution ---------------------------------------------------------------------------------------------------
def test_the_attribution_is_not_in_the_grammar_and_a_written_fault_is_the_judges() -> None:
    assert "by" not in json.dumps(WrittenCritique.model_json_schema()["$defs"]["Fault"]["properties"])
    claimed = WrittenCritique(faults=[Fault(issue="It is rude.", fix="Be polite.", by=RULE_REQUIRED)])
    (kept,) = usable(claimed, task="Write a note.", context=None, answer="Go away.")
    assert kept.by == "judge"  # a model cannot pass its fault off as a rule's


def test_named_by_is_optional_and_parallel_to_the_issues() -> None:
    old = Critique.model_validate({"is_acceptable": False, "score": 3, "issues": ["a", "b"]})
    assert old.named_by == []
    assert Critique(is_acceptable=False, score=3, issues=["a"], named_by=["judge"]).named_by == ["judge"]
    with pytest.raises(ValueError, match="one critic per issue"):
        Critique(is_acceptable=False, score=3, issues=["a", "b"], named_by=["judge"])


def _judge(*, yes: float, written: str = "") -> LogprobModel:
    return LogprobModel(
        yes=lambda answer: yes, better=lambda a, b: 0.5, written=written, fault=lambda a, i: 0.9
    )


def test_the_judge_shows_rule_faults_with_their_critic_even_when_its_verdict_calls_the_answer_right() -> None:
    """Judged right (P(Yes) 0.9), the answer gets no written critique, but the rules' faults are shown."""
    model = _judge(yes=0.9)
    result = JudgeCritic(model).critique(CritiqueRequest(task=EMAIL_TASK, candidate=EMAIL_BODY + "Sam"))
    assert not result.is_acceptable
    assert result.named_by == [RULE_REQUIRED, RULE_REQUIRED]
    assert "no subject line" in result.issues[0] and "not signed as Priya" in result.issues[1]
    assert result.suggestions[1] == 'Replace the last line "Sam" with "Priya".'
    assert model.kinds() == ["verdict"]  # the rules cost no call


def test_the_judge_names_its_own_faults_beside_the_rules() -> None:
    written = json.dumps({"faults": [{"issue": "The email does not say why.", "fix": "Say why."}]})
    model = _judge(yes=0.2, written=written)
    answer = "Hi all,\n\nНа следующей неделе.\n\nThanks,\n[Your Name]"
    result = JudgeCritic(model).critique(CritiqueRequest(task=EMAIL_TASK, candidate=answer))
    assert result.issues[0] == "The email does not say why."
    assert result.named_by[0] == "judge" and result.named_by[-1] == "judge"  # the verdict's own line last
    assert RULE_PLACEHOLDER in result.named_by and RULE_REQUIRED in result.named_by
    assert len(result.named_by) == len(result.issues)


def test_a_good_answer_judged_right_gets_no_rule_fault() -> None:
    result = JudgeCritic(_judge(yes=0.9)).critique(CritiqueRequest(task=EMAIL_TASK, candidate=EMAIL_GOOD))
    assert result.issues == [] and result.named_by == []


def test_the_script_rule_is_shown_by_the_judge() -> None:
    result = JudgeCritic(_judge(yes=0.9)).critique(
        CritiqueRequest(
            task="Write a short thank-you note to a colleague.", candidate="谢谢你的帮助，我非常感激！"
        )
    )
    assert result.named_by == [RULE_SCRIPT] and "script" in result.issues[0]
