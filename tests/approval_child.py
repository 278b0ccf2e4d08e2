"""Child process for tests/test_approval.py: approve a paused refund, and
die (``os._exit``, no cleanup) right after the store's *at*-th commit."""

from __future__ import annotations

import os
import sys

from pathlib import Path

import anyio

from pipeline import Approve
from pipeline.stores import CheckpointStore, Lease, Record
from tests.graph.store_urls import open_store
from tests.stores import CommitResult, DelegatingStore
from tests.test_approval import CHILD_LEASE_TTL, paying_graph


class Dying(DelegatingStore):
    """Kills the process once its *at*-th commit is durable."""

    def __init__(self, inner: CheckpointStore, at: int) -> None:
        super().__init__(inner)
        self.at, self.n = at, 0

    async def commit(
        self,
        record: Record,
        *,
        expected_head: int | None,
        lease: Lease | None = None,
    ) -> CommitResult:
        out = await self.inner.commit(
            record, expected_head=expected_head, lease=lease
        )
        self.n += 1
        if self.n == self.at:
            os._exit(9)
        return out


def main() -> None:
    """Resume thread "t" of the store argv[1] names with an approval."""
    spec, effects, at = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])

    async def run() -> None:
        async with open_store(spec, lease_ttl=CHILD_LEASE_TTL) as store:
            done = await paying_graph(effects).resume(
                Dying(store, at), "t", answer=Approve()
            )
            done.unwrap()

    anyio.run(run)


if __name__ == "__main__":
    main()
