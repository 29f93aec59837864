"""reflection-graph: draft -> critique -> revise loops for LangGraph.

The loop goes by many names (reflection, gleaning, Self-Refine, Reflexion); this package packages it as a compiled
`StateGraph` you can invoke, embed as a subgraph, or serve with `langgraph dev`.
"""

from reflection_graph.batch import BatchSummary, arun_batch, run_batch
from reflection_graph.context import Context
from reflection_graph.critics import (
    BaseCritic,
    CodeTestCritic,
    CommandCritic,
    CompositeCritic,
    Critic,
    CritiqueRequest,
    JSONSchemaCritic,
    LengthCritic,
    LLMCritic,
    RequiredTermsCritic,
)
from reflection_graph.critique import Critique, CritiqueOutput, CritiqueParseError, Finding, parse_critique
from reflection_graph.subgraph import as_messages_node, with_key_mapping
from reflection_graph.gleaning import create_gleaning_graph
from reflection_graph.graph import (
    ReflectionGraph,
    ReflectionSettings,
    build_reflection_graph,
    create_reflection_graph,
    max_model_calls,
)
from reflection_graph.memory import ReflexionMemory
from reflection_graph.models import resolve_model
from reflection_graph.state import InputState, OutputState, ReflectionState, Round, StopReason

__all__ = [
    "BaseCritic",
    "BatchSummary",
    "CodeTestCritic",
    "CommandCritic",
    "CompositeCritic",
    "JSONSchemaCritic",
    "LengthCritic",
    "ReflectionGraph",
    "ReflexionMemory",
    "RequiredTermsCritic",
    "arun_batch",
    "as_messages_node",
    "create_gleaning_graph",
    "resolve_model",
    "run_batch",
    "with_key_mapping",
    "Context",
    "Critic",
    "Critique",
    "CritiqueOutput",
    "CritiqueParseError",
    "CritiqueRequest",
    "Finding",
    "InputState",
    "LLMCritic",
    "OutputState",
    "ReflectionSettings",
    "ReflectionState",
    "Round",
    "StopReason",
    "build_reflection_graph",
    "create_reflection_graph",
    "max_model_calls",
    "parse_critique",
]
