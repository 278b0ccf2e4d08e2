"""A checkpoint store in PostgreSQL (``pip install 'pipeline[postgres]'``).

Usage::

    from pipeline.stores.postgres import PostgresStore

    async with PostgresStore("postgresql://app@db/app") as store:
        await graph.run(state, store=store, thread_id="t1")

Runners on any number of processes and machines share one database: every
change to a thread is one transaction under a lock on that thread (a
PostgreSQL advisory lock), so of several writers exactly one wins each
version, and leases (who runs a thread, fenced by a token) run on the
server's clock.  The store keeps two tables, ``pipeline_checkpoints`` and
``pipeline_leases``, in its *schema* (``public`` unless given), and
creates them if they are missing.

It runs psycopg 3's asyncio connection pool on an event loop of its own,
in a thread: so it serves asyncio and trio alike, any event loop, and a
cancelled caller never leaves a transaction half-done (the work it started
finishes on the store's loop).
"""

try:
    import psycopg  # noqa: F401  # the clear error below, if missing
    import psycopg_pool  # noqa: F401
except ImportError as exc:
    msg = (
        "pipeline.stores.postgres needs psycopg 3 and psycopg-pool "
        f"({exc}): pip install 'pipeline[postgres]'"
    )
    raise ImportError(msg, name=exc.name) from exc

from ..fold._postgres import PostgresStore as PostgresStore


__all__ = ("PostgresStore",)
