"""Checkpoint stores on database servers, for runners on several machines.

Each lives in a module of its own, which imports its client library (an
extra) only when it is imported itself; ``import pipeline`` never does:

- :mod:`pipeline.stores.postgres`: :class:`~pipeline.stores.postgres.PostgresStore`
  (``pip install 'pipeline[postgres]'``);
- :mod:`pipeline.stores.redis`: :class:`~pipeline.stores.redis.RedisStore`
  (``pip install 'pipeline[redis]'``).

The embedded stores, :class:`~pipeline.fold.MemoryStore` and
:class:`~pipeline.fold.SQLiteStore`, are in :mod:`pipeline.fold`.
"""

__all__ = ()
