"""Checkpoint stores: where a fold's records live.

A store keeps opaque records (bytes and a checksum) per thread, commits
them by compare-and-set on the thread's head, and leases each thread to one
runner at a time (see :class:`CheckpointStore` for the contract every store
meets, checked by one conformance suite).

Embedded (imported with this package, standard library only):

- :class:`MemoryStore`: a dict; fast, per process, not durable;
- :class:`SQLiteStore`: a file; the durable default;
- :class:`SignedStore`: wraps any store and signs its records (HMAC).

Caches (per-node, per-model-call) keep their entries in a
:class:`MemoryCache`, or in a store's backend with a :class:`StoreCache`.

On database servers, for runners on several machines, each in a module of
its own that imports its client library (an extra) only when it is imported
itself:

- :mod:`pipeline.stores.postgres`: :class:`~pipeline.stores.postgres.PostgresStore`
  (``pip install 'typed-pipeline[postgres]'``);
- :mod:`pipeline.stores.redis`: :class:`~pipeline.stores.redis.RedisStore`
  (``pip install 'typed-pipeline[redis]'``).

Writing a store of your own: implement :class:`CheckpointStore`, deciding
leases with :func:`take` and :func:`holds` on a :class:`LeaseRow` and
versions with :func:`next_version` (the Redis store makes the same
decisions in its server-side scripts), and run the conformance suite
(``tests/graph/test_store_conformance.py``) against it; ``docs/layout.md``
lists the rest.  Runners take a thread's lease with :func:`leased`.
"""

from ._cache import AsyncCacheStore as AsyncCacheStore
from ._cache import CacheBackend as CacheBackend
from ._cache import CacheStore as CacheStore
from ._cache import MemoryCache as MemoryCache
from ._cache import StoreCache as StoreCache
from ._lease import Held as Held
from ._lease import leased as leased
from ._memory import MemoryStore as MemoryStore
from ._protocol import DEFAULT_LEASE_TTL as DEFAULT_LEASE_TTL
from ._protocol import MAX_THREAD_ID as MAX_THREAD_ID
from ._protocol import CheckpointStore as CheckpointStore
from ._protocol import Lease as Lease
from ._protocol import LeaseRow as LeaseRow
from ._protocol import Record as Record
from ._protocol import check_thread_id as check_thread_id
from ._protocol import holds as holds
from ._protocol import next_version as next_version
from ._protocol import record_checksum as record_checksum
from ._protocol import take as take
from ._signed import SignedStore as SignedStore
from ._sqlite import SQLiteStore as SQLiteStore


__all__ = (
    "DEFAULT_LEASE_TTL",
    "MAX_THREAD_ID",
    "AsyncCacheStore",
    "CacheBackend",
    "CacheStore",
    "CheckpointStore",
    "Held",
    "Lease",
    "LeaseRow",
    "MemoryCache",
    "MemoryStore",
    "Record",
    "SQLiteStore",
    "SignedStore",
    "StoreCache",
    "check_thread_id",
    "holds",
    "leased",
    "next_version",
    "record_checksum",
    "take",
)
