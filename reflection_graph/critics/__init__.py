"""Critics: the `Critic` protocol, the LLM critic, and critics that need no model."""

from reflection_graph.critics.base import BaseCritic, Critic, CritiqueRequest
from reflection_graph.critics.llm import LLMCritic

__all__ = ["BaseCritic", "Critic", "CritiqueRequest", "LLMCritic"]
