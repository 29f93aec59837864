"""What an embedded model is and what its calls default to: one profile per bundled GGUF, one for any other file.

A profile holds the facts the rest of the package asks about a model (is it prompted through a chat template, can
its next-token probabilities judge) and the defaults of its calls (context window, reply limits, repeat penalty).
`EmbeddedChatModel` takes every default it is not given from its profile, so a setting the user passes always wins.

- `qwen2.5-coder-1.5b` (instruction-tuned, chat template): llama-cpp-python's own chat defaults where they matter,
  no repeat penalty (code and revisions copy text on purpose), a reply limit no normal answer reaches, and an 8,192
  token context (its GGUF allows 32,768; 8,192 keeps the KV cache near 230 MB).
- `gemma-3-270m` (a base model, completion-style): short replies and a repeat penalty, without which it loops.
- any other GGUF (`local:/path.gguf`): `INSTRUCT` when its metadata holds a chat template, else `BASE`.

Adding a bundled GGUF is one entry in `PROFILES` (and its file in `_bundled`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["BASE", "INSTRUCT", "PROFILES", "ModelProfile", "chat_prompted", "profile_defaults"]


@dataclass(frozen=True)
class ModelProfile:
    """The facts and call defaults of one embedded model.

    Attributes:
        chat_template: prompted through its GGUF's chat template (instruction-tuned); else completion-style.
        judge: its next-token probabilities can judge answers (`JudgeCritic`); else `LogprobCritic` reads it.
        n_ctx: the context window it is loaded with, in tokens.
        max_tokens: the reply limit of a free-text call: high enough that no normal answer is cut.
        structured_max_tokens: the reply limit of a grammar-constrained JSON call.
        repeat_penalty: llama.cpp's penalty on repeated tokens (1.0: none).
    """

    chat_template: bool
    judge: bool
    n_ctx: int
    max_tokens: int
    structured_max_tokens: int
    repeat_penalty: float

    def defaults(self) -> dict[str, Any]:
        """The `EmbeddedChatModel` fields this profile sets when the user does not."""
        values = asdict(self)
        del values["chat_template"], values["judge"]
        return values


INSTRUCT = ModelProfile(
    chat_template=True,
    judge=True,
    n_ctx=8192,
    max_tokens=2048,
    structured_max_tokens=1024,
    repeat_penalty=1.0,
)
"""An instruction-tuned GGUF (a chat template in its metadata)."""

BASE = ModelProfile(
    chat_template=False,
    judge=False,
    n_ctx=2048,
    max_tokens=200,
    structured_max_tokens=320,
    repeat_penalty=1.1,
)
"""A base model: short completion-style replies, with the repeat penalty small base models need."""

PROFILES: dict[str, ModelProfile] = {
    "qwen2.5-coder-1.5b": INSTRUCT,
    "gemma-3-270m": BASE,
}
"""The profile of each bundled model, by its name in `embedded:<name>`."""


def profile_defaults(model: str | None, has_template: bool) -> dict[str, Any]:
    """The call defaults of a bundled model by name, or of a GGUF file (`model` None) by `has_template`."""
    if model is not None:
        return PROFILES[model].defaults()
    return (INSTRUCT if has_template else BASE).defaults()


def chat_prompted(model: Any) -> bool:
    """Whether `model` is an embedded model prompted through its chat template (its replies are chat replies);
    any other model (a hosted chat model, a plain callable) answers False, and keeps the package's prompts."""
    return getattr(model, "uses_chat_template", False) is True
