"""Chat models for every role: spec resolution, the embedded llama.cpp model, OpenAI-compatible servers.

`resolve_model` turns a spec (`"embedded"`, `"local:/path.gguf"`, `"provider:model"`, a model name plus `base_url`,
a `BaseChatModel` or a plain callable) into a LangChain chat model. `describe(model)` says what any model is and can
do (`reflection_graph.models.profile`), `at_temperature_zero(model)` is the one way to get it greedy, and
`plain_completion(model)` the way to get the call a plain completion of a code stub makes. The
embedded model lives in `reflection_graph.models.embedded` and needs the `[local]` extra. `run_detached` runs a
blocking call (a plain callable, the embedded model, a sync critic) in its own daemon thread, so an abandoned call
keeps neither the event loop nor the process waiting (`_threads`, which also streams a producer's items).
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
from reflection_graph.models._threads import run_detached
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
    "run_detached",
    "supports_structured_output",
]
