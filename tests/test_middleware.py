"""`ReflectionMiddleware` on LangChain v1 `create_agent`, tested the way LangChain tests its own middleware.

Fake chat models (a `GenericFakeChatModel` subclass that records what it received, and a scripted tool-calling
model) run the agent; the tests assert the exact number of agent-model and critic calls, sync and async, and
what each model received. One test runs the `agent` Studio graph on the embedded model.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableLambda
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.errors import GraphRecursionError

from reflection_graph import Context
from reflection_graph.critics import (
    BaseCritic,
    CodeTestCritic,
    CompositeCritic,
    CritiqueRequest,
    LengthCritic,
    LLMCritic,
    RequiredTermsCritic,
)
from reflection_graph.critique import Critique
from reflection_graph.middleware import CRITIQUE_MESSAGE_PREFIX, ReflectionMiddleware
from tests.fakes import FakeCriticModel, RecordingChatModel, ScriptedToolModel, critique

MODES = ["sync", "async"]


async def run(agent: Any, payload: dict[str, Any], mode: str, **kwargs: Any) -> dict[str, Any]:
    if mode == "sync":
        return dict(agent.invoke(payload, **kwargs))
    return dict(await agent.ainvoke(payload, **kwargs))


def ask(text: str = "Write a haiku about rain.") -> dict[str, Any]:
    return {"messages": [HumanMessage(text)]}


def ai_texts(out: dict[str, Any]) -> list[str]:
    return [m.text for m in out["messages"] if isinstance(m, AIMessage)]


def human_text(received: Sequence[BaseMessage]) -> str:
    return "\n".join(m.text for m in received if isinstance(m, HumanMessage))


# -- the loop ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", MODES)
async def test_a_critic_that_rejects_once_makes_two_model_calls_and_returns_the_second_answer(
    mode: str,
) -> None:
    model = RecordingChatModel(
        replies=["Rain falls.", "Soft rain on the roof / puddles hold the grey sky / a frog sings"]
    )
    critic = FakeCriticModel(critiques=[critique(3, issues=["not a haiku"]), critique(9, ok=True, issues=())])
    agent = create_agent(model, middleware=[ReflectionMiddleware(critic, max_iterations=3)])

    out = await run(agent, ask(), mode)

    assert len(model.received) == 2 and len(critic.received) == 2
    assert out["messages"][-1].text.startswith("Soft rain on the roof")
    assert ai_texts(out) == [
        "Rain falls.",
        "Soft rain on the roof / puddles hold the grey sky / a frog sings",
    ]
    # the critic saw the task and the first answer; the agent's second call saw the critique
    assert "Write a haiku about rain." in human_text(critic.received[0])
    assert "Rain falls." in human_text(critic.received[0])
    second = model.received[1][-1]
    assert isinstance(second, HumanMessage) and str(second.id).startswith(CRITIQUE_MESSAGE_PREFIX)
    assert "not a haiku" in second.text and "Score: 3.0/10" in second.text
    report = out["reflection"]
    assert report["stop_reason"] == "accepted" and report["iterations"] == 2 and report["selected"] == 2
    assert [r["score"] for r in report["trajectory"]] == [3.0, 9.0]
    assert [r["accepted"] for r in report["trajectory"]] == [False, True]
    assert report["critique"]["is_acceptable"] is True
    # critic usage: one call per round, tokens summed from the critic's replies
    assert report["usage"]["critique"]["calls"] == 2 == report["usage"]["total"]["calls"]
    assert report["usage"]["critique"]["output_tokens"] > 0
    assert [r["usage"]["critique"]["calls"] for r in report["trajectory"]] == [1, 1]
    # private working state stays out of the output
    assert not {k for k in out if k.startswith("reflection_")}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("select", "expected"), [("best", "answer 1"), ("last", "second answer here")])
async def test_a_critic_that_always_rejects_stops_at_max_iterations_with_the_best_answer(
    mode: str, select: str, expected: str
) -> None:
    model = RecordingChatModel(replies=["answer 1", "second answer here", "answer 3"])
    critic = FakeCriticModel(
        critiques=[critique(6, issues=["too long"]), critique(2, issues=["off topic"]), critique(1)]
    )
    agent = create_agent(model, middleware=[ReflectionMiddleware(critic, max_iterations=2, select=select)])

    out = await run(agent, ask(), mode)

    # documented bound without tools: max_iterations agent model calls and max_iterations critiques
    assert len(model.received) == 2 and len(critic.received) == 2
    assert out["messages"][-1].text == expected
    last_ids = [m.id for m in out["messages"] if isinstance(m, AIMessage)]
    assert len(last_ids) == 2  # the best answer replaced the last message (same id), nothing was appended
    final = out["messages"][-1]
    if select == "best":
        assert final.response_metadata["reflection_selected_round"] == 1
        assert final.usage_metadata["output_tokens"] == 3  # the usage of the call that wrote the last answer
    report = out["reflection"]
    assert report["stop_reason"] == "max_iterations" and report["iterations"] == 2
    assert report["selected"] == (1 if select == "best" else 2) and report["candidate"] == expected
    assert report["trajectory"][1]["diff"].endswith("-answer 1\n+second answer here")


@pytest.mark.parametrize("mode", MODES)
async def test_the_agent_calls_a_tool_after_the_critique(mode: str) -> None:
    calls: list[str] = []

    @tool
    def rainfall(city: str) -> str:
        """Yearly rainfall of a city in millimetres."""
        calls.append(city)
        return f"{city}: 1200 mm"

    model = ScriptedToolModel(
        script=[
            AIMessage("Bergen is rainy."),
            AIMessage("", tool_calls=[{"name": "rainfall", "args": {"city": "Bergen"}, "id": "call-1"}]),
            AIMessage("Bergen gets about 1200 mm of rain a year."),
        ]
    )
    critic = FakeCriticModel(
        critiques=[critique(4, issues=["give a number"]), critique(9, ok=True, issues=())]
    )
    agent = create_agent(model, tools=[rainfall], middleware=[ReflectionMiddleware(critic, max_iterations=2)])

    out = await run(agent, ask("How rainy is Bergen?"), mode)

    assert model.bound_tools == ["rainfall"]
    assert calls == ["Bergen"]  # the tool ran once, after the critique
    assert len(model.received) == 3 and len(critic.received) == 2
    tool_results = [m for m in model.received[2] if isinstance(m, ToolMessage)]
    assert [m.text for m in tool_results] == ["Bergen: 1200 mm"]
    assert out["messages"][-1].text == "Bergen gets about 1200 mm of rain a year."
    # the critic judged the answer, not the tool-call turn
    assert "Bergen gets about 1200 mm" in human_text(critic.received[1])
    assert out["reflection"]["stop_reason"] == "accepted" and out["reflection"]["iterations"] == 2


@pytest.mark.parametrize("mode", MODES)
async def test_the_loop_ends_by_its_counter_within_the_documented_step_count(mode: str) -> None:
    rounds = 3
    # before_agent, then model and after_agent per round; LangGraph needs one more (a bare agent needs 2)
    steps = 1 + 2 * rounds + 1

    def build() -> tuple[RecordingChatModel, FakeCriticModel, Any]:
        model = RecordingChatModel(replies=[f"answer {i}" for i in range(1, 9)])
        critic = FakeCriticModel(critiques=[critique(i, issues=[f"issue {i}"]) for i in range(1, 9)])
        middleware = ReflectionMiddleware(critic, max_iterations=rounds, patience=None)
        return model, critic, create_agent(model, middleware=[middleware])

    model, critic, agent = build()
    out = await run(agent, ask(), mode, config={"recursion_limit": steps})
    assert out["reflection"]["stop_reason"] == "max_iterations" and out["reflection"]["iterations"] == rounds
    assert len(model.received) == rounds and len(critic.received) == rounds
    assert out["messages"][-1].text == "answer 3"  # scores rose 1, 2, 3: the last is the best

    _, _, agent = build()  # one step fewer is not enough: the count above is exact
    with pytest.raises(GraphRecursionError):
        await run(agent, ask(), mode, config={"recursion_limit": steps - 1})


async def test_repeated_issues_stop_with_plateau_as_in_the_graph() -> None:
    model = RecordingChatModel(replies=["a", "b", "c"])
    critic = FakeCriticModel(critiques=[critique(4, issues=["too short"]), critique(4, issues=["too short"])])
    agent = create_agent(model, middleware=[ReflectionMiddleware(critic, max_iterations=3)])
    out = await agent.ainvoke(ask())
    assert out["reflection"]["stop_reason"] == "plateau" and len(model.received) == 2


def test_the_graph_shape_after_agent_can_only_go_back_to_the_model_or_end() -> None:
    agent = create_agent(RecordingChatModel(), middleware=[ReflectionMiddleware(RequiredTermsCritic(["x"]))])
    edges = {(e.source, e.target, e.conditional) for e in agent.get_graph().edges}
    assert edges == {
        ("__start__", "ReflectionMiddleware.before_agent", False),
        ("ReflectionMiddleware.before_agent", "model", False),
        ("model", "ReflectionMiddleware.after_agent", False),
        ("ReflectionMiddleware.after_agent", "model", True),
        ("ReflectionMiddleware.after_agent", "__end__", True),
    }


def test_a_run_without_a_final_answer_is_not_critiqued() -> None:
    @tool(return_direct=True)
    def lookup(city: str) -> str:
        """Look a city up."""
        return f"{city}: found"

    model = ScriptedToolModel(
        script=[AIMessage("", tool_calls=[{"name": "lookup", "args": {"city": "Oslo"}, "id": "c1"}])]
    )
    critic = FakeCriticModel(critiques=[critique(1)])
    agent = create_agent(model, tools=[lookup], middleware=[ReflectionMiddleware(critic)])
    out = agent.invoke(ask("Find Oslo."))
    assert out["messages"][-1].text == "Oslo: found" and len(model.received) == 1
    assert critic.received == [] and out["reflection"]["stop_reason"] == "not_triggered"
    assert out["reflection"]["iterations"] == 0


# -- every kind of critic ---------------------------------------------------------------------------------------
def test_rule_critics_need_no_model() -> None:
    model = RecordingChatModel(replies=["A sunny day.", "Rain falls on the roof."])
    agent = create_agent(model, middleware=[ReflectionMiddleware(RequiredTermsCritic(["rain"]))])
    out = agent.invoke(ask("Write a sentence about rain."))
    assert len(model.received) == 2 and out["messages"][-1].text == "Rain falls on the roof."
    assert "rain" in model.received[1][-1].text  # the finding (missing term) reached the agent
    assert out["reflection"]["usage"]["critique"]["calls"] == 0  # no model call was made to judge


def test_a_composite_critic_and_a_callable_model_critic() -> None:
    seen: list[str] = []

    def judge(prompt: str) -> str:
        seen.append(prompt)
        return json.dumps({"is_acceptable": "roof" in prompt.split("Candidate answer:")[-1], "score": 7})

    composite = CompositeCritic({"length": LengthCritic(max_words=8), "terms": RequiredTermsCritic(["roof"])})
    model = RecordingChatModel(
        replies=["Rain falls and falls and falls on the old grey roof.", "Rain on the roof."]
    )
    out = create_agent(model, middleware=[ReflectionMiddleware(composite)]).invoke(ask())
    assert len(model.received) == 2 and out["messages"][-1].text == "Rain on the roof."
    assert "words" in model.received[1][-1].text  # the length finding reached the agent

    model = RecordingChatModel(replies=["Rain.", "Rain on the roof."])
    out = create_agent(model, middleware=[ReflectionMiddleware(judge)]).invoke(ask())
    assert len(seen) == 2 and "Write a haiku about rain." in seen[0] and "Rain." in seen[0]
    assert out["reflection"]["stop_reason"] == "accepted" and out["messages"][-1].text == "Rain on the roof."


def test_a_code_test_critic_runs_the_tests_on_the_answer() -> None:
    critic = CodeTestCritic("from solution import add\n\ndef test_add():\n    assert add(2, 3) == 5\n")
    model = RecordingChatModel(
        replies=[
            "```python\ndef add(a, b):\n    return a - b\n```",
            "```python\ndef add(a, b):\n    return a + b\n```",
        ]
    )
    out = create_agent(model, middleware=[ReflectionMiddleware(critic)]).invoke(ask("Write add(a, b)."))
    assert len(model.received) == 2 and "a + b" in out["messages"][-1].text
    assert (
        "`add(2, 3)` returned -1, expected 5" in model.received[1][-1].text
    )  # the failing call reached the agent
    assert out["reflection"]["stop_reason"] == "accepted"


def test_a_model_spec_string_becomes_an_llm_critic() -> None:
    middleware = ReflectionMiddleware("embedded", score_threshold=8)
    assert isinstance(middleware.critic, LLMCritic)
    assert middleware.critic.model.temperature == 0  # type: ignore[attr-defined]


# -- the task, per-run state and context ----------------------------------------------------------------------
def test_task_key_names_the_task_and_is_required_at_run_time() -> None:
    critic = FakeCriticModel(critiques=[critique(9, ok=True, issues=())])
    model = RecordingChatModel(replies=["Rain."])
    agent = create_agent(model, middleware=[ReflectionMiddleware(critic, task_key="brief")])
    assert "brief" in agent.get_input_jsonschema()["properties"]
    agent.invoke({"messages": [HumanMessage("go")], "brief": "One word about weather."})
    assert "One word about weather." in human_text(critic.received[0])
    with pytest.raises(ValueError, match="needs a non-empty string under 'brief'"):
        agent.invoke({"messages": [HumanMessage("go")]})


def test_rounds_reset_per_run_on_a_thread_and_the_task_is_the_new_request() -> None:
    model = RecordingChatModel(replies=["a1", "a2", "b1", "b2"])
    critic = FakeCriticModel(
        critiques=[critique(3), critique(5, issues=["x"]), critique(3), critique(5, issues=["y"])]
    )
    agent = create_agent(
        model, middleware=[ReflectionMiddleware(critic, max_iterations=2)], checkpointer=InMemorySaver()
    )
    config: Any = {"configurable": {"thread_id": "t1"}}
    first = agent.invoke(ask("First task."), config)
    second = agent.invoke(ask("Second task."), config)
    assert first["reflection"]["iterations"] == 2 and second["reflection"]["iterations"] == 2
    assert [r["candidate"] for r in second["reflection"]["trajectory"]] == ["b1", "b2"]
    assert len(model.received) == 4 and len(critic.received) == 4
    assert "Task: Second task." in critic.received[2][-1].text


@pytest.mark.parametrize("mode", MODES)
async def test_a_run_context_overrides_max_iterations_and_threshold(mode: str) -> None:
    model = RecordingChatModel(replies=["a", "b", "c"])
    critic = FakeCriticModel(critiques=[critique(6, ok=False, issues=["p"]), critique(9, issues=["q"])])
    agent = create_agent(
        model, middleware=[ReflectionMiddleware(critic, max_iterations=3)], context_schema=Context
    )
    out = await run(agent, ask(), mode, context=Context(max_iterations=1))
    assert len(model.received) == 1 and out["reflection"]["stop_reason"] == "max_iterations"

    model.received.clear(), critic.received.clear()
    out = await run(agent, ask(), mode, context=Context(score_threshold=5))  # score 6 >= 5 accepts
    assert len(model.received) == 1 and out["reflection"]["stop_reason"] == "accepted"
    assert "at least 5 out of 10" in critic.received[0][-1].text  # the critic was told the bar


@pytest.mark.parametrize("mode", MODES)
async def test_a_failing_critic_keeps_the_answer_and_reports_the_error(mode: str) -> None:
    class Broken(BaseCritic):
        name = "broken"

        def critique(self, request: CritiqueRequest, config: Any = None) -> Critique:
            raise RuntimeError("judge offline")

    model = RecordingChatModel(replies=["only answer"])
    out = await run(create_agent(model, middleware=[ReflectionMiddleware(Broken())]), ask(), mode)
    assert out["messages"][-1].text == "only answer" and len(model.received) == 1
    assert out["reflection"]["stop_reason"] == "error"
    assert "RuntimeError: judge offline" in (out["reflection"]["error"] or "")


def test_critic_calls_stay_out_of_the_message_stream() -> None:
    model = RecordingChatModel(replies=["first", "second"])
    critic = FakeCriticModel(critiques=[critique(2), critique(9, ok=True, issues=())])
    agent = create_agent(model, middleware=[ReflectionMiddleware(critic)])
    streamed = [chunk.text for chunk, _ in agent.stream(ask(), stream_mode="messages") if chunk.text]
    assert len(critic.received) == 2
    assert not any("is_acceptable" in text for text in streamed), streamed
    assert "".join(streamed).count("first") >= 1


# -- bad settings fail when the middleware is built -----------------------------------------------------------
@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_iterations": 0}, "max_iterations must be >= 1, got 0"),
        ({"select": "worst"}, "select must be 'best' or 'last', got 'worst'"),
        ({"score_threshold": 11}, "score_threshold must be between 0 and 10"),
        ({"task_key": "messages"}, "is a key of the agent's own state"),
        ({"task_key": "a b"}, "task_key must be a state key name"),
        ({"feedback_prompt": 3}, "feedback_prompt must be a template string"),
    ],
)
def test_bad_settings_raise_value_error_at_construction(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ReflectionMiddleware(RequiredTermsCritic(["x"]), **kwargs)


class HalfCritic:
    name = "half"

    def critique(self, request: CritiqueRequest, config: Any = None) -> Critique:  # no acritique
        raise AssertionError


@pytest.mark.parametrize("critic", [42, None, HalfCritic(), RunnableLambda(lambda x: x), ["embedded"]])
def test_a_critic_of_the_wrong_type_raises_value_error(critic: Any) -> None:
    with pytest.raises(ValueError, match="critic must be a reflection_graph Critic"):
        ReflectionMiddleware(critic)


def test_an_unknown_model_spec_raises_value_error() -> None:
    with pytest.raises(ValueError, match="unknown model spec"):
        ReflectionMiddleware("no-such-provider:model")


# -- a real model path ------------------------------------------------------------------------------------------
@pytest.mark.embedded
def test_the_agent_graph_runs_on_the_embedded_model() -> None:
    pytest.importorskip("llama_cpp", reason='needs pip install "reflection-graph[local]"')
    from graphs.agent import graph

    out = graph.invoke(
        {"messages": [{"role": "user", "content": "Write one sentence about rain."}]},
        context={"max_iterations": 1},
    )
    answer = out["messages"][-1]
    assert isinstance(answer, AIMessage) and answer.text.strip() and not answer.tool_calls
    assert answer.usage_metadata and answer.usage_metadata["output_tokens"] > 0
    report = out["reflection"]
    assert report["iterations"] == 1 and report["stop_reason"] in {"accepted", "max_iterations"}
    assert report["candidate"] == answer.text
    assert 0 <= report["critique"]["score"] <= 10 and report["critique"]["parsed"] is True
    usage = report["usage"]["critique"]
    assert usage["calls"] >= 1 and usage["output_tokens"] > 0


# -- the notebook ------------------------------------------------------------------------------------------------
def test_the_agent_notebook_runs_and_its_stored_outputs_are_current() -> None:
    nbformat = pytest.importorskip("nbformat", reason='needs pip install "reflection-graph[dev]"')
    nbclient = pytest.importorskip("nbclient", reason='needs pip install "reflection-graph[dev]"')
    import re
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "notebooks" / "agent.ipynb"

    def text(notebook: Any) -> str:
        parts = [
            str(out.get("text", "") or out.get("data", {}).get("text/plain", ""))
            for cell in notebook.cells
            for out in cell.get("outputs", [])
        ]
        return re.sub(r"'seconds': [0-9.e-]+", "'seconds': _", "\n".join(parts))

    stored = nbformat.read(path, as_version=4)
    fresh = nbformat.read(path, as_version=4)
    nbclient.NotebookClient(fresh, timeout=120, kernel_name="python3").execute()
    assert "stop reason: accepted | rounds: 2 | returned round: 2" in text(fresh)
    assert "[tool] Bergen: about 2250 mm a year" in text(fresh)
    assert text(stored) == text(fresh)  # stored with outputs, and they match what the code prints today
