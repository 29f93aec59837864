"""One way to pass settings: the graph factory, the agent middleware and the gleaning graph take the same
`Settings` object (and the same keyword settings over it), validated by one function, `chosen_settings`."""

from __future__ import annotations

import inspect
import typing
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from typing_extensions import Unpack

from reflection_graph import ReflectionMiddleware, Settings, create_gleaning_graph, create_reflection_graph
from reflection_graph.settings import SettingsKwargs
from tests.fakes import FakeCriticModel, RecordingChatModel, critique

TASK = "Write a haiku about rain."
GUIDELINES = "A haiku has three lines."
SETTINGS = Settings(score_threshold=8, patience=None, history_window=2, select="last", retries=0)


def critic_model() -> FakeCriticModel:
    """The critic every factory gets: it rejects twice, then accepts."""
    return FakeCriticModel(critiques=[critique(3, issues=["not a haiku"]), critique(5), critique(9, ok=True)])


def asked(model: RecordingChatModel) -> list[str]:
    """What `model` received, call by call: its human messages' text."""
    return ["\n".join(m.text for m in call if isinstance(m, HumanMessage)) for call in model.received]


def drafts() -> RecordingChatModel:
    return RecordingChatModel(
        replies=["Rain falls.", "Rain falls, soft.", "Soft rain / on the roof / a frog"]
    )


def test_the_three_factories_built_from_one_settings_ask_the_critic_the_same() -> None:
    graph_critic, agent_critic, gleaning_critic = critic_model(), critic_model(), critic_model()

    graph = create_reflection_graph(
        drafts(), critic=graph_critic, critic_guidelines=GUIDELINES, settings=SETTINGS
    )
    graph.invoke({"task": TASK})

    middleware = ReflectionMiddleware(agent_critic, critic_guidelines=GUIDELINES, settings=SETTINGS)
    create_agent(drafts(), middleware=[middleware]).invoke({"messages": [HumanMessage(TASK)]})

    gleaning = create_gleaning_graph(
        drafts(), critic=gleaning_critic, validation_prompt=GUIDELINES, num_rounds=2, settings=SETTINGS
    )
    gleaning.invoke({"documents": ["rain"], "prompt": "Write a haiku about {document}."})

    assert len(asked(graph_critic)) == 3  # rejected twice, accepted at the third round (threshold 8)
    assert asked(agent_critic) == asked(graph_critic)
    assert asked(gleaning_critic) == asked(graph_critic)
    assert "at least 8 out of 10" in asked(graph_critic)[0]  # the settings reached each critic


def test_each_factory_takes_settings_then_typed_keyword_settings_over_it() -> None:
    for factory in (create_reflection_graph, create_gleaning_graph, ReflectionMiddleware.__init__):
        params = inspect.signature(factory).parameters
        hints = typing.get_type_hints(factory)
        assert params["settings"].default is None and hints["settings"] == Settings | None, factory
        assert (
            params["values"].kind is inspect.Parameter.VAR_KEYWORD
            and hints["values"] == Unpack[SettingsKwargs]
        )
    assert ReflectionMiddleware(
        critic_model(), settings=SETTINGS, max_iterations=5
    ).settings == SETTINGS.apply({"max_iterations": 5})


@pytest.mark.parametrize(
    "build",
    [
        lambda **kw: create_reflection_graph(drafts(), **kw),
        lambda **kw: ReflectionMiddleware(critic_model(), **kw),
        lambda **kw: create_gleaning_graph(drafts(), validation_prompt=GUIDELINES, **kw),
    ],
)
def test_each_factory_refuses_an_unknown_setting_and_a_settings_of_another_type(build: Any) -> None:
    with pytest.raises(TypeError, match=r"unknown argument\(s\) \['max_iteration'\]"):
        build(max_iteration=3)
    with pytest.raises(TypeError, match="settings must be a reflection_graph.Settings"):
        build(settings={"max_iterations": 3})


def test_the_middleware_refuses_a_settings_that_sets_drafting() -> None:
    with pytest.raises(TypeError, match=r"\['n_drafts'\] shape drafting or budget a whole run"):
        ReflectionMiddleware(critic_model(), settings=Settings(n_drafts=2))
