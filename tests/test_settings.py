"""Settings are declared once: the factory, the runtime Context and the CLI derive from `Settings`."""

from __future__ import annotations

import dataclasses
import typing

import pytest
import typer.main
from typer.testing import CliRunner

from reflection_graph import Context, Settings, create_reflection_graph
from reflection_graph.cli import app
from reflection_graph.critique import Critique, CritiqueParseError, parse_critique
from reflection_graph.prompts import revise_messages
from reflection_graph.settings import choices, setting_fields
from tests.fakes import FakeCriticModel, RecordingChatModel


def test_every_runtime_setting_is_a_context_field_with_the_same_description() -> None:
    context = {f.name: f for f in dataclasses.fields(Context)}
    for f in setting_fields(runtime=True):
        assert f.name in context, f"Context lacks the per-run setting {f.name}"
        assert context[f.name].metadata["description"] == f.metadata["description"]
    models_and_prompts = {"generator_model", "critic_model", "reviser_model", "base_url"} | {
        f"{r}_prompt" for r in ("generate", "critique", "revise")
    }
    runtime = {f.name for f in setting_fields(runtime=True)}
    assert set(context) == runtime | models_and_prompts


def test_every_cli_setting_is_an_option_of_run_and_batch() -> None:
    commands = typer.main.get_command(app).commands  # type: ignore[attr-defined]
    for command in ("run", "batch"):
        opts = {opt for param in commands[command].params for opt in param.opts}
        for f in setting_fields(cli=True):
            flag = f.metadata["flag"] or "--" + f.name.replace("_", "-")
            assert flag in opts, (command, flag)
    assert "-n" in {o for p in commands["run"].params for o in p.opts}
    helps = {p.opts[0]: p.help for p in commands["run"].params}
    assert (
        helps["--max-iterations"] == Settings.__dataclass_fields__["max_iterations"].metadata["description"]
    )
    assert CliRunner().invoke(app, ["run", "--help"]).exit_code == 0


def test_choices_come_from_the_literal_types_and_the_strategy_registry() -> None:
    from reflection_graph import strategies
    from reflection_graph.settings import allowed_values

    hints = typing.get_type_hints(Settings)
    assert choices(hints["select"]) == ("best", "last")
    assert hints["strategy"] is str  # no Literal to extend: any registered name type-checks
    assert (
        tuple(allowed_values("strategy")) == strategies.names() == ("loop", "self_refine", "resample", "tree")
    )
    assert allowed_values("strategy")["tree"] == strategies.get("tree").description
    with pytest.raises(
        ValueError, match="strategy must be one of 'loop', 'self_refine', 'resample' or 'tree', got 'beam'"
    ):
        Settings(strategy="beam")
    with pytest.raises(ValueError, match="select must be 'best' or 'last', got 'worst'"):
        Settings(select="worst")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="focus must be one of 'general', 'code', 'reasoning' or 'format'"):
        Settings(focus="poetry")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_iterations": 0}, "max_iterations must be >= 1"),
        ({"max_iterations": True}, "max_iterations must be an int"),
        ({"min_iterations": 4}, "min_iterations must be between 1 and max_iterations"),
        ({"score_threshold": 10.5}, "score_threshold must be between 0 and 10"),
        ({"timeout_s": 0}, "timeout_s must be >= 0.001"),
        ({"retries": -1}, "retries must be >= 0"),
        ({"prompts": {"judge": "x"}}, "unknown prompt role"),
        ({"stop_on_no_new_issues": "yes"}, "stop_on_no_new_issues must be True or False"),
        ({"token_budget": 0}, "token_budget must be >= 1, got 0; use None for no token budget"),
        ({"token_budget": 2.5}, "token_budget must be an int"),
        ({"time_budget_s": -1}, "time_budget_s must be >= 0.001, got -1; use None for no time budget"),
    ],
)
def test_factory_validation_comes_from_settings(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        create_reflection_graph(lambda p: "x", critic=lambda p: "{}", **kwargs)


def test_unknown_factory_argument_is_named() -> None:
    with pytest.raises(TypeError, match=r"unknown argument\(s\) \['max_iteration'\]"):
        create_reflection_graph(lambda p: "x", max_iteration=3)


def test_context_override_is_validated_like_the_factory() -> None:
    assert Context(max_iterations=5).settings(Settings()).max_iterations == 5
    with pytest.raises(ValueError, match="n_drafts must be <= 16"):
        Context(n_drafts=99).settings(Settings())


# ------------------------------------------------------------------------------- critic scores and sizes


@pytest.mark.parametrize("raw", ['{"score": 11, "is_acceptable": true}', '{"score": 1e309}', '{"score": -2}'])
def test_scores_outside_the_scale_are_an_error_not_a_guess(raw: str) -> None:
    with pytest.raises(CritiqueParseError, match="outside the 0-10 scale"):
        parse_critique(raw)


def test_explicit_scales_are_rescaled() -> None:
    assert parse_critique('{"score": "85/100"}').score == 8.5
    assert parse_critique('{"score": "4/5", "is_acceptable": false}').score == 8.0
    with pytest.raises(ValueError, match="finite"):
        Critique(is_acceptable=True, score=float("inf"))


def test_score_eleven_is_not_accepted_under_a_threshold_of_eight() -> None:
    crit = FakeCriticModel(critiques=['{"score": 11, "is_acceptable": true}'])
    result = create_reflection_graph(
        RecordingChatModel(), critic=crit, score_threshold=8, max_iterations=1, parse_retries=0
    ).invoke({"task": "t"})
    assert result["stop_reason"] == "max_iterations"
    assert result["critique"]["parsed"] is False and result["critique"]["score"] == 0.0


def test_huge_critiques_are_bounded() -> None:
    critique = Critique(
        issues=[f"issue {i}" for i in range(100_000)], is_acceptable=False, score=2, feedback="f" * 10**6
    )
    assert len(critique.issues) == 50 and critique.issues[-1] == "(99951 more not shown)"
    assert len(critique.feedback) == 8000
    messages = revise_messages(
        "t", None, "c", critique.model_dump(), [], focus="general", preserve_correct=True, template=None
    )
    assert sum(len(str(m.content)) for m in messages) < 20_000
    assert len(critique.model_dump_json()) < 20_000


# ------------------------------------------------------------------------------- one declaration of the settings


def test_settings_kwargs_names_and_types_are_the_settings_own() -> None:
    from reflection_graph.settings import SettingsKwargs

    declared = typing.get_type_hints(Settings)
    offered = typing.get_type_hints(SettingsKwargs)
    assert offered == declared  # same names, same types (Literal choices included)
    # every setting is optional, its default is on Settings
    assert SettingsKwargs.__required_keys__ == frozenset()


@pytest.mark.parametrize("factory", ["create_reflection_graph", "build_reflection_graph"])
def test_the_factories_unpack_settings_kwargs(factory: str) -> None:
    import inspect

    from typing_extensions import Unpack

    from reflection_graph import graph as graph_module
    from reflection_graph.settings import SettingsKwargs

    params = inspect.signature(getattr(graph_module, factory)).parameters
    assert params["values"].kind is inspect.Parameter.VAR_KEYWORD
    hints = typing.get_type_hints(getattr(graph_module, factory))
    assert hints["values"] == Unpack[SettingsKwargs]
    assert params["settings"].kind is inspect.Parameter.KEYWORD_ONLY  # or one `Settings` object, as it is
    assert hints["settings"] == Settings | None


def test_the_middleware_takes_the_settings_own_fields_and_defaults() -> None:
    import inspect

    from typing_extensions import Unpack

    from reflection_graph.middleware import ReflectionMiddleware
    from reflection_graph.settings import SettingsKwargs

    critic = lambda prompt: '{"score": 9, "is_acceptable": true}'  # noqa: E731
    middleware = ReflectionMiddleware(critic)
    assert type(middleware.settings) is Settings and middleware.settings == Settings()
    assert middleware.settings.max_iterations == 3  # Settings' default, not a middleware copy
    params = inspect.signature(ReflectionMiddleware.__init__).parameters
    assert typing.get_type_hints(ReflectionMiddleware.__init__)["values"] == Unpack[SettingsKwargs]
    # no setting is re-declared by hand as its own parameter
    assert not set(params) & set(Settings.__dataclass_fields__)
    agent = {f.name for f in setting_fields(agent=True)}
    drafting = {"strategy", "n_drafts", "n_revisions", "focus", "token_budget", "time_budget_s"}
    assert agent == set(Settings.__dataclass_fields__) - drafting
    tuned = ReflectionMiddleware(critic, max_iterations=5, score_threshold=7, patience=None)
    assert tuned.settings == Settings(max_iterations=5, score_threshold=7, patience=None)
    with pytest.raises(TypeError, match=r"\['n_drafts'\] shape drafting"):
        ReflectionMiddleware(critic, n_drafts=2)
    with pytest.raises(ValueError, match="max_iterations must be >= 1"):
        ReflectionMiddleware(critic, max_iterations=0)


def test_graph_and_middleware_share_one_override_resolution() -> None:
    from reflection_graph.loop import _overrides
    from reflection_graph.middleware import ReflectionMiddleware

    critic = lambda prompt: '{"score": 9, "is_acceptable": true}'  # noqa: E731
    middleware = ReflectionMiddleware(critic, max_iterations=4)
    assert isinstance(middleware.overrides, _overrides.Overrides)
    settings, roles = middleware.overrides.for_run({"max_iterations": 2, "unrelated": 1})
    assert settings.max_iterations == 2 and roles.critic is middleware.critic
    assert middleware.overrides.for_run(None)[0].max_iterations == 4
    with pytest.raises(ValueError, match="select must be 'best' or 'last'"):
        middleware.overrides.for_run(Context(select="worst"))  # type: ignore[arg-type]


def test_models_passed_in_are_not_resolved_again_and_run_specs_once(monkeypatch: pytest.MonkeyPatch) -> None:
    from reflection_graph.loop import _overrides
    from tests.fakes import critique

    calls: list[object] = []

    def counting(spec: object, **kwargs: object) -> RecordingChatModel:
        calls.append(spec)
        return RecordingChatModel()

    monkeypatch.setattr(_overrides, "resolve_model", counting)  # where a run resolves its specs
    graph = create_reflection_graph(
        RecordingChatModel(), critic=FakeCriticModel(critiques=[critique(9, ok=True)]), max_iterations=1
    )
    assert calls == []  # the CLI and users pass resolved models: no second resolution
    for _ in range(3):
        graph.invoke({"task": "t"}, context=Context(generator_model="some:model"))
    assert calls == ["some:model"]  # a run's spec is resolved once, then reused
