"""The life of a store on a database server: opened once, on a loop of its
own, closed once.

A server store's client runs on a :class:`~pipeline.stores._bridge.LoopThread`
(its asyncio event loop in a thread of its own).  :class:`ServerStore` owns
that lifecycle for every such store: :meth:`~ServerStore.open` starts the
loop and runs the store's own ``_open`` on it (connect, create what is
missing), :meth:`~ServerStore.aclose` lets the calls in flight finish and
runs ``_close``, ``async with`` does both, and every call goes through
``_call``: writes shielded from the caller's cancellation (a transaction is
never left half-done), reads not.  A subclass supplies ``_open``,
``_close``, its operations on its loop (``_commit``, ``_records``, ...,
``_cache_get`` and ``_cache_put`` for a :class:`~pipeline.stores.StoreCache`)
and a ``__repr__`` (its thread is named after it).
"""

from __future__ import annotations

import functools

from collections.abc import Callable, Coroutine, Sequence
from typing import TYPE_CHECKING, Any, Self, TypeVar

from returns.result import Result

from ..failures import ConcurrentModification, LeaseLost, ThreadBusy
from ._bridge import LoopThread
from ._protocol import Lease, Record


T = TypeVar("T")


class ServerStore:
    """The lifecycle every server store shares (see the module)."""

    _loop: LoopThread | None
    _lease_ttl: float

    if TYPE_CHECKING:  # what each store supplies

        async def _open(self) -> None:
            """Connect and prepare the server (on the store's loop)."""
            ...

        async def _close(self) -> None:
            """Disconnect (on the store's loop)."""
            ...

        async def _commit(
            self,
            record: Record,
            expected_head: int | None,
            lease: Lease | None,
        ) -> Result[None, ConcurrentModification | LeaseLost]: ...

        async def _records(
            self, thread_id: str, upto: int | None
        ) -> Sequence[Record]: ...

        async def _head(self, thread_id: str) -> int | None: ...

        async def _threads(self) -> Sequence[str]: ...

        async def _delete(self, thread_id: str) -> None: ...

        async def _acquire(
            self, thread_id: str, owner: str, ttl: float
        ) -> Result[Lease, ThreadBusy]: ...

        async def _renew(
            self, lease: Lease, ttl: float
        ) -> Result[Lease, LeaseLost]: ...

        async def _release(self, lease: Lease) -> None: ...

        async def _cache_get(
            self, key: str, now: float
        ) -> tuple[bytes, str] | None: ...

        async def _cache_put(
            self,
            key: str,
            value: bytes,
            sha: str,
            now: float,
            ttl: float | None,
        ) -> None: ...

    @property
    def lease_ttl(self) -> float:
        """See :attr:`~pipeline.stores.CheckpointStore.lease_ttl`."""
        return self._lease_ttl

    async def open(self) -> None:
        """Connect and prepare the server (create what is missing).

        Raises:
            psycopg.OperationalError: (PostgreSQL) The server cannot be
                reached.
            redis.exceptions.ConnectionError: (Redis) The server cannot be
                reached.
            RuntimeError: The store was opened already (a closed store
                stays closed: make a new one).
        """
        if self._loop is not None:
            msg = f"{self!r} was opened already"
            raise RuntimeError(msg)
        loop = LoopThread(f"pipeline:{self!r}")  # its thread's name
        try:
            await loop.run(self._open, shield=True)
        except BaseException:
            await loop.close(self._close)
            raise
        self._loop = loop

    async def aclose(self) -> None:
        """Let the calls in flight finish; disconnect.  Idempotent."""
        if self._loop is None:
            return
        await self._loop.close(self._close)

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    # -- the store's operations, each on the store's loop -----------------

    async def commit(
        self,
        record: Record,
        *,
        expected_head: int | None,
        lease: Lease | None = None,
    ) -> Result[None, ConcurrentModification | LeaseLost]:
        """See :meth:`~pipeline.stores.CheckpointStore.commit` (atomic on
        the server: one transaction, or one script)."""
        return await self._call(
            functools.partial(self._commit, record, expected_head, lease),
            shield=True,
        )

    async def records(
        self, thread_id: str, *, upto: int | None = None
    ) -> Sequence[Record]:
        """See :meth:`~pipeline.stores.CheckpointStore.records`."""
        if upto is not None and upto < 0:
            return ()
        return await self._call(
            functools.partial(self._records, thread_id, upto), shield=False
        )

    async def head(self, thread_id: str) -> int | None:
        """See :meth:`~pipeline.stores.CheckpointStore.head`."""
        return await self._call(
            functools.partial(self._head, thread_id), shield=False
        )

    async def threads(self) -> Sequence[str]:
        """See :meth:`~pipeline.stores.CheckpointStore.threads`."""
        return await self._call(self._threads, shield=False)

    async def delete(self, thread_id: str) -> None:
        """See :meth:`~pipeline.stores.CheckpointStore.delete` (the server
        reclaims the space as it does: see the store's own notes)."""
        await self._call(
            functools.partial(self._delete, thread_id), shield=True
        )

    async def acquire(
        self, thread_id: str, owner: str, *, ttl: float
    ) -> Result[Lease, ThreadBusy]:
        """See :meth:`~pipeline.stores.CheckpointStore.acquire` (on the
        server's clock)."""
        return await self._call(
            functools.partial(self._acquire, thread_id, owner, ttl),
            shield=True,
        )

    async def renew(
        self, lease: Lease, *, ttl: float
    ) -> Result[Lease, LeaseLost]:
        """See :meth:`~pipeline.stores.CheckpointStore.renew` (on the
        server's clock)."""
        return await self._call(
            functools.partial(self._renew, lease, ttl), shield=True
        )

    async def release(self, lease: Lease) -> None:
        """See :meth:`~pipeline.stores.CheckpointStore.release`."""
        await self._call(functools.partial(self._release, lease), shield=True)

    async def cache_get(
        self, key: str, now: float, /
    ) -> tuple[bytes, str] | None:
        """See :meth:`~pipeline.stores.CacheBackend.cache_get`."""
        return await self._call(
            functools.partial(self._cache_get, key, now), shield=False
        )

    async def cache_put(
        self,
        key: str,
        value: bytes,
        sha: str,
        now: float,
        ttl: float | None,
        /,
    ) -> None:
        """See :meth:`~pipeline.stores.CacheBackend.cache_put` (one
        statement or command)."""
        await self._call(
            functools.partial(self._cache_put, key, value, sha, now, ttl),
            shield=True,
        )

    async def _call(
        self, work: Callable[[], Coroutine[Any, Any, T]], *, shield: bool
    ) -> T:
        if self._loop is None:
            kind = type(self).__name__
            msg = (
                f"{self!r} is not open: use `async with {kind}(...)` "
                f"or `await {kind}.connect(...)`"
            )
            raise RuntimeError(msg)
        return await self._loop.run(work, shield=shield)
