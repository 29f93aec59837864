"""The `loop` strategy: revise the last candidate until the critic accepts, the score stops improving
(`patience`, `min_improvement`, `stop_on_no_new_issues`), or `max_iterations` rounds. It forces nothing; every
answer is `Strategy`'s default."""

from __future__ import annotations

from reflection_graph.strategies.base import Strategy

__all__ = ["Loop"]


class Loop(Strategy):
    name = "loop"
    description = "runs until accepted, plateau or the limit"
