"""LangGraph Studio / `langgraph dev` entry points: each module exposes a compiled `graph` (see `langgraph.json`).

The graphs are compiled without a checkpointer: the dev server (or LangGraph Platform) supplies persistence.
They draft with `studio_model()`: the model named by `REFLECTION_GRAPH_MODEL` when it is set, else the embedded
model (Qwen2.5-Coder-1.5B-Instruct, or Gemma 3 270M where only it is installed or `REFLECTION_GRAPH_EMBEDDED`
names it) with a small draft budget, so a run on two CPU cores stays short. A run's context
(`generator_model`, `critic_model`, `max_iterations`, ...) overrides these per run, as Studio's configuration
panel does.
"""

from __future__ import annotations

import os

from langchain_core.language_models import BaseChatModel

from reflection_graph.models import MODEL_ENV_VAR, resolve_model
from reflection_graph.models.embedded import EmbeddedChatModel

__all__ = ["STUDIO_MAX_TOKENS", "studio_model"]

STUDIO_MAX_TOKENS = 96
"""Token budget of a draft or revision on the embedded model (small, so a Studio run stays short)."""


def studio_model(max_tokens: int = STUDIO_MAX_TOKENS) -> BaseChatModel:
    """The model the Studio graphs are built with.

    Args:
        max_tokens: free-text token budget of the embedded model (ignored for a model named in the environment).

    Returns:
        `resolve_model(None)` when `REFLECTION_GRAPH_MODEL` is set, else an `EmbeddedChatModel` with small budgets.
    """
    if os.environ.get(MODEL_ENV_VAR, "").strip():
        return resolve_model(None)
    return EmbeddedChatModel(max_tokens=max_tokens)
