"""Fixtures of the Temporal tests: a client of the session's dev server.

Temporal's Python SDK (its client and its workers) runs on asyncio only,
so these tests run on asyncio, not on trio.
"""

from __future__ import annotations

import uuid

import pytest

from temporalio.client import Client

from pipeline.temporal import connect


@pytest.fixture
def anyio_backend() -> str:
    """Temporal's SDK needs asyncio."""
    return "asyncio"


@pytest.fixture(name="client")
async def _client(temporal_address: str) -> Client:
    return await connect(temporal_address)


@pytest.fixture(name="queue")
def _queue() -> str:
    return f"q-{uuid.uuid4().hex}"
