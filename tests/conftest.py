"""Shared test configuration: both anyio backends, Hypothesis profiles."""

from __future__ import annotations

import os

from pathlib import Path

# Imported now, while the stack is shallow, not lazily by Hypothesis's
# engine in the middle of a test: pytest rewrites every module of a
# plugin's distribution (Hypothesis is one) as it is imported, and
# CPython 3.11 before 3.11.8 can fail such a parse under the recursion
# limit Hypothesis raises during a test ("SystemError: AST constructor
# recursion depth mismatch", CPython gh-106905).
import hypothesis.internal.conjecture.optimiser  # noqa: F401
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


ROOT = Path(__file__).parents[1]

VERSION_SENSITIVE = (
    "tests/cli",  # argparse's usage and errors, exit codes, subprocesses
    "tests/temporal",  # the workflow sandbox re-imports the standard library
    "tests/tutorial",  # the tutorial's shell sessions, printed as the page has
    "tests/test_api_reference.py",  # signatures as inspect renders them
    "tests/test_public_api.py",  # what each module exports and imports
    "tests/test_depth.py",  # json's own limits moved (RecursionError, 3.13)
    "tests/test_serde.py",  # json, the cattrs converters
    "tests/graph/test_signed.py",  # sqlite3's ResourceWarnings (3.13)
    "tests/test_native_cancellation.py",  # asyncio's task internals
    "tests/test_stray_cancellation.py",
    "tests/test_exception_propagation.py",  # exception groups
    "docs",  # the examples' printed output
    "README.md",
)
"""Tests whose outcome depends most on the interpreter's version, by path:
``-m "not slow or versions"`` is the fast tier plus these, which `.ci/run`
runs on the Pythons that do not run the whole suite (docs/layout.md)."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the tests under :data:`VERSION_SENSITIVE` ``versions``."""
    for item in items:
        where = item.path.relative_to(ROOT).as_posix()
        if any(
            where == path or where.startswith(f"{path}/")
            for path in VERSION_SENSITIVE
        ):
            item.add_marker(pytest.mark.versions)
