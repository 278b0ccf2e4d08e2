"""The in-memory store: fast, per process, not durable (tests, demos)."""

from __future__ import annotations

import threading
import time

from collections.abc import Sequence
from typing import final

from returns.result import Failure, Result, Success

from ..failures import ConcurrentModification, LeaseLost, ThreadBusy
from ._protocol import (
    DEFAULT_LEASE_TTL,
    Lease,
    LeaseRow,
    Record,
    check_lease_ttl,
    check_thread_id,
    holds,
    take,
)


_COMMITTED: Success[None] = Success(None)
"""What every accepted commit returns (a ``Success`` is immutable: one
serves them all, and no commit builds one)."""


@final
class MemoryStore:
    """A :class:`~pipeline.stores.CheckpointStore` in a dict: fast, per process, not durable.

    Records are immutable values, so the store hands out the very objects it
    keeps.  Leases run on the wall clock (``time.time``).  No call waits
    (none awaits anything): a run's lease is released without a bound or a
    shield (see :func:`~pipeline.stores.leased`).  One store may serve
    several threads, each with its own event loop: every call reads and
    changes the store under one lock of the threads' (held for that call
    only, never across an await).

    .. versionadded:: 0.1.0
    """

    def __init__(self, *, lease_ttl: float = DEFAULT_LEASE_TTL) -> None:
        self._threads: dict[str, list[Record]] = {}
        self._leases: dict[str, LeaseRow] = {}
        self._lease_ttl = (
            lease_ttl  # the default, checked once (a store made per run)
            if lease_ttl is DEFAULT_LEASE_TTL
            else check_lease_ttl(lease_ttl)
        )
        self._mutex = threading.Lock()
        """Held by each call while it reads and changes the dicts: the
        threads of several loops sharing the store take turns (a lease
        went to two owners, a record was lost: found attacking)."""

    @property
    def lease_ttl(self) -> float:
        """See :attr:`~pipeline.stores.CheckpointStore.lease_ttl`."""
        return self._lease_ttl

    def _checked(self, thread_id: object, name: str) -> str:
        """*thread_id*, checked (see :func:`check_thread_id`) unless it
        names a thread this store has leased: a lease is taken only on an
        id checked already (:meth:`acquire`), so an id among the leases'
        is one the check passes, and a run's every commit, renewal and
        release skips it (about 0.25 us each)."""
        if type(thread_id) is str and thread_id in self._leases:
            return thread_id
        return check_thread_id(thread_id, name)

    async def commit(
        self,
        record: Record,
        *,
        expected_head: int | None,
        lease: Lease | None = None,
    ) -> Result[None, ConcurrentModification | LeaseLost]:
        """See :meth:`~pipeline.stores.CheckpointStore.commit`."""
        self._checked(record.thread_id, "record.thread_id")
        with self._mutex:
            if lease is not None and not holds(
                self._leases.get(record.thread_id), lease
            ):
                return Failure(LeaseLost(record.thread_id))
            rows = self._threads.get(record.thread_id)
            head = rows[-1].version if rows else None
            # next_version(head), written out: this is every record's path.
            if head != expected_head or record.version != (
                0 if head is None else head + 1
            ):
                return Failure(
                    ConcurrentModification(
                        record.thread_id, expected_head, head
                    )
                )
            if rows is None:
                self._threads[record.thread_id] = [record]
            else:
                rows.append(record)
            return _COMMITTED

    async def records(
        self, thread_id: str, *, upto: int | None = None
    ) -> Sequence[Record]:
        """See :meth:`~pipeline.stores.CheckpointStore.records`."""
        check_thread_id(thread_id)
        with self._mutex:
            rows = tuple(self._threads.get(thread_id, ()))
        if upto is None:
            return rows
        return tuple(r for r in rows if r.version <= upto)

    async def head(self, thread_id: str) -> int | None:
        """See :meth:`~pipeline.stores.CheckpointStore.head`."""
        check_thread_id(thread_id)
        with self._mutex:
            rows = self._threads.get(thread_id)
            return rows[-1].version if rows else None

    async def threads(self) -> Sequence[str]:
        """See :meth:`~pipeline.stores.CheckpointStore.threads`."""
        with self._mutex:
            return sorted(self._threads)

    async def delete(self, thread_id: str) -> None:
        """See :meth:`~pipeline.stores.CheckpointStore.delete`."""
        check_thread_id(thread_id)
        with self._mutex:
            self._threads.pop(thread_id, None)
            self._leases.pop(thread_id, None)

    async def acquire(
        self, thread_id: str, owner: str, *, ttl: float
    ) -> Result[Lease, ThreadBusy]:
        """See :meth:`~pipeline.stores.CheckpointStore.acquire`."""
        check_thread_id(thread_id)
        # Kept under a plain ``str`` (a subclass's own ``__eq__`` and
        # ``__hash__`` could make another id look leased: see _checked).
        key = str.__str__(thread_id)
        with self._mutex:
            out = take(
                self._leases.get(key),
                thread_id,
                owner,
                ttl,
                time.time(),
            )
            if type(out) is Success:
                lease = out.unwrap()
                self._leases[key] = LeaseRow(owner, lease.token, lease.expires)
            return out

    async def renew(
        self, lease: Lease, *, ttl: float
    ) -> Result[Lease, LeaseLost]:
        """See :meth:`~pipeline.stores.CheckpointStore.renew`."""
        thread_id = self._checked(lease.thread_id, "lease.thread_id")
        with self._mutex:
            if not holds(self._leases.get(thread_id), lease):
                return Failure(LeaseLost(thread_id))
            renewed = Lease(
                thread_id, lease.owner, lease.token, time.time() + ttl
            )
            self._leases[thread_id] = LeaseRow(
                lease.owner, lease.token, renewed.expires
            )
            return Success(renewed)

    async def release(self, lease: Lease) -> None:
        """See :meth:`~pipeline.stores.CheckpointStore.release`."""
        thread_id = self._checked(lease.thread_id, "lease.thread_id")
        with self._mutex:
            row = self._leases.get(thread_id)
            if holds(row, lease):
                assert row is not None  # noqa: S101  # holds
                # The row given up (expired now), built directly:
                # attrs.evolve looks the class's fields up at every call.
                self._leases[thread_id] = LeaseRow(row.owner, row.token, 0.0)
