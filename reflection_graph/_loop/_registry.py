"""The strategies by name: the values the `strategy` setting accepts, and the objects they name.

This module imports nothing of the package. `settings` checks a `strategy` value against `STRATEGIES` and lists
its choices from it; the strategies package (which imports `settings`) registers its strategies into it when it
loads and makes sure only `Strategy` instances enter (`Registry.require`). So settings and strategies never
import each other, and a name is looked up in one place.
"""

from __future__ import annotations

import threading
from typing import Any, Generic, TypeVar

__all__ = ["STRATEGIES", "Registry"]

T = TypeVar("T")


class Registry(Generic[T]):
    """Strategies by name. `register` adds one (an instance of the required class with a `name`), `get` finds
    one, `names` and `descriptions` list them in the order they were registered."""

    def __init__(self) -> None:
        self._strategies: dict[str, T] = {}
        self._lock = threading.Lock()
        self._kind: type = object

    def require(self, kind: type) -> None:
        """Accept only instances of `kind` from now on (the strategies package names its `Strategy` class)."""
        self._kind = kind

    def register(self, strategy: T, *, replace: bool = False) -> T:
        """Add `strategy` under its `name` and return it; `ValueError` when the name is taken (unless
        `replace`) or the object is no `Strategy`."""
        name = getattr(strategy, "name", None)
        if not isinstance(strategy, self._kind) or not isinstance(name, str) or not name.isidentifier():
            raise ValueError(
                f"a strategy must be a reflection_graph.strategies.Strategy instance whose name is an identifier, "
                f"got {strategy!r}"
            )
        with self._lock:
            if name in self._strategies and not replace:
                raise ValueError(f"a strategy named {name!r} is registered already; pass replace=True")
            self._strategies[name] = strategy
        return strategy

    def unregister(self, name: str) -> None:
        """Remove the strategy named `name` (nothing when there is none)."""
        with self._lock:
            self._strategies.pop(name, None)

    def get(self, name: str) -> T:
        """The strategy named `name`; `ValueError` naming the registered ones when there is none."""
        try:
            return self._strategies[name]
        except KeyError:
            raise ValueError(f"strategy must be one of {self.names()}, got {name!r}") from None

    def names(self) -> tuple[str, ...]:
        """The registered names, in the order they were registered."""
        return tuple(self._strategies)

    def descriptions(self) -> dict[str, str]:
        """Each registered name with its strategy's one-line `description`."""
        return {
            name: str(getattr(strategy, "description", "")) for name, strategy in self._strategies.items()
        }


STRATEGIES: Registry[Any] = Registry()
"""The one registry: the strategies package fills it, `settings` reads it."""
