"""Checkpoint stores: the protocol and the in-memory store.

Stores deal in opaque records (bytes plus a checksum), one per boundary
of a fold (a node, a handoff, an agent's turn, a fan-out branch that
finished).  Committing is a compare-and-set on the thread's head version:
exactly one of several concurrent writers wins each version.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, final

import attrs

from returns.result import Failure, Result, Success

from ..errors import ConcurrentModification


@final
@attrs.frozen
class Record:
    """One committed checkpoint: *data* is canonical JSON, *checksum* its hash."""

    thread_id: str
    version: int
    parent: int | None
    data: bytes
    checksum: str


class CheckpointStore(Protocol):
    """Where snapshots are kept.  Every method is safe to call concurrently."""

    async def commit(
        self, record: Record, *, expected_head: int | None
    ) -> Result[None, ConcurrentModification]:
        """Add *record* iff the thread's head version is *expected_head*.

        ``None`` means the thread must not exist yet.  ``record.version``
        is ``expected_head + 1`` (0 for a new thread).
        """
        ...

    async def records(
        self, thread_id: str, *, upto: int | None = None
    ) -> Sequence[Record]:
        """The thread's records with version <= *upto* (all if ``None``), in
        version order.  Empty if the thread does not exist."""
        ...

    async def head(self, thread_id: str) -> int | None:
        """The highest committed version, or ``None`` for no such thread."""
        ...

    async def threads(self) -> Sequence[str]:
        """Every thread id with at least one record, sorted."""
        ...

    async def delete(self, thread_id: str) -> None:
        """Remove every record of the thread (no error if there are none)."""
        ...


@final
class MemoryStore:
    """A :class:`CheckpointStore` in a dict: fast, per process, not durable.

    Records are immutable values, so the store hands out the very objects it
    keeps.
    """

    def __init__(self) -> None:
        self._threads: dict[str, list[Record]] = {}

    async def commit(
        self, record: Record, *, expected_head: int | None
    ) -> Result[None, ConcurrentModification]:
        """See :meth:`CheckpointStore.commit`."""
        rows = self._threads.get(record.thread_id)
        head = rows[-1].version if rows else None
        if head != expected_head or record.version != _next(head):
            return Failure(
                ConcurrentModification(record.thread_id, expected_head, head)
            )
        if rows is None:
            self._threads[record.thread_id] = [record]
        else:
            rows.append(record)
        return Success(None)

    async def records(
        self, thread_id: str, *, upto: int | None = None
    ) -> Sequence[Record]:
        """See :meth:`CheckpointStore.records`."""
        rows = self._threads.get(thread_id, [])
        if upto is None:
            return tuple(rows)
        return tuple(r for r in rows if r.version <= upto)

    async def head(self, thread_id: str) -> int | None:
        """See :meth:`CheckpointStore.head`."""
        rows = self._threads.get(thread_id)
        return rows[-1].version if rows else None

    async def threads(self) -> Sequence[str]:
        """See :meth:`CheckpointStore.threads`."""
        return sorted(self._threads)

    async def delete(self, thread_id: str) -> None:
        """See :meth:`CheckpointStore.delete`."""
        self._threads.pop(thread_id, None)


def _next(head: int | None) -> int:
    return 0 if head is None else head + 1
