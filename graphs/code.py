"""Code generation judged by running tests: the reflection loop with `CodeTestCritic` on a shipped task.

The task is fixed by the tests it is judged against: write `add(a, b)`. Input: `{}` (the shipped `CODE_TASK`) or
`{"task": "..."}` to word it differently; the tests stay `ADD_TESTS`. Each candidate's code (taken out of its
```python fence) runs against the tests in a sandboxed subprocess (time and memory limits, deleted temp dir); a
failing test is a `major` issue, code that does not compile a `critical` one, and the score is
10 * passed / total. Output: `code` (the extracted code of the final candidate), `passed` (every test passed), and
the reflection graph's keys (`candidate`, `critique`, `trajectory`, `iterations`, `stop_reason`, `error`, `usage`).

Configuration (Studio's panel, or a run's `context`): the fields of `reflection_graph.Context`.
"""

from __future__ import annotations

from typing import Any, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from typing_extensions import NotRequired

from graphs import studio_model
from reflection_graph import Context, create_reflection_graph
from reflection_graph.critics.tool import CodeTestCritic, extract_code
from reflection_graph.state import Round, StopReason, UsageReport

__all__ = ["ADD_TESTS", "CODE_TASK", "CodeInput", "CodeOutput", "create_code_graph", "graph"]

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


class CodeInput(TypedDict, total=False):
    """What the code graph takes: an optional rewording of the shipped task."""

    task: NotRequired[str]


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


class _CodeState(CodeInput, CodeOutput, total=False):
    context: str | None


def brief(state: _CodeState) -> dict[str, Any]:
    """Use the shipped task unless the input words it; clear the previous run's candidate on this thread."""
    task = state.get("task")
    if task is not None and (not isinstance(task, str) or not task.strip()):
        raise ValueError("'task' must be a non-empty string, or left out to use the shipped add(a, b) task")
    return {"task": task or CODE_TASK, "candidate": None, "context": None}


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
        tests: plain-assert tests importing from `solution` (default: the shipped `ADD_TESTS`).
        max_iterations: the most test runs (critique rounds).

    Returns:
        The compiled graph, taking `CodeInput` and returning `CodeOutput`.
    """
    reflection = create_reflection_graph(
        model,
        critic=CodeTestCritic(tests, timeout_s=10),
        focus="code",
        max_iterations=max_iterations,
        name="reflection",
    )
    builder = StateGraph(_CodeState, context_schema=Context, input_schema=CodeInput, output_schema=CodeOutput)
    builder.add_node("brief", brief)
    builder.add_node("reflection", reflection)
    builder.add_node("report", report)
    builder.add_edge(START, "brief")
    builder.add_edge("brief", "reflection")
    builder.add_edge("reflection", "report")
    builder.add_edge("report", END)
    return builder.compile(name="code")


graph = create_code_graph(studio_model(max_tokens=128))
