"""Adapters that embed the reflection graph in a host graph whose state is shaped differently.

Three ways to embed, each shown in `tests/test_subgraph.py`:

1. Shared keys: `parent.add_node("reflect", graph)` when the parent's state has `task` (and reads back
   `candidate`, `stop_reason`, ...). Only the input keys go in and only the output keys come out, so a host's
   `messages` or `remaining_steps` never collide with the loop's internal keys.
2. A different schema: `parent.add_node("reflect", with_key_mapping(graph, inputs={"question": "task"},
   outputs={"candidate": "answer"}))`. `inputs` maps *host key -> our input key*; `outputs` maps
   *our output key -> host key*. Unmapped keys are neither read nor written.
3. A messages-based agent: `parent.add_node("reflect", as_messages_node(graph))` takes the last human message as
   the task and appends the answer as an `AIMessage` (its `response_metadata` carries `stop_reason`, `iterations`
   and the final `score`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda

__all__ = ["as_messages_node", "with_key_mapping"]

_INPUT_KEYS = ("task", "candidate", "context")
_OUTPUT_KEYS = ("candidate", "critique", "trajectory", "iterations", "stop_reason", "error", "usage")


def with_key_mapping(
    graph: Runnable[Any, Any],
    *,
    inputs: Mapping[str, str],
    outputs: Mapping[str, str],
    name: str = "reflection",
) -> Runnable[Any, dict[str, Any]]:
    """Wrap `graph` as a node for a host whose state uses other key names.

    Args:
        graph: the compiled reflection graph.
        inputs: host key -> reflection input key (`task`, `candidate` or `context`); must map one key to `task`.
        outputs: reflection output key -> host key.
        name: the node's run name.

    Raises:
        ValueError: a mapping names a key the reflection graph does not have, or nothing maps to `task`.
    """
    bad_in = sorted(set(inputs.values()) - set(_INPUT_KEYS))
    if bad_in:
        raise ValueError(f"inputs maps to unknown reflection input key(s) {bad_in}; use {list(_INPUT_KEYS)}")
    if "task" not in inputs.values():
        raise ValueError("inputs must map one host key to 'task', e.g. inputs={'question': 'task'}")
    bad_out = sorted(set(outputs) - set(_OUTPUT_KEYS))
    if bad_out:
        raise ValueError(
            f"outputs names unknown reflection output key(s) {bad_out}; use {list(_OUTPUT_KEYS)}"
        )

    def _in(state: Mapping[str, Any]) -> dict[str, Any]:
        return {ours: state[theirs] for theirs, ours in inputs.items() if state.get(theirs) is not None}

    def _out(result: Mapping[str, Any]) -> dict[str, Any]:
        return {theirs: result.get(ours) for ours, theirs in outputs.items()}

    def call(state: Mapping[str, Any], config: RunnableConfig) -> dict[str, Any]:
        return _out(graph.invoke(_in(state), config))

    async def acall(state: Mapping[str, Any], config: RunnableConfig) -> dict[str, Any]:
        return _out(await graph.ainvoke(_in(state), config))

    return RunnableLambda(call, afunc=acall, name=name)


def _last_human(state: Mapping[str, Any]) -> str:
    messages: list[BaseMessage] = list(state.get("messages") or [])
    for message in reversed(messages):
        if isinstance(message, HumanMessage):
            return message.text
    raise ValueError(
        "as_messages_node needs at least one human message in state['messages'] to use as the task"
    )


def _answer(result: Mapping[str, Any], name: str) -> dict[str, Any]:
    critique = result.get("critique") or {}
    message = AIMessage(
        content=result.get("candidate") or "",
        name=name,
        response_metadata={
            "stop_reason": result.get("stop_reason"),
            "iterations": result.get("iterations"),
            "score": critique.get("score"),
        },
    )
    return {"messages": [message]}


def as_messages_node(graph: Runnable[Any, Any], *, name: str = "reflection") -> Runnable[Any, dict[str, Any]]:
    """Wrap `graph` as a node for a messages-based agent (`MessagesState`): last human message in, AI message out."""

    def call(state: Mapping[str, Any], config: RunnableConfig) -> dict[str, Any]:
        return _answer(graph.invoke({"task": _last_human(state)}, config), name)

    async def acall(state: Mapping[str, Any], config: RunnableConfig) -> dict[str, Any]:
        return _answer(await graph.ainvoke({"task": _last_human(state)}, config), name)

    return RunnableLambda(call, afunc=acall, name=name)
