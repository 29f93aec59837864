"""The public surface stays narrow and tidy: one sorted `__all__` per public module, every name importable, private
helpers private, at most 20 names at the top level."""

from __future__ import annotations

import importlib
import pkgutil
import re
from pathlib import Path
from types import ModuleType

import pytest

import reflection_graph

PUBLIC_MODULES = {
    "cli",
    "context",
    "critics",
    "critique",
    "gleaning",
    "graph",
    "loop",
    "memory",
    "middleware",
    "models",
    "prompts",
    "runners",
    "settings",
    "state",
    "strategies",
    "subgraph",
}
TOP_LEVEL = {
    "CodeTestCritic",
    "CompositeCritic",
    "Context",
    "Critic",
    "Critique",
    "LLMCritic",
    "ReflectionMiddleware",
    "ReflexionMemory",
    "Settings",
    "aevaluate",
    "as_messages_node",
    "build_reflection_graph",
    "create_gleaning_graph",
    "create_reflection_graph",
    "evaluate",
    "max_model_calls",
    "resolve_model",
    "run_batch",
    "with_key_mapping",
}


def _isort_key(name: str) -> tuple[int, str]:
    """ruff's RUF022 order: SCREAMING_CASE, then CamelCase, then the rest, each alphabetical."""
    if re.fullmatch(r"[A-Z0-9_]+", name) and not name.isdigit():
        return 0, name
    return (1 if name[0].isupper() else 2), name


def _public_modules() -> list[ModuleType]:
    """Every public module and subpackage: no part of its dotted name starts with `_`."""
    found = [reflection_graph]
    for info in pkgutil.walk_packages(reflection_graph.__path__, "reflection_graph."):
        if any(part.startswith("_") for part in info.name.split(".")):
            continue
        found.append(importlib.import_module(info.name))
    return found


def test_top_level_all_is_small_and_holds_what_most_users_need() -> None:
    names = reflection_graph.__all__
    assert len(names) == len(set(names)) <= 20, (
        f"{len(names)} public names: keep the top level at 20 or fewer"
    )
    assert set(names) == TOP_LEVEL


def test_every_public_module_has_one_sorted_importable_all() -> None:
    modules = _public_modules()
    assert {m.__name__ for m in modules} >= {
        "reflection_graph.critics.code_tests",
        "reflection_graph.models.embedded",
    }
    for module in modules:
        names = getattr(module, "__all__", None)
        assert isinstance(names, list), f"{module.__name__} has no __all__"
        assert names == sorted(names, key=_isort_key), f"sort {module.__name__}.__all__ (ruff RUF022 order)"
        assert len(names) == len(set(names)), module.__name__
        for name in names:
            assert hasattr(module, name), f"{module.__name__}.__all__ names {name}, which it does not define"
            assert not name.startswith("_"), f"{module.__name__}.__all__ exports the private {name}"


def test_names_left_the_top_level_are_in_their_subpackage() -> None:
    import reflection_graph.critics as critics
    import reflection_graph.state as state

    for name in ("BaseCritic", "CommandCritic", "CritiqueRequest", "JSONSchemaCritic", "LengthCritic"):
        assert name in critics.__all__ and not hasattr(reflection_graph, name)
    for name in ("InputState", "OutputState"):
        assert name in state.__all__ and not hasattr(reflection_graph, name)


def test_every_module_is_public_by_intent_or_private_by_name() -> None:
    found = {m.name for m in pkgutil.iter_modules(reflection_graph.__path__)}
    public = {name for name in found if not name.startswith("_")}
    assert public == PUBLIC_MODULES, f"new public module(s) {public - PUBLIC_MODULES}: prefix helpers with _"
    for name in public:
        importlib.import_module(f"reflection_graph.{name}")


def test_the_package_metadata_names_its_license_as_an_spdx_expression(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`project.license` is an SPDX string (a TOML table is deprecated and stops building after 2027-02-18), which
    needs setuptools>=77 to build: the metadata setuptools writes says `License-Expression: MIT`, warning-free."""
    import shutil
    import warnings

    from setuptools import build_meta

    tomllib = pytest.importorskip("tomllib")  # Python 3.11+

    root = Path(__file__).resolve().parent.parent
    project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    assert project["project"]["license"] == "MIT"
    assert "setuptools>=77" in project["build-system"]["requires"]
    source = tmp_path / "src"
    shutil.copytree(
        root / "reflection_graph", source / "reflection_graph", ignore=shutil.ignore_patterns("__pycache__")
    )
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(root / name, source / name)
    monkeypatch.chdir(source)  # setuptools builds the project in the working directory
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        name = build_meta.prepare_metadata_for_build_wheel(str(tmp_path))
    metadata = (tmp_path / name / "METADATA").read_text(encoding="utf-8").splitlines()
    assert "License-Expression: MIT" in metadata
    assert not [w for w in caught if "license" in str(w.message).lower()]
