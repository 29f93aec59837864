"""The recipient rule: a greeting or a sign-off naming another person than the task does is named with an edit that
quotes the line and its correction; a right name, a generic greeting, a short form and any task that names several
people or none are not."""

from __future__ import annotations

import pytest

from reflection_graph.critics._rule_faults import RULE_RECIPIENT, recipient_faults, rule_faults

LANDLORD = (
    "Write an email to my landlord, Mr Brennan, letting him know the heating in flat 12B stopped working on Sunday "
    "night. Sign it Priyanka Rao."
)
BODY = "\n\nThe heating in flat 12B stopped working on Sunday night. Could someone take a look?\n\n"

WRONG_GREETING = [
    (
        LANDLORD,
        "Dear Mr Brenan," + BODY + "Kind regards,\nPriyanka Rao",
        "Dear Mr Brenan,",
        "Dear Mr Brennan,",
    ),
    (
        "Write to Dr Okafor asking for my test results.",
        "Hello Dr Okonkwo\n\nCould you send my results?",
        None,
        None,
    ),
    (
        "Reply to Sarah and say I can come on Friday.",
        "Hi Sara,\n\nI can come on Friday.\n\nBest,\nSam",
        None,
        None,
    ),
    (
        "Write a text message to my neighbour Greg asking if he could water my plants.",
        "Hi Mum! Could you water my plants while I'm away?",
        "Hi Mum!",
        "Hi Greg!",
    ),
    (
        "Write a short Slack message to Fatima thanking her for covering my shift.",
        "Hi Tomasz, thank you so much for covering my shift.",
        "Hi Tomasz,",
        "Hi Fatima,",
    ),
    ("Email Mr Brennan about the rent.", "Dear Mrs Brannigan,\n\nThe rent is paid.", None, None),
    (
        "Write to Ms O'Brien about the lease.",
        "Dear Ms O'Brian,\n\nIt is signed.",
        "Dear Ms O'Brian,",
        "Dear Ms O'Brien,",
    ),
    (
        "Write a short email to Dana Reyes at Northwind Labs declining the offer.",
        "Subject: Offer\n\nDear Ms Reyse,\n\nI must decline.",
        "Dear Ms Reyse,",
        "Dear Ms Reyes,",
    ),
    (
        "Write a short email to Dana Reyes at Northwind Labs declining the offer.",
        "Dear Diana,\n\nI must decline.",
        "Dear Diana,",
        "Dear Dana,",
    ),
]
FIXES = {
    "Hello Dr Okonkwo": "Hello Dr Okafor",
    "Hi Sara,": "Hi Sarah,",
    "Dear Mrs Brannigan,": "Dear Mr Brennan,",
}


@pytest.mark.parametrize(("task", "answer", "line", "fixed"), WRONG_GREETING)
def test_a_greeting_to_another_person_is_named_with_the_line_and_its_correction(
    task: str, answer: str, line: str | None, fixed: str | None
) -> None:
    faults = recipient_faults(answer, task=task)
    assert len(faults) == 1, faults
    assert faults[0].by == RULE_RECIPIENT
    greeting = answer.split("\n\n")[-2 if answer.startswith("Subject") else 0].split("\n")[0]
    line = line or next(k for k in FIXES if greeting.startswith(k))
    fixed = fixed or FIXES[line]
    assert faults[0].fix == f'Replace "{line}" with "{fixed}".'
    assert "recipient" in faults[0].issue


RIGHT_GREETING = [
    (LANDLORD, "Dear Mr Brennan," + BODY + "Kind regards,\nPriyanka Rao"),
    (LANDLORD, "Dear Mr. Brennan," + BODY + "Kind regards,\nPriyanka"),
    ("Write to Dr Okafor asking for my results.", "Dear Dr Okafor,\n\nCould you send my results?"),
    ("Reply to Sarah and say yes.", "Hi Sarah,\n\nYes!"),
    ("Reply to Sarah and say yes.", "Hi sarah,\n\nYes!"),
    ("Write a short email to Dana Reyes at Northwind Labs.", "Dear Dana,\n\nThank you."),
    ("Write a short email to Dana Reyes at Northwind Labs.", "Dear Ms Reyes,\n\nThank you."),
    ("Write a short email to Dana Reyes at Northwind Labs.", "Dear Dana Reyes,\n\nThank you."),
    ("Write to Ms O'Brien about the lease.", "Dear Ms O'Brien,\n\nThe lease is signed."),
    ("Write to Anne-Marie about the lease.", "Hi Anne-Marie,\n\nThe lease is signed."),
]


@pytest.mark.parametrize(("task", "answer"), RIGHT_GREETING)
def test_a_greeting_to_the_tasks_recipient_is_not_named(task: str, answer: str) -> None:
    assert recipient_faults(answer, task=task) == []


SKIPPED = [
    # several people the answer could greet
    ("Write an email to Sarah and Tom about the launch.", "Hi Tim,\n\nThe launch is on."),
    ("Write an email to Sarah, Tom and Ali about the launch.", "Hi Tim,\n\nThe launch is on."),
    (
        "Write to my landlord, Mr Brennan, and mention that Mrs Patel next door agrees.",
        "Dear Mr Brown,\n\nHi.",
    ),
    # no recipient named
    ("Write an email to the team about the launch.", "Hi Priya,\n\nThe launch is on."),
    ("Write an email about my trip to Paris.", "Hi Greg,\n\nParis was great."),
    ("Write a thank-you note for the gift.", "Dear Aunt Jo,\n\nThank you."),
    # generic greetings, titles and roles
    ("Write an email to Sarah about the launch.", "Hi all,\n\nThe launch is on."),
    ("Write an email to Sarah about the launch.", "Dear team,\n\nThe launch is on."),
    ("Write a cover letter to Ms Jones at Acme.", "Dear Hiring Manager,\n\nI apply."),
    ("Write to my landlord, Mr Brennan, about the heating.", "Dear Landlord,\n\nThe heating broke."),
    ("Write to Mr Brennan about the heating.", "Dear Sir or Madam,\n\nThe heating broke."),
    ("Write to Dr Okafor about my results.", "Dear Doctor,\n\nMy results?"),
    ("Write to Dr Okafor about my results.", "Good morning,\n\nMy results?"),
    # another form of the name than the task gives: a first name for a title and surname, or the reverse
    ("Write to Mr Brennan about the heating.", "Dear John,\n\nThe heating broke."),
    ("Reply to Greg about the plants.", "Dear Mr Smith,\n\nThe plants are fine."),
    # short forms and initials
    ("Write a note to Robert about dinner.", "Hi Rob,\n\nDinner at 8?"),
    ("Write a note to Robert about dinner.", "Hi Bob,\n\nDinner at 8?"),
    ("Write a note to Elizabeth about dinner.", "Hi Liz,\n\nDinner at 8?"),
    ("Write a note to Tomasz about dinner.", "Hi Tom,\n\nDinner at 8?"),
    # a family word for a relative the task speaks of
    ("Write a note to my mother, Jane, about dinner.", "Hi Mum,\n\nDinner at 8?"),
    # a possessive: the recipient is someone of Sarah's
    ("Write an email to Tom's manager about the delay.", "Dear Ms Grant,\n\nThe delay is mine."),
    ("Write an email to Tom's manager about the delay.", "Hi Sue,\n\nThe delay is mine."),
    # no greeting line
    ("Write a note to Sarah about dinner.", "Dinner at 8? Tom will come too."),
]


@pytest.mark.parametrize(("task", "answer"), SKIPPED)
def test_a_greeting_the_rule_cannot_read_without_doubt_is_not_named(task: str, answer: str) -> None:
    assert recipient_faults(answer, task=task) == []


def test_a_name_the_context_holds_counts_as_named() -> None:
    task = "Reply to Sarah and say yes."
    assert (
        recipient_faults("Hi Sally,\n\nYes!", task=task, context="Hi, it's Sally here (Sarah's assistant).")
        == []
    )
    assert len(recipient_faults("Hi Sally,\n\nYes!", task=task)) == 1


# -- the sign-off -----------------------------------------------------------------------------------------------------
WRONG_SIGN_OFF = [
    (LANDLORD, "Dear Mr Brennan," + BODY + "Kind regards,\nPriyanka Roa", "Priyanka Roa", "Priyanka Rao"),
    (LANDLORD, "Dear Mr Brennan," + BODY + "Kind regards,\nAnita", "Anita", "Priyanka Rao"),
    (
        "Write a note to Sarah from Tom about dinner.",
        "Hi Sarah,\n\nDinner at 8?\n\nLove,\nTim",
        "Tim",
        "Tom",
    ),
    (
        "Write a short email to Mr Brennan about the rent. Sign it Dr Tom Hale.",
        "Dear Mr Brennan,\n\nThe rent is paid.\n\nThanks, Tim Hale",
        "Thanks, Tim Hale",
        "Thanks, Tom Hale",
    ),
    (
        LANDLORD,
        "Dear Mr Brennan," + BODY + "Best regards,\nPriyanka Roa\nFlat 12B",
        "Priyanka Roa",
        "Priyanka Rao",
    ),
]


@pytest.mark.parametrize(("task", "answer", "line", "fixed"), WRONG_SIGN_OFF)
def test_a_sign_off_as_another_person_is_named_with_the_line_and_its_correction(
    task: str, answer: str, line: str, fixed: str
) -> None:
    faults = recipient_faults(answer, task=task)
    assert [f.fix for f in faults] == [f'Replace "{line}" with "{fixed}".']
    assert faults[0].by == RULE_RECIPIENT
    assert "signed" in faults[0].issue


RIGHT_SIGN_OFF = [
    (LANDLORD, "Dear Mr Brennan," + BODY + "Kind regards,\nPriyanka Rao"),
    (LANDLORD, "Dear Mr Brennan," + BODY + "Kind regards,\nPriyanka"),
    (LANDLORD, "Dear Mr Brennan," + BODY + "Kind regards,\nP. Rao"),
    (LANDLORD, "Dear Mr Brennan," + BODY + "Kind regards,\nPriya Rao"),
    ("Write a note to Sarah from Tom about dinner.", "Hi Sarah,\n\nDinner at 8?\n\nLove,\nTom"),
    ("Write a note to Sarah from Tom about dinner.", "Hi Sarah,\n\nDinner at 8?\n\nLove,\nTom Harris"),
    ("Write a note to Sarah from Tom about dinner.", "Hi Sarah,\n\nDinner at 8?\n\nThanks, Tommy"),
    # no signer, or several
    ("Write a note to Sarah about dinner.", "Hi Sarah,\n\nDinner at 8?\n\nLove,\nTim"),
    ("Write a note to Sarah from Tom and Ali about dinner.", "Hi Sarah,\n\nDinner at 8?\n\nLove,\nAli"),
    # a role or a team under the closing
    (LANDLORD, "Dear Mr Brennan," + BODY + "Kind regards,\nThe Tenants"),
    # the signer's name in the lines of the sign-off
    (LANDLORD, "Dear Mr Brennan," + BODY + "Kind regards,\nAnita\nfor Priyanka Rao"),
    # "Thanks, Sarah!" thanks the recipient; "signed by" speaks of another letter
    ("Write a note to Sarah from Tom about dinner.", "Hi Sarah,\n\nDinner at 8?\nThanks, Sarah!"),
    ("Reply to the letter signed by Mr Brennan.", "Dear Mr Brennan,\n\nNoted.\n\nBest,\nPriya"),
    # a title in the task's signature is not a name
    ("Write to Mr Brennan. Sign it as Dr Rao.", "Dear Mr Brennan,\n\nNoted.\n\nBest,\nPriyanka Rao"),
    # no closing over the last line
    (LANDLORD, "Dear Mr Brennan," + BODY + "Priyanka Rao\nFlat 12B\nSent from Anita's phone"),
]


@pytest.mark.parametrize(("task", "answer"), RIGHT_SIGN_OFF)
def test_a_sign_off_the_rule_reads_as_right_or_cannot_read_is_not_named(task: str, answer: str) -> None:
    assert recipient_faults(answer, task=task) == []


def test_a_signature_the_answer_lacks_is_left_to_the_required_rule() -> None:
    task = "Write a thank-you email to Mr Okafor for the visit. Sign it as Daniel Brooks."
    answer = "Dear Mr Okafor,\n\nThank you for hosting us.\n\nWith kind regards,\nDaniel Brookes"
    assert recipient_faults(answer, task=task) == []
    assert [f.by for f in rule_faults(answer, task=task)] == ["rule:required"]


def test_a_whole_email_to_the_wrong_person_signed_by_the_wrong_one_gets_both_faults_after_the_other_rules() -> (
    None
):
    task = (
        "Write an email to my landlord, Mr Brennan, letting him know the heating in flat 12B stopped working on "
        "Sunday night, with a subject line. Sign it Priyanka Rao."
    )
    answer = (
        "Dear Mr Brenan,\n\nI'm writing to let you know that the heating in flat 12B stopped working on Sunday "
        "night, and the flat has been cold since.\n\nThank you for your help.\n\nKind regards,\nPriyanka Roa"
    )
    faults = rule_faults(answer, task=task)
    assert [f.by for f in faults] == ["rule:required", RULE_RECIPIENT, RULE_RECIPIENT]
    assert [f.fix for f in faults[1:]] == [
        'Replace "Dear Mr Brenan," with "Dear Mr Brennan,".',
        'Replace "Priyanka Roa" with "Priyanka Rao".',
    ]


def test_a_whole_right_email_is_not_named() -> None:
    task = (
        "Write a short email to Dana Reyes at Northwind Labs declining their offer for the Data Analyst position. "
        "Thank her for the offer. Sign it as Sam Patel."
    )
    answer = (
        "Subject: Data Analyst offer\n\nDear Dana,\n\nThank you for offering me the Data Analyst position at "
        "Northwind Labs. After careful thought, I have decided to decline.\n\nBest regards,\nSam Patel"
    )
    assert rule_faults(answer, task=task) == []
