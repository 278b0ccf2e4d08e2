"""Where cached outputs live: in memory, or in a checkpoint store's backend.

A cache holds canonical JSON bytes under a key (the SHA-256 of the
canonical JSON of what was asked: a node's input, a model request); the
caller writes and reads the JSON through its converter, never pickle.

* :class:`MemoryCache`: a dictionary in this process (a :class:`CacheStore`,
  synchronous: a hit costs a dictionary lookup);
* :class:`StoreCache`: entries in the file or server of a checkpoint store
  (an :class:`AsyncCacheStore`): a table of the SQLite file or of the
  PostgreSQL store's schema, or keys under the Redis store's prefix.  They outlive the process: another process, or
  another store opened on the same file or server, reads them.  Each entry
  keeps the SHA-256 of its bytes; an entry whose bytes do not match (a torn
  or altered row) is a miss, as is one the caller cannot decode (its type
  changed): the work is done again and the entry replaced.
"""

from __future__ import annotations

import hashlib
import time

from collections.abc import Callable
from typing import Protocol, final, runtime_checkable


__all__ = (
    "AsyncCacheStore",
    "CacheBackend",
    "CacheStore",
    "MemoryCache",
    "StoreCache",
)


class CacheStore(Protocol):
    """Where cached outputs live: canonical JSON bytes under a key.

    .. versionadded:: 0.1.0
    """

    def get(self, key: str, /) -> bytes | None:
        """The bytes under *key*, or ``None`` (absent or expired)."""
        ...

    def put(self, key: str, value: bytes, ttl: float | None, /) -> None:
        """Keep *value* under *key* for *ttl* seconds (``None``: for ever)."""
        ...


class AsyncCacheStore(Protocol):
    """A :class:`CacheStore` whose lookups wait on input and output (a file,
    a server): the same two operations, awaited.

    .. versionadded:: 0.1.0
    """

    async def get(self, key: str, /) -> bytes | None:
        """The bytes under *key*, or ``None`` (absent, expired or
        damaged)."""
        ...

    async def put(self, key: str, value: bytes, ttl: float | None, /) -> None:
        """Keep *value* under *key* for *ttl* seconds (``None``: for ever)."""
        ...


@runtime_checkable
class CacheBackend(Protocol):
    """A checkpoint store that can keep cache entries beside its records
    (:class:`SQLiteStore`, :class:`~pipeline.stores.postgres.PostgresStore`,
    :class:`~pipeline.stores.redis.RedisStore`).

    Times are seconds on the caller's clock (see :class:`StoreCache`).

    .. versionadded:: 0.1.0
    """

    async def cache_get(
        self, key: str, now: float, /
    ) -> tuple[bytes, str] | None:
        """The bytes under *key* and their SHA-256 (hex), unless absent or
        expired at *now*."""
        ...

    async def cache_put(
        self,
        key: str,
        value: bytes,
        sha: str,
        now: float,
        ttl: float | None,
        /,
    ) -> None:
        """Keep *value* (whose SHA-256 is *sha*) under *key* from *now* for
        *ttl* seconds (``None``: for ever), replacing what was there."""
        ...


@final
class MemoryCache:
    """A :class:`CacheStore` in this process's memory (a dictionary).

    *clock* (seconds, monotonic) decides expiry; tests pass a fake one.

    .. versionadded:: 0.1.0
    """

    __slots__ = ("_clock", "_entries")

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._entries: dict[str, tuple[float, bytes]] = {}

    def get(self, key: str, /) -> bytes | None:
        """The bytes under *key*, or ``None`` (absent or expired)."""
        entry = self._entries.get(key)
        if entry is None:
            return None
        expires, value = entry
        if expires < self._clock():
            del self._entries[key]
            return None
        return value

    def put(self, key: str, value: bytes, ttl: float | None, /) -> None:
        """Keep *value* under *key* for *ttl* seconds (``None``: for ever)."""
        expires = float("inf") if ttl is None else self._clock() + ttl
        self._entries[key] = (expires, value)

    def __len__(self) -> int:
        return len(self._entries)


@final
class StoreCache:
    """An :class:`AsyncCacheStore` whose entries live in *store*'s backend:
    a table of the SQLite file or of the PostgreSQL store's schema, or keys
    under the Redis store's prefix.

    Entries outlive the process and are shared by every store opened on
    the same file or server.  *clock* (seconds since the epoch, by default
    ``time.time``: entries outlive the process, so a monotonic clock
    would not do) decides expiry; tests pass a fake one.  An entry whose
    bytes no longer match their SHA-256 is a miss.

    Raises:
        TypeError: *store* cannot keep cache entries (not a
            :class:`CacheBackend`).

    .. versionadded:: 0.1.0
    """

    __slots__ = ("_backend", "_clock")

    def __init__(
        self, store: object, *, clock: Callable[[], float] = time.time
    ) -> None:
        if not isinstance(store, CacheBackend):
            msg = (
                f"StoreCache: a {type(store).__name__} cannot keep cache "
                "entries (SQLiteStore, PostgresStore and RedisStore can)"
            )
            raise TypeError(msg)
        self._backend = store
        self._clock = clock

    async def get(self, key: str, /) -> bytes | None:
        """The bytes under *key*, or ``None`` (absent, expired or
        damaged)."""
        found = await self._backend.cache_get(key, self._clock())
        if found is None:
            return None
        value, sha = found
        if hashlib.sha256(value).hexdigest() != sha:
            return None
        return value

    async def put(self, key: str, value: bytes, ttl: float | None, /) -> None:
        """Keep *value* under *key* for *ttl* seconds (``None``: for ever)."""
        sha = hashlib.sha256(value).hexdigest()
        await self._backend.cache_put(key, value, sha, self._clock(), ttl)
