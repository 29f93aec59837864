"""The profile of each embedded model (`ModelProfile`): one per bundled GGUF (`PROFILES`, by the name in
`embedded:<name>`), `INSTRUCT` or `BASE` for any other file; which bundled model plain `embedded` runs
(`default_embedded`), where each one's GGUF is, and an `EmbeddedChatModel`'s input filled with its profile's call
defaults. What any model is and can do (`describe`) is `profile.py`, which exports these names too."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

from reflection_graph.models import _bundled

__all__ = [
    "BASE",
    "EMBEDDED_ENV_VAR",
    "INSTRUCT",
    "PROFILES",
    "DefaultCritic",
    "ModelProfile",
    "bundled_model_path",
    "bundled_names",
    "default_embedded",
    "default_model_path",
    "profile_defaults",
    "with_profile_defaults",
]

DefaultCritic = Literal["judge", "logprob", "llm"]
"""The critic a model judges with when none is named: `JudgeCritic`, `LogprobCritic` or `LLMCritic`."""


@dataclass(frozen=True)
class ModelProfile:
    """The facts and call defaults of one embedded model.

    Attributes:
        chat_template: prompted through its GGUF's chat template (instruction-tuned); else completion-style.
        default_critic: the critic it judges with when none is named (`ModelFacts.default_critic`): "judge" when
            its next-token probabilities can judge answers (`JudgeCritic`), "logprob" when only its answer
            likelihood ranks them (`LogprobCritic`).
        n_ctx: the context window it is loaded with, in tokens.
        max_tokens: the reply limit of a free-text call: high enough that no normal answer is cut.
        structured_max_tokens: the reply limit of a grammar-constrained JSON call.
        repeat_penalty: llama.cpp's penalty on repeated tokens (1.0: none).
        stop_repetition: stop a free-text reply that falls into a loop (a span of text repeated back to back),
            keeping what it wrote before the repeats (`finish_reason` "repetition").
        gguf: a bundled model's GGUF file: its path, or a function returning it (called at the first load; it may
            assemble and verify the file). None for the profiles of GGUF files given by path.
    """

    chat_template: bool
    default_critic: DefaultCritic
    n_ctx: int
    max_tokens: int
    structured_max_tokens: int
    repeat_penalty: float
    stop_repetition: bool = True
    gguf: str | Callable[[], str] | None = field(default=None, compare=False)

    def defaults(self) -> dict[str, Any]:
        """The `EmbeddedChatModel` fields this profile sets when the user does not."""
        values = asdict(self)
        del values["chat_template"], values["default_critic"], values["gguf"]
        return values

    def path(self) -> str:
        """The GGUF file of a bundled model (`gguf`, called when it is a function)."""
        if self.gguf is None:
            raise ValueError("this profile names no GGUF file: give it gguf='/path/to/model.gguf'")
        return self.gguf if isinstance(self.gguf, str) else self.gguf()


INSTRUCT = ModelProfile(
    chat_template=True,
    default_critic="judge",
    n_ctx=8192,
    max_tokens=2048,
    structured_max_tokens=1024,
    repeat_penalty=1.0,
)
"""An instruction-tuned GGUF (a chat template in its metadata)."""

BASE = ModelProfile(
    chat_template=False,
    default_critic="logprob",
    n_ctx=2048,
    max_tokens=200,
    structured_max_tokens=320,
    repeat_penalty=1.1,
)
"""A base model: short completion-style replies, with the repeat penalty small base models need."""

PROFILES: dict[str, ModelProfile] = {
    "qwen2.5-coder-1.5b": replace(INSTRUCT, gguf=_bundled._qwen_path),
    "gemma-3-270m": replace(BASE, gguf=_bundled._gemma_path),
}
"""The bundled models, by their name in `embedded:<name>`: one entry each."""

EMBEDDED_ENV_VAR = "REFLECTION_GRAPH_EMBEDDED"
"""Environment variable naming the bundled model that plain `embedded` runs (a name in `PROFILES`)."""


def bundled_names() -> tuple[str, ...]:
    """The names of the bundled models (`PROFILES`), as in the specs `embedded:<name>`."""
    return tuple(PROFILES)


def default_embedded() -> str:
    """The bundled model plain `embedded` runs: `REFLECTION_GRAPH_EMBEDDED` when set (the test suite pins Gemma
    through it), else Qwen when any of its parts is installed (a broken install is then reported, not hidden
    behind Gemma), else Gemma."""
    named = os.environ.get(EMBEDDED_ENV_VAR, "").strip()
    if named:
        if named not in PROFILES:
            raise ValueError(
                f"{EMBEDDED_ENV_VAR}={named!r} is not a bundled model: use one of {', '.join(PROFILES)} or unset it"
            )
        return named
    return "qwen2.5-coder-1.5b" if _bundled.qwen_installed() else "gemma-3-270m"


def bundled_model_path(name: str) -> str:
    """The GGUF file of a bundled model, assembled (and verified) at the first call of the process."""
    if name not in PROFILES:
        raise ValueError(f"unknown bundled model {name!r}: use one of {', '.join(PROFILES)}")
    return PROFILES[name].path()


def default_model_path() -> str:
    """The GGUF file plain `embedded` runs (see `default_embedded`)."""
    return bundled_model_path(default_embedded())


def profile_defaults(model: str | None, has_template: bool) -> dict[str, Any]:
    """The call defaults of a bundled model by name, or of a GGUF file (`model` None) by `has_template`."""
    if model is not None:
        return PROFILES[model].defaults()
    return (INSTRUCT if has_template else BASE).defaults()


def with_profile_defaults(data: Any, has_template: Callable[[str], bool]) -> Any:
    """`EmbeddedChatModel`'s input with every call default the user did not give (None counts as not given) filled
    from its model's profile: a bundled model's by name, a GGUF file's by `has_template(path)`. Input that names an
    unknown model or a missing file is returned as is, for the field validators to say what is wrong."""
    if not isinstance(data, dict):
        return data
    model, path = data.get("model"), data.get("model_path")
    if model is None and path is None:
        model = default_embedded()
    if model is not None and model not in PROFILES:
        return data
    template = False
    if model is None:
        if not isinstance(path, str) or not os.path.isfile(os.path.expanduser(path)):
            return data
        template = has_template(os.path.expanduser(path))
    filled = dict(data)
    for key, value in profile_defaults(model, template).items():
        if filled.get(key) is None:
            filled[key] = value
    return filled
