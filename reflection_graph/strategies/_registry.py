"""Where strategies are registered by name: the `strategy` setting names one of them."""

from __future__ import annotations

import threading

from reflection_graph.strategies.base import Strategy

__all__ = ["Registry"]


class Registry:
    """Strategies by name. `register` adds one (a `Strategy` instance with a `name`), `get` finds one."""

    def __init__(self) -> None:
        self._strategies: dict[str, Strategy] = {}
        self._lock = threading.Lock()

    def register(self, strategy: Strategy, *, replace: bool = False) -> Strategy:
        """Add `strategy` under its `name` and return it; `ValueError` when the name is taken (unless
        `replace`) or the object is no `Strategy`."""
        if not isinstance(strategy, Strategy) or not strategy.name or not strategy.name.isidentifier():
            raise ValueError(
                f"a strategy must be a reflection_graph.strategies.Strategy instance whose name is an identifier, "
                f"got {strategy!r}"
            )
        with self._lock:
            if strategy.name in self._strategies and not replace:
                raise ValueError(
                    f"a strategy named {strategy.name!r} is registered already; pass replace=True"
                )
            self._strategies[strategy.name] = strategy
        return strategy

    def unregister(self, name: str) -> None:
        """Remove the strategy named `name` (nothing when there is none)."""
        with self._lock:
            self._strategies.pop(name, None)

    def get(self, name: str) -> Strategy:
        """The strategy named `name`; `ValueError` naming the registered ones when there is none."""
        try:
            return self._strategies[name]
        except KeyError:
            raise ValueError(f"strategy must be one of {self.names()}, got {name!r}") from None

    def names(self) -> tuple[str, ...]:
        return tuple(self._strategies)
