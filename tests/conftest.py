"""Shared test configuration: both anyio backends, Hypothesis profiles."""

from __future__ import annotations

import os

import pytest

from hypothesis import HealthCheck, settings

# The database servers of the PostgreSQL and Redis store tests.
from tests.servers import make_store as make_store
from tests.servers import postgres_url as postgres_url
from tests.servers import redis_url as redis_url
from tests.servers import store_spec as store_spec
from tests.servers import temporal_address as temporal_address


collect_ignore = ["typing"]  # checked by mypy and basedpyright, never run

settings.register_profile(
    "ci",
    derandomize=True,
    deadline=None,
    max_examples=100,
    suppress_health_check=[HealthCheck.too_slow],
    print_blob=True,
)
settings.register_profile(
    "dev", deadline=None, max_examples=50, print_blob=True
)
settings.register_profile(
    "nightly", deadline=None, max_examples=5_000, print_blob=True
)
settings.load_profile(
    os.environ.get(
        "HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"
    )
)


@pytest.fixture(
    params=[
        pytest.param("asyncio", id="asyncio"),
        pytest.param("trio", id="trio"),
    ]
)
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """Every async test runs on asyncio and on trio."""
    return str(request.param)
