"""The counting rules read limits and counts in more phrasings: word limits ("no longer than", "a limit of",
"a 60-word limit", "a 60-word description" well over), sentence limits ("at most", "no more than", "or fewer") and
steps ("exactly 5 steps", "in five numbered steps") counted as the answer's outermost list items; a limit scoped to
a part of the answer is still not read, nor steps the answer does not write as a list."""

from __future__ import annotations

import pytest

from reflection_graph.critics._rule_faults import RULE_REQUIRED, required_faults

ELEVEN = "Tea is good and everybody should drink it every single morning."
FIFTEEN = "Tea is good and everybody should drink it every single morning with biscuits and cake."
THREE = "Tea is old. It came from China. People drink it hot."

# (task, answer, words the issue holds, words the fix holds)
FAULTY = [
    ("Describe tea in no longer than 10 words.", ELEVEN, "limit of 10", "Cut at least 1 words"),
    ("Describe tea. There is a limit of 10 words.", ELEVEN, "limit of 10", f'"{ELEVEN}"'),
    ("Describe tea; keep to a 10-word limit.", ELEVEN, "limit of 10", "10 or fewer"),
    (
        "Write a product description of at most 10 words for the Trail 30 backpack.",
        ELEVEN,
        "limit of 10",
        "Cut",
    ),
    ("Write a 10-word slogan for tea.", FIFTEEN, "well over the 10 words", "about 10 are left"),
    (
        "Summarise tea's history in at most two sentences.",
        THREE,
        "3 sentences, where the task asks for 2",
        "People",
    ),
    ("Explain tea in no more than two sentences.", THREE, "3 sentences", '"People drink it hot."'),
    ("Explain tea in 2 sentences or fewer.", THREE, "3 sentences", '"People drink it hot."'),
    (
        "Write exactly 3 steps for making tea.",
        "1. Boil water.\n2. Pour it on the leaves.\n3. Wait.\n4. Drink.",
        "4 steps, where the task asks for 3",
        'Keep 3 steps: delete or merge into the others "4. Drink.".',
    ),
    (
        "Explain how to make tea in five numbered steps.",
        "1. Boil water.\n2. Pour it on the leaves.\n   - Use a pot.\n3. Wait.\n4. Drink.",
        "4 steps, where the task asks for 5",
        'Add 1 more step(s) after "4. Drink."',
    ),
]

GOOD = [
    ("Describe tea in no longer than 11 words.", ELEVEN),
    ("Write a 12-word slogan for tea.", FIFTEEN),  # near enough to a length to aim at
    ("Write a post with at most 5 words for the title, then describe tea.", "Tea Time\n\n" + ELEVEN),
    ("Explain tea in two sentences or more.", THREE),
    ("Explain tea in at least two sentences.", THREE),
    ("Write exactly 3 steps for making tea.", "1. Boil water.\n   - Use fresh water.\n2. Pour.\n3. Wait."),
    (
        "Explain how to make tea in five steps.",
        "Boil water. Pour it. Wait. Stir. Drink.",
    ),  # prose: not counted
    (
        "Explain how to make tea in 2 steps.",
        "**Step 1: Heat**\n- Boil water.\n- Warm the pot.\n\n**Step 2: Brew**\n- Pour.",
    ),
    ("Write 3 steps of at most 10 words each for making tea.", "1. Boil water.\n2. Pour.\n3. Wait."),
]


@pytest.mark.parametrize(("task", "answer", "issue", "fix"), FAULTY, ids=[f[0][:40] for f in FAULTY])
def test_a_limit_or_count_in_another_phrasing_is_read(task: str, answer: str, issue: str, fix: str) -> None:
    (fault,) = required_faults(answer, task=task)
    assert fault.by == RULE_REQUIRED and issue in fault.issue and fix in fault.fix, fault


@pytest.mark.parametrize(("task", "answer"), GOOD, ids=[g[0][:40] for g in GOOD])
def test_an_answer_within_the_limit_or_a_limit_not_read_names_nothing(task: str, answer: str) -> None:
    assert required_faults(answer, task=task) == []
