"""The `Critic` protocol every critic implements, and a base class with a threaded async default."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from langchain_core.runnables import RunnableConfig

from reflection_graph._threads import run_detached
from reflection_graph.critique import Critique

__all__ = ["BaseCritic", "Critic", "CritiqueRequest"]


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
    abandons (`run_detached`: neither the event loop nor the process waits for it)."""

    name: str = "critic"

    def critique(self, request: CritiqueRequest, config: RunnableConfig | None = None) -> Critique:
        raise NotImplementedError

    async def acritique(self, request: CritiqueRequest, config: RunnableConfig | None = None) -> Critique:
        return await run_detached(self.critique, request, config)
