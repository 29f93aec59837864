"""The arithmetic rule: a sum the answer works out wrong is named with an edit that quotes the wrong result and the
right one, written the same way; a right sum, and any sum it cannot read without doubt, is not."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reflection_graph.critics._rule_faults import RULE_ARITHMETIC, arithmetic_faults, rule_faults

DATASETS = Path(__file__).resolve().parents[2] / "datasets"
TASK = "Answer the question."

WRONG = [
    ("3 x 4 = 13", "13", "12"),
    ("So 12 + 15 = 28.", "28", "27"),
    ("Together that is £40 + £25 = £75.", "£75", "£65"),
    ("Two at 12.50 each: 2 × 12.50 = 24.00.", "24.00", "25.00"),
    ("7 pens cost 7 x 3 = 24 dollars.", "24", "21"),
    ("5 * 6 = 35", "35", "30"),
    ("4 · 2.5 = 9", "9", "10"),
    ("90 − 25 = 55", "55", "65"),
    ("90 - 25 = 75", "75", "65"),
    ("100 ÷ 4 = 20", "20", "25"),
    ("12 plus 15 is 28.", "28", "27"),
    ("3 times 4 equals 13.", "13", "12"),
    ("9 minus 4 makes 6.", "6", "5"),
    ("100 divided by 4 is 20.", "20", "25"),
    ("6 multiplied by 7 gives 43.", "43", "42"),
    ("1,200 + 300 = 1,600", "1,600", "1,500"),
    ("$1,250.50 + $250 = $1,600.50", "$1,600.50", "$1,500.50"),
    ("2 + 3 × 4 = 21", "21", "14"),
    ("20% of 80 is 18.", "18", "16"),
    ("15% of 80 is 15.", "15", "12"),
    ("A tip of 20 percent of $45 is $8.", "$8", "$9"),
    ("4 tickets at £12.50 each come to £45.00.", "£45.00", "£50.00"),
    ("3 nights at $120 a night, $340 in total.", "$340", "$360"),
    ("Four tickets at £12.50 each come to £48.00, so you get £52.00 back.", "£48.00", "£50.00"),
    ("5 books at €8 apiece cost €45.", "€45", "€40"),
    ("6 hours at $25 per hour comes to $125.", "$125", "$150"),
    ("10 chairs for £15 each, £140 altogether.", "£140", "£150"),
]


@pytest.mark.parametrize(("answer", "wrong", "right"), WRONG)
def test_a_wrong_sum_is_named_with_the_right_result_written_the_same_way(
    answer: str, wrong: str, right: str
) -> None:
    faults = arithmetic_faults(answer, task=TASK)
    assert len(faults) == 1, faults
    assert faults[0].by == RULE_ARITHMETIC
    assert faults[0].fix == f'Replace "{wrong}" with "{right}".'
    assert f"{right}, not {wrong}" in faults[0].issue


RIGHT = [
    "3 x 4 = 12",
    "12 + 15 = 27, so the answer is 27.",
    "£40 + £25 = £65",
    "2 × 12.50 = 25.00",
    "100 / 3 = 33.33",
    "100 / 3 = 33.3",
    "2 / 3 = 0.67 (or 0.66 cut short)",
    "2 / 3 = 0.66",
    "10 / 3 = 3",
    "1,200 + 300 = 1,500",
    "2 + 3 × 4 = 14",
    "2 + 3 × 4 = 20",  # read left to right, as people sometimes write it
    "20% of 80 is 16.",
    "12 plus 15 is 27.",
    "100 divided by 4 is 25.",
    "4 tickets at £12.50 each come to £50.00.",
    "3 nights at $120 a night, $360 in total.",
    "Four tickets at £12.50 each come to £50.00, so you get £50.00 back from your £100 note.",
    "3 x 12.75 = 38",  # rounded to the whole pounds it shows
]


@pytest.mark.parametrize("answer", RIGHT)
def test_a_right_sum_is_not_named(answer: str) -> None:
    assert arithmetic_faults(answer, task=TASK) == []


AMBIGUOUS = [
    "The release is 2024-05-01 = launch day 1.",
    "We meet at 10:30 + 2 = 12:30 on Friday.",
    "Call 0800 123 456 or 555-1234.",
    "Upgrade from v3.1.4 to 3.2.",
    "Pages 10-15 cover it; see 1/2/2024.",
    "```\nprint(3 + 4 == 8)\nx = 3 + 4 = 8\n```",
    "Run `3 + 4 = 8` to see the bug.",
    'The student wrote "3 + 4 = 8".',
    "The sum (3 + 4 = 8) in the book is a typo.",
    "3 + 4 = 8 is wrong; it is 7.",
    "It is not true that 12 + 15 = 28.",
    "If 3 x 4 = 13, the rest follows.",
    "That is roughly 3 x 33 = 100 people.",
    "2x + 3 + 4 = 10, so x = 1.5.",
    "-3 + 4 = 2 is what a careless reader gets.",
    "2 + 3 = 5 + 4 = 9",
    "£40 + $25 = £65",
    "4 tickets for £50 in total.",
    "2 adults and 3 children at £10 each come to £50.",
    "4 tickets at £12.50 each plus a £5 booking fee come to £55.",
    "3 nights at $120 a night, $400 in total with tax.",
    "500 g at £4 comes to £2.",
    "3 nights at $120 per person come to $720.",
    "4 tickets at £12.50 each come to about £50.",
    "Single tickets at £5 each come to £20.",
    "20% of 80 people is 16 and 25% of the rest is 16.",
]


@pytest.mark.parametrize("answer", AMBIGUOUS)
def test_a_sum_the_rule_cannot_read_without_doubt_is_not_named(answer: str) -> None:
    assert arithmetic_faults(answer, task=TASK) == []


def test_a_sum_the_task_holds_is_the_tasks_not_the_answers() -> None:
    task = "My friend says 3 x 4 = 13. Explain multiplication to her kindly."
    assert arithmetic_faults("Your sum, 3 x 4 = 13, is a common slip.", task=task) == []
    assert arithmetic_faults("She wrote 3 x 4 = 13", task=task) == []


def test_each_wrong_result_is_named_once() -> None:
    answer = "First, 3 x 4 = 13. Then 5 + 5 = 11. Again: 3 x 4 = 13."
    assert [f.fix for f in arithmetic_faults(answer, task=TASK)] == [
        'Replace "13" with "12".',
        'Replace "11" with "10".',
    ]


def test_a_whole_answer_with_a_wrong_total_among_right_figures() -> None:
    task = (
        "I'm booking 3 nights at the Harbour Inn at $120 a night and 2 dinners at $45 each. Write a short note "
        "to my partner with the costs."
    )
    answer = (
        "Hi Sam,\n\nI've booked the Harbour Inn for Friday to Monday. 3 nights at $120 a night, $340 in total. "
        "I also booked 2 dinners at $45 each, which comes to $90.\n\nSo the trip is $340 + $90 = $430 all in, "
        "due on 12-05-2025 at 14:30.\n\nSee you soon,\nAlex"
    )
    assert [f.fix for f in arithmetic_faults(answer, task=task)] == ['Replace "$340" with "$360".']


def test_a_whole_right_answer_with_dates_times_and_phone_numbers_is_not_named() -> None:
    task = "Tell the customer what 4 tickets at £12.50 cost, and how to pay."
    answer = (
        "Dear Ms Lee,\n\n4 tickets at £12.50 each come to £50.00. Please pay by 2024-05-01 (call 020 7946 0958, "
        "9:00-17:00, Mon-Fri), quoting ref 12/345-6.\n\n1. Go to the box office.\n2. Give your name.\n\n"
        "Kind regards,\nThe Box Office"
    )
    assert arithmetic_faults(answer, task=task) == []


def test_rule_faults_names_the_wrong_sum_after_the_other_rules() -> None:
    task = "What do 7 pens cost at 3 dollars each? Answer in one sentence."
    faults = rule_faults("7 pens cost 7 x 3 = 24 dollars. That is a lot.", task=task)
    assert [f.by for f in faults] == ["rule:required", RULE_ARITHMETIC]
    assert faults[-1].fix == 'Replace "24" with "21".'


@pytest.mark.parametrize(
    "answer",
    [
        "We're open 9 - 5 = 8 hours a day.",
        "Open 9-5 = 8 hours, Mon–Fri.",
        "Read chapters 3 + 4 = 50 pages in all.",
        "Steps 1 + 2 are 10 minutes.",
        "Section 2 - 1 is 12 pages long.",
    ],
)
def test_a_range_or_a_label_is_not_read_as_a_sum(answer: str) -> None:
    assert arithmetic_faults(answer, task=TASK) == []


def test_the_fix_quotes_the_result_as_the_answer_spaces_it() -> None:
    assert [f.fix for f in arithmetic_faults("£ 40 + £ 25 = £ 75", task=TASK)] == [
        'Replace "£ 75" with "£65".'
    ]


def test_a_result_without_money_or_trailing_zeros_gets_as_few_decimals_as_the_value_needs() -> None:
    assert [f.fix for f in arithmetic_faults("10% of 250 is 2.5", task=TASK)] == ['Replace "2.5" with "25".']
    assert [f.fix for f in arithmetic_faults("7.5 + 2.25 = 9.5", task=TASK)] == ['Replace "9.5" with "9.75".']


def test_on_the_judged_pairs_good_answers_get_no_arithmetic_fault_and_wrong_sums_are_named() -> None:
    named = []
    for name in ("pairs.jsonl", "pairs_holdout.jsonl"):
        for line in (DATASETS / name).read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            assert arithmetic_faults(row["good"], task=row["task"]) == [], row["task"]
            named += arithmetic_faults(row["bad"], task=row["task"])
    assert {f.fix for f in named} >= {'Replace "124" with "144".', 'Replace "32" with "42".'}
