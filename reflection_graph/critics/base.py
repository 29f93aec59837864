"""The `Critic` protocol every critic implements, and a base class with a threaded async default.

A critic needs two methods, `critique` and `acritique`, and a `name`. What else it needs from the graph, it says
itself (`BaseCritic` has the defaults), so a new critic, the package's or your own, works without edits elsewhere:
- `metered`: True when every model call it makes goes through `call_model` / `acall_model` (the package's one call
  layer: retries, timeouts, the run's token and time budget, and the usage it records per role). False (the
  default for your own critic): the graph counts its calls with a LangChain usage callback in the `config` it
  hands the critic, so pass that `config` on to your model calls.
- `for_run(model=..., prompt=...)`: this critic for one run that names another critic model
  (`Context.critic_model`) or another critique prompt (`Context.critique_prompt`). The default keeps the critic
  for a new prompt and returns None for a new model, meaning "no model to swap": the run is then judged by an
  `LLMCritic` on the named model. A critic that judges with a model returns a copy on the new one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from langchain_core.runnables import Runnable, RunnableConfig

from reflection_graph._calls import acall, call
from reflection_graph._threads import run_detached
from reflection_graph.critique import Critique

__all__ = ["BaseCritic", "Critic", "CritiqueRequest", "acall_model", "call_model", "for_run", "is_metered"]


@dataclass(frozen=True)
class CritiqueRequest:
    """What a critic is asked to judge.

    Attributes:
        task: what the candidate should achieve.
        candidate: the text being judged.
        context: optional extra material (source documents, constraints).
        iteration: 1-based round number.
        score_threshold: the acceptance bar on the 0-10 scale, when one is set.
        history: a bounded window of earlier rounds (each a dict with `candidate`, `score`, `feedback`).
    """

    task: str
    candidate: str
    context: str | None = None
    iteration: int = 1
    score_threshold: float | None = None
    history: tuple[dict[str, Any], ...] = field(default_factory=tuple)


@runtime_checkable
class Critic(Protocol):
    """Anything that judges a candidate. Implement both methods (or subclass `BaseCritic`)."""

    name: str

    def critique(self, request: CritiqueRequest, config: RunnableConfig | None = None) -> Critique: ...

    async def acritique(self, request: CritiqueRequest, config: RunnableConfig | None = None) -> Critique: ...


class BaseCritic:
    """Base class: subclasses implement `critique`; `acritique` runs it in a daemon thread that a cancelled run
    abandons (`run_detached`: neither the event loop nor the process waits for it).

    Attributes:
        name: the critic's name in findings.
        metered: every model call goes through `call_model` / `acall_model` (see the module doc); False: the
            graph counts the calls with a usage callback.
    """

    name: str = "critic"
    metered: bool = False

    def critique(self, request: CritiqueRequest, config: RunnableConfig | None = None) -> Critique:
        raise NotImplementedError

    async def acritique(self, request: CritiqueRequest, config: RunnableConfig | None = None) -> Critique:
        return await run_detached(self.critique, request, config)

    def for_run(self, *, model: Any = None, prompt: Any = None) -> Critic | None:
        """This critic for a run that names another critic `model` (a chat model, already at temperature 0)
        and/or another critique `prompt` (None: keep). The default: kept for a new prompt; None for a new model
        (this critic has no model to swap)."""
        return None if model is not None else self


def is_metered(critic: Any) -> bool:
    """Whether `critic` declares that its model calls go through the package's call layer."""
    return bool(getattr(critic, "metered", False))


def for_run(critic: Critic, *, model: Any = None, prompt: Any = None) -> Critic | None:
    """`critic.for_run(...)` for a critic that has it; one that has not is kept for a prompt, None for a model."""
    adapt = getattr(critic, "for_run", None)
    if callable(adapt):
        return adapt(model=model, prompt=prompt)  # type: ignore[no-any-return]
    return None if model is not None else critic


def call_model(
    model: Runnable[Any, Any],
    value: Any,
    config: RunnableConfig | None = None,
    *,
    retries: int = 2,
    timeout_s: float | None = None,
) -> Any:
    """`model.invoke(value, config)` through the package's call layer: retried on transient errors, admitted by
    the run's budget (its reply limit cut to what is left) and recorded in the critique's usage. A critic whose
    calls all go through here sets `metered = True`."""
    return call(model, value, config, retries=retries, timeout_s=timeout_s)


async def acall_model(
    model: Runnable[Any, Any],
    value: Any,
    config: RunnableConfig | None = None,
    *,
    retries: int = 2,
    timeout_s: float | None = None,
) -> Any:
    """Async twin of `call_model`."""
    return await acall(model, value, config, retries=retries, timeout_s=timeout_s)
