"""The embedded model's own settings checked when it is built: a bundled model's name, a GGUF file's path, one
model chosen and token budgets that fit its context window; and LangChain's profile of those settings.
"""

from __future__ import annotations

import os
from typing import Any

from reflection_graph.models.profile import PROFILES

__all__ = ["bundled_name", "check_choice", "gguf_path", "langchain_profile"]


def bundled_name(value: str | None) -> str | None:
    """`value` when it names a bundled model (or is None).

    Raises:
        ValueError: an unknown name, with the names there are.
    """
    if value is not None and value not in PROFILES:
        raise ValueError(
            f"unknown bundled model {value!r}: use one of {', '.join(PROFILES)}, or model_path='/path.gguf'"
        )
    return value


def gguf_path(value: str | None) -> str | None:
    """`value` with `~` expanded, when it is an existing file (or None).

    Raises:
        ValueError: no such file.
    """
    if value is None:
        return None
    path = os.path.expanduser(str(value))
    if not os.path.isfile(path):
        raise ValueError(
            f"GGUF model file not found: {path!r}; pass an existing .gguf file, or model_path=None for a "
            "bundled model"
        )
    return path


def check_choice(
    model: str | None, model_path: str | None, max_tokens: int, structured_max_tokens: int, n_ctx: int
) -> None:
    """Check that at most one of `model` and `model_path` is given, and that both reply budgets fit in `n_ctx`.

    Raises:
        ValueError: both are given, or a budget is not smaller than `n_ctx`.
    """
    if model is not None and model_path is not None:
        raise ValueError(f"pass model={model!r} (a bundled model) or model_path={model_path!r}, not both")
    if max_tokens >= n_ctx or structured_max_tokens >= n_ctx:
        raise ValueError(
            f"max_tokens ({max_tokens}) and structured_max_tokens ({structured_max_tokens}) must be "
            f"smaller than n_ctx ({n_ctx}); raise n_ctx or lower the token budgets"
        )


def langchain_profile(n_ctx: int, max_tokens: int) -> dict[str, Any]:
    """LangChain's model profile (`BaseChatModel.profile`) of an embedded model with these settings."""
    return {
        "max_input_tokens": n_ctx,
        "max_output_tokens": max_tokens,
        "text_inputs": True,
        "text_outputs": True,
        "structured_output": True,
        "tool_calling": False,
        "temperature": True,
    }
