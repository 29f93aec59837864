"""A reply cut by its reply limit (`finish_reason` "length") is known as such: never accepted, never selected
over a whole one."""

from __future__ import annotations

from langchain_core.messages import AIMessage

from reflection_graph import create_reflection_graph
from reflection_graph._loop._rules import CUT_ISSUE
from reflection_graph.critics import LengthCritic
from tests.fakes import FakeCriticModel, RecordingChatModel, critique


def _cut(text: str) -> AIMessage:
    return AIMessage(content=text, response_metadata={"finish_reason": "length"})


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
