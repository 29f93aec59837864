"""reflection-graph: draft -> critique -> revise loops for LangGraph.

The loop goes by many names (reflection, gleaning, Self-Refine, Reflexion); this package packages it as a compiled
`StateGraph` you can invoke, embed as a subgraph, or serve with `langgraph dev`.

The top level holds the names most users need. The rest lives in the subpackage named for it:
`reflection_graph.critics` (every critic, `BaseCritic`, `CritiqueRequest`), `reflection_graph.models`,
`reflection_graph.memory`, `reflection_graph.runners`, and the state schemas in `reflection_graph.state`.
"""

from reflection_graph._runtime import max_model_calls
from reflection_graph.context import Context
from reflection_graph.critics import CodeTestCritic, CompositeCritic, Critic, LLMCritic
from reflection_graph.critique import Critique
from reflection_graph.gleaning import create_gleaning_graph
from reflection_graph.graph import build_reflection_graph, create_reflection_graph
from reflection_graph.memory import ReflexionMemory
from reflection_graph.middleware import ReflectionMiddleware
from reflection_graph.models import resolve_model
from reflection_graph.runners.batch import run_batch
from reflection_graph.runners.eval import aevaluate, evaluate
from reflection_graph.settings import Settings
from reflection_graph.subgraph import as_messages_node, with_key_mapping

__all__ = [
    "CodeTestCritic",
    "CompositeCritic",
    "Context",
    "Critic",
    "Critique",
    "LLMCritic",
    "ReflectionMiddleware",
    "ReflexionMemory",
    "Settings",
    "aevaluate",
    "as_messages_node",
    "build_reflection_graph",
    "create_gleaning_graph",
    "create_reflection_graph",
    "evaluate",
    "max_model_calls",
    "resolve_model",
    "run_batch",
    "with_key_mapping",
]
