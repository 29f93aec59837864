"""The facts rule reads a code or number the task gives after a word ("order 4417", "flat 12B", "TP 1357",
"spring 2027") that the answer changes: after the same word, a variant of the same shape the task does not give
(two characters swapped, one changed, or any where the word is not a small one), and names it with the exact edit;
never an amount, a time, list numbering, a value the task itself holds, one the task leaves to the writer, or one
the answer also gives right."""

from __future__ import annotations

import pytest

from reflection_graph.critics._rule_faults import RULE_FACTS, facts_faults

# (task, answer, the exact fix)
FAULTY = [
    (
        "Tell Ms Lee that order 4417 ships today.",
        "Dear Ms Lee, order 4471 ships today.",
        'Replace "4471" with "4417".',
    ),
    (
        "Report that the boiler in flat 12B is broken.",
        "The boiler in flat 21B is broken.",
        'Replace "21B" with "12B".',
    ),
    (
        "Say my flight TP 1357 lands at noon.",
        "My flight TP 1537 lands at noon.",
        'Replace "1537" with "1357".',
    ),
    ("Say the hall opens in spring 2027.", "The hall opens in spring 2028.", 'Replace "2028" with "2027".'),
    ("Invite the team to Room 4B on Monday.", "Join us in Room 2A on Monday.", 'Replace "2A" with "4B".'),
    (
        "Quote reference #AB1234 in the reply.",
        "Your reference number AB1243 is noted.",
        'Replace "AB1243" with "AB1234".',
    ),
]

GOOD = [
    ("Tell Ms Lee that order 4417 ships today.", "Dear Ms Lee, your order (#4417) ships today."),
    ("Tell Ms Lee that order 4417 ships today.", "Order 4417 ships today; order 4471 shipped last week."),
    (
        "Compare orders 4417 and 4471; say order 4417 ships today.",
        "Order 4471 ships today.",
    ),  # the task holds it
    ("Book Room 4B for Monday, or another room if it is taken.", "I booked Room 2A for Monday."),
    ("List 3 tips about tea.", "1. Boil.\n2. Pour.\n3. Steep."),
    ("Say we were founded in 2014 and this is our 10th year.", "In 2024 we mark ten years."),  # 2014 + 10
    ("Tell them the essay is 1500 words long.", "The essay runs to about 1,500 words."),
    ("Say the office is in Room 4B.", "The office is in room 4b."),
    ("Tell them the flight is TP 1357.", "Your flight, TP1357, is confirmed."),
]


@pytest.mark.parametrize(("task", "answer", "fix"), FAULTY, ids=[f[0][:40] for f in FAULTY])
def test_a_changed_code_is_named_with_the_exact_edit(task: str, answer: str, fix: str) -> None:
    (fault,) = facts_faults(answer, task=task)
    assert fault.by == RULE_FACTS and fault.fix == fix, fault


@pytest.mark.parametrize(("task", "answer"), GOOD, ids=[g[0][:40] for g in GOOD])
def test_a_code_kept_or_not_a_code_names_nothing(task: str, answer: str) -> None:
    assert facts_faults(answer, task=task) == []


def test_an_amount_or_a_time_is_left_to_their_own_rule() -> None:
    """ "$1520" for "$1250" is named once, as an amount; "10:54" for "10:45" once, as a time: never as a code."""
    (fee,) = facts_faults("The fee of $1520 is due.", task="Write that the fee of $1250 is due.")
    assert fee.fix == 'Replace "$1520" with "$1250".'
    task = "Say the train leaves at 10:45 from platform 9."
    (time,) = facts_faults("The train leaves at 10:54 from platform 9.", task=task)
    assert time.fix == 'Replace "10:54" with "10:45".'
