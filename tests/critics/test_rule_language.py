"""The language rule: a sentence, or the whole answer, in another language of the same script is a fault with a
concrete edit that quotes it; short lines, quotes, code and tasks that speak of languages are not read; without
the detector (the `[language]` extra) the rule names nothing; the judge shows its faults."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reflection_graph.critics import CritiqueRequest, JudgeCritic, _rule_language
from reflection_graph.critics._rule_faults import RULE_LANGUAGE, language_faults, rule_faults
from tests.fakes import LogprobModel

DATASETS = Path(__file__).resolve().parents[2] / "datasets"

TASK = (
    "Write a short note to the team saying the office is closed on Friday for the move to the new building."
)
NOTE = (
    "Hi team,\n\nThe office is closed on Friday while we move to the new building. Please take your laptops home "
    "on Thursday evening.\n\nThanks,\nSam"
)
GERMAN = "Vielen Dank für eure Geduld, wir sehen uns nächste Woche im neuen Gebäude."


def test_a_sentence_in_german_in_an_english_note_is_named_with_its_english_asked_for() -> None:
    answer = NOTE.replace("Thanks,", GERMAN + "\n\nThanks,")
    (fault,) = language_faults(answer, task=TASK)
    assert fault.by == RULE_LANGUAGE
    assert "German" in fault.issue and "English" in fault.issue
    assert fault.fix == f'Replace "{GERMAN}" with the same in English.'
    assert language_faults(NOTE, task=TASK) == []


def test_an_english_answer_to_a_task_asking_for_french_is_named_whole() -> None:
    task = "Reply in French to thank the bakery for the birthday cake they made for my daughter."
    answer = (
        "Thank you so much for the beautiful birthday cake. My daughter loved it, and so did all her friends."
    )
    (fault,) = language_faults(answer, task=task)
    assert fault.issue == "The answer is in English, not in French as the task asks."
    assert fault.fix.startswith(
        'Write the whole answer again in French, starting with its first line "Thank you'
    )
    french = (
        "Merci beaucoup pour le magnifique gâteau d'anniversaire. Ma fille l'a adoré, et ses amies aussi."
    )
    assert language_faults(french, task=task) == []


def test_a_spanish_question_opening_with_its_inverted_mark_is_read_as_its_own_sentence() -> None:
    answer = "Hi Ana! I'm away next week. ¿Podrías regar mis plantas mientras no estoy? Thanks so much!"
    (fault,) = language_faults(
        answer, task="Write a text asking my neighbour Ana to water my plants next week."
    )
    assert "Spanish" in fault.issue and '"¿Podrías regar mis plantas mientras no estoy?"' in fault.fix


@pytest.mark.parametrize(
    "answer",
    [
        NOTE.replace("Thanks,", "Danke schön!\n\nThanks,"),  # too short to tell
        NOTE.replace("Thanks,", f'As the Germans say, "{GERMAN}"\n\nThanks,'),  # quoted
        NOTE.replace("Thanks,", f"`{GERMAN}`\n\nThanks,"),  # code
    ],
)
def test_short_lines_quotes_and_code_are_not_read(answer: str) -> None:
    assert language_faults(answer, task=TASK) == []


@pytest.mark.parametrize(
    "task",
    [
        "Translate this note for our Berlin office: the office is closed on Friday for the move.",
        "Write a note for the team, with a line in German for our Berlin colleagues, about Friday's move.",
        "Write a bilingual note about Friday's move.",
    ],
)
def test_a_task_that_speaks_of_languages_is_left_to_the_judge(task: str) -> None:
    assert language_faults(NOTE.replace("Thanks,", GERMAN + "\n\nThanks,"), task=task) == []


def test_without_the_detector_the_rule_names_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    answer = NOTE.replace("Thanks,", GERMAN + "\n\nThanks,")
    assert _rule_language.available() and language_faults(answer, task=TASK) != []
    monkeypatch.setattr(_rule_language, "_detector", lambda: None)
    assert not _rule_language.available()
    assert language_faults(answer, task=TASK) == []
    assert [f.by for f in rule_faults(answer, task=TASK)] == []


def test_no_good_answer_of_the_judged_pairs_is_said_to_be_in_another_language() -> None:
    for name in ("pairs.jsonl", "pairs_holdout.jsonl"):
        for line in (DATASETS / name).read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            assert language_faults(row["good"], task=row["task"]) == [], row["task"]


def test_the_judge_shows_the_language_rule_s_fault_with_its_name() -> None:
    answer = NOTE.replace("Thanks,", GERMAN + "\n\nThanks,")
    judge = LogprobModel(yes=lambda answer: 0.9, better=lambda a, b: 0.5, fault=lambda a, i: 0.9)
    critique = JudgeCritic(judge).critique(CritiqueRequest(task=TASK, candidate=answer))
    assert critique.named_by == [RULE_LANGUAGE]
    assert GERMAN in critique.issues[0]
