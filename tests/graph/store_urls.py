"""Open a store from a short spec (for child processes): ``sqlite:PATH``."""

from __future__ import annotations

import contextlib

from collections.abc import AsyncIterator
from pathlib import Path

from pipeline import graph
from pipeline.fold import CheckpointStore


@contextlib.asynccontextmanager
async def open_store(
    spec: str, *, lease_ttl: float
) -> AsyncIterator[CheckpointStore]:
    """The store *spec* names, opened, with leases of *lease_ttl* seconds."""
    kind, _, where = spec.partition(":")
    if kind == "sqlite":
        async with graph.SQLiteStore(
            Path(where), lease_ttl=lease_ttl
        ) as store:
            yield store
        return
    msg = f"unknown store spec {kind!r}"
    raise ValueError(msg)
