"""A store wrapper that tests subclass to inject faults around commits."""

from __future__ import annotations

from collections.abc import Sequence

from returns.result import Result

from pipeline.errors import ConcurrentModification
from pipeline.fold import CheckpointStore, Record


class DelegatingStore:
    """A CheckpointStore passing everything to *inner*; tests override
    ``commit`` to inject faults."""

    def __init__(self, inner: CheckpointStore) -> None:
        self.inner = inner

    async def commit(
        self, record: Record, *, expected_head: int | None
    ) -> Result[None, ConcurrentModification]:
        return await self.inner.commit(record, expected_head=expected_head)

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
