"""A store wrapper that tests subclass to inject faults around commits;
one that crashes at a given commit."""

from __future__ import annotations

from collections.abc import Sequence

from returns.result import Result

from pipeline.failures import ConcurrentModification, LeaseLost, ThreadBusy
from pipeline.stores import CheckpointStore, Lease, Record


CommitResult = Result[None, ConcurrentModification | LeaseLost]


class DelegatingStore:
    """A CheckpointStore passing everything to *inner*; tests override
    ``commit`` to inject faults."""

    def __init__(self, inner: CheckpointStore) -> None:
        self.inner = inner

    @property
    def lease_ttl(self) -> float:
        return self.inner.lease_ttl

    async def commit(
        self,
        record: Record,
        *,
        expected_head: int | None,
        lease: Lease | None = None,
    ) -> CommitResult:
        return await self.inner.commit(
            record, expected_head=expected_head, lease=lease
        )

    async def records(
        self, thread_id: str, *, upto: int | None = None
    ) -> Sequence[Record]:
        return await self.inner.records(thread_id, upto=upto)

    async def head(self, thread_id: str) -> int | None:
        return await self.inner.head(thread_id)

    async def threads(self) -> Sequence[str]:
        return await self.inner.threads()

    async def delete(self, thread_id: str) -> None:
        await self.inner.delete(thread_id)

    async def acquire(
        self, thread_id: str, owner: str, *, ttl: float
    ) -> Result[Lease, ThreadBusy]:
        return await self.inner.acquire(thread_id, owner, ttl=ttl)

    async def renew(
        self, lease: Lease, *, ttl: float
    ) -> Result[Lease, LeaseLost]:
        return await self.inner.renew(lease, ttl=ttl)

    async def release(self, lease: Lease) -> None:
        await self.inner.release(lease)


class Crash(BaseException):
    """The process dies here."""


class CrashOnCommit(DelegatingStore):
    """Dies (raises :class:`Crash`) at its *at*-th commit."""

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
        self.n += 1
        if self.n == self.at:
            raise Crash
        return await self.inner.commit(
            record, expected_head=expected_head, lease=lease
        )
