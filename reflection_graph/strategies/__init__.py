"""Strategies: each way of running the rounds is one module with a `Strategy` subclass, registered here.

A strategy owns the settings it forces, its edges after `critique`, the few questions the nodes ask it and its
bound on model calls (reflection_graph/strategies/base.py says which). To add one, write a module like
`self_refine.py` and add its line below, or register it from your own code:

```python
from reflection_graph import strategies

strategies.register(MyStrategy())  # then create_reflection_graph(..., strategy="my_strategy")
```

Nothing else names it: the `strategy` setting is a `str` checked against this registry (held in
`reflection_graph.settings`, which reads it without importing this package), and the CLI's
`--strategy` takes its choices and help from it when a command runs. A built graph keeps the strategy object it
was built with, whatever is registered under its name later.
"""

from __future__ import annotations

from typing import cast

from reflection_graph.settings import STRATEGIES, Registry
from reflection_graph.strategies.base import Strategy
from reflection_graph.strategies.loop import Loop
from reflection_graph.strategies.resample import Resample
from reflection_graph.strategies.self_refine import SelfRefine
from reflection_graph.strategies.tree import Tree

__all__ = ["Strategy", "get", "names", "register", "registry", "unregister"]

registry = cast("Registry[Strategy]", STRATEGIES)
registry.require(Strategy)
registry.register(Loop())
registry.register(SelfRefine())
registry.register(Resample())
registry.register(Tree())

register = registry.register
unregister = registry.unregister
get = registry.get
names = registry.names
