"""Code for base models: stubs are completed, candidates are well-formed, and prose is never taken for code."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

from reflection_graph import create_reflection_graph
from reflection_graph._text._extract import extract_code, extract_json_object, fenced_blocks, well_formed
from reflection_graph.critics.base import CritiqueRequest
from reflection_graph.critics.code_tests import CodeTestCritic
from reflection_graph.loop._code import code_messages, find_stub, finish_candidate
from reflection_graph.loop._stub_tests import docstring_tests, with_solution_import
from reflection_graph.settings import Settings
from tests.fakes import EOG, RecordingChatModel, scripted_embedded

STUB = '''def clamp(x: int, low: int, high: int) -> int:
    """Return x limited to the range [low, high].

    >>> clamp(5, 0, 3)
    3
    >>> clamp(-1, 0, 3)
    0
    """
'''

HELD_OUT = "def test_inside():\n    assert clamp(2, 0, 3) == 2\n"

# -- the replies that broke extraction ------------------------------------------------------------------------


def test_a_reply_of_only_a_closing_fence_and_prose_holds_no_code() -> None:
    # the revise prompt ended with ```python; the model closed the fence at once and repeated the instructions
    reply = "```\nRewrite the answer so that it fixes every issue in the critique.\nRevised answer:"
    assert extract_code(reply) == ""
    judged = CodeTestCritic(with_solution_import(HELD_OUT, "clamp")).critique(
        CritiqueRequest(task="t", candidate=reply)
    )
    assert judged.issues == ["no code found in the candidate"]
    assert not any("syntax error" in issue for issue in judged.issues)


def test_instruction_text_is_not_reported_as_a_syntax_error_at_line_1() -> None:
    reply = "Return only the complete corrected code. Fix the failing tests and reported errors first."
    assert extract_code(reply) == ""
    # prose around unfenced code: only the code is taken
    mixed = "Sure, here it is:\n\ndef f(x):\n    return x + 1\n\nThis adds one to x."
    assert extract_code(mixed) == "def f(x):\n    return x + 1\n"


def test_code_before_a_closing_fence_is_kept_and_the_prose_after_it_dropped() -> None:
    reply = "def f():\n    return 1\n```\nNote: the function above returns 1.\n```\nmore prose"
    assert extract_code(reply) == "def f():\n    return 1\n"
    odd = "def f():\n    return 1\n```\nNote: the function above returns 1."
    assert [(b.inside, b.body) for b in fenced_blocks(odd)] == [(True, "def f():\n    return 1")]


def test_prose_in_a_plain_fence_is_not_code_but_a_python_fence_wins() -> None:
    assert extract_code("```\nThe answer is below.\n```") == ""
    assert extract_code("```\nDone\n```\n```python\nx = 1\n```") == "x = 1\n"


@pytest.mark.parametrize(
    ("reply", "stored"),
    [
        ("x = 1\n```\nDone.", "```python\nx = 1\n```\nDone."),  # the opening fence was the prompt's
        ("```python\nx = 1", "```python\nx = 1\n```"),  # cut off by the token limit
        ("```python\nx = 1\n```", "```python\nx = 1\n```"),  # already well-formed
        ("```\nprose only", "prose only"),  # a stray closing fence
        ("x = 1", "x = 1"),
    ],
)
def test_well_formed_balances_the_fences(reply: str, stored: str) -> None:
    assert well_formed(reply) == stored
    assert len([b for b in fenced_blocks(stored) if not b.closed]) == 0


def test_extract_json_object_reads_fenced_and_bare_json() -> None:
    assert extract_json_object('Verdict:\n```json\n{"score": 7}\n```') == {"score": 7}
    assert extract_json_object('text {"a": [1, {"b": 2}]} tail') == {"a": [1, {"b": 2}]}
    assert extract_json_object("[1, 2] and no object") is None


# -- stubs ----------------------------------------------------------------------------------------------------


def test_find_stub_in_a_fence_in_prose_or_alone() -> None:
    for task in (
        STUB,
        f"Complete this:\n```python\n{STUB}```\nThanks.",
        f"Write the body.\n\n{STUB}\nBe brief.",
    ):
        stub = find_stub(task)
        assert stub is not None and stub.name == "clamp" and stub.indent == "    "
        assert stub.source.endswith('    """') and stub.source.startswith("def clamp(")
    assert find_stub("Write a haiku about rain") is None
    assert find_stub("def done():\n    return 1\n") is None  # a function with a body is no stub


def test_finish_candidate_appends_the_body_and_cuts_at_the_end_of_the_function() -> None:
    # the embedded model's reply is stripped, so its first line lost its indentation
    body = "return max(low, min(x, high))\n\nprint(clamp(1, 2, 3))\nassert False"
    full = finish_candidate(STUB, body)
    assert full == STUB + "    return max(low, min(x, high))\n"
    ast.parse(full)
    # a nested block keeps its own indentation
    nested = finish_candidate(STUB, "if x < low:\n        return low\n    return min(x, high)")
    assert nested.endswith("    if x < low:\n        return low\n    return min(x, high)\n")
    # cut off by the token limit inside an expression: the lines that parse are kept
    cut = finish_candidate(STUB, "y = x\n    return min(max(y, low),")
    assert cut == STUB + "    y = x\n" and ast.parse(cut)


def test_finish_candidate_keeps_a_restated_function_and_balances_fences_without_a_stub() -> None:
    restated = "Here you go:\n```python\ndef clamp(x, low, high):\n    return max(low, min(x, high))\n```"
    assert finish_candidate(STUB, restated) == "def clamp(x, low, high):\n    return max(low, min(x, high))\n"
    assert finish_candidate("Write add(a, b).", "def add(a, b):\n    return a + b\n```") == (
        "```python\ndef add(a, b):\n    return a + b\n```"
    )


def test_docstring_examples_become_tests() -> None:
    tests = docstring_tests(STUB)
    assert tests.startswith("from solution import clamp\n")
    assert "def test_example_1():\n    assert clamp(5, 0, 3) == 3\n" in tests
    assert "assert clamp(-1, 0, 3) == 0" in tests
    critic = CodeTestCritic(tests)
    assert critic.test_names == ("test_example_1", "test_example_2")
    good = finish_candidate(STUB, "return max(low, min(x, high))")
    assert critic.critique(CritiqueRequest(task=STUB, candidate=good)).is_acceptable
    with pytest.raises(ValueError, match="no example with an expected output"):
        docstring_tests('def f():\n    """Nothing to run."""\n')
    with pytest.raises(ValueError, match="no function stub"):
        docstring_tests("Write a haiku")
    assert with_solution_import("from solution import clamp\n" + HELD_OUT, "clamp").count("import") == 1


def test_code_messages_end_with_the_stub_and_revisions_show_test_code_and_stub() -> None:
    draft = code_messages(STUB, None)
    assert draft is not None and len(draft) == 1
    assert draft[0].content == STUB, (
        "a first draft is the plain completion of the stub: no header, no example"
    )
    fenced = code_messages(f"Complete this function, please:\n```python\n{STUB}```\nThanks.", None)
    assert fenced is not None and fenced[0].content == STUB
    critique = {"issues": ["test_example_1 failed: assert clamp(5, 0, 3) == 3 failed (clamp(5, 0, 3) was 5)"]}
    previous = STUB + "    return x\n"
    revise = code_messages(STUB, "Use only builtins.", candidate=previous, critique=critique)
    assert revise is not None
    text = str(revise[0].content)
    assert "# test_example_1 failed: assert clamp(5, 0, 3) == 3" in text
    assert "    return x\n" in text and "# Use only builtins." in text
    assert text.rstrip().endswith(STUB.rstrip()) and text.count("def clamp(") == 2
    assert "def word_lengths(" in text, "a solved example comes first, so a base model writes a body"
    assert code_messages("Write a haiku", None) is None


# -- through the graph -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_the_code_loop_completes_the_stub_and_revises_with_the_failing_test(mode: str) -> None:
    import asyncio

    generator = RecordingChatModel(replies=["return x", "return max(low, min(x, high))"])
    critic = CodeTestCritic(docstring_tests(STUB))
    graph = create_reflection_graph(generator, critic=critic, focus="code", n_revisions=1, strategy="loop")
    result = graph.invoke({"task": STUB}) if mode == "sync" else asyncio.run(graph.ainvoke({"task": STUB}))

    assert result["stop_reason"] == "accepted" and result["iterations"] == 2
    first, second = result["trajectory"]
    assert first["candidate"] == STUB + "    return x\n"  # the full function, not the bare continuation
    assert second["candidate"] == result["candidate"] == STUB + "    return max(low, min(x, high))\n"
    draft_prompt, revise_prompt = generator.prompts
    assert draft_prompt.rstrip().endswith(STUB.rstrip())
    assert "`clamp(5, 0, 3)` returned 5" in revise_prompt, "the reviser saw the failing test"
    assert "    return x\n" in revise_prompt and revise_prompt.rstrip().endswith(STUB.rstrip())


def test_an_overridden_prompt_keeps_its_own_wording_but_gets_well_formed_fences() -> None:
    generator = RecordingChatModel(replies=["def add(a, b):\n    return a + b\n```\nThat is all."])
    critic = CodeTestCritic("from solution import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n")
    graph = create_reflection_graph(
        generator, critic=critic, focus="code", prompts={"generate": "Task: {task}\n```python\n"}
    )
    result = graph.invoke({"task": STUB.replace("clamp", "add")})
    assert generator.prompts[0].startswith("Task: def add(")
    assert result["candidate"] == "```python\ndef add(a, b):\n    return a + b\n```\nThat is all."
    assert result["stop_reason"] == "accepted"


def test_focus_code_with_a_test_critic_defaults_to_one_draft_and_two_rounds_of_two_fresh_drafts() -> None:
    from reflection_graph.loop._defaults import setup_defaults as code_defaults

    critic = CodeTestCritic(docstring_tests(STUB))
    layered = code_defaults(critic, Settings(focus="code"))
    assert layered == Settings(focus="code", strategy="resample", n_drafts=1, n_revisions=2, max_iterations=3)
    assert layered.given == {"focus"}  # a layer under the caller's values, not values the caller set
    user = code_defaults(critic, Settings(focus="code", n_drafts=4, n_revisions=1))
    assert (user.n_drafts, user.n_revisions, user.max_iterations) == (4, 1, 3)  # what a user passes wins
    assert code_defaults(critic, Settings(focus="general")) == Settings(focus="general")
    assert code_defaults(None, Settings(focus="code")) == Settings(focus="code")
    generator = RecordingChatModel(replies=["return x"])
    result = create_reflection_graph(generator, critic=critic, focus="code").invoke({"task": STUB})
    assert len(generator.received) == 1 + 2 + 2 and result["stop_reason"] == "max_iterations"
    assert [len(r.get("samples", [r])) for r in result["trajectory"]] == [1, 2, 2]
    assert len({str(m) for m in generator.received}) == 1  # every draft from the task alone: no revision


def test_a_stub_may_import_before_its_docstring() -> None:
    stub = 'def area(r):\n    import math\n    """Area of a circle of radius r."""\n'
    found = find_stub(stub)
    assert found is not None and found.name == "area" and found.source + "\n" == stub
    assert finish_candidate(stub, "return math.pi * r * r") == stub + "    return math.pi * r * r\n"


def test_a_chat_template_model_gets_the_task_as_it_is_and_revises_in_the_conversation() -> None:
    from langchain_core.messages import AIMessage, HumanMessage

    generator = RecordingChatModel(
        uses_chat_template=True,
        replies=[
            "```python\ndef clamp(x: int, low: int, high: int) -> int:\n    return x\n```\nThis returns x.",
            "```python\ndef clamp(x: int, low: int, high: int) -> int:\n    return max(low, min(x, high))\n```",
        ],
    )
    critic = CodeTestCritic(docstring_tests(STUB), isolation="off")
    graph = create_reflection_graph(
        generator, critic=critic, focus="code", n_drafts=1, n_revisions=1, strategy="loop"
    )
    result = graph.invoke({"task": STUB})

    assert result["stop_reason"] == "accepted" and result["iterations"] == 2
    draft, revise = generator.received
    assert [type(m) for m in draft] == [HumanMessage]
    assert draft[0].content == STUB, "the user's own words: what a user asks without the loop"
    assert [type(m) for m in revise] == [HumanMessage, AIMessage, HumanMessage]
    assert revise[0].content == draft[0].content, "the revision continues the draft's conversation"
    assert "return x" in str(revise[1].content) and "This returns x" not in str(revise[1].content)
    assert "`clamp(5, 0, 3)` returned 5" in str(revise[2].content), (
        "the failing example and its error are fed back"
    )
    assert result["candidate"].endswith("return max(low, min(x, high))\n")
    assert code_messages(STUB, None) == [HumanMessage(STUB)], "a completion-style model keeps the bare stub"


def test_a_chat_prompted_model_revises_in_a_conversation_not_from_the_worked_example() -> None:
    """Through its chat template an instruction-tuned model copied the completion-style revision prompt whole
    (`Task:`, `Previous answer:`, ...); it gets the task, its own answer, then the review instead."""
    from langchain_core.messages import AIMessage, HumanMessage

    from reflection_graph import create_reflection_graph
    from reflection_graph.prompts import CHAT_REVISE_PROMPT
    from tests.fakes import FakeCriticModel, critique

    generator = RecordingChatModel(
        uses_chat_template=True, replies=["Dear Ana, no.", "Dear Ana, thank you, but I must decline."]
    )
    critic = FakeCriticModel(
        critiques=[critique(3.0, issues=["It is curt."]), critique(9.0, ok=True, issues=[])]
    )
    graph = create_reflection_graph(generator, critic=critic, max_iterations=2)
    result = graph.invoke({"task": "Decline Ana's invitation politely"})
    assert result["candidate"] == "Dear Ana, thank you, but I must decline."
    draft, revision = generator.received
    assert [type(m) for m in draft] == [HumanMessage], "the first draft is the plain call: the task as it is"
    assert draft[0].text == "Decline Ana's invitation politely"
    assert [type(m) for m in revision] == [HumanMessage, AIMessage, HumanMessage]
    assert revision[0].text == "Decline Ana's invitation politely" and revision[1].text == "Dear Ana, no."
    assert "- It is curt." in revision[2].text and "Score" not in revision[2].text
    assert revision[2].text.endswith("Write the revised answer only, with nothing before or after it.")
    assert CHAT_REVISE_PROMPT.endswith("Write the revised answer only, with nothing before or after it.")
    # a model without a chat template keeps the completion-style revision
    plain = RecordingChatModel(replies=["Dear Ana, no.", "Dear Ana, sorry."])
    critic = FakeCriticModel(
        critiques=[critique(3.0, issues=["It is curt."]), critique(9.0, ok=True, issues=[])]
    )
    create_reflection_graph(plain, critic=critic, max_iterations=2).invoke(
        {"task": "Decline Ana's invitation"}
    )
    assert plain.received[1][-1].text.endswith("Revised answer:\n")


# -- a base model's first draft of a stub is the plain completion ------------------------------------------------


def test_a_base_models_first_draft_is_the_plain_greedy_completion_of_the_stub(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The draft prompt is the stub itself, sent at llama-cpp-python's own `create_completion` sampling (greedy,
    no repeat penalty, no repetition stop), and the candidate is the stub followed by the completion."""
    pytest.importorskip("llama_cpp", reason='needs pip install "reflection-graph[local]"')
    from reflection_graph.models._repetition import RepetitionStop

    model = scripted_embedded(
        monkeypatch, tmp_path, ["    return", " max(low,", " min(x,", " high))", "\n", EOG]
    )
    assert model.repeat_penalty == 1.1 and model.stop_repetition is True  # a base model's prose defaults
    llama = model._loaded().llama
    calls: list[tuple[Any, dict[str, Any]]] = []
    completion = llama.create_completion

    def recorded(prompt: Any, **args: Any) -> dict[str, Any]:
        calls.append((prompt, args))
        return completion(prompt, **args)

    monkeypatch.setattr(llama, "create_completion", recorded)
    critic = CodeTestCritic(docstring_tests(STUB), isolation="off")
    graph = create_reflection_graph(model, critic=critic, focus="code", n_drafts=1, max_iterations=1)
    result = graph.invoke({"task": STUB})
    ((prompt, args),) = calls
    assert prompt == STUB
    assert args["temperature"] == 0 and args["repeat_penalty"] == 1.0
    assert not any(isinstance(c, RepetitionStop) for c in args.get("stopping_criteria") or ())
    assert result["trajectory"][0]["candidate"] == STUB + "    return max(low, min(x, high))\n"
    assert model.repeat_penalty == 1.1 and model.stop_repetition is True  # the model itself is unchanged


def test_a_plain_completion_keeps_what_the_user_set_and_leaves_other_models_as_they_are() -> None:
    from reflection_graph.models import plain_completion
    from reflection_graph.models.embedded import EmbeddedChatModel

    gemma = plain_completion(EmbeddedChatModel(model="gemma-3-270m"))
    assert (gemma.repeat_penalty, gemma.stop_repetition) == (1.0, False)
    chosen = plain_completion(EmbeddedChatModel(model="gemma-3-270m", repeat_penalty=1.3))
    assert (chosen.repeat_penalty, chosen.stop_repetition) == (1.3, False)
    qwen = EmbeddedChatModel(model="qwen2.5-coder-1.5b")  # its plain call is the chat completion already
    assert plain_completion(qwen) is qwen
    fake = RecordingChatModel()
    assert plain_completion(fake) is fake


def test_a_base_models_later_samples_and_revisions_keep_its_own_settings(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Only the greedy first draft is the plain completion: the other samples of the round are the model's own."""
    pytest.importorskip("llama_cpp", reason='needs pip install "reflection-graph[local]"')
    model = scripted_embedded(monkeypatch, tmp_path, ["    return", " x", "\n", EOG])
    llama = model._loaded().llama
    penalties: list[float] = []
    completion = llama.create_completion

    def recorded(prompt: Any, **args: Any) -> dict[str, Any]:
        penalties.append(args["repeat_penalty"])
        return completion(prompt, **args)

    monkeypatch.setattr(llama, "create_completion", recorded)
    critic = CodeTestCritic(docstring_tests(STUB), isolation="off")
    graph = create_reflection_graph(model, critic=critic, focus="code", n_drafts=2, max_iterations=1)
    graph.invoke({"task": STUB})
    assert sorted(penalties) == [1.0, 1.1]
