"""Settings and critic options are frozen copies from the moment they enter: an edit of what the caller passed,
made after the build, changes nothing the graph or the critic does, and an edit of the copy raises `TypeError`."""

from __future__ import annotations

import copy
import pickle
from typing import Any

import pytest

from reflection_graph import Context, Settings, create_reflection_graph
from reflection_graph.critics.base import CritiqueRequest
from reflection_graph.critics.rules import JSONSchemaCritic
from reflection_graph.settings import FrozenDict, frozen, thawed
from tests.fakes import FakeCriticModel, RecordingChatModel, critique, numbered_drafts

ALPHA = "ALPHA {task}\nDraft:\n"
BETA = "BETA {task}\nDraft:\n"


def _one_round(**build: Any) -> tuple[Any, RecordingChatModel]:
    gen = RecordingChatModel(replies=[numbered_drafts()])
    crit = FakeCriticModel(critiques=[critique(9, ok=True, issues=[])])
    return create_reflection_graph(gen, critic=crit, max_iterations=1, **build), gen


def test_editing_the_prompts_dict_after_the_build_does_not_change_the_draft_prompt() -> None:
    prompts = {"generate": ALPHA}
    graph, gen = _one_round(settings=Settings(prompts=prompts))
    prompts["generate"] = BETA
    graph.invoke({"task": "t"})
    assert gen.prompts[0] == "ALPHA t\nDraft:\n"


def test_editing_the_prompts_keyword_after_the_build_does_not_change_the_draft_prompt() -> None:
    prompts = {"generate": ALPHA}
    graph, gen = _one_round(prompts=prompts)
    prompts["generate"] = BETA
    prompts["judge"] = "an unknown role, refused at the build, never reaches the graph"
    graph.invoke({"task": "t"})
    assert gen.prompts[0] == "ALPHA t\nDraft:\n"


def test_the_settings_prompts_are_read_only_and_refuse_an_edit_or_an_unknown_role() -> None:
    settings = Settings(prompts={"generate": ALPHA})
    graph, gen = _one_round(settings=settings)
    with pytest.raises(TypeError):
        settings.prompts["generate"] = BETA  # type: ignore[index]
    with pytest.raises(TypeError):
        settings.prompts["judge"] = "x"  # type: ignore[index]
    with pytest.raises(TypeError):
        del settings.prompts["generate"]  # type: ignore[attr-defined]
    graph.invoke({"task": "t"})
    assert gen.prompts[0] == "ALPHA t\nDraft:\n"
    assert set(settings.prompts) == {"generate"}


def test_a_layer_or_an_override_freezes_the_values_it_sets() -> None:
    prompts = {"revise": "R {candidate}"}
    for changed in (
        Settings().apply({"prompts": prompts}),
        Settings().forced({"prompts": prompts}),
        Settings().with_defaults({"prompts": prompts}),
        Settings().override(prompts=prompts),
    ):
        prompts_before = dict(prompts)
        prompts["revise"] = "changed {candidate}"
        assert isinstance(changed.prompts, FrozenDict)
        assert changed.prompts == prompts_before
        prompts["revise"] = "R {candidate}"


def test_frozen_settings_compare_copy_pickle_and_take_run_overrides() -> None:
    settings = Settings(prompts={"generate": ALPHA}, max_iterations=2)
    assert settings == Settings(prompts={"generate": ALPHA}, max_iterations=2)
    assert settings.prompts == {"generate": ALPHA} and dict(settings.prompts) == {"generate": ALPHA}
    assert copy.deepcopy(settings) == settings and copy.copy(settings) == settings
    restored = pickle.loads(pickle.dumps(settings))
    assert restored == settings and isinstance(restored.prompts, FrozenDict)
    assert restored.given == settings.given
    assert hash(settings) == hash(restored)
    forced = settings.forced({"max_iterations": 3})
    assert forced.prompts == settings.prompts and "max_iterations" in forced.given
    run = Context(revise_prompt="R {candidate}").settings(settings)
    assert run.prompts == {"generate": ALPHA, "revise": "R {candidate}"}
    assert settings.prompts == {"generate": ALPHA}


def test_prompts_that_are_no_mapping_are_refused_in_one_line() -> None:
    with pytest.raises(ValueError, match="prompts must be a mapping of role to template"):
        Settings(prompts=["generate"])  # type: ignore[arg-type]


def test_frozen_and_thawed_go_all_the_way_down() -> None:
    value = {"a": [1, {"b": [2, 3]}], "c": {4}}
    held = frozen(value)
    value["a"][1]["b"].append(9)  # type: ignore[index,union-attr]
    assert held == {"a": [1, {"b": [2, 3]}], "c": {4}}
    assert isinstance(held["a"], tuple) and isinstance(held["a"][1], FrozenDict)
    plain = thawed(held)
    assert plain == {"a": [1, {"b": [2, 3]}], "c": {4}} and isinstance(plain["a"][1], dict)
    plain["a"].append(5)
    assert len(held["a"]) == 2


# -- critics ---------------------------------------------------------------------------------------------------


def _verdict(critic: Any, candidate: str) -> bool:
    return bool(critic.critique(CritiqueRequest(task="t", candidate=candidate)).is_acceptable)


def test_a_json_schema_critic_keeps_the_schema_it_was_built_with() -> None:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {"user": {"type": "object", "required": ["name"]}},
        "required": ["user"],
    }
    critic = JSONSchemaCritic(schema)
    schema["required"].append("age")
    schema["properties"]["user"]["required"].append("email")
    schema["properties"]["user"]["type"] = "array"
    assert _verdict(critic, '{"user": {"name": "Ada"}}')
    assert not _verdict(critic, '{"user": {}}')  # the nested `required` of construction time still holds
    assert critic.schema == {
        "type": "object",
        "properties": {"user": {"type": "object", "required": ["name"]}},
        "required": ["user"],
    }
    assert critic.schema["required"] == ("user",)
    with pytest.raises(TypeError):
        critic.schema["required"] = []  # type: ignore[index]


def test_an_instruction_critic_keeps_the_keywords_it_was_built_with() -> None:
    pytest.importorskip("if_verifiable", reason='needs pip install "reflection-graph[instructions]"')
    from reflection_graph.critics import InstructionCritic

    keywords = ["alpha"]
    arguments: list[dict[str, Any]] = [{"keywords": keywords}]
    ids = ["keywords:existence"]
    critic = InstructionCritic(ids, arguments)
    keywords.append("beta")
    arguments[0]["keywords"] = ["gamma"]
    ids[0] = "punctuation:no_comma"
    assert _verdict(critic, "alpha, in a sentence")
    assert not _verdict(critic, "gamma and beta")
    assert critic.instruction_id_list == ("keywords:existence",)
    assert critic.kwargs[0] == {"keywords": ["alpha"]} and critic.kwargs[0]["keywords"] == ("alpha",)
    with pytest.raises(TypeError):
        critic.kwargs[0]["keywords"] = ["beta"]  # type: ignore[index]
