"""A bench/ script imported by a test: the folder is on `sys.path` only while the test runs."""

from __future__ import annotations

import contextlib
import importlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parents[1] / "bench"


@contextlib.contextmanager
def bench_module(name: str) -> Iterator[Any]:
    """The module `bench/<name>.py`, imported with bench/ first on `sys.path` (removed again after)."""
    sys.path.insert(0, str(BENCH))
    try:
        yield importlib.import_module(name)
    finally:
        sys.path.remove(str(BENCH))
