"""A LangChain v1 agent (`create_agent`) whose final answer is critiqued by `ReflectionMiddleware`.

Input: `{"messages": [{"role": "user", "content": "Write one sentence about rain."}]}`.
Output: `messages` (the last one is the answer: the best round's answer) and `reflection` (`candidate`, `critique`,
`trajectory`, `iterations`, `stop_reason`, `error`, `selected`, `usage`).
Configuration (Studio's panel, or a run's `context`): the fields of `reflection_graph.Context`; the middleware
reads `max_iterations`, `score_threshold`, `select`, `min_improvement`, `patience`, `critic_model`, `base_url`
and `critique_prompt` (the agent's own model is fixed when the graph is built).

The agent and its critic run on `studio_model()`: the embedded model (Qwen2.5-Coder-1.5B-Instruct by default)
unless `REFLECTION_GRAPH_MODEL` names another model. For a small *base* model such as the bundled Gemma 3 270M,
which continues text rather than chats, `AnswerCue` ends a first request with an `Answer:` line for the model to
continue (later turns end with `Assistant:`, see `reflection_graph.models.embedded.messages_to_prompt`). The cue
only changes what the model is sent, never the state.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph.state import CompiledStateGraph

from graphs import studio_model
from reflection_graph import Context
from reflection_graph.middleware import ReflectionMiddleware

__all__ = ["AGENT_SYSTEM_PROMPT", "AnswerCue", "create_agent_graph", "graph"]

AGENT_SYSTEM_PROMPT = "Below is a request and the short, direct answer a helpful assistant wrote."


class AnswerCue(AgentMiddleware):
    """Append an `Answer:` cue line to the request of a first turn (no AI message yet) sent to the model."""

    @staticmethod
    def _cued(request: ModelRequest[Any]) -> ModelRequest[Any]:
        messages = list(request.messages)
        if any(isinstance(m, AIMessage) for m in messages) or not messages:
            return request
        last = messages[-1]
        if not isinstance(last, HumanMessage):
            return request
        messages[-1] = last.model_copy(update={"content": f"{last.text.rstrip()}\n\nAnswer:"})
        return request.override(messages=messages)

    def wrap_model_call(
        self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], ModelResponse[Any]]
    ) -> ModelResponse[Any]:
        return handler(self._cued(request))

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any]:
        return await handler(self._cued(request))


def create_agent_graph(
    model: BaseChatModel | None = None, *, max_iterations: int = 2
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """The Studio agent: `model` (default `studio_model()`) answers, the same model critiques at temperature 0.

    Args:
        model: the agent's chat model; None uses `studio_model()`.
        max_iterations: critique rounds per run (a run's `Context.max_iterations` overrides it).
    """
    model = model if model is not None else studio_model()
    return create_agent(
        model,
        system_prompt=AGENT_SYSTEM_PROMPT,
        middleware=[AnswerCue(), ReflectionMiddleware(model, max_iterations=max_iterations)],
        context_schema=Context,
        name="agent",
    )


graph = create_agent_graph()
