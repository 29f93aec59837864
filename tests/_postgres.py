"""The PostgreSQL server that `.ci/postgres.sh` starts on 127.0.0.1, for tests marked `postgres`."""

from __future__ import annotations

import os

import pytest

PG_ENV = "REFLECTION_GRAPH_PG_DSN"


def pg_dsn() -> str:
    """The Postgres DSN from the environment; skip without one, but fail under CI (CI must not go green by skipping)."""
    dsn = os.environ.get(PG_ENV, "").strip()
    if dsn:
        return dsn
    how = f'start a throwaway server with `eval "$(.ci/postgres.sh)"`, which exports {PG_ENV}'
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{PG_ENV} is not set and CI=true: postgres tests must run in CI; {how}")
    pytest.skip(f"{PG_ENV} is not set; {how}")
