"""The passed-on rule names a phone number, email address, date or time a task sentence plainly asks to pass on
("give him my number, ...", "questions go to ... on ...", "tell them it is due by ...", "ask them to reply by ...",
"announcing ...: 10 am to 1 pm") that the answer holds in no form, with an edit quoting it; it stays silent where the
answer holds it in another form, where the task does not ask for it, moves it, or asks for a summary."""

from __future__ import annotations

import pytest

from reflection_graph.critics._rule_faults import RULE_REQUIRED, given_faults

# (task, answer, words the issue holds, the fix's opening)
FAULTY = [
    (
        "Email my landlord about the leak. Give him my number, 07911 482305, so he can call.",
        "Dear Mr Ray,\n\nThe kitchen tap leaks.\n\nBest,\nAna",
        'the phone number, "07911 482305"',
        'Add "07911 482305" to the answer, in or after "The kitchen tap leaks."',
    ),
    (
        "Write a notice about the lift repair. Questions go to the caretaker on 0161 555 0192.",
        "The lift is out of order this week. Please ask the caretaker if you have questions.",
        '"0161 555 0192"',
        'Add "0161 555 0192"',
    ),
    (
        "Write to the team, telling them to send questions to help@example.org.",
        "Hi all, please send any questions to the help desk.",
        'the email address, "help@example.org"',
        'Add "help@example.org"',
    ),
    (
        "Write an email asking the volunteers to send their availability by Friday 5 December.",
        "Hi all,\n\nPlease send me your availability soon.\n\nThanks!",
        'the deadline, "by Friday 5 December"',
        'Add "by Friday 5 December"',
    ),
    (
        "Write a note reminding the team that reports are due this Friday, 28 June.",
        "Hi team, please send your reports soon.",
        'the deadline, "28 June"',
        'Add "28 June"',
    ),
    (
        "Write a post announcing the bake sale: Saturday 17 May, 10 am to 1 pm, in the church hall.",
        "Join us for the bake sale on Saturday 17 May in the church hall!",
        'the time, "10 am to 1 pm"',
        'Add "10 am to 1 pm"',
    ),
]

GOOD = [
    (FAULTY[0][0], "Dear Mr Ray,\n\nThe kitchen tap leaks. You can call me on 07911-482-305.\n\nBest,\nAna"),
    (FAULTY[0][0], "Dear Mr Ray,\n\nThe tap leaks. My number is +44 7911 482305.\n\nBest,\nAna"),
    (FAULTY[3][0], "Hi all, please send me your availability by Friday. Thanks!"),  # the weekday
    (FAULTY[4][0], "Hi team, reports are due on 28/06."),
    (FAULTY[5][0], "Bake sale! Saturday 17 May, from 10 till 1, in the church hall."),
    (
        "Write an email declining the meeting. Do not give my number, 07911 482305.",
        "Hi, I cannot attend. Best, Ana",
    ),
    ("Reply to Jo, whose number is 07911 482305, saying yes.", "Hi Jo, yes, I would love to come!"),
    ("Summarise: 'The sale is on 17 May, 10 am to 1 pm. Call 0161 555 0192.'", "A bake sale is coming up."),
    (
        "Tell Sam the meeting on Friday 28 June is moved; propose another day.",
        "Hi Sam, can we meet on Monday?",
    ),
    ("Draft a proposal for the client. I need it by Friday 30 May.", "Proposal: a new website for Acme."),
    (
        "Remind Jo the appointment is at 4 p.m. on Thursday.",
        "Hi Jo, it is at 5 p.m. on Thursday.",
    ),  # facts' to name
]


@pytest.mark.parametrize(("task", "answer", "issue", "fix"), FAULTY, ids=[f[0][:40] for f in FAULTY])
def test_a_value_to_pass_on_that_the_answer_leaves_out_is_named(
    task: str, answer: str, issue: str, fix: str
) -> None:
    (fault,) = given_faults(answer, task=task)
    assert fault.by == RULE_REQUIRED and issue in fault.issue and fault.fix.startswith(fix), fault


@pytest.mark.parametrize(("task", "answer"), GOOD, ids=[g[0][:40] + g[1][:10] for g in GOOD])
def test_a_value_held_in_another_form_or_not_asked_for_names_nothing(task: str, answer: str) -> None:
    assert given_faults(answer, task=task) == []
