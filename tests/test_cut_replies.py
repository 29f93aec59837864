"""A reply cut by its reply limit (`finish_reason` "length") or stopped in a loop (`finish_reason` "repetition",
the embedded model's `stop_repetition`) is known as such: never accepted, never selected over a whole one."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage

from reflection_graph import create_reflection_graph
from reflection_graph._loop._rules import CUT_ISSUE, REPETITION_ISSUE
from reflection_graph.critics import LengthCritic
from reflection_graph.critics.code_tests import CodeTestCritic
from tests.fakes import FakeCriticModel, RecordingChatModel, critique


def _cut(text: str, reason: str = "length") -> AIMessage:
    return AIMessage(content=text, response_metadata={"finish_reason": reason})


def test_a_cut_draft_is_marked_and_not_accepted_even_when_its_critic_accepts_it() -> None:
    generator = RecordingChatModel(
        replies=[_cut("Dear Ana, thank you for"), "Dear Ana, thank you. I decline."]
    )
    critic = FakeCriticModel(critiques=[critique(9.5, ok=True), critique(8.0, ok=True)])
    result = create_reflection_graph(generator, critic=critic, max_iterations=2).invoke(
        {"task": "Decline Ana"}
    )
    first, second = result["trajectory"]
    assert first["cut"] is True and first["accepted"] is False
    assert first["critique"]["issues"][0] == CUT_ISSUE and first["critique"]["is_acceptable"] is False
    assert "cut" not in second and second["accepted"] is True
    # the cut draft scored higher, yet the whole answer is returned
    assert first["score"] > second["score"]
    assert result["candidate"] == "Dear Ana, thank you. I decline." and result["stop_reason"] == "accepted"


def test_a_cut_sample_is_not_chosen_over_a_whole_one_whatever_the_scores() -> None:
    generator = RecordingChatModel(replies=[_cut("one two three four five six seven"), "one two three"])
    graph = create_reflection_graph(
        generator, critic=LengthCritic(min_words=5), n_drafts=2, max_iterations=1, select="best"
    )
    result = graph.invoke({"task": "Write a few words"})
    (round_,) = result["trajectory"]
    # the two samples run concurrently: which one gets the cut reply is not fixed; only the cut one is long
    # enough for the critic, so without the rule it would win
    assert sorted(bool(s.get("cut")) for s in round_["samples"]) == [False, True]
    assert result["candidate"] == "one two three" and "cut" not in round_


def test_a_reply_stopped_in_a_loop_is_cut_with_its_own_issue_and_not_accepted() -> None:
    generator = RecordingChatModel(
        replies=[_cut("Rai: I can't do that!\n\nLily: It's fun.", "repetition"), "Rai and Lily talk it over."]
    )
    critic = FakeCriticModel(critiques=[critique(9.5, ok=True), critique(8.0, ok=True)])
    result = create_reflection_graph(generator, critic=critic, max_iterations=2).invoke(
        {"task": "A dialogue"}
    )
    first, second = result["trajectory"]
    assert first["cut"] is True and first["accepted"] is False and first["critique"]["is_acceptable"] is False
    assert first["critique"]["issues"][0] == REPETITION_ISSUE != CUT_ISSUE
    assert "token limit" not in " ".join(first["critique"]["issues"])
    assert REPETITION_ISSUE in generator.prompts[1], "the reviser was told why the draft stopped"
    assert "cut" not in second and second["accepted"] is True
    assert result["candidate"] == "Rai and Lily talk it over." and result["stop_reason"] == "accepted"


@pytest.mark.parametrize("reason", ["length", "repetition"])
def test_a_cut_code_draft_is_not_chosen_over_a_whole_one_even_when_it_passes_more_tests(reason: str) -> None:
    tests = "from solution import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
    passing = "```python\ndef add(a, b):\n    return a + b\n```"
    failing = "```python\ndef add(a, b):\n    return a * b\n```"
    generator = RecordingChatModel(replies=[_cut(passing, reason), failing])
    graph = create_reflection_graph(
        generator, critic=CodeTestCritic(tests), focus="code", n_drafts=2, max_iterations=1, strategy="loop"
    )
    result = graph.invoke({"task": "Write add(a, b) returning the sum."})
    (round_,) = result["trajectory"]
    by_cut = {bool(s.get("cut")): s for s in round_["samples"]}
    assert by_cut[True]["critique"]["checks_passed"] > by_cut[False]["critique"]["checks_passed"]
    issue = {"length": CUT_ISSUE, "repetition": REPETITION_ISSUE}[reason]
    assert by_cut[True]["critique"]["issues"][0] == issue
    assert "return a * b" in result["candidate"] and "cut" not in round_
