"""W5 and W9 on the server stores: PostgreSQL and Redis.

The servers are started here (as the tests start them, from Debian's
packages), durable: PostgreSQL with ``fsync`` and synchronous commits, Redis
with an append-only file synced before every reply (``appendfsync
always``).  ``PIPELINE_POSTGRES_URL`` and ``PIPELINE_REDIS_URL`` point at
servers of your own instead.  Each baseline is the plain client with the
same server: one insert (PostgreSQL, autocommit) or one ``SET`` (Redis) per
boundary, from one connection, on the loop.

Both sides work as a deployed application does: the schema (the store's
tables, the baseline's table) is made once per case, outside the timings;
each run connects (opens a store, or a plain connection), writes a thread
(or key range) of its own, and disconnects.
"""

from __future__ import annotations

import contextlib
import itertools

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

import anyio

from benchmarks._harness import Case, Settings, measure_pair
from benchmarks.w_graph import Counter, chain_graph
from pipeline.stores import CheckpointStore
from tests import servers


STEPS = 100
"""W5: the length of the checkpointed chain."""
THREADS = 100
"""W9: concurrent threads of a NODES-node chain."""
NODES = 10
PAYLOAD = b'{"n":1}' * 30
W5_REPS = 11
"""W5's timings per side, in turn with the baseline's (see _cases)."""


_runs = itertools.count()
"""Each run's number: its threads' (and keys') names."""


@contextlib.asynccontextmanager
async def _opened(
    kind: str, url: str, name: str
) -> AsyncIterator[CheckpointStore]:
    async with servers.open_store(kind, url, name, drop=False) as store:
        yield store


def _w5_ours(kind: str, url: str, name: str) -> Callable[[], Awaitable[int]]:
    g = chain_graph(STEPS)

    async def run() -> int:
        async with _opened(kind, url, name) as store:
            done = await g.run(
                Counter(), store=store, thread_id=f"w5-{next(_runs)}"
            )
            return done.unwrap().state.n

    return run


def _w9_ours(kind: str, url: str, name: str) -> Callable[[], Awaitable[int]]:
    g = chain_graph(NODES)

    async def run() -> int:
        total = 0
        n = next(_runs)
        async with _opened(kind, url, name) as store:

            async def one(i: int) -> None:
                nonlocal total
                out = await g.run(
                    Counter(), store=store, thread_id=f"w9-{n}-{i}"
                )
                total += out.unwrap().state.n

            async with anyio.create_task_group() as tg:
                for i in range(THREADS):
                    tg.start_soon(one, i)
        return total

    return run


def _plain_postgres(
    url: str, name: str, rows: int
) -> Callable[[], Awaitable[int]]:
    import psycopg  # noqa: PLC0415  # only with the postgres extra

    from psycopg import sql  # noqa: PLC0415

    insert = sql.SQL("INSERT INTO {} VALUES (%s, %s, %s)").format(
        sql.Identifier(name, "bench_log")
    )

    async def run() -> int:
        n = next(_runs)
        with psycopg.connect(url, autocommit=True) as conn:
            # Rendered once, as the store renders its commit once (psycopg
            # renders a composed query afresh on every execute).
            query = insert.as_bytes(conn)
            for i in range(rows):  # one commit (one WAL flush) each
                conn.execute(query, (n, i, PAYLOAD))
        return rows

    return run


def _floor_postgres(
    url: str, name: str, rows: int
) -> Callable[[], Awaitable[int]]:
    """The server's floor for W5 on PostgreSQL: the plain client (as the
    baseline: one connection, synchronous, each statement prepared by
    psycopg from its fifth call) calling the store's
    own statements, no library between: the thread's lease taken, each
    step's record committed by ``pipeline_commit_v2`` (the lease and the
    head checked, under the thread's lock), the lease given up.  What the
    exactly-once contract costs the server, beside the baseline's bare
    insert in the same run."""
    import psycopg  # noqa: PLC0415  # only with the postgres extra

    from psycopg import sql  # noqa: PLC0415

    def call(function: str, params: int) -> sql.Composed:
        return sql.SQL("SELECT * FROM {}({})").format(
            sql.Identifier(name, function),
            sql.SQL(", ").join([sql.Placeholder()] * params),
        )

    async def run() -> int:
        n = next(_runs)
        thread = f"floor-{n}"
        key = f"{name}/{thread}"
        with psycopg.connect(url, autocommit=True) as conn:
            acquire, commit, release = (
                call(f, k).as_bytes(conn)
                for f, k in (
                    ("pipeline_acquire_v1", 4),
                    ("pipeline_commit_v2", 9),
                    ("pipeline_release_v2", 4),
                )
            )
            conn.execute(acquire, (thread, key, "floor", 60.0))
            head = None
            for i in range(rows):  # one commit (one WAL flush) each
                row = conn.execute(
                    commit,
                    (thread, key, i, head, PAYLOAD, "-", head, "floor", 1),
                ).fetchone()
                assert row == (-1,)  # noqa: S101  # stored
                head = i
            conn.execute(release, (thread, key, "floor", 1))
        return rows

    return run


def _plain_redis(
    url: str, name: str, rows: int
) -> Callable[[], Awaitable[int]]:
    import redis  # noqa: PLC0415  # only with the redis extra

    async def run() -> int:
        n = next(_runs)
        with redis.Redis.from_url(url) as client:
            for i in range(rows):
                client.set(f"{name}:bench:{n}:{i}", PAYLOAD)
        return rows

    return run


def _prepare(kind: str, url: str, name: str) -> None:
    """The store's schema and the baseline's table, made once."""

    async def make() -> None:
        async with _opened(kind, url, name):
            pass

    anyio.run(make)
    if kind == "postgres":
        import psycopg  # noqa: PLC0415  # only with the postgres extra

        from psycopg import sql  # noqa: PLC0415

        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(
                sql.SQL(
                    "CREATE TABLE {} (run INTEGER, step INTEGER, data BYTEA, "
                    "PRIMARY KEY (run, step))"
                ).format(sql.Identifier(name, "bench_log"))
            )


def _drop(kind: str, url: str, name: str) -> None:
    async def drop() -> None:
        async with servers.open_store(kind, url, name, drop=True):
            pass

    anyio.run(drop)


@contextlib.contextmanager
def _server(kind: str) -> Iterator[str]:
    start = (
        servers.postgres_server if kind == "postgres" else servers.redis_server
    )
    with start(durable=True) as url:
        yield url


def _cases(kind: str, url: str, name: str, settings: Settings) -> list[Case]:
    plain = _plain_postgres if kind == "postgres" else _plain_redis
    # W5's runs are short and bound by the disk's flushes, whose cost
    # drifts: more repetitions, each side's in turn with the other's.
    w5 = ("W5", f"chain-{kind}", STEPS, "step", W5_REPS)
    w9 = (
        "W9",
        f"{kind}-threads",
        THREADS * NODES,
        "node commit",
        settings.reps,
    )
    pairs = [(w5, _w5_ours(kind, url, name)), (w9, _w9_ours(kind, url, name))]
    if kind == "postgres":
        floor = ("W5", "floor-postgres", STEPS, "step", W5_REPS)
        pairs.insert(1, (floor, _floor_postgres(url, name, STEPS)))
    out: list[Case] = []
    for (workload, variant, size, unit, reps), ours in pairs:
        out.extend(
            measure_pair(
                workload,
                variant,
                size=size,
                unit=unit,
                baseline=plain(url, name, size),
                ours=ours,
                expected=size,
                settings=Settings(reps, 1, settings.backend),
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
            name = servers.namespace()
            _prepare(kind, url, name)
            stack.callback(_drop, kind, url, name)
            out.extend(_cases(kind, url, name, few))
    return out
