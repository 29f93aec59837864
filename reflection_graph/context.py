"""Per-run configuration shown in LangGraph Studio (`context_schema`).

Every field defaults to None, meaning "use what the graph was built with". A value given here for one run wins over
the factory's value and over environment variables. The setting fields take their description from
`reflection_graph.settings.Settings` (declared there once); a test checks that every per-run setting is here.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from reflection_graph.settings import Select, Settings

__all__ = ["Context"]


def _override(name: str) -> Any:
    """A per-run override of setting `name`, described as the setting is."""
    description = Settings.__dataclass_fields__[name].metadata["description"]
    return field(default=None, metadata={"description": description})


def _text(description: str) -> Any:
    return field(default=None, metadata={"description": description})


@dataclass(kw_only=True)
class Context:
    """Run-time overrides of the reflection loop's settings and models."""

    generator_model: str | None = _text(
        "Model that drafts: 'embedded', 'local:/path.gguf' or 'provider:model'."
    )
    critic_model: str | None = _text("Model that critiques (defaults to the generator's).")
    reviser_model: str | None = _text("Model that revises (defaults to the generator's).")
    base_url: str | None = _text("OpenAI-compatible server URL for string model names.")
    max_iterations: int | None = _override("max_iterations")
    score_threshold: float | None = _override("score_threshold")
    select: Select | None = _override("select")
    min_improvement: float | None = _override("min_improvement")
    patience: int | None = _override("patience")
    n_drafts: int | None = _override("n_drafts")
    n_revisions: int | None = _override("n_revisions")
    token_budget: int | None = _override("token_budget")
    time_budget_s: float | None = _override("time_budget_s")
    generate_prompt: str | None = _text("Template for drafting ({task}, {context}, {lessons}).")
    critique_prompt: str | None = _text(
        "Template for the critic ({task}, {context}, {candidate}, {threshold_rule})."
    )
    revise_prompt: str | None = _text("Template for revising ({task}, {candidate}, {critique}, {history}).")

    def settings(self, base: Settings) -> Settings:
        """`base` with this run's overrides applied (validated; a bad value raises `ValueError`)."""
        names = base.__dataclass_fields__
        values = {f.name: getattr(self, f.name) for f in fields(self) if f.name in names}
        prompts = {role: getattr(self, f"{role}_prompt") for role in ("generate", "critique", "revise")}
        if any(prompts.values()):
            values["prompts"] = {**base.prompts, **{k: v for k, v in prompts.items() if v}}
        return base.override(**values)

    def models(self) -> tuple[str | None, str | None, str | None, str | None]:
        """(generator, critic, reviser, base_url) named for this run."""
        return self.generator_model, self.critic_model, self.reviser_model, self.base_url
