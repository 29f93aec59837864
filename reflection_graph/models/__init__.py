"""Chat models for every role: spec resolution, the embedded llama.cpp model, OpenAI-compatible servers.

`resolve_model` turns a spec (`"embedded"`, `"local:/path.gguf"`, `"provider:model"`, a model name plus `base_url`,
a `BaseChatModel` or a plain callable) into a LangChain chat model. `describe(model)` says what any model is and can
do (`reflection_graph.models.profile`), `at_temperature_zero(model)` is the one way to get it greedy, and
`plain_completion(model)` the way to get the call a plain completion of a code stub makes. The
embedded model lives in `reflection_graph.models.embedded` and needs the `[local]` extra.
"""

from reflection_graph.models._resolve import (
    MODEL_ENV_VAR,
    OPENAI_COMPATIBLE_MAX_TOKENS,
    CallableChatModel,
    ModelSpec,
    Role,
    critic_model,
    resolve_model,
    supports_structured_output,
)
from reflection_graph.models.profile import ModelFacts, at_temperature_zero, describe, plain_completion

__all__ = [
    "MODEL_ENV_VAR",
    "OPENAI_COMPATIBLE_MAX_TOKENS",
    "CallableChatModel",
    "ModelFacts",
    "ModelSpec",
    "Role",
    "at_temperature_zero",
    "critic_model",
    "describe",
    "plain_completion",
    "resolve_model",
    "supports_structured_output",
]
