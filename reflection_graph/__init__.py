"""reflection-graph: draft -> critique -> revise loops for LangGraph.

The loop goes by many names (reflection, gleaning, Self-Refine, Reflexion); this package packages it as a compiled
`StateGraph` you can invoke, embed as a subgraph, or serve with `langgraph dev`.
"""

from reflection_graph.context import Context
from reflection_graph.critics import BaseCritic, Critic, CritiqueRequest, LLMCritic
from reflection_graph.critique import Critique, CritiqueOutput, CritiqueParseError, Finding, parse_critique
from reflection_graph.graph import (
    ReflectionSettings,
    build_reflection_graph,
    create_reflection_graph,
    max_model_calls,
)
from reflection_graph.state import InputState, OutputState, ReflectionState, Round, StopReason

__all__ = [
    "BaseCritic",
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
