"""Template placeholders: what counts as one, and the rule selection respects (a candidate that brought one in ranks
below every candidate without one), down to the graph's answer; and whole lines in the task's script."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reflection_graph import create_reflection_graph
from reflection_graph._text import _placeholders
from reflection_graph._text._lines import scripts, whole_line
from reflection_graph._text._placeholders import (
    asks_for_template,
    inline_placeholders,
    introduced_placeholders,
    placeholders,
    with_salutations_named,
    without_placeholder_lines,
)
from reflection_graph._text._rule_revision import bare_sign_off, placeholder_edits, rule_revision
from reflection_graph.loop import _rules
from tests.fakes import FakeCriticModel, RecordingChatModel, critique


@pytest.mark.parametrize(
    ("text", "slots"),
    [
        ("Best regards,\n[Your Name]", ["[Your Name]"]),
        ("Dear <name>, welcome to [Company] on {start date}.", ["<name>", "[Company]", "{start date}"]),
        ("Hi {name}, see you soon.", ["{name}"]),
        ("Dear [Recruiter's Name],\n\nBest,\n[Your Name]", ["[Recruiter's Name]", "[Your Name]"]),
        ("Dear [Hiring Manager’s Name],", ["[Hiring Manager’s Name]"]),
        ("<a href='x'> and ['a', 'b']", []),  # an attribute, a list of strings
        ("See [1], [x] and [the docs](https://example.org).", []),  # a citation, a checkbox, a link
        ("Write to <dana@example.org> or <https://example.org>.<br>", []),  # an address, a URL, a tag
        ("The area is x^{2}, as in \\frac{a}{b}.", []),  # math
        ("Use `{name}` in the template string.", []),  # inline code
        ("```python\nprint(f'{name}')\n```\nDone.", []),  # a code fence
        ('def greet(name):\n    return f"Hello {name}"', []),  # code
        ("Best,\n[Name]", ["[Name]"]),  # a lone slot under a sign-off, though it has no space
        ("Hi [Name], the value is scores[Name].", ["[Name]"]),  # the second is an index
    ],
)
def test_what_is_a_placeholder(text: str, slots: list[str]) -> None:
    assert placeholders(text) == slots


@pytest.mark.parametrize(
    "text",
    [
        "[flake8]\nmax-line-length = 100\nexclude = .git,__pycache__",  # an INI file
        "Put this in setup.cfg:\n\n[flake8]\nmax-line-length = 100\n\nThen run flake8.",
        '[tool.ruff]\nline-length = 100\n\n[tool.ruff.lint]\nselect = ["E", "F"]',  # a TOML file
        "Add a [tool.ruff] table to pyproject.toml, headed by its own line:\n\n[tool.ruff]",
        '[[bin]]\nname = "app"',  # a TOML array of tables
        "[mypy]\n\nstrict = true",  # a header with a key under it, past a blank line
        "SELECT\n    [Customer Name],\n    [Order Date]\nFROM [Sales Orders];",  # T-SQL identifiers
        "Run this:\n\nUPDATE [Sales Orders] SET [Order Date] = GETDATE()\nWHERE [Order Id] = 7;",
        "select\n    [Customer Name]\nfrom [Sales Orders];",  # lower case, a statement ended by ';'
        "Setup is quick.\n\n[Read the guide][guide]\n\n[guide]: https://example.org/guide",  # reference links
        'Read [the guide] first.\n\n[the guide]: https://example.org/guide "Guide"',  # a shortcut reference
        "Print scores[Name] for each student, and table[Row Key] for each row.",  # indexes
        "Use a List<Item> here.",  # a type argument
    ],
)
def test_code_config_links_and_indexes_hold_no_placeholder(text: str) -> None:
    assert placeholders(text) == []


@pytest.mark.parametrize(
    "text",
    [
        "Select the option you like; then write Dear [Name],",  # prose that opens with a SQL word
        "Update: see [Company Name] for details.\nFrom then on, sign as [Your Name].",
        "Dear [Recipient's Full Name]:\nNo.",  # a colon after a greeting slot is no link definition
        "Best regards,\n[Your Name]\nx = 1",  # one `key = value` line: not a config file
    ],
)
def test_prose_that_looks_a_little_like_code_keeps_its_placeholders(text: str) -> None:
    assert placeholders(text)


@pytest.mark.parametrize(
    "task",
    [
        "Write an offer letter. Put the applicant's name in square brackets so I can mail-merge it.",
        "Write a welcome email with a merge field for the recipient's name.",
        "Write a form letter to our donors.",
        "Write the reply with the customer's name bracketed.",
    ],
)
def test_a_task_asking_for_merge_fields_asks_for_a_template(task: str) -> None:
    answer = "Dear [Applicant Name],\n\nWelcome aboard.\n\nBest,\n[Your Name]"
    assert asks_for_template(task)
    assert introduced_placeholders(answer, task=task) == []
    assert inline_placeholders(answer, task=task) == []
    assert without_placeholder_lines(answer, task=task) == answer
    assert with_salutations_named(answer, task=task) == answer


def test_only_a_placeholder_nothing_earlier_held_is_brought_in() -> None:
    task = "Write to Dana declining the offer."
    assert introduced_placeholders("Hi Dana,\n[Your Name]", task=task) == ["[Your Name]"]
    assert introduced_placeholders("Hi Dana,\n[your  name]", task=task, earlier=("Bye, [Your Name]",)) == []
    assert introduced_placeholders("Hi [Name]", task="Hi [Name]: fill it in") == []
    assert introduced_placeholders("Hi [Name]", task="Write an email template for declining offers.") == []
    assert introduced_placeholders("Hi [Name]", task=task, context="Leave a blank for the name.") == []
    assert asks_for_template("Write an email template") and not asks_for_template(task, None)


# -- selection ---------------------------------------------------------------------------------------------------
def _round(score: float, placeholder: bool, echo: bool = False) -> dict[str, Any]:
    return {"candidate": "c", "score": score, "critique": {}, "placeholder": placeholder, "echo": echo}


@given(st.lists(st.tuples(st.floats(0, 10), st.booleans(), st.booleans()), min_size=1, max_size=8))
def test_a_placeholder_is_never_selected_while_a_candidate_without_one_exists(
    rows: list[tuple[float, bool, bool]],
) -> None:
    rounds: list[Any] = [_round(score, slot, echo) for score, slot, echo in rows]
    for select in ("best", "last"):
        chosen = _rules.select_round(rounds, select)
        if any(not slot and not echo for _, slot, echo in rows):
            assert not chosen["placeholder"] and not chosen["echo"]
    samples = [_round(score, slot) for score, slot, _ in rows]
    if not all(slot for _, slot, _ in rows):
        assert not samples[_rules.best_sample(samples)]["placeholder"]


GOOD = "Dear Dana,\n\nThank you for the offer. I must decline it.\n\nBest regards,\nSam"


def test_the_graph_keeps_the_answer_without_a_placeholder_the_critic_scored_lower() -> None:
    inline = GOOD.replace("Data Analyst offer", "[Job Title] offer").replace(
        "the offer", "the [Job Title] offer"
    )
    generator = RecordingChatModel(replies=[GOOD, inline])  # an inline slot no rule can write out
    critic = FakeCriticModel(critiques=[critique(5.0), critique(9.0)])
    result = create_reflection_graph(generator, critic=critic, max_iterations=2).invoke(
        {"task": "Write to Dana declining the offer."}
    )
    assert [r["placeholder"] for r in result["trajectory"]] == [False, True]
    assert result["trajectory"][1]["score"] > result["trajectory"][0]["score"]
    assert result["candidate"] == GOOD


@pytest.mark.parametrize(
    ("answer", "left"),
    [
        (GOOD.replace("Sam", "[Your Name]"), GOOD.replace("\nSam", "")),
        (GOOD.replace("Sam", "[Your Name]\n[Your Position], [Company]"), GOOD.replace("\nSam", "")),
        ("Dear [Name],\nI decline.", "Dear [Name],\nI decline."),  # inline: the reviser's to write out
        ("Hi Dana,\n- [x] done", "Hi Dana,\n- [x] done"),  # not a placeholder
    ],
)
def test_a_final_answer_leaves_out_a_line_that_is_only_a_placeholder(answer: str, left: str) -> None:
    task = "Write to Dana declining the offer."
    assert without_placeholder_lines(answer, task=task) == left
    assert without_placeholder_lines(answer, task="Write an email template declining offers.") == answer


def test_a_repeated_revision_is_no_round_and_the_rule_proposes_the_fix_the_critic_judges() -> None:
    signed = GOOD.replace("Sam", "[Your Name]")
    generator = RecordingChatModel(replies=[signed, signed])  # the revision returns its input word for word
    critic = FakeCriticModel(critiques=[critique(5.0), critique(9.0, ok=True)])
    result = create_reflection_graph(generator, critic=critic, max_iterations=2).invoke(
        {"task": "Write to Dana declining the offer."}
    )
    rounds = result["trajectory"]
    fixed = "Dear Dana,\n\nThank you for the offer. I must decline it."  # no slot, and no bare sign-off left
    assert [r["candidate"] for r in rounds] == [signed, fixed]
    assert [r["placeholder"] for r in rounds] == [True, False]  # a slot on a line of its own counts too
    assert rounds[1]["tactic"] == "rule" and rounds[1]["repeated"] == ["revise"]
    assert len(critic.received) == 2  # the repeat was not judged; the rule's candidate was
    assert result["candidate"] == fixed == rounds[1]["candidate"]  # the answer is the judged candidate


def test_the_answer_is_never_rewritten_after_the_loop() -> None:
    signed = GOOD.replace("Sam", "[Your Name]")
    generator = RecordingChatModel(replies=[signed, signed.replace("Dear", "Hi")])
    critic = FakeCriticModel(critiques=[critique(5.0), critique(9.0, ok=True)])
    result = create_reflection_graph(generator, critic=critic, max_iterations=2).invoke(
        {"task": "Write to Dana declining the offer."}
    )
    rounds = result["trajectory"]
    # the revision kept the slot: the rule's fix of it is the candidate the critic judged, and the answer is it
    assert rounds[1]["tactic"] == "revise+rule" and "[Your Name]" not in rounds[1]["candidate"]
    assert rounds[1]["candidate"] == "Hi Dana,\n\nThank you for the offer. I must decline it."
    assert result["candidate"] == rounds[1]["candidate"]


@pytest.fixture
def scans(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """How often each text's prose is scanned for slots, with the memos emptied first."""
    for memo in (_placeholders._held, _placeholders._reading, _placeholders._introduced):
        memo.cache_clear()
    seen: Counter[str] = Counter()
    prose = _placeholders._prose

    def counted(text: str) -> str:
        seen[text] += 1
        return prose(text)

    monkeypatch.setattr(_placeholders, "_prose", counted)
    return seen


def test_a_candidate_is_scanned_once_whoever_asks(scans: Counter[str]) -> None:
    task, earlier = "Write to Dana declining the offer.", "Dear [Name],\nNo."
    candidate = "Dear [Name],\nI decline.\n[Your Name]"
    assert inline_placeholders(candidate, task=task) == ["[Name]", "[Your Name]"]  # generate, then the judge
    assert inline_placeholders(candidate, task=task) == ["[Name]", "[Your Name]"]
    assert inline_placeholders(candidate, task=task, earlier=(earlier,)) == ["[Your Name]"]
    assert without_placeholder_lines(candidate, task=task) == "Dear [Name],\nI decline."  # the rule
    assert scans[candidate] == 1 and scans[earlier] == 1


def test_the_graph_scans_each_candidate_once(scans: Counter[str]) -> None:
    signed = GOOD.replace("Sam", "[Your Name]")
    generator = RecordingChatModel(replies=[signed, signed.replace("Dear", "Hi")])
    critic = FakeCriticModel(critiques=[critique(5.0), critique(9.0, ok=True)])
    result = create_reflection_graph(generator, critic=critic, max_iterations=2).invoke(
        {"task": "Write to Dana declining the offer."}
    )
    fixed = "Hi Dana,\n\nThank you for the offer. I must decline it."  # the revision, fixed by the rule
    assert result["candidate"] == fixed
    assert scans == Counter({signed: 1, signed.replace("Dear", "Hi"): 1})  # the fix holds no bracket to scan


def test_code_is_never_checked_for_placeholders() -> None:
    code = 'def greet(name):\n    return "Hi [Your Name]"\n'
    generator = RecordingChatModel(replies=["def greet(name):\n    return 'Hi'\n", code])
    critic = FakeCriticModel(critiques=[critique(5.0), critique(9.0)])
    result = create_reflection_graph(generator, critic=critic, max_iterations=2, focus="code").invoke(
        {"task": "Write greet(name)."}
    )
    assert [r["placeholder"] for r in result["trajectory"]] == [False, False]
    assert result["candidate"] == code.strip()


# -- whole lines -------------------------------------------------------------------------------------------------
LATIN = frozenset({"LATIN"})


@pytest.mark.parametrize(
    ("line", "kept"),
    [
        (
            "The email does not mention the reason for declining the offer, which is important to show respect to",
            "",
        ),
        (
            "Add a brief explanation of why you declined. For example: 'I appreciate the邀",
            "Add a brief explanation of why you declined.",
        ),
        ("Replace 'Tom' with your name.", "Replace 'Tom' with your name."),
        ("Use a greeting, e.g. Dear Dana. Then sign off", "Use a greeting, e.g. Dear Dana."),
        ("It costs 3.5 dollars, not 4.", "It costs 3.5 dollars, not 4."),
        ('Say "Thank you." at the end!', 'Say "Thank you." at the end!'),
        ("Missing sign-off", ""),  # not a sentence
        ("Спасибо за письмо.", ""),  # another script
    ],
)
def test_whole_line_keeps_whole_sentences_in_the_tasks_script(line: str, kept: str) -> None:
    assert whole_line(line, LATIN) == kept


def test_scripts_group_han_and_kana_and_ignore_digits_and_punctuation() -> None:
    assert scripts("日本語のテキスト、カタカナ") == {"CJK"}
    assert scripts("Write 3 emails, ½ page!") == {"LATIN"}
    assert scripts("Café naïve") == {"LATIN"}
    assert (
        whole_line("メールに感謝がありません。", scripts("日本語で書いてください"))
        == "メールに感謝がありません。"
    )


@pytest.mark.parametrize(
    ("answer", "named"),
    [
        ("Dear [Recruiter's Name],\n\nI decline.", "Dear Recruiter,\n\nI decline."),
        ("  Hi [Hiring Manager's name]!\nNo.", "  Hi Hiring Manager!\nNo."),
        ("Dear [Name],\nNo.", "Hello,\nNo."),
        ("Dear [Recipient's Full Name]:\nNo.", "Hello:\nNo."),
        ("Hello <your name>,\nNo.", "Hello,\nNo."),
        ("Dear Recruiter's Name,\nNo.", "Dear Recruiter,\nNo."),  # the brackets dropped, the slot kept
        ("Dear Recipient's Name,\nNo.", "Hello,\nNo."),
        ("Dear Mr. Name,\nNo.", "Dear Mr. Name,\nNo."),  # a name, not a slot
        (
            "Dear Dana,\nI decline [Company]'s offer.",
            "Dear Dana,\nI decline [Company]'s offer.",
        ),  # not a greeting
        ("Dear [Name] and team,\nNo.", "Dear [Name] and team,\nNo."),  # more than the slot: the reviser's
    ],
)
def test_a_greeting_slot_is_addressed_to_the_role_it_names(answer: str, named: str) -> None:
    task = "Write to the recruiter declining the offer."
    assert with_salutations_named(answer, task=task) == named
    template = "Write an email template declining offers."  # a template asked for keeps its slots
    assert with_salutations_named(answer, task=template) == answer


def test_a_greeting_slot_every_revision_keeps_is_named_by_the_rule_and_judged() -> None:
    slotted = GOOD.replace("Dear Dana", "Dear [Recruiter's Name]")
    generator = RecordingChatModel(replies=[slotted, slotted.replace("\nSam", "\nSam Lee")])
    critic = FakeCriticModel(critiques=[critique(5.0), critique(6.0), critique(7.0)])
    graph = create_reflection_graph(generator, critic=critic, max_iterations=3, min_iterations=3)
    result = graph.invoke({"task": "Write to the recruiter declining the offer."})
    rounds = result["trajectory"]
    assert [r["placeholder"] for r in rounds] == [True, False]
    assert (
        result["stop_reason"] == "plateau"
    )  # round 3's replies, fixed, were round 2's candidate: no new one
    assert rounds[0]["candidate"] == slotted  # the rounds keep what was written
    assert rounds[1]["tactic"] == "revise+rule" and rounds[1]["candidate"].startswith("Dear Recruiter,")
    assert rounds[1]["candidate"].endswith("Sam Lee")
    assert result["candidate"] in [r["candidate"] for r in rounds]


@pytest.mark.parametrize(
    ("answer", "fixed"),
    [
        ("Dear Dana,\n\nI decline.\n\nSincerely,\n[Your Name]", "Dear Dana,\n\nI decline."),
        ("Dear Dana,\n\nI decline.\n\nBest regards,", "Dear Dana,\n\nI decline."),  # bare: the sender unnamed
        (
            "Dear [Recruiter's Name],\n\nI decline.\n\nBest,\nSam",
            "Dear Recruiter,\n\nI decline.\n\nBest,\nSam",
        ),
        ("Dear Dana,\n\nI decline.\n\nBest,\nSam", None),  # nothing to fix
        ("Here is the list.\n\nThanks!", None),  # no greeting: no letter, no sign-off
    ],
)
def test_the_rule_fixes_slots_and_never_leaves_a_letter_on_a_bare_sign_off(
    answer: str, fixed: str | None
) -> None:
    task = "Write to Dana declining the offer."
    assert rule_revision(answer, task=task) == fixed
    if fixed is not None:
        assert bare_sign_off(fixed) is None and inline_placeholders(fixed, task=task) == []
        edits = placeholder_edits(answer, task=task)
        assert edits and all(
            any(f'"{line.strip()}"' in e for e in edits)
            for line in set(answer.splitlines()) - set(fixed.splitlines())
            if line.strip()
        )


def test_a_bare_sign_off_ranks_below_a_signed_letter_and_the_rule_proposes_its_fix() -> None:
    bare = "Dear Dana,\n\nThank you for the offer. I must decline it.\n\nBest regards,"
    generator = RecordingChatModel(replies=[bare, bare])
    critic = FakeCriticModel(critiques=[critique(8.0), critique(6.0)])
    result = create_reflection_graph(generator, critic=critic, max_iterations=2).invoke(
        {"task": "Write to Dana declining the offer."}
    )
    rounds = result["trajectory"]
    assert [r["placeholder"] for r in rounds] == [True, False]
    assert rounds[1]["tactic"] == "rule"
    assert result["candidate"] == "Dear Dana,\n\nThank you for the offer. I must decline it."  # scored lower
