"""The llama.cpp session of one embedded model: its loaded GGUF (`_llama`), its prompts rendered and tokenized as
llama.cpp is sent them, and their phases evaluated with the saved prefix states (`_reuse`).

A session is a view of a loaded GGUF, which every model on the same file, context window and threads shares (its
lock, its saved states), with the settings of the model that uses it: its context window and the memory its saved
states may take. It holds nothing else, so a model makes one for each call from its current settings.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import BaseMessage

from reflection_graph.models import _reuse
from reflection_graph.models._llama import _Loaded
from reflection_graph.models._prompting import DEFAULT_STOP, chat_message, cue_stop, messages_to_prompt

__all__ = ["LlamaSession"]


@dataclass(frozen=True)
class LlamaSession:
    """The llama.cpp session of an embedded model's calls.

    Attributes:
        loaded: the loaded GGUF (`_llama._load`): the `llama_cpp.Llama`, its lock, chat template and saved states.
        n_ctx: the model's context window in tokens.
        cache_bytes: memory for saved prompt-prefix states, bytes (0: none kept; the same figures, slower).
    """

    loaded: _Loaded
    n_ctx: int
    cache_bytes: int = 0

    @property
    def llama(self) -> Any:
        """The `llama_cpp.Llama` (use it under `loaded.lock`)."""
        return self.loaded.llama

    @property
    def chat(self) -> bool:
        """Whether prompts go through the GGUF's own chat template; else completion-style (the bundled Gemma 3
        270M, a base model, has none in its metadata)."""
        return self.loaded.formatter is not None

    def render(self, messages: Sequence[BaseMessage]) -> str:
        """The prompt text of `messages`: through the chat template (the generation prompt added) when the GGUF
        has one, else completion-style (`messages_to_prompt`)."""
        if not self.chat:
            return messages_to_prompt(list(messages))
        prompt: str = self.loaded.formatter(messages=[chat_message(m) for m in messages]).prompt
        return prompt

    def own_stops(self, messages: Sequence[BaseMessage] = ()) -> list[str]:
        """The model's own stop sequences: through a chat template, its end-of-turn token and the prompt's cue
        line repeated (`_prompting.cue_stop`); for a base model `DEFAULT_STOP`."""
        if not self.chat:
            return list(DEFAULT_STOP)
        return [s for s in (self.loaded.end_of_turn, cue_stop(messages)) if s]

    def end_of_turn(self) -> list[str]:
        """The end-of-turn text a chat-template reply is cut at (none for a completion-style model)."""
        return [self.loaded.end_of_turn] if self.loaded.end_of_turn and self.chat else []

    def tokenize(self, text: str) -> list[int]:
        """The tokens of `text` as a prompt: through a chat template as llama-cpp-python's chat completion
        tokenizes it (its special tokens are tokens, the template adds any BOS), else with a BOS, as text."""
        ids: list[int] = self.llama.tokenize(text.encode("utf-8"), add_bos=not self.chat, special=self.chat)
        return ids

    def prompt_ids(self, prompt: str) -> list[int]:
        """The tokens of `prompt` (`tokenize`), refused when they leave no room in the context window.

        Raises:
            ValueError: the prompt is too long for `n_ctx`.
        """
        ids = self.tokenize(prompt)
        if len(ids) + 16 > self.n_ctx:
            raise ValueError(
                f"the prompt has {len(ids)} tokens, too many for n_ctx={self.n_ctx}; raise n_ctx on "
                "EmbeddedChatModel or shorten the task/context"
            )
        return ids

    def bounds(self, plan: _reuse.Plan, ids: list[int]) -> tuple[int, ...]:
        """Where the phases of `ids` end (`_reuse.token_bounds` of `plan.prefixes`), tokenized as `tokenize` does."""
        return _reuse.token_bounds(plan.prefixes, ids, self.tokenize)

    def evaluate(self, ids: list[int], bounds: Sequence[int], *, keep_end: bool = False) -> int:
        """Evaluate `ids` in phases ending at `bounds`, loading and saving prefix states (`_reuse.evaluate`); hold
        `loaded.lock`. Returns how many tokens were evaluated (the rest came from a saved state)."""
        loaded = self.loaded
        return _reuse.evaluate(loaded.llama, ids, bounds, loaded.states, self.cache_bytes, keep_end=keep_end)
