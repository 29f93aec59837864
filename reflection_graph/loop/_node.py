"""The nodes of the loop: `generate`, `critique` and `finalize` (one module each), each a pair of plain functions
over shared steps, and `Node`, the one wrapper that runs them.

A node function is `fn(step, state, config)`: `step` (a `Step`) is this run's settings and roles (the built
ones with the run's `Context` applied), the strategy, the trigger and the memory; `Node` (the one wrapper, the
`Runnable` LangGraph pairs a sync and an async body with) makes it for each call and runs the node inside the
step's budget (reflection_graph/_runtime/_budget.py). The sync and async twins are a few lines each: the
shared steps decide the job, build the prompts (reflection_graph/loop/_messages.py), apply the rules
(reflection_graph/loop/_rules.py), ask the strategy (reflection_graph/strategies/) and shape the state
updates; the twins only make the calls (reflection_graph/_runtime/_calls.py), either directly or awaited.

Who writes what:
- `generate` decides its job (`draft`, `revise` or `glean` a given candidate) and writes only `rg_pending`: the
  round's candidates, each with the usage of the call that made it. When no critique will follow (the trigger
  said no, the round limit is already reached, a model error, a strategy's last revision) it writes `stop_reason`.
- `critique` judges the pending candidates and writes the round (`trajectory`), `iterations`, and `stop_reason`
  only when a rule stops the loop. With nothing pending for this round (generate stopped) it passes.
- `finalize` alone builds the outputs: it picks the answer (`select`), reports the critique, the stop reason and
  the usage totals (summed once, here, from the rounds).
The edges after `critique` (and any node there, such as the tree's `select`) are the strategy's.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from langchain_core.runnables import Runnable, RunnableConfig, ensure_config
from langgraph.runtime import get_runtime

from reflection_graph._runtime import step_budget
from reflection_graph.context import Context
from reflection_graph.loop._critique_node import acritique, critique
from reflection_graph.loop._finalize import afinalize, finalize
from reflection_graph.loop._generate import agenerate, generate
from reflection_graph.loop._overrides import Overrides
from reflection_graph.loop._step import Step
from reflection_graph.strategies import Strategy

__all__ = ["Node", "Setup", "make_nodes", "setup_of"]


@dataclass
class Setup:
    """What the graph was built with: the settings and roles (`overrides`), the strategy, trigger and memory."""

    overrides: Overrides
    strategy: Strategy
    should_refine: Callable[[Mapping[str, Any]], bool] | None = None
    memory: Any = None

    def step(self, runtime: Any) -> Step:
        """What a node of this run works with: the built settings and roles with the run's `Context` applied."""
        settings, roles = self.overrides.for_run(runtime.context)
        store = getattr(self.memory, "store", None) or runtime.store
        return Step(settings, roles, self.strategy, self.should_refine, self.memory, store)


NodeFn = Callable[[Step, Any, RunnableConfig], dict[str, Any]]
AsyncNodeFn = Callable[[Step, Any, RunnableConfig], Awaitable[dict[str, Any]]]


class Node(Runnable[Any, Any]):
    """A graph node with a sync and an async body, each a plain function `fn(step, state, config)`, run inside
    the step's budget.

    LangGraph pairs a sync and an async body only for a `Runnable` (a plain sync function runs under `ainvoke` in a
    worker thread, which would serialize the async critiques); `runtime` is read with `get_runtime`. Measured with
    the CPU clock on the bench's 3-round run (25 x 10 runs, interleaved): this pairing costs the same as LangGraph's
    own plain-function node (0.98x), `RunnableLambda(func, afunc=...)` 1.32x (it opens a traced child run per call).
    """

    def __init__(self, name: str, setup: Setup, func: NodeFn, afunc: AsyncNodeFn) -> None:
        self.name = name
        self._setup = setup
        self._func = func
        self._afunc = afunc

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        step = self._setup.step(get_runtime(Context))
        with step_budget(step.settings, input) as settle:
            return settle(self._func(step, input, ensure_config(config)))

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        step = self._setup.step(get_runtime(Context))
        with step_budget(step.settings, input) as settle:
            return settle(await self._afunc(step, input, ensure_config(config)))


def make_nodes(setup: Setup) -> dict[str, Node]:
    """The nodes bound to `setup`, by name."""
    pairs: dict[str, tuple[NodeFn, AsyncNodeFn]] = {
        "generate": (generate, agenerate),
        "critique": (critique, acritique),
        "finalize": (finalize, afinalize),
    }
    return {name: Node(name, setup, func, afunc) for name, (func, afunc) in pairs.items()}


def setup_of(graph: Any) -> Setup:
    """What a reflection graph was built with (its nodes share one `Setup`: the settings and roles as built, the
    strategy object, the trigger and the memory), from the builder or the compiled graph."""
    node = graph.nodes["generate"]
    bound = getattr(node, "bound", None) or node.runnable  # compiled: a PregelNode; builder: a StateNodeSpec
    if not isinstance(bound, Node):
        raise TypeError(f"{graph!r} is no reflection graph")
    return bound._setup
