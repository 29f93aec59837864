"""Code generation judged by running tests: the reflection loop with `CodeTestCritic`, on your function and tests.

Input: `{"task": ..., "tests": ..., "entry_point"?: ...}`; every key has a default, so `{}` runs the shipped task
(`CODE_TASK`, write `add(a, b)`) against the shipped tests (`ADD_TESTS`).

- `task`: what to write. A function stub (a signature and a docstring) is completed by the model
  (completion-style, for base models) and the full function is the candidate.
- `tests`: plain-assert test functions (`def test_x(): assert f(1) == 2`). Left out, they are built from the
  `>>>` examples in the task's docstring, or are the shipped `ADD_TESTS` for a task without examples.
- `entry_point`: the function the tests call; when the tests do not import it from `solution`, the import is
  added (the candidate's code is written to `solution.py`). Default: the stub's function.

Tests without a test function, tests that do not parse, or tests that cannot import the function are rejected
before any model call, with a message saying what to change.

Each candidate's code runs against the tests in a sandboxed subprocess (time and memory limits, deleted temp dir);
a failing test is a `major` issue, code that does not compile a `critical` one, and the score is
10 * passed / total. Output: `code` (the code of the final candidate), `passed` (every test passed), and the
reflection graph's keys (`candidate`, `critique`, `trajectory`, `iterations`, `stop_reason`, `error`, `usage`).

Configuration (Studio's panel, or a run's `context`): the fields of `reflection_graph.Context`.
"""

from __future__ import annotations

import functools
from typing import Any, TypedDict

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime
from pydantic import BaseModel, Field

from graphs import studio_model
from reflection_graph import Context, create_reflection_graph
from reflection_graph.critics.base import BaseCritic, CritiqueRequest
from reflection_graph.critics.code_tests import CodeTestCritic, extract_code
from reflection_graph.critique import Critique
from reflection_graph.loop import resolve_tests
from reflection_graph.state import Round, StopReason, UsageReport

__all__ = ["ADD_TESTS", "CODE_TASK", "CodeInput", "CodeOutput", "code_tests", "create_code_graph", "graph"]

CODE_TASK = (
    "Write a Python function `add(a, b)` that returns the sum of `a` and `b`. "
    "Reply with the code only, in a ```python block."
)

ADD_TESTS = """\
from solution import add


def test_small_numbers():
    assert add(2, 3) == 5


def test_negative_numbers():
    assert add(-4, 1) == -3


def test_floats():
    assert abs(add(0.1, 0.2) - 0.3) < 1e-9
"""

_TESTS_KEY = "code_graph_tests"
"""The `configurable` key that carries a run's tests to the critic inside the reflection subgraph."""


class CodeInput(BaseModel):
    """What the code graph takes: the task, its tests and the function they call (all optional)."""

    task: str = Field(default=CODE_TASK, description="What to write; a function stub is completed.")
    tests: str | None = Field(
        default=None,
        description="Plain-assert test functions. Default: the docstring's >>> examples, else the shipped tests.",
    )
    entry_point: str | None = Field(
        default=None, description="The function the tests call (default: the stub's function)."
    )


class CodeOutput(TypedDict, total=False):
    """The reflection output plus the extracted `code` and whether every test `passed`.

    Plain channels (no reducers): each run on a thread replaces the previous run's values.
    """

    code: str
    passed: bool
    candidate: str | None
    critique: dict[str, Any] | None
    trajectory: list[Round]
    iterations: int
    stop_reason: StopReason | None
    error: str | None
    usage: UsageReport


class _CodeState(CodeOutput, total=False):
    task: str
    tests: str | None
    entry_point: str | None
    context: str | None


def code_tests(
    task: str, tests: str | None = None, entry_point: str | None = None, *, default: str = ADD_TESTS
) -> str:
    """The tests a run is judged by: `resolve_tests`, with the shipped `ADD_TESTS` as the last default.

    Raises:
        ValueError: the tests have no test function or do not parse, or nothing says which function they call.
    """
    return resolve_tests(task, tests, entry_point, default=default)


@functools.lru_cache(maxsize=32)
def _critic(tests: str) -> CodeTestCritic:
    return CodeTestCritic(tests, timeout_s=10)


class _RunTests(BaseCritic):
    """Runs the tests of this run (set by the `reflection` node in the run's `configurable`)."""

    name = "code_tests"

    def __init__(self, default: str) -> None:
        self.default = default

    def _for(self, config: RunnableConfig | None) -> CodeTestCritic:
        tests = ((config or {}).get("configurable") or {}).get(_TESTS_KEY) or self.default
        return _critic(tests)

    def critique(self, request: CritiqueRequest, config: RunnableConfig | None = None) -> Critique:
        return self._for(config).critique(request, config)

    async def acritique(self, request: CritiqueRequest, config: RunnableConfig | None = None) -> Critique:
        return await self._for(config).acritique(request, config)


def _brief(default_tests: str) -> Any:
    def brief(state: _CodeState) -> dict[str, Any]:
        """Check the input and settle the tests (before any model call); clear the previous run's candidate."""
        task = state.get("task")
        if task is None:
            task = CODE_TASK
        if not isinstance(task, str) or not task.strip():
            raise ValueError(
                "'task' must be a non-empty string, or left out to use the shipped add(a, b) task"
            )
        tests = code_tests(task, state.get("tests"), state.get("entry_point"), default=default_tests)
        return {"task": task, "tests": tests, "candidate": None, "context": None}

    return brief


_OUTPUT_KEYS = frozenset(CodeOutput.__annotations__)


def report(state: _CodeState) -> dict[str, Any]:
    """Extract the final code and say whether all tests passed."""
    critique = state.get("critique") or {}
    return {
        "code": extract_code(state.get("candidate") or ""),
        "passed": bool(critique.get("is_acceptable")) and state.get("stop_reason") == "accepted",
    }


def create_code_graph(
    model: Any, *, tests: str = ADD_TESTS, max_iterations: int = 3
) -> CompiledStateGraph[Any, Context, Any, Any]:
    """Build the code graph: `brief` -> `reflection` (subgraph, judged by `CodeTestCritic`) -> `report`.

    Args:
        model: the model that writes and revises the code (a chat model, a model spec string, or a callable).
        tests: the tests of a run whose input gives none and whose task has no docstring examples
            (default: the shipped `ADD_TESTS`).
        max_iterations: the most test runs (critique rounds).

    Returns:
        The compiled graph, taking `CodeInput` and returning `CodeOutput`.
    """
    CodeTestCritic(tests)
    reflection_graph = create_reflection_graph(
        model, critic=_RunTests(tests), focus="code", max_iterations=max_iterations, name="reflection"
    )

    def reflection(state: _CodeState, config: RunnableConfig, runtime: Runtime[Context]) -> dict[str, Any]:
        """The reflection loop, judged by this run's tests."""
        configurable = {**(config.get("configurable") or {}), _TESTS_KEY: state["tests"]}
        inputs = {"task": state["task"], "candidate": None, "context": state.get("context")}
        out = reflection_graph.invoke(
            inputs, {**config, "configurable": configurable}, context=runtime.context
        )
        return {key: value for key, value in out.items() if key in _OUTPUT_KEYS}

    builder = StateGraph(_CodeState, context_schema=Context, input_schema=CodeInput, output_schema=CodeOutput)
    builder.add_node("brief", _brief(tests))
    builder.add_node("reflection", reflection)
    builder.add_node("report", report)
    builder.add_edge(START, "brief")
    builder.add_edge("brief", "reflection")
    builder.add_edge("reflection", "report")
    builder.add_edge("report", END)
    return builder.compile(name="code")


graph = create_code_graph(studio_model(max_tokens=128))
