"""Open a store from a short spec, for child processes: ``sqlite:PATH``,
or ``postgres:SCHEMA:URL`` and ``redis:PREFIX:URL`` (see the ``store_spec``
fixture in tests/servers.py)."""

from __future__ import annotations

import contextlib

from collections.abc import AsyncIterator
from pathlib import Path

from pipeline import stores
from pipeline.stores import CheckpointStore
from tests import servers


@contextlib.asynccontextmanager
async def open_store(
    spec: str, *, lease_ttl: float
) -> AsyncIterator[CheckpointStore]:
    """The store *spec* names, opened, with leases of *lease_ttl* seconds
    (its schema or key prefix is left in place: the spec's owner drops it)."""
    kind, _, where = spec.partition(":")
    if kind == "sqlite":
        async with stores.SQLiteStore(
            Path(where), lease_ttl=lease_ttl
        ) as store:
            yield store
        return
    if kind in {"postgres", "redis"}:
        name, _, url = where.partition(":")
        async with servers.open_store(
            kind, url, name, lease_ttl=lease_ttl, drop=False
        ) as server_store:
            yield server_store
        return
    msg = f"unknown store spec {kind!r}"
    raise ValueError(msg)
