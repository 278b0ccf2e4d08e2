"""A checkpoint store in Redis (``pip install 'pipeline[redis]'``).

Usage::

    from pipeline.stores.redis import RedisStore

    async with RedisStore("redis://cache:6379/0") as store:
        await graph.run(state, store=store, thread_id="t1")

Runners on any number of processes and machines share one Redis server:
every change to a thread is one Lua script, which Redis runs atomically,
so of several writers exactly one wins each version, and leases (who runs
a thread, fenced by a token) run on the server's clock.  Every key starts
with the store's *prefix* (``pipeline`` unless given); deleting a thread
leaves none of its keys.  One server (with replicas or not), not Redis
Cluster; durable as far as the server's persistence settings make it
(``appendonly yes``, ``appendfsync always`` for every commit).

It runs redis-py's asyncio client on an event loop of its own, in a
thread: so it serves asyncio and trio alike, any event loop, and a
cancelled caller never interrupts a command in flight.
"""

try:
    import redis  # noqa: F401  # the clear error below, if missing
except ImportError as exc:
    msg = (
        "pipeline.stores.redis needs the redis client "
        f"({exc}): pip install 'pipeline[redis]'"
    )
    raise ImportError(msg, name=exc.name) from exc

from ..fold._redis import RedisStore as RedisStore


__all__ = ("RedisStore",)
