"""Per-run configuration shown in LangGraph Studio (`context_schema`).

Every field defaults to None, meaning "use what the graph was built with". A value given here for one run wins over
the factory's value and over environment variables.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

__all__ = ["Context"]


@dataclass(kw_only=True)
class Context:
    """Run-time overrides of the reflection loop's settings."""

    generator_model: str | None = field(
        default=None,
        metadata={"description": "Model that drafts: 'embedded', 'local:/path.gguf' or 'provider:model'."},
    )
    critic_model: str | None = field(
        default=None, metadata={"description": "Model that critiques (defaults to the generator's)."}
    )
    reviser_model: str | None = field(
        default=None, metadata={"description": "Model that revises (defaults to the generator's)."}
    )
    base_url: str | None = field(
        default=None, metadata={"description": "OpenAI-compatible server URL for string model names."}
    )
    max_iterations: int | None = field(
        default=None, metadata={"description": "Hard limit on critique rounds (>= 1)."}
    )
    score_threshold: float | None = field(
        default=None,
        metadata={"description": "Accept when score >= this (0-10); unset: the critic's verdict."},
    )
    select: Literal["best", "last"] | None = field(
        default=None, metadata={"description": "Return the best-scoring candidate or the last one."}
    )
    min_improvement: float | None = field(
        default=None, metadata={"description": "Smallest score gain that counts as progress."}
    )
    patience: int | None = field(
        default=None, metadata={"description": "Rounds without progress before stopping with 'plateau'."}
    )
    generate_prompt: str | None = field(
        default=None, metadata={"description": "Template for drafting ({task}, {context}, {lessons})."}
    )
    critique_prompt: str | None = field(
        default=None,
        metadata={
            "description": "Template for the critic ({task}, {context}, {candidate}, {threshold_rule})."
        },
    )
    revise_prompt: str | None = field(
        default=None,
        metadata={"description": "Template for revising ({task}, {candidate}, {critique}, {history})."},
    )
