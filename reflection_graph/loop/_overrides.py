"""The one resolution of a run's settings and models, shared by the graph's nodes and `ReflectionMiddleware`.

A run may carry a `Context` (Studio's `context_schema`, `graph.invoke(..., context=Context(...))`) or the same keys
as a mapping (`configurable`, the agent's context dict). `Overrides.for_run` applies it to what was built:
- the settings: each non-None per-run field replaces the built one (validated by `Settings`); then what the
  strategy the graph was built with forces (reflection_graph/strategies/) is applied again, so a run cannot undo
  it. That strategy is the object kept at build time, never looked up by name again: a later
  `strategies.register(..., replace=True)` or `unregister` changes no graph built before;
- the models: `generator_model` / `reviser_model` / `critic_model` (with `base_url`) replace the built roles. A
  new generator also replaces the reviser, and the critic when the critic was the default one (built on the
  generator's model), which a `critic_model` or `critique_prompt` rebuilds too. A critic passed in is asked
  (`for_run`, reflection_graph/critics/base.py) for itself on the run's `critic_model` or `critique_prompt`: a
  model critic swaps its model or prompt, a composite asks its critics, and a critic with no model to swap
  (tests, rules) is kept for a prompt and, for a named model, gives way to an `LLMCritic` on it.
Model specs are resolved once per distinct override (cached), never per node.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from langchain_core.language_models import BaseChatModel

from reflection_graph.context import Context
from reflection_graph.critics.base import Critic, for_run
from reflection_graph.loop._defaults import default_critic
from reflection_graph.models import at_temperature_zero, resolve_model
from reflection_graph.settings import Settings
from reflection_graph.strategies import Strategy

ModelLike = Any  # BaseChatModel | str | Callable[[str], str] | None; resolved by reflection_graph.models


@dataclass(frozen=True)
class Roles:
    """The models and critic of one run (`generator`/`reviser` are None for the middleware: the agent drafts)."""

    generator: BaseChatModel | None
    reviser: BaseChatModel | None
    critic: Critic


def as_context(value: Any) -> Context | None:
    """A run's `Context`: as given, or built from a mapping's known keys (others ignored); else None."""
    if isinstance(value, Context):
        return value
    if isinstance(value, Mapping):
        known = Context.__dataclass_fields__
        return Context(**{k: v for k, v in value.items() if k in known})
    return None


def resolve(spec: ModelLike, role: str, base_url: str | None = None) -> BaseChatModel:
    """A chat model for `role`: a model passed in is used as it is; a spec goes through `resolve_model` once."""
    if isinstance(spec, BaseChatModel):
        return spec

    return resolve_model(spec, role=role, base_url=base_url)


def critic_help(spec: Any) -> str:
    """The one-line error for a `critic` that is none of the kinds accepted, naming the type of `spec`."""
    return (
        f"critic must be a reflection_graph Critic (LLMCritic, CodeTestCritic, CompositeCritic, a rule critic or "
        f"a BaseCritic subclass), a chat model, a model spec string such as 'embedded' or 'openai:gpt-4o-mini', "
        f"or a callable fn(prompt: str) -> str returning a JSON verdict; got {type(spec).__name__}"
    )


def as_critic(
    critic: ModelLike | Critic,
    generator: BaseChatModel | None,
    settings: Settings,
    *,
    base_url: str | None,
    guidelines: str | None,
) -> Critic:
    """A `Critic` as given, or a critic on the named model (default: the generator's, at temperature 0), the kind
    `_defaults.default_critic` chooses.

    Raises:
        ValueError: `critic` is neither a `Critic`, a chat model, a model spec nor a callable.
    """
    if isinstance(critic, Critic):
        return critic
    if critic is None and generator is not None:
        model = generator
    elif isinstance(critic, (str, BaseChatModel)) or callable(critic) or critic is None:
        try:
            model = resolve(critic, "critic", base_url)
        except TypeError as exc:
            raise ValueError(f"{critic_help(critic)} ({exc})") from exc
    else:
        raise ValueError(critic_help(critic))
    return default_critic(model, settings, guidelines=guidelines, named=critic is not None)


class Overrides:
    """What was built (settings, roles), and `for_run`: this run's settings and roles.

    Args:
        settings: the built settings.
        roles: the built roles.
        base_url: the OpenAI-compatible server named when the graph or middleware was built.
        guidelines: critic guidelines, kept when a critic is rebuilt for a run.
        default_critic: the critic was built from the generator's model (a new generator replaces it).
        strategy: the strategy the graph was built with (what it forces holds for every run); None forces nothing.
    """

    def __init__(
        self,
        settings: Settings,
        roles: Roles,
        *,
        base_url: str | None = None,
        guidelines: str | None = None,
        default_critic: bool = False,
        strategy: Strategy | None = None,
    ) -> None:
        self.settings = settings
        self.strategy = strategy
        self.roles = roles
        self.base_url = base_url
        self.guidelines = guidelines
        self.default_critic = default_critic
        self._built_key = (None, None, None, None, settings.prompts.get("critique"))
        self._cache: dict[tuple[Any, ...], Roles] = {}
        self._lock = threading.Lock()

    def for_run(self, context: Any) -> tuple[Settings, Roles]:
        """The built settings and roles with this run's `Context` (or mapping) applied; bad values raise
        `ValueError` naming the setting."""
        ctx = as_context(context)
        if ctx is None:
            return self.settings, self.roles
        settings = ctx.settings(self.settings)
        if self.strategy is not None:
            settings = self.strategy.force(settings)
        key = (
            ctx.generator_model,
            ctx.critic_model,
            ctx.reviser_model,
            ctx.base_url,
            settings.prompts.get("critique"),
        )
        if key == self._built_key:
            return settings, self.roles
        with self._lock:
            if key not in self._cache:
                self._cache[key] = self._roles(ctx, settings)
            return settings, self._cache[key]

    def _roles(self, ctx: Context, settings: Settings) -> Roles:
        built, url = self.roles, ctx.base_url or self.base_url
        generator = resolve(ctx.generator_model, "generator", url) if ctx.generator_model else None
        reviser = resolve(ctx.reviser_model, "reviser", url) if ctx.reviser_model else generator
        prompt = settings.prompts.get("critique")
        new_prompt = prompt != self.settings.prompts.get("critique")
        critic = built.critic
        if self.default_critic and (ctx.critic_model or generator is not None or new_prompt):
            critic = self._critic(ctx.critic_model or None, generator or built.generator, settings, url)
        elif ctx.critic_model or new_prompt:  # the critic says how it takes another model or prompt
            model = (
                at_temperature_zero(resolve(ctx.critic_model, "critic", url)) if ctx.critic_model else None
            )
            adapted = for_run(critic, model=model, prompt=prompt if new_prompt else None)
            critic = adapted if adapted is not None else self._critic(model, None, settings, url)
        return Roles(generator or built.generator, reviser or built.reviser, critic)

    def _critic(
        self, spec: Any, generator: BaseChatModel | None, settings: Settings, url: str | None
    ) -> Critic:
        return as_critic(spec, generator, settings, base_url=url, guidelines=self.guidelines)
