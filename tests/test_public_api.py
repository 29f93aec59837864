"""The public surface stays narrow and tidy: one sorted `__all__`, every name importable, private helpers private."""

from __future__ import annotations

import importlib
import pkgutil

import reflection_graph
import reflection_graph.critics

PUBLIC_MODULES = {
    "cli",
    "context",
    "critics",
    "critique",
    "gleaning",
    "graph",
    "memory",
    "middleware",
    "models",
    "prompts",
    "runners",
    "settings",
    "state",
    "subgraph",
}


def test_top_level_all_is_sorted_small_and_importable() -> None:
    names = reflection_graph.__all__
    assert names == sorted(names, key=lambda n: (n[0].islower(), n)), "keep __all__ sorted (classes first)"
    assert len(names) == len(set(names)) <= 30, f"{len(names)} public names: keep the top level narrow"
    for name in names:
        assert getattr(reflection_graph, name) is not None, name


def test_critics_all_is_sorted_and_importable() -> None:
    names = reflection_graph.critics.__all__
    assert names == sorted(names, key=lambda n: (n[0].islower(), n))
    for name in names:
        assert getattr(reflection_graph.critics, name) is not None, name


def test_every_module_is_public_by_intent_or_private_by_name() -> None:
    found = {m.name for m in pkgutil.iter_modules(reflection_graph.__path__)}
    public = {name for name in found if not name.startswith("_")}
    assert public == PUBLIC_MODULES, f"new public module(s) {public - PUBLIC_MODULES}: prefix helpers with _"
    for name in public:
        importlib.import_module(f"reflection_graph.{name}")
