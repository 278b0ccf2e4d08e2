"""Keyed checksums: a store whose records an attacker cannot forge.

Every record's plain checksum (SHA-256 over its thread, version, parent and
bytes) detects torn writes, flipped bits and records moved to another
thread or version, by accident.  Someone who can write to the database can
also recompute it.  :class:`SignedStore` wraps any store and replaces the
checksum with an HMAC-SHA256 under a key the writer keeps: a record written
without the key fails the check on reading, exactly as a corrupt one does
(so the same rules apply: a failing *last* record is reported and skipped,
any other is a :class:`~pipeline.failures.CheckpointDecodeError`).

What it does not detect: records removed from the end of a thread (a
rollback to an earlier, genuinely signed version), or a whole thread
deleted.  Keep the key out of the store, and rotate it by running the old
threads to completion (a store holds records under one key).
"""

from __future__ import annotations

import hmac

from collections.abc import Sequence
from typing import final

import attrs

from returns.result import Result

from ..failures import ConcurrentModification, LeaseLost, ThreadBusy
from ._protocol import (
    CheckpointStore,
    Lease,
    Record,
    check_thread_id,
    record_checksum,
)


_PREFIX = "hmac-sha256="
_MIN_KEY = 16
_REFUSED = "refused: not signed with this store's key"
"""What a record that fails the HMAC check carries as its checksum to the
decoder (which then treats it as torn or tampered)."""


@final
class SignedStore:
    """*store*, with every record's checksum an HMAC-SHA256 under *key*.

    ::

        store = SignedStore(SQLiteStore(path), key=secret_bytes)

    *key* is at least 16 bytes (32 random bytes, say, from a secret
    manager); it is never shown in a ``repr``.  Leases, heads and deletes
    pass through unchanged.

    .. versionadded:: 0.1.0
    """

    def __init__(self, store: CheckpointStore, *, key: bytes) -> None:
        raw: object = key  # checked at run time too: not every caller is typed
        if not isinstance(raw, bytes | bytearray) or len(raw) < _MIN_KEY:
            msg = f"SignedStore: key must be at least {_MIN_KEY} bytes"
            raise ValueError(msg)
        self._store = store
        self._key = bytes(key)

    def __repr__(self) -> str:
        return f"SignedStore({self._store!r}, key=<hidden>)"

    @property
    def inner(self) -> CheckpointStore:
        """The store holding the signed records."""
        return self._store

    @property
    def lease_ttl(self) -> float:
        """See :attr:`~pipeline.stores.CheckpointStore.lease_ttl`."""
        return self._store.lease_ttl

    def _signature(self, record: Record) -> str:
        return _PREFIX + record_checksum(
            record.thread_id,
            record.version,
            record.parent,
            record.data,
            self._key,
        )

    def _verified(self, record: Record) -> Record:
        """*record* as it was given to :meth:`commit` when its HMAC holds,
        else with a checksum that no decoder accepts."""
        signature, _, original = record.checksum.rpartition(":")
        ok = hmac.compare_digest(self._signature(record), signature)
        return attrs.evolve(record, checksum=original if ok else _REFUSED)

    async def commit(
        self,
        record: Record,
        *,
        expected_head: int | None,
        lease: Lease | None = None,
    ) -> Result[None, ConcurrentModification | LeaseLost]:
        """See :meth:`~pipeline.stores.CheckpointStore.commit` (the record is
        signed first: its checksum becomes the HMAC and the plain one)."""
        check_thread_id(record.thread_id, "record.thread_id")
        signed = attrs.evolve(
            record, checksum=f"{self._signature(record)}:{record.checksum}"
        )
        return await self._store.commit(
            signed, expected_head=expected_head, lease=lease
        )

    async def records(
        self, thread_id: str, *, upto: int | None = None
    ) -> Sequence[Record]:
        """See :meth:`~pipeline.stores.CheckpointStore.records` (a record
        whose signature fails comes back with a checksum nothing accepts)."""
        rows = await self._store.records(thread_id, upto=upto)
        return tuple(self._verified(r) for r in rows)

    async def head(self, thread_id: str) -> int | None:
        """See :meth:`~pipeline.stores.CheckpointStore.head`."""
        return await self._store.head(thread_id)

    async def threads(self) -> Sequence[str]:
        """See :meth:`~pipeline.stores.CheckpointStore.threads`."""
        return await self._store.threads()

    async def delete(self, thread_id: str) -> None:
        """See :meth:`~pipeline.stores.CheckpointStore.delete`."""
        await self._store.delete(thread_id)

    async def acquire(
        self, thread_id: str, owner: str, *, ttl: float
    ) -> Result[Lease, ThreadBusy]:
        """See :meth:`~pipeline.stores.CheckpointStore.acquire`."""
        return await self._store.acquire(thread_id, owner, ttl=ttl)

    async def renew(
        self, lease: Lease, *, ttl: float
    ) -> Result[Lease, LeaseLost]:
        """See :meth:`~pipeline.stores.CheckpointStore.renew`."""
        return await self._store.renew(lease, ttl=ttl)

    async def release(self, lease: Lease) -> None:
        """See :meth:`~pipeline.stores.CheckpointStore.release`."""
        await self._store.release(lease)
