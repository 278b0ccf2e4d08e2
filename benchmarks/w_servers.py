"""W5 and W9 on the server stores: PostgreSQL and Redis.

The servers are started here (as the tests start them, from Debian's
packages), durable: PostgreSQL with ``fsync`` and synchronous commits, Redis
with an append-only file synced before every reply (``appendfsync
always``).  ``PIPELINE_POSTGRES_URL`` and ``PIPELINE_REDIS_URL`` point at
servers of your own instead.  Each baseline is the plain client with the
same server: one insert (PostgreSQL, autocommit) or one ``SET`` (Redis) per
boundary, from one connection, on the loop.
"""

from __future__ import annotations

import contextlib

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

import anyio

from benchmarks._harness import Case, Settings, measure
from benchmarks.w_graph import Counter, chain_graph
from pipeline.stores import CheckpointStore
from tests import servers


STEPS = 100
"""W5: the length of the checkpointed chain."""
THREADS = 100
"""W9: concurrent threads of a NODES-node chain."""
NODES = 10
PAYLOAD = b'{"n":1}' * 30


@contextlib.asynccontextmanager
async def _fresh(kind: str, url: str) -> AsyncIterator[CheckpointStore]:
    async with servers.open_store(kind, url, servers.namespace()) as store:
        yield store


def _w5_ours(kind: str, url: str) -> Callable[[], Awaitable[int]]:
    g = chain_graph(STEPS)

    async def run() -> int:
        async with _fresh(kind, url) as store:
            done = await g.run(Counter(), store=store, thread_id="w5")
            return done.unwrap().state.n

    return run


def _w9_ours(kind: str, url: str) -> Callable[[], Awaitable[int]]:
    g = chain_graph(NODES)

    async def run() -> int:
        total = 0
        async with _fresh(kind, url) as store:

            async def one(i: int) -> None:
                nonlocal total
                out = await g.run(Counter(), store=store, thread_id=f"t{i}")
                total += out.unwrap().state.n

            async with anyio.create_task_group() as tg:
                for i in range(THREADS):
                    tg.start_soon(one, i)
        return total

    return run


def _plain_postgres(url: str, rows: int) -> Callable[[], Awaitable[int]]:
    import psycopg  # noqa: PLC0415  # only with the postgres extra

    async def run() -> int:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("DROP TABLE IF EXISTS bench_log")
            conn.execute(
                "CREATE TABLE bench_log (step INTEGER PRIMARY KEY, data BYTEA)"
            )
            for i in range(rows):  # one commit (one WAL flush) each
                conn.execute(
                    "INSERT INTO bench_log VALUES (%s, %s)", (i, PAYLOAD)
                )
            conn.execute("DROP TABLE bench_log")
        return rows

    return run


def _plain_redis(url: str, rows: int) -> Callable[[], Awaitable[int]]:
    import redis  # noqa: PLC0415  # only with the redis extra

    async def run() -> int:
        with redis.Redis.from_url(url) as client:
            for i in range(rows):
                client.set(f"bench:{i}", PAYLOAD)
            client.delete(*(f"bench:{i}" for i in range(rows)))
        return rows

    return run


@contextlib.contextmanager
def _server(kind: str) -> Iterator[str]:
    start = (
        servers.postgres_server if kind == "postgres" else servers.redis_server
    )
    with start(durable=True) as url:
        yield url


def _cases(kind: str, url: str, settings: Settings) -> list[Case]:
    plain = _plain_postgres if kind == "postgres" else _plain_redis
    w5 = ("W5", f"chain-{kind}", STEPS, "step")
    w9 = ("W9", f"{kind}-threads", THREADS * NODES, "node commit")
    out: list[Case] = []
    for (workload, variant, size, unit), ours in (
        (w5, _w5_ours(kind, url)),
        (w9, _w9_ours(kind, url)),
    ):
        for impl, run in (("baseline", plain(url, size)), ("pipeline", ours)):
            out.append(
                measure(
                    workload,
                    variant,
                    impl,
                    size=size,
                    unit=unit,
                    run=run,
                    expected=size,
                    settings=settings,
                )
            )
    return out


def cases(settings: Settings) -> list[Case]:
    """W5 (chain of 100, µs/step) and W9 (C = 100, node commits) on each
    server store, beside the plain client."""
    few = Settings(max(3, settings.reps // 2), 1, settings.backend)
    out: list[Case] = []
    for kind in ("postgres", "redis"):
        with contextlib.ExitStack() as stack:
            try:
                url = stack.enter_context(_server(kind))
            except servers.ServerUnavailable as e:
                print(f"# {kind}: skipped ({e})", flush=True)
                continue
            out.extend(_cases(kind, url, few))
    return out
