"""The PostgreSQL and Redis stores, beyond the conformance suite: several
processes, dead lease holders, namespaces, opening and closing, any event
loop.  (tests/graph/test_store_conformance.py runs them through the suite
every store passes.)"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import importlib
import json
import os
import subprocess
import sys
import threading

from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Coroutine,
    Iterator,
    Sequence,
)
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import anyio.abc
import anyio.lowlevel
import pytest

from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from returns.pipeline import is_successful
from returns.result import Failure, Success

from pipeline import stores
from pipeline.failures import ConcurrentModification, LeaseLost, ThreadBusy
from pipeline.stores import Lease, Record
from tests import servers


CHILD = Path(__file__).with_name("server_store_child.py")
ROOT = Path(__file__).parents[1]

Server = tuple[str, str]
"""A store kind (``"postgres"`` or ``"redis"``) and its server's URL."""


@pytest.fixture(
    params=[
        pytest.param(
            "postgres", marks=[pytest.mark.postgres, pytest.mark.slow]
        ),
        pytest.param("redis", marks=[pytest.mark.redis, pytest.mark.slow]),
    ]
)
def server(request: pytest.FixtureRequest) -> Server:
    """Each server store's kind, with its server running."""
    kind = str(request.param)
    return kind, str(request.getfixturevalue(f"{kind}_url"))


def rec(thread: str, version: int, payload: bytes = b"{}") -> Record:
    parent = None if version == 0 else version - 1
    return Record(thread, version, parent, payload, f"sum-{version}")


@contextlib.asynccontextmanager
async def child(
    *args: str,
) -> AsyncIterator[tuple[Process, Callable[[], Awaitable[str]]]]:
    """A child process running tests/server_store_child.py, and a function
    reading its next line."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    async with await anyio.open_process(
        [sys.executable, str(CHILD), *args],
        env=env,
        stderr=None,
    ) as proc:
        assert proc.stdout is not None
        lines = BufferedByteReceiveStream(proc.stdout)

        async def line() -> str:
            with anyio.fail_after(60):
                raw = await lines.receive_until(b"\n", 1 << 20)
            return raw.decode()

        try:
            yield proc, line
        finally:
            if proc.returncode is None:
                proc.kill()
            with anyio.CancelScope(shield=True):
                await proc.wait()


async def test_two_processes_one_winner_per_version(server: Server) -> None:
    """Two processes committing the same thread's versions as fast as they
    can: each version is won by exactly one, whose record it keeps."""
    kind, url = server
    name, n = servers.namespace(), 1000
    async with (
        servers.open_store(kind, url, name) as store,
        child("race", kind, url, name, "a", str(n)) as (a, read_a),
        child("race", kind, url, name, "b", str(n)) as (b, read_b),
    ):
        assert await read_a() == "ready"
        assert await read_b() == "ready"
        for proc in (a, b):  # both go at once
            assert proc.stdin is not None
            await proc.stdin.send(b"go\n")
        out = {
            "a": json.loads(await read_a()),
            "b": json.loads(await read_b()),
        }
        won = {who: o["won"] for who, o in out.items()}
        # Some commit lost to the other process's; how many varies (one may
        # win every version when the other never catches up).
        assert out["a"]["lost"] + out["b"]["lost"] > 0
        assert set(won["a"]).isdisjoint(won["b"])
        assert sorted(won["a"] + won["b"]) == list(range(n))
        rows = await store.records("t")
        assert [r.version for r in rows] == list(range(n))
        for who, versions in won.items():
            for v in versions:
                assert rows[v].data == f"{who}:{v}".encode()


async def test_lease_of_a_killed_process_expires(server: Server) -> None:
    """A process holding a thread is killed: its lease still keeps others
    out until it expires on the server's clock, then another process takes
    the thread with the next token and the dead holder is fenced off."""
    kind, url = server
    name = servers.namespace()
    async with servers.open_store(kind, url, name) as store:
        async with child("lease", kind, url, name, "1.5") as (proc, read):
            held = json.loads(await read())
            proc.kill()
        dead = Lease("t", "doomed", held["token"], held["expires"])
        first = await store.acquire("t", "heir", ttl=60)
        assert isinstance(first.failure(), ThreadBusy)
        out = first
        with anyio.fail_after(30):
            while not is_successful(out):
                # Wait out the dead holder's lease, as the server counts it.
                busy = out.failure()
                assert isinstance(busy, ThreadBusy)
                await anyio.sleep(busy.expires_in)
                out = await store.acquire("t", "heir", ttl=60)
        lease = out.unwrap()
        assert (lease.owner, lease.token) == ("heir", dead.token + 1)
        late = await store.commit(rec("t", 1), expected_head=0, lease=dead)
        assert late.failure() == LeaseLost("t")
        assert (await store.renew(dead, ttl=60)).failure() == LeaseLost("t")
        assert await store.commit(
            rec("t", 1), expected_head=0, lease=lease
        ) == Success(None)


async def test_namespaces_keep_stores_apart(server: Server) -> None:
    """Stores in different schemas or key prefixes of one server see only
    their own threads and leases; the same one, reopened, sees them all."""
    kind, url = server
    one, two = servers.namespace(), servers.namespace()
    async with (
        servers.open_store(kind, url, one) as a,
        servers.open_store(kind, url, two) as b,
    ):
        await a.commit(rec("t", 0, b"in a"), expected_head=None)
        await b.commit(rec("u", 0, b"in b"), expected_head=None)
        (await a.acquire("t", "x", ttl=60)).unwrap()
        assert list(await a.threads()) == ["t"]
        assert list(await b.threads()) == ["u"]
        assert list(await b.records("t")) == []
        assert is_successful(await b.acquire("t", "y", ttl=60))
        async with servers.open_store(kind, url, one, drop=False) as again:
            assert [r.data for r in await again.records("t")] == [b"in a"]
            assert isinstance(
                (await again.acquire("t", "y", ttl=60)).failure(), ThreadBusy
            )


async def test_any_thread_id_and_payload(server: Server) -> None:
    """Thread ids with separators, quotes and non-ASCII text, and payloads of
    any bytes, come back as they went in, sorted as Python sorts."""
    kind, url = server
    ids = ["a:b", "a", "é", "Z", "x'; DROP TABLE y; --", "records:t", "💾"]
    payload = bytes(range(256)) * 3 + b"\n\x00\n"
    async with servers.open_store(kind, url, servers.namespace()) as store:
        for thread in ids:
            assert await store.commit(
                rec(thread, 0, payload + thread.encode()), expected_head=None
            ) == Success(None)
        assert list(await store.threads()) == sorted(ids)
        for thread in ids:
            (row,) = await store.records(thread)
            assert row == rec(thread, 0, payload + thread.encode())
            assert list(await store.records(thread, upto=-1)) == []
        await store.delete("a")
        assert list(await store.records("a:b")) != []


@pytest.mark.slow
@pytest.mark.postgres
async def test_postgres_delete_leaves_no_rows(postgres_url: str) -> None:
    """After delete, no row of the thread is left in either table."""
    import psycopg  # noqa: PLC0415

    name = servers.namespace()
    async with servers.postgres_store(postgres_url, schema=name) as store:
        lease = (await store.acquire("gone", "a", ttl=60)).unwrap()
        for v in range(3):
            await store.commit(
                rec("gone", v), expected_head=v - 1 if v else None, lease=lease
            )
        await store.commit(rec("kept", 0), expected_head=None)
        await store.delete("gone")

        def count() -> tuple[int, int]:
            with psycopg.connect(postgres_url) as conn:
                row = conn.execute(
                    f"SELECT (SELECT count(*) FROM {name}.pipeline_checkpoints"  # noqa: S608
                    " WHERE thread_id = 'gone'), (SELECT count(*) FROM "
                    f"{name}.pipeline_leases WHERE thread_id = 'gone')"
                ).fetchone()
                assert row is not None
                return row[0], row[1]

        assert await anyio.to_thread.run_sync(count) == (0, 0)
        assert list(await store.threads()) == ["kept"]


@pytest.mark.slow
@pytest.mark.postgres
async def test_postgres_under_serializable_default(postgres_url: str) -> None:
    """A server whose default isolation is serializable changes nothing:
    racing writers still get one winner per version and no errors."""
    from pipeline.stores.postgres import PostgresStore  # noqa: PLC0415

    sep = "&" if "?" in postgres_url else "?"
    url = (
        f"{postgres_url}{sep}options=-c%20"
        "default_transaction_isolation%3Dserializable"
    )
    name = servers.namespace()
    try:
        async with PostgresStore(url, schema=name, pool_size=4) as store:
            wins: list[int] = []

            async def writer(i: int) -> None:
                for v in range(10):
                    out = await store.commit(
                        rec("t", v, f"{i}".encode()),
                        expected_head=v - 1 if v else None,
                    )
                    if is_successful(out):
                        wins.append(v)

            async with anyio.create_task_group() as tg:
                for i in range(8):
                    tg.start_soon(writer, i)
            assert sorted(wins) == list(range(10))
    finally:
        await anyio.to_thread.run_sync(servers.drop_schema, postgres_url, name)
    with pytest.raises(ValueError, match="pool_size"):
        PostgresStore(url, pool_size=0)


@pytest.mark.postgres
async def test_postgres_commits_in_one_statement_on_an_older_schema(
    postgres_url: str,
) -> None:
    """A schema whose tables an earlier release made (no commit function)
    gets the function when a store opens it; the thread's records stay,
    and commits on them check the head and the lease as before."""
    import psycopg  # noqa: PLC0415

    from psycopg import sql  # noqa: PLC0415

    from pipeline.stores.postgres import (  # noqa: PLC0415
        PostgresStore,
        _Statements,
    )

    name = servers.namespace()
    # The earlier release's schema: its tables, no commit function.
    *tables, function = _Statements(name).tables
    assert "FUNCTION" in function.as_string()
    old = sql.SQL(
        "INSERT INTO {} VALUES ('old', 0, NULL, '{{}}'::bytea, 'sum-0')"
    ).format(sql.Identifier(name, "pipeline_checkpoints"))

    def make() -> None:
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            conn.execute(
                sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(name))
            )
            for statement in (*tables, old):
                conn.execute(statement)

    await anyio.to_thread.run_sync(make)
    try:
        async with PostgresStore(postgres_url, schema=name) as store:
            lease = (await store.acquire("old", "me", ttl=60)).unwrap()
            for v in range(1, 4):
                out = await store.commit(
                    rec("old", v), expected_head=v - 1, lease=lease
                )
                assert out == Success(None)
            stale = await store.commit(rec("old", 4), expected_head=2)
            assert not is_successful(stale)
            assert [r.version for r in await store.records("old")] == [
                0,
                1,
                2,
                3,
            ]
    finally:
        await anyio.to_thread.run_sync(servers.drop_schema, postgres_url, name)


def _lease_row(url: str, schema: str, thread: str) -> tuple[Any, ...] | None:
    """The thread's lease row as the table holds it (owner, token,
    expires), read apart from any store."""
    import psycopg  # noqa: PLC0415

    from psycopg import sql  # noqa: PLC0415

    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(
            sql.SQL(
                "SELECT owner, token, expires FROM {} WHERE thread_id = %s"
            ).format(sql.Identifier(schema, "pipeline_leases")),
            (thread,),
        ).fetchone()


@pytest.mark.postgres
async def test_postgres_takes_leases_in_one_statement_on_an_older_schema(
    postgres_url: str,
) -> None:
    """A schema the previous release made (its tables and commit function,
    no lease functions), with a lease that release took, gets the lease
    functions when a store opens it; the lease stays its holder's, and
    the thread's records stay."""
    import psycopg  # noqa: PLC0415

    from psycopg import sql  # noqa: PLC0415

    from pipeline.stores.postgres import (  # noqa: PLC0415
        PostgresStore,
        _Statements,
    )

    name = servers.namespace()
    leases = sql.Identifier(name, "pipeline_leases")

    def make() -> float:
        """The previous release's schema, a record, and a live lease as
        that release's acquisition wrote it; the server's clock."""
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            conn.execute(
                sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(name))
            )
            for statement in _Statements(name).tables:
                conn.execute(statement)
            conn.execute(
                sql.SQL(
                    "INSERT INTO {} VALUES "
                    "('old', 0, NULL, '{{}}'::bytea, 'sum-0')"
                ).format(sql.Identifier(name, "pipeline_checkpoints"))
            )
            row = conn.execute(
                sql.SQL(
                    "INSERT INTO {} (thread_id, owner, token, expires) "
                    "VALUES ('old', 'before', 3, "
                    "extract(epoch FROM clock_timestamp())::float8 + 600) "
                    "RETURNING expires"
                ).format(leases)
            ).fetchone()
            assert row is not None
            return float(row[0])

    def functions() -> tuple[Any, ...] | None:
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            return conn.execute(
                "SELECT to_regproc(%s), to_regproc(%s), to_regproc(%s)",
                tuple(
                    f"{name}.pipeline_{f}_v1"
                    for f in ("acquire", "renew", "release")
                ),
            ).fetchone()

    expires = await anyio.to_thread.run_sync(make)
    assert None in (await anyio.to_thread.run_sync(functions) or (None,))
    try:
        async with PostgresStore(postgres_url, schema=name) as store:
            assert None not in (
                await anyio.to_thread.run_sync(functions) or (None,)
            )
            busy = await store.acquire("old", "after", ttl=60)
            assert isinstance(busy.failure(), ThreadBusy)
            held = Lease("old", "before", 3, expires)
            again = (await store.acquire("old", "before", ttl=60)).unwrap()
            assert (again.owner, again.token) == ("before", 3)
            renewed = (await store.renew(held, ttl=60)).unwrap()
            assert renewed.token == 3
            out = await store.commit(
                rec("old", 1), expected_head=0, lease=held
            )
            assert out == Success(None)
            await store.release(held)
            assert await anyio.to_thread.run_sync(
                _lease_row, postgres_url, name, "old"
            ) == ("before", 3, 0.0)
            taken = (await store.acquire("old", "after", ttl=60)).unwrap()
            assert (taken.owner, taken.token) == ("after", 4)
            assert [r.version for r in await store.records("old")] == [0, 1]
    finally:
        await anyio.to_thread.run_sync(servers.drop_schema, postgres_url, name)


def _functions(url: str, schema: str, names: list[str]) -> list[bool]:
    """Whether each of the schema's functions *names* exists."""
    import psycopg  # noqa: PLC0415

    with psycopg.connect(url, autocommit=True) as conn:
        found = [
            conn.execute(
                "SELECT to_regproc(%s) IS NOT NULL", (f"{schema}.{n}",)
            ).fetchone()
            for n in names
        ]
    return [row is not None and bool(row[0]) for row in found]


_PREVIOUS_FUNCTIONS = [
    "pipeline_commit_v1",
    "pipeline_acquire_v1",
    "pipeline_renew_v1",
    "pipeline_release_v1",
    "pipeline_release_v2",
]
"""The functions the previous releases' stores call (schema versions 2
and 3)."""

_NEW_FUNCTIONS = ["pipeline_release_v2", "pipeline_commit_v2"]
"""What a schema of version 2 lacks (version 3 only the commit)."""


@pytest.mark.postgres
async def test_postgres_upgrades_the_previous_releases_schema(
    postgres_url: str,
) -> None:
    """A schema an earlier release made (schema version 2: no
    pipeline_release_v2, no pipeline_commit_v2), with a thread and a live
    lease in it, gets the new functions when a store of this release opens
    it; that store commits and releases on it, and the earlier release's
    calls (its commit and release functions, still there) keep working
    beside it."""
    import psycopg  # noqa: PLC0415

    from psycopg import sql  # noqa: PLC0415

    name = servers.namespace()

    def previous() -> None:
        """The earlier release's schema: this one's, without the new
        release and commit functions."""
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP FUNCTION {}(text, text, text, bigint)").format(
                    sql.Identifier(name, "pipeline_release_v2")
                )
            )
            conn.execute(
                sql.SQL(
                    "DROP FUNCTION {}(text, text, bigint, bigint, bytea, "
                    "text, bigint, text, bigint)"
                ).format(sql.Identifier(name, "pipeline_commit_v2"))
            )

    def old_store_calls(token: int) -> tuple[Any, ...]:
        """What a store of the previous release sends: a commit and a
        release, through the v1 functions."""
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            commit = conn.execute(
                sql.SQL(
                    "SELECT outcome, head FROM {}"
                    "(%s, %s, %s, %s, %s, %s, %s, %s, %s)"
                ).format(sql.Identifier(name, "pipeline_commit_v1")),
                ("t", f"{name}/t", 3, 2, b"{}", "sum-3", 2, "old", token),
            ).fetchone()
            conn.execute(
                sql.SQL("SELECT * FROM {}(%s, %s, %s, %s)").format(
                    sql.Identifier(name, "pipeline_release_v1")
                ),
                ("t", f"{name}/t", "old", token),
            )
            assert commit is not None
            return tuple(commit)

    try:
        async with servers.postgres_store(
            postgres_url, schema=name, drop=False
        ) as made:
            lease = (await made.acquire("t", "me", ttl=600)).unwrap()
            await made.commit(rec("t", 0), expected_head=None, lease=lease)
        await anyio.to_thread.run_sync(previous)
        assert await anyio.to_thread.run_sync(
            _functions, postgres_url, name, _NEW_FUNCTIONS
        ) == [False, False]
        async with servers.postgres_store(
            postgres_url, schema=name, drop=False
        ) as store:
            assert (
                await anyio.to_thread.run_sync(
                    _functions,
                    postgres_url,
                    name,
                    [*_PREVIOUS_FUNCTIONS, *_NEW_FUNCTIONS],
                )
                == [True] * 7
            )
            busy = await store.acquire("t", "other", ttl=60)
            assert isinstance(busy.failure(), ThreadBusy)
            out = await store.commit(rec("t", 1), expected_head=0, lease=lease)
            assert out == Success(None)
            await store.release(lease)
            assert await anyio.to_thread.run_sync(
                _lease_row, postgres_url, name, "t"
            ) == ("me", lease.token, 0.0)
            # A store of the previous release takes the thread over.
            old = (await store.acquire("t", "old", ttl=60)).unwrap()
            await store.commit(rec("t", 2), expected_head=1, lease=old)
            assert await anyio.to_thread.run_sync(
                old_store_calls, old.token
            ) == ("stored", 2)
            assert await anyio.to_thread.run_sync(
                _lease_row, postgres_url, name, "t"
            ) == ("old", old.token, 0.0)
            assert [r.version for r in await store.records("t")] == [
                0,
                1,
                2,
                3,
            ]
    finally:
        await anyio.to_thread.run_sync(servers.drop_schema, postgres_url, name)


@pytest.mark.postgres
async def test_postgres_makes_a_schema_the_previous_release_opens(
    postgres_url: str,
) -> None:
    """A schema this release made holds every function the previous
    release's stores call, so they open it without creating anything."""
    name = servers.namespace()
    async with servers.postgres_store(postgres_url, schema=name):
        assert (
            await anyio.to_thread.run_sync(
                _functions, postgres_url, name, _PREVIOUS_FUNCTIONS
            )
            == [True] * 5
        )


@pytest.mark.postgres
async def test_postgres_release_leaves_its_connection_as_it_was(
    postgres_url: str,
) -> None:
    """The store's connections plan its functions' statements once
    (``plan_cache_mode``), read committed, and a release's commit that
    does not wait for the disk changes only its own transaction: the
    connection that ran it still commits synchronously."""
    sep = "&" if "?" in postgres_url else "?"
    url = f"{postgres_url}{sep}options=-c%20synchronous_commit%3Don"

    async def settings() -> list[str]:
        pool = store._pools[asyncio.get_running_loop()]
        conn = await pool.get()
        try:
            out = []
            for name in (
                "synchronous_commit",
                "plan_cache_mode",
                "default_transaction_isolation",
            ):
                cur = await conn.execute(
                    sql.SQL("SHOW {}").format(sql.Identifier(name))
                )
                row = await cur.fetchone()
                assert row is not None
                out.append(str(row[0]))
            return out
        finally:
            await pool.put(conn)

    from psycopg import sql  # noqa: PLC0415

    from pipeline.stores.postgres import PostgresStore  # noqa: PLC0415

    name = servers.namespace()
    want = ["on", "force_generic_plan", "read committed"]
    try:
        async with PostgresStore(url, schema=name, pool_size=1) as store:
            assert await store._call(settings, shield=True) == want
            lease = (await store.acquire("t", "me", ttl=60)).unwrap()
            await store.commit(rec("t", 0), expected_head=None, lease=lease)
            await store.release(lease)
            assert await store._call(settings, shield=True) == want
            assert await anyio.to_thread.run_sync(
                _lease_row, postgres_url, name, "t"
            ) == ("me", lease.token, 0.0)
    finally:
        await anyio.to_thread.run_sync(servers.drop_schema, postgres_url, name)


@pytest.mark.postgres
async def test_postgres_leaves_plans_to_a_server_before_12(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server without ``plan_cache_mode`` (before PostgreSQL 12) is not
    asked to set it: the store opens, commits and releases as before."""
    from psycopg import sql  # noqa: PLC0415

    from pipeline.stores import postgres  # noqa: PLC0415

    monkeypatch.setattr(postgres, "_GENERIC_PLANS", 10**9)

    async def mode() -> str:
        pool = store._pools[asyncio.get_running_loop()]
        conn = await pool.get()
        try:
            cur = await conn.execute(sql.SQL("SHOW plan_cache_mode"))
            row = await cur.fetchone()
            assert row is not None
            return str(row[0])
        finally:
            await pool.put(conn)

    async with servers.postgres_store(postgres_url) as store:
        assert await store._call(mode, shield=True) == "auto"
        lease = (await store.acquire("t", "me", ttl=60)).unwrap()
        out = await store.commit(rec("t", 0), expected_head=None, lease=lease)
        assert out == Success(None)
        await store.release(lease)


_LeaseCase = tuple[tuple[str, int, bool] | None, str, str, int]
"""The lease row before (none, or owner, token, live), the call, and the
caller's owner and (to renew or release) token."""

_LEASE_CASES = st.tuples(
    st.none()
    | st.tuples(st.sampled_from("ab"), st.integers(1, 3), st.booleans()),
    st.sampled_from(("acquire", "renew", "release")),
    st.sampled_from("ab"),
    st.integers(1, 3),
)


def _put_lease_row(
    url: str, schema: str, thread: str, row: tuple[str, int, bool] | None
) -> float:
    """Set the thread's lease row (a live one for ten minutes, a lapsed one
    ten minutes ago); the server's clock."""
    import psycopg  # noqa: PLC0415

    from psycopg import sql  # noqa: PLC0415

    leases = sql.Identifier(schema, "pipeline_leases")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DELETE FROM {} WHERE thread_id = %s").format(leases),
            (thread,),
        )
        now = conn.execute(
            "SELECT extract(epoch FROM clock_timestamp())::float8"
        ).fetchone()
        assert now is not None
        if row is not None:
            owner, token, live = row
            conn.execute(
                sql.SQL("INSERT INTO {} VALUES (%s, %s, %s, %s)").format(
                    leases
                ),
                (thread, owner, token, now[0] + (600 if live else -600)),
            )
        return float(now[0])


async def _lease_call_as_decided(
    url: str,
    store: stores.CheckpointStore,
    schema: str,
    thread: str,
    case: _LeaseCase,
) -> None:
    """One lease call on a row set up as *case* says: its answer and the
    row it leaves are what ``take`` or ``holds`` decide on that row."""
    from pipeline.stores import LeaseRow, holds, take  # noqa: PLC0415

    before, op, owner, token = case
    now = await anyio.to_thread.run_sync(
        _put_lease_row, url, schema, thread, before
    )
    row = await anyio.to_thread.run_sync(_lease_row, url, schema, thread)
    found = None if row is None else LeaseRow(*row)
    mine = Lease(thread, owner, token, now + 5)
    after = row  # unless the call changes it
    if op == "acquire":
        got = await store.acquire(thread, owner, ttl=60)
        want = take(found, thread, owner, 60, now)
        lease = got.value_or(None)
        if isinstance(lease, Lease):
            granted = want.unwrap()
            assert (lease.owner, lease.token) == (granted.owner, granted.token)
            assert now < lease.expires - 60 < now + 30
            after = (owner, lease.token, lease.expires)
        else:
            busy = got.failure()
            assert isinstance(busy, ThreadBusy)
            assert isinstance(want.failure(), ThreadBusy)
            assert 500 < busy.expires_in <= 600
    elif op == "renew":
        renewed = await store.renew(mine, ttl=60)
        if holds(found, mine):
            lease = renewed.unwrap()
            assert (lease.owner, lease.token) == (owner, token)
            after = (owner, token, lease.expires)
        else:
            assert isinstance(renewed.failure(), LeaseLost)
    else:
        await store.release(mine)
        if holds(found, mine):
            after = (owner, token, 0.0)
    assert (
        await anyio.to_thread.run_sync(_lease_row, url, schema, thread)
        == after
    )


@pytest.mark.postgres
@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@settings(max_examples=20, deadline=None)
@given(cases=st.lists(_LEASE_CASES, min_size=1, max_size=4))
def test_postgres_lease_functions_decide_as_take_and_holds(
    postgres_url: str, backend: str, cases: list[_LeaseCase]
) -> None:
    """Each lease function (one statement on the server) answers and
    writes what ``take`` and ``holds`` decide on the row it found: the
    same lease and token, ThreadBusy or LeaseLost when they say so, the
    row written to match the answer, or left as it was."""

    async def main() -> None:
        name = servers.namespace()
        try:
            async with servers.postgres_store(
                postgres_url, schema=name, drop=False
            ) as store:
                for i, case in enumerate(cases):
                    await _lease_call_as_decided(
                        postgres_url, store, name, f"t{i}", case
                    )
        finally:
            await anyio.to_thread.run_sync(
                servers.drop_schema, postgres_url, name
            )

    anyio.run(main, backend=backend)


@pytest.mark.postgres
async def test_postgres_lease_calls_run_again_on_a_broken_connection(
    postgres_url: str,
) -> None:
    """A lease call whose pooled connection the server closed meanwhile
    runs once more on a fresh one (each lease function can run twice with
    the same outcome), as the several statements' transaction did."""
    import psycopg  # noqa: PLC0415

    name = servers.namespace()

    def kill(pids: list[int]) -> None:
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            for pid in pids:
                conn.execute("SELECT pg_terminate_backend(%s)", (pid,))

    async with servers.postgres_store(postgres_url, schema=name) as store:

        async def idle_pids() -> list[int]:
            await store.head("t")  # each pool of the store has a connection
            return [
                conn.info.backend_pid
                for pool in store._pools.values()
                for conn in pool._idle
            ]

        await anyio.to_thread.run_sync(kill, await idle_pids())
        lease = (await store.acquire("t", "me", ttl=60)).unwrap()
        await anyio.to_thread.run_sync(kill, await idle_pids())
        renewed = (await store.renew(lease, ttl=60)).unwrap()
        assert renewed.token == lease.token
        await anyio.to_thread.run_sync(kill, await idle_pids())
        await store.release(lease)
        assert await anyio.to_thread.run_sync(
            _lease_row, postgres_url, name, "t"
        ) == ("me", lease.token, 0.0)


@pytest.mark.postgres
async def test_postgres_keeps_one_cursor_per_live_connection(
    postgres_url: str,
) -> None:
    """The store's one-statement calls reuse one cursor per connection;
    a connection the server closed goes with its cursor (its call raises,
    as a commit whose connection broke does), and the next call runs on a
    fresh connection with a fresh cursor."""
    import psycopg  # noqa: PLC0415

    def kill(pids: list[int]) -> None:
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            for pid in pids:
                conn.execute("SELECT pg_terminate_backend(%s)", (pid,))

    async with servers.postgres_store(postgres_url) as store:
        await store.commit(rec("t", 0), expected_head=None)
        (pool,) = store._pools.values()
        (conn, cur), *others = pool.cursors.items()
        assert not others
        for v in range(1, 4):
            await store.commit(rec("t", v), expected_head=v - 1)
        assert pool.cursors == {conn: cur}
        await anyio.to_thread.run_sync(kill, [conn.info.backend_pid])
        # The pool finds an idle connection the server ended before it
        # hands it out; here the end comes unseen (as in the middle of a
        # call would): the commit, whose outcome is unknown, raises.
        with (
            _unseen_ends(),
            pytest.raises(psycopg.OperationalError),
        ):
            await store.commit(rec("t", 4), expected_head=3)
        assert conn.closed
        assert conn not in pool.cursors
        await store.commit(rec("t", 4), expected_head=3)
        assert await store.head("t") == 4
        assert conn not in pool.cursors
        assert len(pool.cursors) == 1
        assert all(not c.closed for c in pool.cursors)


@pytest.mark.postgres
async def test_postgres_stores_of_a_schema_render_their_sql_once(
    postgres_url: str,
) -> None:
    """A store opened on a schema another store of this process used (as
    each W5 run opens one) composes and renders none of its SQL again: its
    connection's settings and check, and its hot calls, as the first
    store rendered them; and it works as the first did."""
    from psycopg import sql  # noqa: PLC0415

    from pipeline.stores.postgres import PostgresStore  # noqa: PLC0415

    async def run(store: PostgresStore, thread: str) -> None:
        lease = (await store.acquire(thread, "me", ttl=10)).unwrap()
        await store.commit(rec(thread, 0), expected_head=None, lease=lease)
        await store.commit(rec(thread, 1), expected_head=0, lease=lease)
        await store.release(lease)
        assert await store.head(thread) == 1

    async with servers.postgres_store(postgres_url) as first:
        await run(first, "a")
        rendered: list[object] = []
        render = sql.Composed.as_bytes

        def counted(self: sql.Composed, context: Any) -> bytes:
            rendered.append(self)
            return render(self, context)

        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(sql.Composed, "as_bytes", counted)
            async with PostgresStore(
                postgres_url, schema=first.schema
            ) as second:
                assert second._sql is first._sql
                await run(second, "b")
        assert rendered == []


@contextlib.contextmanager
def _unseen_ends() -> Iterator[None]:
    """The pool's look at idle connections sees no ends (as when the
    server ends one after the look): the call on it breaks."""
    from pipeline.stores import postgres  # noqa: PLC0415

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(postgres, "_readable", lambda _: False)
        yield


def _terminate(url: str, pids: list[int]) -> None:
    """End the backends *pids*, and wait until each is gone (its goodbye
    sent to its client)."""
    import psycopg  # noqa: PLC0415

    with psycopg.connect(url, autocommit=True) as conn:
        for pid in pids:
            conn.execute("SELECT pg_terminate_backend(%s, 10000)", (pid,))


async def _idle_pids(store: Any, n: int) -> list[int]:
    """The backends of the store's *n* idle connections, made so, on the
    loop its calls run on (and on trio, of as many of the pool its hot
    calls speak to from trio itself: see pipeline.stores._pq)."""

    async def fill_pool(pool: Any) -> list[int]:
        conns = [await pool.get() for _ in range(n)]
        for conn in conns:
            await pool.put(conn)
        return [conn.info.backend_pid for conn in pool._idle]

    async def fill() -> list[int]:
        return await fill_pool(store._pools[asyncio.get_running_loop()])

    pids: list[int] = await store._call(fill, shield=True)
    try:
        asyncio.get_running_loop()
    except RuntimeError:  # trio
        from pipeline.stores.postgres import _trio_run  # noqa: PLC0415

        pids += await fill_pool(store._pools[_trio_run()])
    return pids


@pytest.mark.postgres
async def test_postgres_replaces_connections_the_server_ended(
    postgres_url: str,
) -> None:
    """After the server ends the pool's idle connections (a restart,
    ``pg_terminate_backend``, ``idle_session_timeout``), every call runs
    on a new one: none raises the server's goodbye (found attacking:
    attack9, pg_dead_pool_retry)."""
    from pipeline import graph, handler  # noqa: PLC0415
    from pipeline.graph import END  # noqa: PLC0415

    @handler
    async def inc(n: int) -> Success[int]:
        return Success(n + 1)

    g = graph.builder(int).node("a", inc).entry("a").edge("a", END).build()
    async with servers.postgres_store(postgres_url) as store:
        calls: list[Callable[[], Awaitable[object]]] = [
            lambda: store.acquire("t", "me", ttl=60),
            lambda: store.commit(rec("t", 0), expected_head=None),
            lambda: store.renew(Lease("t", "me", 1, 0.0), ttl=60),
            lambda: store.release(Lease("t", "me", 1, 0.0)),
            lambda: store.records("t"),
            lambda: store.delete("t"),
            lambda: g.run(0, store=store, thread_id="run"),
        ]
        pids: list[int] = []
        for call in calls:
            pids = await _idle_pids(store, 4)
            assert len(pids) >= 4
            await anyio.to_thread.run_sync(_terminate, postgres_url, pids)
            out = await call()
            assert not isinstance(out, Exception)
        assert (await g.run(0, store=store, thread_id="run2")).unwrap().done
        # Each pool looks at its idle connections on its next call (on
        # trio, the store's thread serves the cold calls only).
        assert await store.threads()
        live = [c for pool in store._pools.values() for c in pool._idle]
        assert all(c.info.backend_pid not in pids for c in live)


@pytest.mark.postgres
async def test_postgres_runs_a_lease_call_again_on_a_new_connection(
    postgres_url: str,
) -> None:
    """A lease call, a transaction under a thread's lock, or a read, whose
    connection broke runs once more on a new connection, not on another
    idle one the server may have ended too."""
    async with servers.postgres_store(postgres_url) as store:
        for call in (
            lambda: store.acquire("t", "me", ttl=60),
            lambda: store.renew(Lease("t", "me", 1, 0.0), ttl=60),
            lambda: store.release(Lease("t", "me", 1, 0.0)),
            lambda: store.head("t"),
            lambda: store.records("t"),
            store.threads,
            lambda: store.delete("t"),
        ):
            pids = await _idle_pids(store, 4)
            assert len(pids) >= 4
            await anyio.to_thread.run_sync(_terminate, postgres_url, pids)
            with _unseen_ends():
                await call()
        assert (
            await anyio.to_thread.run_sync(
                _lease_row, postgres_url, store.schema, "t"
            )
            is None
        )


@pytest.mark.slow
@pytest.mark.postgres
async def test_postgres_stores_create_one_schema_at_once(
    postgres_url: str,
) -> None:
    """Stores opened at the same moment on a schema that does not exist yet
    all open (one creates it), and share it."""
    name = servers.namespace()
    try:
        async with contextlib.AsyncExitStack() as stack:
            opened: list[stores.CheckpointStore] = []

            async def open_one() -> None:
                store = await stack.enter_async_context(
                    servers.postgres_store(
                        postgres_url, schema=name, drop=False
                    )
                )
                opened.append(store)

            async with anyio.create_task_group() as tg:
                for _ in range(6):
                    tg.start_soon(open_one)
            await opened[0].commit(rec("t", 0), expected_head=None)
            for store in opened:
                assert list(await store.threads()) == ["t"]
    finally:
        await anyio.to_thread.run_sync(servers.drop_schema, postgres_url, name)


@pytest.mark.slow
@pytest.mark.redis
async def test_redis_delete_leaves_no_keys(redis_url: str) -> None:
    """After every thread is deleted, no key is left under the prefix."""
    prefix = servers.namespace()
    async with servers.redis_store(redis_url, prefix=prefix) as store:
        for thread in ("a", "b"):
            lease = (await store.acquire(thread, "me", ttl=60)).unwrap()
            await store.commit(rec(thread, 0), expected_head=None, lease=lease)
            await store.release(lease)
        keys = await anyio.to_thread.run_sync(
            servers.redis_keys, redis_url, prefix
        )
        assert len(keys) == 5  # two lists, two lease hashes, the set
        await store.delete("a")
        await store.delete("b")
        assert (
            await anyio.to_thread.run_sync(
                servers.redis_keys, redis_url, prefix
            )
            == []
        )


@pytest.mark.slow
@pytest.mark.redis
async def test_redis_reloads_flushed_scripts(redis_url: str) -> None:
    """A server that lost the store's scripts (restarted, flushed) gets them
    again: commits go on working."""
    import redis  # noqa: PLC0415

    async with servers.redis_store(redis_url) as store:
        await store.commit(rec("t", 0), expected_head=None)

        def flush() -> None:
            with redis.Redis.from_url(redis_url) as client:
                client.script_flush()

        await anyio.to_thread.run_sync(flush)
        assert await store.commit(rec("t", 1), expected_head=0) == Success(
            None
        )
        assert await store.head("t") == 1


async def test_serves_other_event_loops_and_backends(server: Server) -> None:
    """One open store serves callers on other event loops, of either
    backend, in other threads, at once."""
    kind, url = server
    async with servers.open_store(kind, url, servers.namespace()) as store:

        async def write(thread: str) -> None:
            for v in range(20):
                out = await store.commit(
                    rec(thread, v), expected_head=v - 1 if v else None
                )
                assert out == Success(None)

        def elsewhere(backend: str) -> None:
            anyio.run(write, backend, backend=backend)

        async with anyio.create_task_group() as tg:
            tg.start_soon(write, "here")
            for backend in ("asyncio", "trio"):
                tg.start_soon(anyio.to_thread.run_sync, elsewhere, backend)
        assert list(await store.threads()) == ["asyncio", "here", "trio"]
        assert await store.head("trio") == 19


async def test_cancelled_callers_leave_whole_work(server: Server) -> None:
    """Callers cancelled by anyio (on either backend) while their commits
    are in flight: each commit lands whole or not at all, and the store
    goes on working."""
    kind, url = server
    async with servers.open_store(kind, url, servers.namespace()) as store:
        for delay in (0.0, 0.0005, 0.001, 0.002, 0.005):
            async with anyio.create_task_group() as tg:
                for i in range(10):
                    tg.start_soon(
                        functools.partial(
                            store.commit, rec(f"t{i}", 0), expected_head=None
                        )
                    )
                with anyio.move_on_after(delay):
                    await anyio.sleep_forever()
                tg.cancel_scope.cancel()
            for i in range(10):
                head = await store.head(f"t{i}")
                assert head in {None, 0}
                await store.delete(f"t{i}")
        assert await store.commit(rec("after", 0), expected_head=None) == (
            Success(None)
        )
        assert list(await store.threads()) == ["after"]


async def test_open_and_close(server: Server) -> None:
    """A store must be opened before use and only once; closing is
    idempotent, and a closed store refuses calls; a server that cannot be
    reached fails the opening and leaves no thread behind."""
    kind, url = server
    from pipeline.stores.postgres import PostgresStore  # noqa: PLC0415
    from pipeline.stores.redis import RedisStore  # noqa: PLC0415

    store: PostgresStore | RedisStore = (
        PostgresStore(url, schema=servers.namespace())
        if kind == "postgres"
        else RedisStore(url, prefix=servers.namespace())
    )
    with pytest.raises(RuntimeError, match="not open"):
        await store.head("t")
    async with servers.open_store(kind, url, servers.namespace()) as opened:
        with pytest.raises(RuntimeError, match="opened already"):
            await opened.open()
        await opened.aclose()
        await opened.aclose()
        with pytest.raises(RuntimeError, match="closed"):
            await opened.head("t")
        with pytest.raises(RuntimeError, match="opened already"):
            await opened.open()

    before = {t.name for t in threading.enumerate()}
    port = servers.free_port()
    if kind == "postgres":
        import psycopg  # noqa: PLC0415

        with pytest.raises(psycopg.OperationalError):
            await PostgresStore.connect(
                f"postgresql://nobody@127.0.0.1:{port}/none"
            )
    else:
        import redis.exceptions  # noqa: PLC0415

        with pytest.raises(redis.exceptions.ConnectionError):
            await RedisStore.connect(f"redis://127.0.0.1:{port}/0")
    assert {t.name for t in threading.enumerate()} <= before


def test_extras_are_named_when_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Importing a server store without its client library says which extra
    to install."""
    for module, library, extra in (
        ("pipeline.stores.postgres", "psycopg", "postgres"),
        ("pipeline.stores.redis", "redis", "redis"),
    ):
        monkeypatch.delitem(sys.modules, module, raising=False)
        monkeypatch.setitem(sys.modules, library, None)
        with pytest.raises(ImportError, match=rf"pipeline\[{extra}\]"):
            importlib.import_module(module)


def test_import_pipeline_imports_no_client() -> None:
    """``import pipeline`` (and its subpackages) loads neither psycopg nor
    redis."""
    code = (
        "import sys, pipeline, pipeline.fold, pipeline.graph, "
        "pipeline.swarm, pipeline.stores; "
        "print(sorted(m for m in ('psycopg', 'psycopg_pool', 'redis') "
        "if m in sys.modules))"
    )
    out = subprocess.run(  # noqa: S603
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        timeout=120,
    )
    assert out.stdout.strip() == "[]"


async def test_calls_on_the_opening_loop_stay_on_it(
    server: Server, anyio_backend: str
) -> None:
    """Opened on asyncio, a store runs the calls of that loop there (its
    own thread connects only when a caller elsewhere needs it); opened on
    trio, it has no home loop.  Redis runs trio's calls on the caller's
    loop too (it speaks to its server there): only other asyncio loops
    need its thread."""
    kind, url = server
    native = kind == "redis"
    async with servers.open_store(kind, url, servers.namespace()) as store:
        home = anyio_backend == "asyncio"
        assert (store._home is not None) is home
        assert await store.commit(rec("t", 0), expected_head=None) == (
            Success(None)
        )
        assert store._thread_ready is (not home and not native)

        def elsewhere(backend: str) -> int | None:
            return anyio.run(store.head, "t", backend=backend)

        assert await anyio.to_thread.run_sync(elsewhere, "trio") == 0
        assert store._thread_ready is not native
        assert await anyio.to_thread.run_sync(elsewhere, "asyncio") == 0
        assert store._thread_ready
        assert await store.head("t") == 0


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_natively_cancelled_callers_leave_whole_work(
    server: Server, anyio_backend: str
) -> None:
    """Callers on the store's home loop cancelled by asyncio's own
    ``task.cancel()`` while their commits are in flight: each commit lands
    whole or not at all, and the store goes on working."""
    import asyncio  # noqa: PLC0415

    del anyio_backend
    kind, url = server
    async with servers.open_store(kind, url, servers.namespace()) as store:
        for delay in (0.0, 0.0005, 0.001, 0.002, 0.005):
            tasks = [
                asyncio.ensure_future(
                    store.commit(rec(f"t{i}", 0), expected_head=None)
                )
                for i in range(10)
            ]
            await asyncio.sleep(delay)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            for i in range(10):
                assert await store.head(f"t{i}") in {None, 0}
                await store.delete(f"t{i}")
        assert await store.commit(rec("after", 0), expected_head=None) == (
            Success(None)
        )
        assert list(await store.threads()) == ["after"]


async def test_closed_from_another_loop(server: Server) -> None:
    """A store closed by a caller on another loop (in another thread)
    closes its home loop's client too, and then refuses calls."""
    kind, url = server
    async with servers.open_store(kind, url, servers.namespace()) as store:
        assert await store.commit(rec("t", 0), expected_head=None) == (
            Success(None)
        )
        await anyio.to_thread.run_sync(
            functools.partial(anyio.run, store.aclose, backend="trio")
        )
        with pytest.raises(RuntimeError, match="closed"):
            await store.head("t")


_OPS = st.lists(
    st.tuples(st.integers(-1, 3), st.integers(0, 3), st.booleans()),
    min_size=1,
    max_size=8,
)


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(case=_OPS)
def test_home_and_thread_give_the_same_outcomes(
    server: Server, case: list[tuple[int, int, bool]]
) -> None:
    """The same commits (right and wrong heads and versions, with and
    without a lease, a stale lease) give the same outcomes on the store's
    home loop as through its thread."""
    kind, url = server

    async def side(store: stores.CheckpointStore, thread: str) -> list[str]:
        lease = (await store.acquire(thread, "me", ttl=30)).unwrap()
        stale = Lease(thread, "me", lease.token + 1, lease.expires)
        got = []
        for expected, version, fresh in case:
            out = await store.commit(
                rec(thread, version),
                expected_head=None if expected < 0 else expected,
                lease=(lease if fresh else stale) if version % 2 else None,
            )
            got.append(str(out).replace(thread, "T"))
        got.append(str(await store.head(thread)))
        return got

    async def both() -> None:
        name = servers.namespace()
        async with servers.open_store(kind, url, name) as store:
            home = store._home
            assert home is not None
            at_home = await side(store, "h1")
            store._home = None  # through the thread
            try:
                through = await side(store, "h2")
            finally:
                store._home = home
        assert at_home == through

    anyio.run(both, backend="asyncio")


@contextlib.contextmanager
def held_commits(
    store: stores.CheckpointStore,
) -> Iterator[tuple[threading.Event, threading.Event]]:
    """The store's commits, held before they start until *release* is set
    (*started* says one is held); on the home loop, on the store's thread
    and on trio alike (the events are the threads')."""
    started, release = threading.Event(), threading.Event()
    original = store._commit  # type: ignore[attr-defined]

    async def held(*args: object) -> object:
        started.set()
        # Not anyio.to_thread: on the store's thread, the call carries its
        # trio caller's context, and anyio would take the loop for trio's.
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # on trio itself (Redis)
            await anyio.to_thread.run_sync(release.wait)
        else:
            await loop.run_in_executor(None, release.wait)
        return await original(*args)

    store._commit = held  # type: ignore[attr-defined]
    try:
        yield started, release
    finally:
        release.set()
        del store._commit  # type: ignore[attr-defined]


async def _redis_writer_cancelled_in_flight(url: str) -> None:
    """A Redis writer cancelled by anyio while its commit's answer is on
    the way (see the test below)."""
    # Redis holds a write's cancellation back in its commands, not
    # around them (on trio, each command's bound is a shield too): the
    # answer is held on the way, the command sent.
    async with (
        held_answers(url) as (proxy, switch, answer_held),
        servers.redis_store(proxy) as store,
    ):
        outcome: list[object] = []
        scope = anyio.CancelScope()

        async def writer() -> None:
            task = asyncio.current_task() if store._home else None
            with scope:
                try:
                    await store.commit(rec("t", 0), expected_head=None)
                    outcome.append("returned")
                except anyio.get_cancelled_exc_class():
                    # On asyncio, asked a few times, not at every turn of
                    # the loop (the test's twenty turns below would ask
                    # twenty more): the rest of the wait was shielded.
                    outcome.append(
                        ("cancelled", task is None or task.cancelling() <= 5)
                    )
                    raise

        switch(True)
        async with anyio.create_task_group() as tg:
            tg.start_soon(writer)
            await answer_held.wait()
            scope.cancel()
            for _ in range(20):  # the writer sees its cancellation
                await anyio.lowlevel.checkpoint()
            assert outcome == []  # and still waits for its write
            switch(False)
        assert outcome == [("cancelled", True)]
        assert await store.head("t") == 0
        assert await store.commit(rec("t", 1), expected_head=0) == Success(
            None
        )


async def test_a_cancelled_writer_goes_on_once_its_write_is_whole(
    server: Server, anyio_backend: str
) -> None:
    """A writer cancelled (by anyio) while its commit is in flight waits
    until the commit is whole, then raises; the commit is stored.  (On
    asyncio the call runs on the home loop, on trio through the store's
    thread, or on trio itself for Redis.)"""
    kind, url = server
    if kind == "redis":
        await _redis_writer_cancelled_in_flight(url)
        return
    async with servers.open_store(kind, url, servers.namespace()) as store:
        assert (store._home is not None) is (anyio_backend == "asyncio")
        outcome: list[object] = []
        scope = anyio.CancelScope()

        async def writer() -> None:
            with scope:
                try:
                    await store.commit(rec("t", 0), expected_head=None)
                    outcome.append("returned")
                except anyio.get_cancelled_exc_class():
                    outcome.append(("cancelled", release.is_set()))
                    raise

        with held_commits(store) as (started, release):
            async with anyio.create_task_group() as tg:
                tg.start_soon(writer)
                await anyio.to_thread.run_sync(started.wait)
                scope.cancel()
                for _ in range(20):  # the writer sees its cancellation
                    await anyio.lowlevel.checkpoint()
                assert outcome == []  # and still waits for its write
                release.set()
        assert outcome == [("cancelled", True)]
        assert await store.head("t") == 0
        # The store goes on; a write's error reaches its caller.
        assert await store.commit(rec("t", 1), expected_head=0) == Success(
            None
        )
        out = await store.commit(rec("t", 1), expected_head=0)
        assert not is_successful(out)


@contextlib.asynccontextmanager
async def _commit_on_hold(
    url: str, query: str = ""
) -> AsyncIterator[
    tuple[stores.CheckpointStore, asyncio.Future[Any], Callable[[bool], None]]
]:
    """A Redis store (on *url* through a proxy, with *query*), its commit
    of record 0 in flight as a task, its answer held on the way; and the
    proxy's switch."""
    async with (
        held_answers(url) as (proxy, switch, answer_held),
        servers.redis_store(proxy + query) as store,
    ):
        assert store._native is (not query)
        switch(True)
        task: asyncio.Future[Any] = asyncio.ensure_future(
            store.commit(rec("t", 0), expected_head=None)
        )
        await answer_held.wait()
        yield store, task, switch


async def _cancelled_natively(url: str, query: str, *, times: int) -> None:
    """The commit of :func:`_commit_on_hold` cancelled *times* times by
    ``task.cancel()``: it waits until whole, then raises; it is stored."""
    async with _commit_on_hold(url, query) as (store, task, switch):
        for _ in range(times):
            task.cancel()
            for _ in range(20):  # the writer sees its cancellation
                await asyncio.sleep(0)
            assert not task.done()  # and still waits for its write
        switch(False)
        with pytest.raises(asyncio.CancelledError):
            await task
        assert await store.head("t") == 0


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_natively_cancelled_writer_goes_on_once_its_write_is_whole(
    server: Server, anyio_backend: str
) -> None:
    """A writer on the home loop cancelled by asyncio's own
    ``task.cancel()`` while its commit is in flight waits until the commit
    is whole, then raises ``CancelledError``; the commit is stored."""
    import asyncio  # noqa: PLC0415

    del anyio_backend
    kind, url = server
    if kind == "redis":
        # Redis runs the commit in its caller's own task (it speaks to its
        # server on the home loop itself): held in flight, its answer on
        # the way.
        await _cancelled_natively(url, "", times=1)
        return
    async with servers.open_store(kind, url, servers.namespace()) as store:
        with held_commits(store) as (started, release):
            task = asyncio.ensure_future(
                store.commit(rec("t", 0), expected_head=None)
            )
            await asyncio.to_thread(started.wait)
            task.cancel()
            for _ in range(20):  # the writer sees its cancellation
                await asyncio.sleep(0)
            assert not task.done()  # and still waits for its write
            release.set()
            with pytest.raises(asyncio.CancelledError):
                await task
        assert await store.head("t") == 0


@pytest.mark.redis
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_writer_cancelled_twice_goes_on_once_its_write_is_whole(
    redis_url: str, anyio_backend: str
) -> None:
    """A writer cancelled twice by asyncio's own ``task.cancel()`` while
    its commit is in flight, on each path of the home loop (the store's
    own connections, and redis-py's client in a task of its own for a URL
    the store does not speak itself): it waits until the commit is whole
    however often it is cancelled (anyio's shield does not stop a native
    cancellation), then raises; the commit is stored."""
    del anyio_backend
    for query in ("", "?socket_keepalive=true"):
        await _cancelled_natively(redis_url, query, times=2)


@pytest.mark.redis
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_cancelled_redis_write_past_its_bound_names_the_timeout(
    redis_url: str, anyio_backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cancelled Redis write whose answer does not come within the
    command's bound may or may not land later: the cancellation it raises
    has the timeout as its cause (documented in the store's module)."""
    import redis.exceptions  # noqa: PLC0415

    from pipeline.stores import redis as redis_store  # noqa: PLC0415

    del anyio_backend
    monkeypatch.setattr(redis_store, "_TIMEOUT", 0.2)
    async with _commit_on_hold(redis_url) as (_, task, switch):
        task.cancel()
        with pytest.raises(asyncio.CancelledError) as caught:
            await task
        assert isinstance(
            caught.value.__cause__, redis.exceptions.TimeoutError
        )
        switch(False)


@pytest.mark.redis
@pytest.mark.parametrize("anyio_backend", ["trio"])
async def test_a_cancelled_redis_write_past_its_bound_raises_the_timeout_on_trio(
    redis_url: str, anyio_backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On trio the same write raises the timeout itself (trio's shield
    holds the cancellation until the next checkpoint), not a cancellation
    from closing its connection (found attacking: a bare ``Cancelled``)."""
    import redis.exceptions  # noqa: PLC0415

    from pipeline.stores import redis as redis_store  # noqa: PLC0415

    del anyio_backend
    monkeypatch.setattr(redis_store, "_TIMEOUT", 0.2)
    async with (
        held_answers(redis_url) as (proxy, switch, answer_held),
        servers.redis_store(proxy) as store,
    ):
        outcome: list[str] = []
        scope = anyio.CancelScope()

        async def writer() -> None:
            with scope:
                try:
                    await store.commit(rec("t", 0), expected_head=None)
                except redis.exceptions.TimeoutError:
                    outcome.append("timeout")

        switch(True)
        async with anyio.create_task_group() as tg:
            tg.start_soon(writer)
            await answer_held.wait()
            scope.cancel()
        assert outcome == ["timeout"]
        switch(False)


@pytest.mark.redis
async def test_a_redis_write_nobody_cancels_enters_no_cancel_scope(
    redis_url: str, anyio_backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Redis write nobody cancels enters no cancel scope, anyio's nor
    trio's: its shield is entered only once cancelled, and on trio its
    bound is the run's watch (a scope with a deadline and a shield cost
    12 µs a command)."""
    entered: list[str] = []

    def counting(name: str, real: Any) -> Callable[..., Any]:
        def make(*args: Any, **kwargs: Any) -> Any:
            entered.append(name)
            return real(*args, **kwargs)

        return make

    async with servers.redis_store(redis_url) as store:
        # Its connection opened (under a scope of its own: seldom).
        assert await store.commit(rec("t", 0), expected_head=None) == (
            Success(None)
        )
        monkeypatch.setattr(
            anyio, "CancelScope", counting("anyio", anyio.CancelScope)
        )
        if anyio_backend == "trio":
            import trio  # noqa: PLC0415

            monkeypatch.setattr(
                trio, "CancelScope", counting("trio", trio.CancelScope)
            )
        for version in range(1, 11):
            out = await store.commit(
                rec("t", version), expected_head=version - 1
            )
            assert out == Success(None)
        monkeypatch.undo()
        assert entered == []
        assert await store.head("t") == 10


def test_redis_bounds_on_trio_end_each_command_at_its_own_time() -> None:
    """The trio run's watch of its Redis commands (``_resp._Watch``) keeps
    the deadline an earlier command set, but sleeps on to a later
    command's own time: no command is cut before its bound, nor waits past
    it, and a command whose reply came is never cut."""
    trio = pytest.importorskip("trio")
    from trio.testing import MockClock  # noqa: PLC0415

    from pipeline.stores import _resp  # noqa: PLC0415

    class Command:
        def __init__(self) -> None:
            self.cut_at: float | None = None

        def expire(self) -> None:
            self.cut_at = trio.current_time()

    async def main() -> None:
        watch = _resp._watch(trio)
        first, second, third = Command(), Command(), Command()
        watch.start(first, 5.0)  # type: ignore[arg-type]
        await trio.sleep(1)  # (the mock clock's time)
        del watch.busy[first]  # type: ignore[arg-type]  # its reply came
        watch.start(second, 6.0)  # type: ignore[arg-type]
        await trio.sleep(4.5)
        assert second.cut_at is None  # the watch woke at 5, slept on
        watch.start(third, 5.8)  # type: ignore[arg-type]
        await trio.sleep(10)
        cut = [c.cut_at for c in (first, second, third)]
        assert cut == [None, 6.0, 5.8]
        assert watch.busy == {}

    trio.run(main, clock=MockClock(autojump_threshold=0))


async def test_a_failing_call_raises_its_error(
    server: Server, anyio_backend: str
) -> None:
    """An error of the store's work reaches its caller, at home and
    through the thread alike, and the store goes on working."""
    kind, url = server
    del anyio_backend
    async with servers.open_store(kind, url, servers.namespace()) as store:

        async def broken(*_: object) -> None:
            raise ValueError("broken")

        store._commit = broken  # type: ignore[method-assign,assignment]
        with pytest.raises(ValueError, match="broken"):
            await store.commit(rec("t", 0), expected_head=None)
        del store._commit
        assert await store.commit(rec("t", 0), expected_head=None) == (
            Success(None)
        )


async def test_the_thread_starts_with_the_first_call_away_from_home(
    server: Server, anyio_backend: str
) -> None:
    """Opened on asyncio, a store starts its thread only when a caller
    elsewhere needs it, once however many callers ask at once, and closing
    stops it (and refuses to start one); opened on trio, it runs on its
    thread from the start (PostgreSQL) or on trio itself (Redis)."""
    kind, url = server
    name = servers.namespace()

    def threads() -> set[str]:
        return {t.name for t in threading.enumerate()}

    async with servers.open_store(kind, url, name) as store:
        mine = f"pipeline:{store!r}"
        if anyio_backend == "trio":
            assert (store._loop is not None) is (kind == "postgres")
            assert (mine in threads()) is (kind == "postgres")
            return
        assert store._loop is None
        assert await store.commit(rec("t", 0), expected_head=None) == (
            Success(None)
        )
        assert store._loop is None
        assert mine not in threads()

        def elsewhere() -> int | None:
            # Another asyncio loop (trio's calls need no thread for Redis).
            return anyio.run(store.head, "t", backend="asyncio")

        async with anyio.create_task_group() as tg:
            for _ in range(4):
                tg.start_soon(anyio.to_thread.run_sync, elsewhere)
        assert [t.name for t in threading.enumerate()].count(mine) == 1
        assert await store.head("t") == 0
    assert mine not in threads()
    with pytest.raises(RuntimeError, match="closed"):
        await anyio.to_thread.run_sync(elsewhere)


@pytest.mark.redis
@pytest.mark.slow
async def test_redis_bounds_the_wait_for_an_answer(
    redis_url: str, anyio_backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Redis command waits for its answer no longer than the store's
    bound (redis-py's socket timeout, kept with one timer per command):
    past it the call raises redis-py's ``TimeoutError``, the commit may or
    may not have landed, and the store goes on working."""
    import redis  # noqa: PLC0415
    import redis.exceptions  # noqa: PLC0415

    from pipeline.stores import redis as redis_store  # noqa: PLC0415

    del anyio_backend
    name = servers.namespace()
    async with servers.open_store("redis", redis_url, name) as store:
        monkeypatch.setattr(redis_store, "_TIMEOUT", 0.2)
        with redis.Redis.from_url(redis_url) as other:
            other.execute_command("CLIENT", "PAUSE", "30000", "WRITE")
            try:
                with pytest.raises(redis.exceptions.TimeoutError):
                    await store.commit(rec("t", 0), expected_head=None)
            finally:
                other.execute_command("CLIENT", "UNPAUSE")
        head = await store.head("t")
        assert head in {None, 0}
        assert await store.commit(
            rec("t", 0 if head is None else 1), expected_head=head
        ) == Success(None)


class _FakeConn:
    """A pooled connection, as far as the pool looks: a socket the server
    may end, and a transaction status."""

    def __init__(self) -> None:
        import socket  # noqa: PLC0415

        from psycopg.pq import TransactionStatus  # noqa: PLC0415

        self.closed = False
        self.ours, self.server = socket.socketpair()
        self.pgconn = SimpleNamespace(
            transaction_status=TransactionStatus.IDLE,
            socket=self.ours.fileno(),
        )

    def end(self) -> None:
        """The server ends the connection (its side closes)."""
        self.server.close()

    async def close(self) -> None:
        from psycopg.pq import TransactionStatus  # noqa: PLC0415

        self.closed = True
        self.pgconn.transaction_status = TransactionStatus.UNKNOWN


@settings(max_examples=60, deadline=None)
@given(
    size=st.integers(1, 3),
    plans=st.lists(
        st.lists(st.booleans(), max_size=6), min_size=1, max_size=5
    ),
    failing=st.sets(st.integers(0, 12), max_size=3),
    ending=st.sets(st.integers(0, 30), max_size=4),
)
def test_postgres_pool_serves_every_caller_within_its_size(
    size: int, plans: list[list[bool]], failing: set[int], ending: set[int]
) -> None:
    """The PostgreSQL store's pool, with callers interleaving at every
    step: no more than *size* connections open at once, a connection is
    never handed to two callers, one returned broken (or closed) is closed
    and its place reused, one the server ended while it was idle (the
    *ending*-th returned) is never handed out but closed and its place
    reused, a failed connection attempt frees its place, and closing the
    pool closes every idle connection."""
    import asyncio  # noqa: PLC0415

    pytest.importorskip("psycopg_pool")
    from psycopg.pq import TransactionStatus  # noqa: PLC0415

    from pipeline.stores.postgres import _Pool  # noqa: PLC0415

    made: list[_FakeConn] = []
    returns = iter(range(1 << 20))
    attempts = iter(range(1 << 20))

    async def connect() -> _FakeConn:
        await asyncio.sleep(0)  # connecting takes a turn of the loop
        if next(attempts) in failing:
            raise OSError("refused")
        made.append(_FakeConn())
        return made[-1]

    async def main() -> None:
        pool = _Pool(connect, size, 30.0)  # type: ignore[arg-type]
        in_use: set[int] = set()

        async def caller(plan: list[bool]) -> None:
            for broken in plan:
                try:
                    conn: _FakeConn = await pool.get()  # type: ignore[assignment]
                except OSError:
                    continue
                assert not conn.closed
                assert conn.server.fileno() != -1  # not ended
                assert id(conn) not in in_use
                in_use.add(id(conn))
                assert sum(not c.closed for c in made) <= size
                await asyncio.sleep(0)  # the others go on meanwhile
                in_use.discard(id(conn))
                if broken:
                    conn.pgconn.transaction_status = TransactionStatus.UNKNOWN
                await pool.put(conn)  # type: ignore[arg-type]
                idle = any(id(c) == id(conn) for c in pool._idle)
                if next(returns) in ending and idle:
                    conn.end()  # while it is idle in the pool

        try:
            await asyncio.gather(*(caller(plan) for plan in plans))
            assert sum(not c.closed for c in made) <= size
            await pool.close()
            assert all(c.closed for c in made)
        finally:
            for c in made:
                c.ours.close()
                c.server.close()

    anyio.run(main, backend="asyncio")


@pytest.mark.parametrize("ending", ["value", "error", "closed"])
def test_the_bridge_wakes_its_caller_from_the_task_itself(ending: str) -> None:
    """The store's thread wakes a caller from its call's task, at the end
    of the task's last step (not from its done callbacks, a turn of the
    loop later), with the work's value, its error, or (the loop shutting
    down, the task cancelled) an error saying the store was closed."""
    import asyncio  # noqa: PLC0415

    from pipeline.stores._bridge import _Call  # noqa: PLC0415

    woken: list[tuple[bool, object, object]] = []

    async def main() -> None:
        started = asyncio.Event()

        async def work() -> int:
            if ending == "error":
                raise KeyError("k")
            if ending == "closed":
                started.set()
                await asyncio.Event().wait()  # until cancelled
            return 7

        def wake(then: Callable[[], object]) -> None:
            task = asyncio.current_task()
            assert task is not None
            woken.append((task.done(), call.result, call.error))
            then()

        call: _Call[int] = _Call(work, wake)
        task = asyncio.get_running_loop().create_task(call.run())
        if ending == "closed":
            await started.wait()
            task.cancel()
        await asyncio.wait((task,))
        assert call.event.is_set()
        assert task.cancelled() == (ending == "closed")
        if not task.cancelled():
            assert task.result() is None  # the error is the caller's

    asyncio.run(main())
    ((done, result, error),) = woken
    assert not done  # woken from the task's own step
    if ending == "value":
        assert (result, error) == (7, None)
    elif ending == "error":
        assert isinstance(error, KeyError)
    else:
        assert isinstance(error, RuntimeError)
        assert "closed" in str(error)


def test_postgres_pool_times_out_when_every_connection_is_in_use() -> None:
    """A caller finding all the pool's connections in use waits for one no
    longer than the pool's timeout (``PoolTimeout``), and the pool goes
    on serving."""

    pytest.importorskip("psycopg_pool")
    import socket  # noqa: PLC0415

    from psycopg.pq import TransactionStatus  # noqa: PLC0415
    from psycopg_pool import PoolTimeout  # noqa: PLC0415

    from pipeline.stores.postgres import _Pool  # noqa: PLC0415

    quiet, peer = socket.socketpair()  # nothing to read: a live server

    class Conn:
        closed = False
        pgconn = type(
            "PG",
            (),
            {
                "transaction_status": TransactionStatus.IDLE,
                "socket": quiet.fileno(),  # nothing to read: not ended
            },
        )

        async def close(self) -> None:
            self.closed = True

    async def connect() -> Conn:
        return Conn()

    async def main() -> None:
        pool = _Pool(connect, 1, 0.05)  # type: ignore[arg-type]
        held = await pool.get()
        with pytest.raises(PoolTimeout):
            await pool.get()
        await pool.put(held)
        assert await pool.get() is held  # the timed-out waiter is skipped
        await pool.put(held)
        await pool.close()
        assert held.closed

    with quiet, peer:
        anyio.run(main, backend="asyncio")


def test_postgres_pool_keeps_a_connection_handed_to_a_cancelled_caller() -> (
    None
):
    """A waiting caller cancelled (natively, ``task.cancel()``) after a
    connection was handed to it, before it could take it: the connection
    goes back to the pool, not lost with its place."""

    pytest.importorskip("psycopg_pool")
    import asyncio  # noqa: PLC0415
    import socket  # noqa: PLC0415

    from psycopg.pq import TransactionStatus  # noqa: PLC0415

    from pipeline.stores.postgres import _Pool  # noqa: PLC0415

    quiet, peer = socket.socketpair()  # nothing to read: a live server

    class Conn:
        closed = False
        pgconn = type(
            "PG",
            (),
            {
                "transaction_status": TransactionStatus.IDLE,
                "socket": quiet.fileno(),  # nothing to read: not ended
            },
        )

        async def close(self) -> None:
            self.closed = True

    made: list[Conn] = []

    async def connect() -> Conn:
        made.append(Conn())
        return made[-1]

    async def main() -> None:
        pool = _Pool(connect, 1, 30.0)  # type: ignore[arg-type]
        held = await pool.get()
        waiting = asyncio.ensure_future(pool.get())
        for _ in range(3):  # the caller is now parked on its waiter
            await asyncio.sleep(0)
        await pool.put(held)  # handed to the waiting caller ...
        waiting.cancel()  # ... who is cancelled before it runs again
        try:
            took = await waiting
        except asyncio.CancelledError:
            pass
        else:  # Python 3.11's wait_for returns what it was handed
            await pool.put(took)
        again = await asyncio.wait_for(pool.get(), 30.0)
        assert again is held
        assert len(made) == 1
        await pool.put(again)
        await pool.close()

    with quiet, peer:
        anyio.run(main, backend="asyncio")


@pytest.mark.redis
@pytest.mark.slow
async def test_redis_replaces_connections_the_server_closed(
    redis_url: str, anyio_backend: str
) -> None:
    """The Redis store's scripts run over connections of its own; one the
    server closed while it was idle (a restart, a ``timeout``, a proxy) is
    replaced before a command is sent on it, so the next commit succeeds,
    at home and on trio alike."""
    import redis  # noqa: PLC0415

    from redis.asyncio.connection import AbstractConnection  # noqa: PLC0415

    from pipeline.stores import _resp  # noqa: PLC0415
    from pipeline.stores import redis as redis_store  # noqa: PLC0415

    del anyio_backend
    async with servers.open_store(
        "redis", redis_url, servers.namespace()
    ) as store:
        for v in range(3):
            assert await store.commit(
                rec("t", v), expected_head=v - 1 if v else None
            ) == Success(None)
        assert isinstance(store, redis_store.RedisStore)

        # Each idle connection, and its check: the loop's view (asyncio),
        # or a look at the socket (trio, see pipeline.stores._resp).
        async def usable(conn: object) -> bool:
            if isinstance(conn, _resp.Connection | _resp.LoopConnection):
                return conn.usable()
            assert isinstance(conn, AbstractConnection)
            return await redis_store._usable(conn)

        idle = [
            *(c for conns in store._idle.values() for c in conns),
            *(w for wires in store._wires.values() for w in wires),
            *store._here_wires,
        ]
        assert idle
        with redis.Redis.from_url(redis_url) as other:
            other.execute_command(
                "CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"
            )
        # At once, no turn of the loop in between: the store's own
        # connections look at their sockets (the server closed them before
        # it answered the kill), redis-py's at what its loop has seen.
        own = [c for c in idle if not isinstance(c, AbstractConnection)]
        assert not [c for c in own if await usable(c)]
        assert await store.commit(rec("t", 3), expected_head=2) == Success(
            None
        )
        assert await store.head("t") == 3


async def _named(store: Any, name: str) -> None:
    """Name a Redis store's one connection *name*, so that the server can
    count it (see :func:`_redis_clients`); any other store is left as it
    is."""
    from pipeline.stores.redis import RedisStore  # noqa: PLC0415

    if isinstance(store, RedisStore):
        await store._ask("CLIENT", "SETNAME", name)


# The home loop's client dies with its loop, unclosed: what it left is
# reported as unraisable when collected (here, not in a later test).
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("ending", ["run", "run_until_complete"])
@pytest.mark.parametrize("closer", ["asyncio", "trio"])
def test_closed_from_another_loop_as_the_home_loop_ends(
    server: Server, ending: str, closer: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store closed from another thread just as its home loop ends (the
    close it schedules there never runs: ``asyncio.run`` cancels it,
    ``run_until_complete`` stops before it) still closes its own thread,
    and aclose returns instead of raising or waiting for ever; a Redis
    store's home connection is ended from there (it was left open).  The
    home loop is held busy until the close is scheduled, then ends: no
    timing."""
    import asyncio  # noqa: PLC0415

    kind, url = server
    opened, scheduled = threading.Event(), threading.Event()
    box: dict[str, Any] = {}
    schedule = asyncio.run_coroutine_threadsafe

    def scheduling(coro: Any, loop: Any) -> Any:
        done = schedule(coro, loop)
        scheduled.set()  # the home loop may end now
        return done

    monkeypatch.setattr(asyncio, "run_coroutine_threadsafe", scheduling)

    name = servers.namespace()

    async def home() -> None:
        from pipeline.stores.postgres import PostgresStore  # noqa: PLC0415
        from pipeline.stores.redis import RedisStore  # noqa: PLC0415

        try:
            store = (
                PostgresStore(url, schema=name)
                if kind == "postgres"
                else RedisStore(url, prefix=name)
            )
            await store.open()
            await _named(store, name)
            box["store"] = store
        finally:
            opened.set()
        scheduled.wait()  # busy (blocked) until the close is scheduled

    def at_home() -> None:
        if ending == "run":
            asyncio.run(home())
        else:
            box["loop"] = loop = asyncio.new_event_loop()
            loop.run_until_complete(home())

    thread = threading.Thread(target=at_home)
    thread.start()
    try:
        opened.wait()
        store = box["store"]
        anyio.run(store.aclose, backend=closer)
    finally:
        scheduled.set()
        thread.join()
    names = {t.name for t in threading.enumerate()}
    assert f"pipeline:{store!r}" not in names  # the store's thread ended
    assert kind != "redis" or _redis_clients(url, name) == 0  # ended
    anyio.run(store.aclose, backend=closer)  # again: a no-op
    if "loop" in box:
        box["loop"].close()
    box.clear()
    del store  # its client's leftovers are collected now, in this test
    gc.collect()
    if kind == "postgres":
        servers.drop_schema(url, name)


@pytest.mark.redis
@pytest.mark.slow
async def test_redis_keeps_the_thread_for_urls_it_does_not_speak(
    redis_url: str, anyio_backend: str
) -> None:
    """A URL the store does not speak itself on trio (here, an option in
    the query string) keeps redis-py's client: trio's calls go through the
    store's thread, and work as on a plain URL."""
    from pipeline.stores.redis import RedisStore  # noqa: PLC0415

    url = redis_url + "?health_check_interval=0"
    async with servers.redis_store(url) as store:
        assert isinstance(store, RedisStore)
        assert not store._native
        assert await store.commit(rec("t", 0), expected_head=None) == (
            Success(None)
        )
        assert await store.head("t") == 0
        assert (store._loop is not None) is (anyio_backend == "trio")
        assert not store._wires


@pytest.mark.redis
@pytest.mark.slow
async def test_redis_uses_the_database_of_its_url(
    redis_url: str, anyio_backend: str
) -> None:
    """The URL's database is the one written to, whoever speaks to the
    server (redis-py on asyncio, the store itself on trio)."""
    import redis  # noqa: PLC0415

    del anyio_backend
    url = redis_url.rsplit("/", 1)[0] + "/3"
    name = servers.namespace()
    async with servers.redis_store(url, prefix=name) as store:
        assert await store.commit(rec("t", 0), expected_head=None) == (
            Success(None)
        )

        def keys(db: int) -> list[bytes]:
            at = redis_url.rsplit("/", 1)[0] + f"/{db}"
            with redis.Redis.from_url(at) as client:
                return sorted(client.keys(f"{name}:*"))

        assert await anyio.to_thread.run_sync(keys, 0) == []
        assert await anyio.to_thread.run_sync(keys, 3) == [
            f"{name}:records:t".encode(),
            f"{name}:threads".encode(),
        ]


@contextlib.asynccontextmanager
async def held_answers(
    url: str,
) -> AsyncIterator[tuple[str, Callable[[bool], None], anyio.Event]]:
    """A proxy to the Redis server at *url*: its URL, a switch that holds
    the server's answers (``True``) or lets them through again, and an
    event set once an answer is held (so its caller is waiting for it)."""
    host, port = url.split("//")[1].split("/", maxsplit=1)[0].split(":")
    holding = False
    held = anyio.Event()
    release = anyio.Event()

    def switch(on: bool) -> None:
        nonlocal holding
        holding = on
        if not on:
            release.set()

    async def pipe(
        source: anyio.abc.ByteStream,
        sink: anyio.abc.ByteStream,
        hold: bool,
    ) -> None:
        with contextlib.suppress(
            anyio.EndOfStream, anyio.BrokenResourceError, OSError
        ):
            async for chunk in source:
                if hold and holding:
                    held.set()
                    await release.wait()
                await sink.send(chunk)

    async def serve(client: anyio.abc.SocketStream) -> None:
        async with (
            client,
            await anyio.connect_tcp(host, int(port)) as server,
            anyio.create_task_group() as tg,
        ):
            tg.start_soon(pipe, client, server, False)
            await pipe(server, client, True)
            tg.cancel_scope.cancel()

    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, serve)
        mine = listener.extra(anyio.abc.SocketAttribute.local_port)  # noqa: S610  # anyio's
        try:
            yield f"redis://127.0.0.1:{mine}/0", switch, held
        finally:
            switch(False)
            tg.cancel_scope.cancel()


@pytest.mark.redis
@pytest.mark.slow
async def test_redis_cancelled_reader_stops_and_the_store_goes_on(
    redis_url: str, anyio_backend: str
) -> None:
    """A reader cancelled while its answer is held on the way stops at once
    (on trio, the connection it was reading from is dropped, not kept with
    an answer nobody reads); the next calls get their own answers."""
    del anyio_backend
    async with (
        held_answers(redis_url) as (url, switch, held),
        servers.redis_store(url) as store,
    ):
        assert await store.commit(rec("t", 0), expected_head=None) == (
            Success(None)
        )
        outcome: list[object] = []

        async def reader() -> None:
            try:
                outcome.append(await store.head("t"))
            except anyio.get_cancelled_exc_class():
                outcome.append("cancelled")
                raise

        switch(True)
        async with anyio.create_task_group() as tg:
            tg.start_soon(reader)
            await held.wait()  # its answer came, and is held
            tg.cancel_scope.cancel()
        assert outcome == ["cancelled"]
        switch(False)
        assert await store.head("t") == 0
        assert await store.commit(rec("t", 1), expected_head=0) == (
            Success(None)
        )
        assert [r.version for r in await store.records("t")] == [0, 1]


@pytest.mark.redis
@pytest.mark.slow
async def test_redis_closes_the_connections_of_trio_runs_that_ended(
    redis_url: str, anyio_backend: str
) -> None:
    """A store outliving trio runs (each ``trio.run`` in a thread, say)
    keeps no connection of a run that is over: they are closed once the run
    is gone, not left open until the store closes."""
    from pipeline.stores import _resp  # noqa: PLC0415
    from pipeline.stores.redis import RedisStore  # noqa: PLC0415

    del anyio_backend
    async with servers.redis_store(redis_url) as store:
        assert isinstance(store, RedisStore)
        seen: list[_resp.Connection] = []

        async def write() -> None:
            assert await store.commit(rec("t", 0), expected_head=None) == (
                Success(None)
            )
            seen.extend(store._run_wires())  # this run's

        await anyio.to_thread.run_sync(
            functools.partial(anyio.run, write, backend="trio")
        )
        assert len(seen) == 1
        gc.collect()  # the run's token, and so its list
        assert all(seen[0] not in ws for ws in store._wires.values())
        assert seen[0]._socket.fileno() == -1  # closed
        assert await store.head("t") == 0


async def _in_step(store: stores.CheckpointStore, big: list[Record]) -> None:
    """Every connection the store kept answers its own commands: the big
    thread's records come whole and in order, and a probe reads back what
    was just written (a connection out of step would give an earlier
    reply)."""
    assert list(await store.records("big")) == big
    for probe in ("p0", "p1", "p2"):
        head = await store.head(probe)
        version = 0 if head is None else head + 1
        assert await store.commit(rec(probe, version), expected_head=head) == (
            Success(None)
        )
        assert await store.head(probe) == version
        assert list(await store.records("big")) == big


@pytest.mark.redis
async def test_redis_cancelled_at_any_instant_leaves_no_connection_out_of_step(
    redis_url: str, anyio_backend: str
) -> None:
    """Readers (of replies long enough to come in many pieces) and writers
    cancelled after every number of the loop's turns, by anyio's scopes on
    both backends, and on asyncio also by ``task.cancel()`` and
    ``asyncio.wait_for``: a reader stops, a writer's commit lands whole or
    not at all (once started on asyncio's home loop, it lands), and no
    connection is kept with a reply nobody read."""
    big = [rec("big", v, b"[" + b"7," * 150_000 + b"7]") for v in range(3)]
    async with servers.redis_store(redis_url) as store:
        for record in big:
            head = None if record.version == 0 else record.version - 1
            assert await store.commit(record, expected_head=head) == (
                Success(None)
            )
        for turns in range(40):
            async with anyio.create_task_group() as tg:
                tg.start_soon(store.records, "big")
                tg.start_soon(store.head, "big")
                tg.start_soon(
                    functools.partial(
                        store.commit, rec(f"s{turns}", 0), expected_head=None
                    )
                )
                for _ in range(turns):
                    await anyio.lowlevel.checkpoint()
                tg.cancel_scope.cancel()
            assert await store.head(f"s{turns}") in {None, 0}
            await _in_step(store, big)
        if anyio_backend != "asyncio":
            return
        for turns in range(40):
            tasks = [
                asyncio.ensure_future(store.records("big")),
                asyncio.ensure_future(
                    store.commit(rec(f"n{turns}", 0), expected_head=None)
                ),
            ]
            for _ in range(turns):
                await asyncio.sleep(0)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            # Started (asyncio runs tasks in order), the commit landed.
            assert await store.head(f"n{turns}") == (0 if turns else None)
            await _in_step(store, big)
        for wait in (0.0, 0.0001, 0.0003, 0.001, 0.002, 0.005, 0.01):
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(store.records("big"), wait)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(
                    store.commit(rec(f"w{wait}", 0), expected_head=None), wait
                )
            assert await store.head(f"w{wait}") in {None, 0}
            await _in_step(store, big)


@pytest.mark.redis
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_redis_natively_cancelled_writer_opening_a_connection_lands(
    redis_url: str, anyio_backend: str
) -> None:
    """A writer on the home loop with no idle connection, cancelled by
    ``task.cancel()`` while its new connection opens: the connection opens
    all the same, the commit lands, then the writer raises
    ``CancelledError``."""
    from pipeline.stores import redis as redis_store  # noqa: PLC0415

    del anyio_backend
    async with servers.redis_store(redis_url) as store:
        assert isinstance(store, redis_store.RedisStore)
        redis_store._abandon(store._here_wires)
        task = asyncio.ensure_future(
            store.commit(rec("t", 0), expected_head=None)
        )
        await asyncio.sleep(0)  # it starts, and waits for its connection
        assert not store._here_wires
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert await store.head("t") == 0
        assert len(store._here_wires) == 1  # kept: its reply was read


@pytest.mark.redis
@pytest.mark.slow
def test_a_reply_that_beat_its_timer_leaves_the_connection_usable(
    redis_url: str,
) -> None:
    """On asyncio a command's timer may fire in the very turn of the loop
    its reply came in: the reply is taken, and the connection's next
    command does not find that old timeout (it failed at once, unsent).
    Asyncio's own connection (trio's has no timer of its own)."""
    import asyncio  # noqa: PLC0415

    from pipeline.stores import _resp  # noqa: PLC0415

    where = _resp.target(redis_url)
    assert where is not None

    async def main() -> None:
        conn = await _resp.LoopConnection.open(where, 5)
        try:
            assert await conn.ask(("PING",), bound=5) == b"PONG"
            conn._protocol.expire()  # the timer, fired with the reply
            assert conn.usable()
            assert await conn.ask(("PING",), bound=5) == b"PONG"
        finally:
            conn.abandon()

    asyncio.run(main())


@pytest.mark.redis
def test_redis_bounds_on_asyncio_keep_one_timer_per_connection(
    redis_url: str,
) -> None:
    """On asyncio a connection's commands share one timer, moved on
    lazily (a timer made and cancelled per command cost some 3 µs): its
    first command sets it, later ones make none.  A command is not cut by
    the timer an earlier, shorter bound left: it sleeps on to the
    command's own time (the server holds this one's reply 0.2 s, past the
    earlier bound's 0.05 s)."""
    import redis  # noqa: PLC0415

    from pipeline.stores import _resp  # noqa: PLC0415

    where = _resp.target(redis_url)
    assert where is not None

    async def main() -> None:
        loop = asyncio.get_running_loop()
        made: list[float] = []
        real = loop.call_at

        def call_at(when: float, *args: Any, **kwargs: Any) -> Any:
            made.append(when)
            return real(when, *args, **kwargs)

        conn = await _resp.LoopConnection.open(where, 5)
        try:
            loop.call_at = call_at  # type: ignore[method-assign,assignment]
            for _ in range(20):
                assert await conn.ask(("PING",), bound=5) == b"PONG"
            assert len(made) <= 1
            assert await conn.ask(("PING",), bound=0.05) == b"PONG"
            with redis.Redis.from_url(redis_url) as other:
                other.execute_command("CLIENT", "PAUSE", "200", "WRITE")
            key = f"{servers.namespace()}:k"
            assert await conn.ask(("SET", key, b"v"), bound=5) == b"OK"
            assert conn.usable()
        finally:
            conn.abandon()

    asyncio.run(main())


@pytest.mark.redis
def test_redis_on_asyncio_reads_replies_into_a_buffer_of_its_own(
    redis_url: str,
) -> None:
    """An asyncio connection's replies are read into a buffer it made once
    (a buffered protocol's ``recv_into``), not by the transport's
    ``recv(262144)`` (a 256 KiB buffer a read, which the C library may map
    and unmap each time); a reply larger than the buffer is read whole,
    in pieces."""
    from pipeline.stores import _resp  # noqa: PLC0415

    where = _resp.target(redis_url)
    assert where is not None
    key = f"{servers.namespace()}:big"
    value = os.urandom(300_000)

    async def main() -> None:
        conn = await _resp.LoopConnection.open(where, 5)
        try:
            assert isinstance(conn._protocol, asyncio.BufferedProtocol)
            buffer = conn._protocol.buffer
            assert await conn.ask(("SET", key, value), bound=5) == b"OK"
            assert await conn.ask(("GET", key), bound=5) == value
            assert await conn.ask(("DEL", key), bound=5) == 1
            assert conn._protocol.buffer is buffer
            assert conn.usable()
        finally:
            conn.abandon()

    asyncio.run(main())


@pytest.mark.redis
def test_redis_bounds_on_asyncio_keep_nothing_of_their_callers(
    redis_url: str,
) -> None:
    """The bounds' timer outlives the command that set it (by up to its
    bound): it holds nothing of that command's caller (its context, where
    a step's state may be), which is collected once the caller is done."""
    import contextvars  # noqa: PLC0415
    import weakref  # noqa: PLC0415

    from pipeline.stores import _resp  # noqa: PLC0415

    where = _resp.target(redis_url)
    assert where is not None
    held: contextvars.ContextVar[object] = contextvars.ContextVar("held")

    class State:
        pass

    async def main() -> None:
        conn = await _resp.LoopConnection.open(where, 5)
        try:

            async def caller() -> weakref.ref[State]:
                state = State()
                held.set(state)
                assert await conn.ask(("PING",), bound=5) == b"PONG"
                return weakref.ref(state)

            gone = await asyncio.get_running_loop().create_task(caller())
            # A turn of the loop: the callback that woke this task, which
            # holds the caller's task (and context), is done with.
            await anyio.lowlevel.checkpoint()
            gc.collect()
            assert gone() is None
            assert conn._timer is not None  # the timer is still there
        finally:
            conn.abandon()

    asyncio.run(main())


@pytest.mark.redis
def test_redis_commands_on_trio_find_their_run_and_clock_once(
    redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A trio run's commands find its idle connections without a look in
    the store's weak mapping of runs (each look made a weak reference),
    and their bounds read the run's clock itself (``trio.current_time``
    reaches it through three calls); another run is looked up again."""
    import trio  # noqa: PLC0415

    class Unused:
        def get(self, *_: object) -> object:
            raise AssertionError

    def unused() -> float:
        raise AssertionError

    async def main(store: stores.CheckpointStore, first: int) -> None:
        assert await store.commit(
            rec("t", first), expected_head=first - 1 if first else None
        ) == Success(None)
        with monkeypatch.context() as patched:
            patched.setattr(store, "_wires", Unused())
            patched.setattr(trio, "current_time", unused)
            for version in range(first + 1, first + 4):
                out = await store.commit(
                    rec("t", version), expected_head=version - 1
                )
                assert out == Success(None)

    async def both() -> None:
        async with servers.redis_store(redis_url) as store:
            await main(store, 0)
            assert await store.head("t") == 3
            # Another run (in a thread of its own): its own connections,
            # looked up again.
            await trio.to_thread.run_sync(trio.run, main, store, 4)
            assert await store.head("t") == 7

    trio.run(both)


@pytest.mark.redis
async def test_redis_commits_at_home_and_on_trio_skip_the_common_layers(
    redis_url: str, anyio_backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Redis commit in the caller's task (on trio, or on the loop the
    store was opened on) runs its script straight on the connection, not
    through ``ServerStore``'s dispatch (``_call``, ``_here``) and
    ``_run``'s wrappers: the commit's own call, with the same outcomes
    (committed, the head moved, the lease lost)."""
    from pipeline.stores._server import ServerStore  # noqa: PLC0415

    del anyio_backend
    async with servers.redis_store(redis_url) as store:
        lease = (await store.acquire("t", "me", ttl=30)).unwrap()

        def unused(*_: object, **__: object) -> object:
            raise AssertionError

        monkeypatch.setattr(ServerStore, "_call", unused)
        monkeypatch.setattr(ServerStore, "_here", unused)
        monkeypatch.setattr(store, "_run", unused)
        for version in range(3):
            out = await store.commit(
                rec("t", version),
                expected_head=None if version == 0 else version - 1,
                lease=lease,
            )
            assert out == Success(None)
        moved = await store.commit(rec("t", 5), expected_head=1, lease=lease)
        assert moved == Failure(ConcurrentModification("t", 1, 2))
        stale = Lease("t", "me", lease.token + 1, lease.expires)
        lost = await store.commit(rec("t", 3), expected_head=2, lease=stale)
        assert lost == Failure(LeaseLost("t"))
        monkeypatch.undo()
        assert await store.head("t") == 2


@pytest.mark.redis
def test_trio_connects_to_an_address_in_numbers_itself(
    redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On trio a connection to an address in numbers (or a socket's path)
    is made as trio's own sockets connect, not by anyio's happy eyeballs
    (a task group and a task: 190 µs of a connection's 250, and a W5 run
    opens one); a name is still anyio's to resolve and try."""
    import trio  # noqa: PLC0415

    from pipeline.stores import _resp  # noqa: PLC0415

    where = _resp.target(redis_url)
    assert where is not None
    assert where.host == "127.0.0.1"

    def unused(*_: object, **__: object) -> Any:
        raise AssertionError

    monkeypatch.setattr(anyio, "connect_tcp", unused)

    async def main() -> None:
        conn = await _resp.Connection.open(where)
        try:
            assert await conn.ask("PING", bound=5) == b"PONG"
        finally:
            await conn.aclose()
        assert conn._socket.fileno() == -1  # closed
        named = _resp.Target("localhost", where.port)
        with pytest.raises(AssertionError):
            await _resp.Connection.open(named)

    trio.run(main)


@pytest.mark.postgres
def test_postgres_commit_v2_decides_as_v1(postgres_url: str) -> None:
    """``pipeline_commit_v2`` (insert first, the reason only on a refusal)
    answers and writes what ``pipeline_commit_v1`` (each read first) does,
    on every combination of a thread's head (none, 0, 2), its lease row
    (none, the caller's, another's), the caller's lease (none, its own, a
    stale token) and the commit's version and expected head (around the
    head, negative, and the largest bigint): the same outcome and head,
    the same rows after it."""
    import itertools  # noqa: PLC0415

    import psycopg  # noqa: PLC0415

    from psycopg import sql  # noqa: PLC0415

    name = servers.namespace()

    async def make() -> None:
        async with servers.postgres_store(
            postgres_url, schema=name, drop=False
        ):
            pass

    anyio.run(make)
    big = 2**63 - 1
    code = {"stored": -1, "lease": -2}
    try:
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            ck = sql.Identifier(name, "pipeline_checkpoints")
            leases = sql.Identifier(name, "pipeline_leases")
            call = {
                v: sql.SQL(
                    "SELECT {}{}(%s::text, %s::text, %s::bigint, "
                    "%s::bigint, %s::bytea, %s::text, %s::bigint, "
                    "%s::text, %s::bigint)"
                ).format(
                    sql.SQL("outcome, head FROM " if v == 1 else ""),
                    sql.Identifier(name, f"pipeline_commit_v{v}"),
                )
                for v in (1, 2)
            }
            rows = sql.SQL(
                "SELECT version FROM {} WHERE thread_id = 't' ORDER BY 1"
            ).format(ck)
            seen = 0
            for (
                head,
                lease_row,
                caller,
                version,
                expected,
            ) in itertools.product(
                (None, 0, 2),
                (None, ("me", 1), ("other", 2)),
                (None, ("me", 1), ("me", 2)),
                (-1, 0, 1, 2, 3, 4),
                (None, -1, 0, 1, 2, 3, big),
            ):
                answers = []
                for v in (1, 2):
                    with conn.transaction(force_rollback=True):
                        for n in range(-1 if head is None else head + 1):
                            conn.execute(
                                sql.SQL(
                                    "INSERT INTO {} VALUES "
                                    "('t', %s, NULL, '', 'x')"
                                ).format(ck),
                                (n,),
                            )
                        if lease_row is not None:
                            conn.execute(
                                sql.SQL(
                                    "INSERT INTO {} VALUES ('t', %s, %s, 1e12)"
                                ).format(leases),
                                lease_row,
                            )
                        out = conn.execute(
                            call[v],
                            (
                                "t",
                                f"{name}/t",
                                version,
                                None if version <= 0 else version - 1,
                                b"{}",
                                "sum",
                                expected,
                                *(caller or (None, None)),
                            ),
                        ).fetchone()
                        assert out is not None
                        if v == 1:
                            outcome, found = out
                            answer = code.get(
                                outcome, -3 if found is None else found
                            )
                        else:
                            (answer,) = out
                        after = [r[0] for r in conn.execute(rows)]
                        answers.append((answer, after))
                assert answers[0] == answers[1], (
                    head,
                    lease_row,
                    caller,
                    version,
                    expected,
                )
                seen += answers[1][0] == -1
            assert seen > 0  # some were stored
    finally:
        servers.drop_schema(postgres_url, name)


@pytest.mark.postgres
async def test_postgres_a_call_run_again_after_the_close_connects_no_more(
    postgres_url: str,
) -> None:
    """A lease call in flight while the store closes, whose connection
    breaks then, is not run once more on a new connection (its retry
    would make a pool that nobody closes, and take a lease for a closed
    store): it raises that the store is closed (found attacking)."""
    import psycopg  # noqa: PLC0415

    from pipeline.stores.postgres import PostgresStore  # noqa: PLC0415

    name = servers.namespace()
    store = await PostgresStore.connect(postgres_url, schema=name)
    first = store._one
    reached, closed = anyio.Event(), anyio.Event()

    async def broken_then(
        call: str,
        args: Sequence[object],
        *,
        fresh: bool = False,
        write: bool = False,
    ) -> tuple[Any, ...]:
        if not fresh:  # the call in flight: its connection breaks
            reached.set()
            await closed.wait()
            msg = "server closed the connection unexpectedly"
            raise psycopg.OperationalError(msg)
        return await first(call, args, fresh=fresh, write=write)

    store._one = broken_then  # type: ignore[method-assign]

    async def acquire() -> None:
        with pytest.raises(RuntimeError, match="the store is closed"):
            await store.acquire("t", "me", ttl=60)

    async with anyio.create_task_group() as tg:
        tg.start_soon(acquire)
        await reached.wait()
        await store.aclose()
        closed.set()
    # No connection made after the close, none left open.
    for pool in store._pools.values():
        assert pool._closed or not pool._idle
        assert all(conn.closed for conn in pool.cursors)
    await anyio.to_thread.run_sync(servers.drop_schema, postgres_url, name)


@pytest.mark.postgres
@pytest.mark.parametrize("anyio_backend", ["trio"])
async def test_postgres_closing_leaves_a_trio_runs_connections_in_use_be(
    postgres_url: str,
) -> None:
    """On trio the store closes a run's pool from its own thread: the
    connections in use keep their wires (a caller handed one meanwhile
    prepared its statements again on a connection that had them, and
    failed: found attacking), the idle ones are closed at the run's next
    turn, and one in use is closed as it comes back."""
    from pipeline.stores.postgres import PostgresStore  # noqa: PLC0415

    name = servers.namespace()
    store = await PostgresStore.connect(postgres_url, schema=name, pool_size=2)
    await store.commit(rec("t", 0), expected_head=None)
    (pool,) = store._pools.values()
    taken = await pool.get()  # the one that committed, with its wire
    wire = pool.cursors[taken]
    other = await pool.get()  # a second, made now, then idle
    await pool.put(other)
    idle = list(pool._idle)
    await store.aclose()
    assert pool.cursors.get(taken) is wire  # still the caller's
    await anyio.lowlevel.checkpoint()  # the run's turn: idle ones closed
    assert idle
    assert all(conn.closed for conn in idle)
    open_in_use = not taken.closed
    await pool.put(taken)
    assert open_in_use
    assert taken.closed
    assert not pool.cursors
    await anyio.to_thread.run_sync(servers.drop_schema, postgres_url, name)


@pytest.mark.parametrize(
    ("schema", "why"),
    [
        ("q" * 64, "64 bytes"),
        ("é" * 32, "64 bytes"),
        ("", "0 bytes"),
        ("a\x00b", "3 bytes"),
        ("a\ud800", "not UTF-8"),
    ],
    ids=["long", "long-bytes", "empty", "nul", "surrogate"],
)
def test_postgres_refuses_a_schema_name_it_would_cut_short(
    schema: str, why: str
) -> None:
    """PostgreSQL keeps 63 bytes of a name: two longer names sharing them
    are one schema but lock a thread with different keys (two runners
    both held one thread's lease: found attacking).  Such a name, an
    empty one, one with NUL or not UTF-8 is refused where the store is
    made, by its size, not shown; 63 bytes are taken."""
    from pipeline.stores.postgres import PostgresStore  # noqa: PLC0415

    with pytest.raises(ValueError, match=why) as info:
        PostgresStore("postgresql://nowhere", schema=schema)
    assert "qqqq" not in str(info.value)
    assert "schema" in str(info.value)
    assert PostgresStore("postgresql://nowhere", schema="q" * 63).schema
    assert PostgresStore("postgresql://nowhere", schema="é" * 31).schema


@pytest.mark.postgres
async def test_postgres_a_caller_queued_at_the_close_connects_no_more(
    postgres_url: str,
) -> None:
    """A call waiting for one of the pool's connections when the store
    closes does not connect afresh once the connection in use comes back
    (closed, as the store is): it raises that the store is closed, on
    asyncio as on trio (it ran after the close: found attacking)."""
    from pipeline.stores.postgres import PostgresStore  # noqa: PLC0415

    name = servers.namespace()
    store = await PostgresStore.connect(postgres_url, schema=name, pool_size=1)
    await store.head("t")
    (pool,) = store._pools.values()
    taken = await pool.get()  # the pool's one connection, in use
    refused: list[BaseException] = []

    async def queued() -> None:
        try:
            await store.commit(rec("t", 0), expected_head=None)
        except RuntimeError as exc:
            refused.append(exc)

    async with anyio.create_task_group() as tg:
        tg.start_soon(queued)
        await anyio.wait_all_tasks_blocked()
        assert pool._waiting  # it waits for the connection
        await store.aclose()
        await pool.put(taken)  # back to a closed pool: closed
    assert [str(e) for e in refused] == ["the store is closed"]
    assert taken.closed
    assert not pool._idle
    assert not pool.cursors
    await anyio.to_thread.run_sync(servers.drop_schema, postgres_url, name)


@pytest.mark.postgres
@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_postgres_closing_from_a_later_run_closes_an_earlier_ones_pool(
    postgres_url: str, backend: str
) -> None:
    """A store used in one event loop (or trio run) and closed from
    another: the first one's connections are closed by the close, its
    wires watching nothing (a wire holds its loop: the pool was never
    collected with a loop that ended, nor its connections closed: found
    attacking)."""
    from pipeline.stores.postgres import PostgresStore  # noqa: PLC0415

    name = servers.namespace()

    async def first() -> PostgresStore:
        store = await PostgresStore.connect(postgres_url, schema=name)
        await store.head("t")  # a hot call: the connection has a wire
        await store.records("t")
        return store

    store = anyio.run(first, backend=backend)
    pools = list(store._pools.values())
    conns = [conn for pool in pools for conn in pool._idle]
    anyio.run(store.aclose, backend=backend)
    assert conns
    assert all(conn.closed for conn in conns)
    assert all(not pool._idle and not pool.cursors for pool in pools)
    servers.drop_schema(postgres_url, name)


@pytest.mark.anyio
async def test_the_bridge_closes_its_thread_without_a_worker_thread() -> None:
    """Closing the store's thread waits for its loop's end as the thread
    tells it (its last act), not on a worker thread of the caller's that
    joins it (a hop between threads less per close: on trio, a store's
    every opening makes such a thread); the thread is over, its loop
    closed, its last work done, when ``close`` returns."""
    from pipeline.stores._bridge import LoopThread  # noqa: PLC0415

    thread = LoopThread("pipeline:test")

    async def answer() -> int:
        return 7

    assert await thread.run(answer, shield=False) == 7
    closed: list[bool] = []

    async def last() -> None:
        closed.append(True)

    def no_worker(*_: object, **__: object) -> None:
        raise AssertionError("a worker thread")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(anyio.to_thread, "run_sync", no_worker)
        await thread.close(last)
    assert closed == [True]
    assert not thread._thread.is_alive()
    assert thread._loop.is_closed()


def test_the_bridge_thread_ends_quietly_when_its_closer_is_gone() -> None:
    """The store's thread tells its closer's loop that it is over as its
    last act; a closer whose loop or run is gone meanwhile (its wake
    raises ``RuntimeError``, as asyncio's closed loop and trio's finished
    run do) is nobody to tell: the thread ends without an error."""
    from pipeline.stores._bridge import LoopThread  # noqa: PLC0415

    errors: list[object] = []
    thread = LoopThread("pipeline:test")

    def gone() -> None:
        raise RuntimeError("Event loop is closed")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(threading, "excepthook", errors.append)
        thread._ended = gone
        thread._loop.call_soon_threadsafe(thread._loop.stop)
        thread._thread.join(10)
    assert not thread._thread.is_alive()
    assert thread._over
    assert thread._loop.is_closed()
    assert errors == []


def _redis_clients(url: str, name: str) -> int:
    """How many of the server's clients are named *name*."""
    import redis  # noqa: PLC0415

    with redis.Redis.from_url(url) as admin:
        return sum(c["name"] == name for c in admin.client_list())


# The home loop ends with the store open: its transports are collected
# unclosed, which asyncio reports (here, not in a later test).
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
@pytest.mark.filterwarnings("ignore::ResourceWarning")
@pytest.mark.redis
@pytest.mark.parametrize("ending", ["stopped", "closed"])
@pytest.mark.parametrize("closer", ["asyncio", "trio"])
def test_redis_closing_after_the_home_loop_ends_its_connections(
    redis_url: str, ending: str, closer: str
) -> None:
    """A Redis store used on an asyncio loop that stops (or is closed)
    with the store open, then closed from another run: the home loop's
    connections are ended by the close, not kept open for as long as the
    store lives (found looking for the PostgreSQL store's F7 here)."""
    from pipeline.stores.redis import RedisStore  # noqa: PLC0415

    name = servers.namespace()
    store = RedisStore(redis_url, prefix=name)

    async def home(store: RedisStore) -> None:
        await store.open()
        assert (
            await store.commit(rec("t", 0), expected_head=None)
        ).unwrap() is None
        # The store's connection, named so that the server can count it.
        await store._ask("CLIENT", "SETNAME", name)

    loop = asyncio.new_event_loop()
    loop.run_until_complete(home(store))
    if ending == "closed":
        loop.close()
    assert store._here_wires
    assert _redis_clients(redis_url, name) == 1
    anyio.run(store.aclose, backend=closer)
    assert not store._here_wires
    assert _redis_clients(redis_url, name) == 0  # the server dropped it
    loop.close()
    del store  # its transports are collected now, in this test
    gc.collect()


@pytest.mark.redis
def test_redis_bound_timers_of_loops_in_two_threads_fire_at_once(
    redis_url: str,
) -> None:
    """Two asyncio loops in two threads, a Redis connection each, whose
    bounds' timers run at the same moment: each runs (a context shared by
    every connection could be entered by one thread at a time: the other
    timer failed, and its connection's commands were bound no more; found
    attacking).  The timers are held in their callbacks together by a
    barrier: no timing."""
    from pipeline.stores import _resp  # noqa: PLC0415

    target = _resp.target(redis_url)
    assert target is not None
    barrier = threading.Barrier(2)
    done: dict[int, asyncio.Future[None]] = {}
    original = _resp.LoopConnection._bound

    def bound(self: Any) -> None:
        barrier.wait(timeout=30)  # both timers in their callbacks at once
        original(self)
        fired = done[threading.get_ident()]
        if not fired.done():
            fired.set_result(None)

    async def one() -> None:
        done[threading.get_ident()] = (
            asyncio.get_running_loop().create_future()
        )
        conn = await _resp.LoopConnection.open(target, 5.0)
        try:
            assert await conn.ask(("PING",), bound=0.01) in {b"PONG", "PONG"}
            await asyncio.wait_for(done[threading.get_ident()], 30)
        finally:
            conn.abandon()

    failures: list[BaseException] = []

    def thread() -> None:
        try:
            asyncio.run(one())
        except BaseException as exc:  # noqa: BLE001  # reported below
            failures.append(exc)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_resp.LoopConnection, "_bound", bound)
        threads = [threading.Thread(target=thread) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert failures == []


# The home loop ends with a command in flight: its transport is collected
# unclosed, which asyncio reports (a ResourceWarning); what the test looks
# for is any other exception left unraised (the unraisable hook's).
@pytest.mark.filterwarnings("ignore::ResourceWarning")
@pytest.mark.redis
@pytest.mark.parametrize("ending", ["stopped", "closed"])
@pytest.mark.parametrize("closer", ["asyncio", "trio"])
def test_redis_closing_after_the_home_loop_ends_its_command_in_flight(
    redis_url: str, ending: str, closer: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Redis store whose home loop stops (or is closed) while a command
    waits for its reply, then closed from another run: that command's
    connection is ended by the close too (it was lent to the command, not
    idle, and stayed open until the loop was closed or the task collected;
    found attacking), the command raises the broken connection's error if
    the loop runs again, and a task collected on the closed loop leaves no
    "Exception ignored" behind (its connection's end scheduled a callback
    on the closed loop).  The command is a pop the server holds (nothing is
    pushed), sent in the loop's one turn: no timing."""
    import redis as redis_py  # noqa: PLC0415

    from pipeline.stores.redis import RedisStore  # noqa: PLC0415

    unraisable: list[Any] = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    name = servers.namespace()
    store = RedisStore(redis_url, prefix=name)

    async def home(store: RedisStore) -> None:
        await store.open()
        # The store's one connection, named so that the server can count it.
        await store._ask("CLIENT", "SETNAME", name)

    loop = asyncio.new_event_loop()
    loop.run_until_complete(home(store))
    held = loop.create_task(store._ask("BLPOP", f"{name}:nothing", 0))
    loop.run_until_complete(asyncio.sleep(0))  # it sends, then waits
    assert not held.done()
    assert not store._here_wires  # lent to the command
    assert _redis_clients(redis_url, name) == 1
    if ending == "closed":
        loop.close()
    anyio.run(store.aclose, backend=closer)
    assert _redis_clients(redis_url, name) == 0  # the server dropped it
    if ending == "stopped":  # the loop runs again: the command ends
        with pytest.raises(redis_py.exceptions.ConnectionError):
            loop.run_until_complete(held)
        loop.close()
    del held, store  # collected now, in this test
    gc.collect()
    assert [u.exc_value for u in unraisable] == []


def test_trio_as_a_guest_of_asyncio_is_told_from_asyncio() -> None:
    """The server stores' look at the caller's library: asyncio's loop on
    asyncio, None on trio, and None on trio in guest mode on an asyncio
    loop too (asyncio's running loop is the host's there, while the task
    is trio's: the stores took asyncio's way and failed; found
    attacking), and asyncio's loop in an asyncio run blocking a trio
    task."""
    import trio  # noqa: PLC0415

    from pipeline.stores._server import asyncio_loop  # noqa: PLC0415

    async def on_trio() -> asyncio.AbstractEventLoop | None:
        return asyncio_loop()

    async def host() -> tuple[bool, asyncio.AbstractEventLoop | None]:
        loop = asyncio.get_running_loop()
        done: asyncio.Future[Any] = loop.create_future()
        trio.lowlevel.start_guest_run(
            on_trio,
            run_sync_soon_threadsafe=loop.call_soon_threadsafe,
            done_callback=done.set_result,
        )
        in_guest = (await done).unwrap()
        return asyncio_loop() is loop, in_guest

    assert asyncio.run(host()) == (True, None)
    assert trio.run(on_trio) is None
    assert asyncio_loop() is None  # no loop at all

    async def on_asyncio() -> bool:
        return asyncio_loop() is asyncio.get_running_loop()

    async def asyncio_inside_trio() -> bool:
        # A loop run from inside trio's (blocking it): trio's name is set.
        return asyncio.run(on_asyncio())

    assert trio.run(asyncio_inside_trio)


def _as_trio_guest(
    run: Callable[[], Awaitable[Any]],
) -> Callable[[], Coroutine[Any, Any, Any]]:
    """An asyncio function that runs *run* as a trio guest run of the
    caller's loop (``trio.lowlevel.start_guest_run``) and returns what it
    returns."""
    import trio  # noqa: PLC0415

    async def host() -> Any:
        loop = asyncio.get_running_loop()
        done: asyncio.Future[Any] = loop.create_future()
        trio.lowlevel.start_guest_run(
            run,
            run_sync_soon_threadsafe=loop.call_soon_threadsafe,
            done_callback=done.set_result,
        )
        return (await done).unwrap()

    return host


async def _every_call(store: stores.CheckpointStore, thread: str) -> None:
    """Every call of *store* on *thread*, each checked, the lease's by
    :func:`~pipeline.stores.leased` too; the thread deleted at the end."""
    assert (
        await store.commit(rec(thread, 0), expected_head=None)
    ).unwrap() is None
    assert await store.head(thread) == 0
    assert [r.version for r in await store.records(thread)] == [0]
    assert thread in await store.threads()
    lease = (await store.acquire(thread, "guest", ttl=5)).unwrap()
    lease = (await store.renew(lease, ttl=5)).unwrap()
    committed = await store.commit(
        rec(thread, 1), expected_head=0, lease=lease
    )
    assert committed.unwrap() is None
    await store.release(lease)

    async def body(held: Any) -> Any:
        del held
        return Success(await store.head(thread))

    assert (await stores.leased(store, thread, body)).unwrap() == 1
    await store.delete(thread)
    assert await store.head(thread) is None


def test_trio_as_a_guest_of_asyncio_uses_a_server_store(
    server: Server,
) -> None:
    """trio in guest mode on an asyncio loop: a store opened in the guest
    run serves it (trio's way); one opened on the host loop serves the
    guest run and the host; one opened in the guest run serves the host's
    tasks too, and closes from a later guest run.  Every call of each
    (found attacking: opening took asyncio's way inside trio, Redis
    raised "Timeout should be used inside a task" and PostgreSQL trio's
    "unrecognized yield message")."""
    from pipeline.stores.postgres import PostgresStore  # noqa: PLC0415
    from pipeline.stores.redis import RedisStore  # noqa: PLC0415

    kind, url = server
    name = servers.namespace()

    def make() -> PostgresStore | RedisStore:
        if kind == "postgres":
            return PostgresStore(url, schema=name)
        return RedisStore(url, prefix=name)

    async def in_guest() -> None:
        async with make() as store:
            await _every_call(store, "opened in the guest")

    asyncio.run(_as_trio_guest(in_guest)())

    async def on_host() -> None:
        store = make()
        await store.open()

        async def guest() -> None:
            await _every_call(store, "used in the guest")

        await _as_trio_guest(guest)()
        await _every_call(store, "used on the host")
        await store.aclose()

    asyncio.run(on_host())

    box: dict[str, Any] = {}

    async def opened() -> None:
        box["store"] = store = make()
        await store.open()
        await _every_call(store, "opened by a guest")

    async def closed() -> None:
        await _every_call(box["store"], "closed by a guest")
        await box["store"].aclose()

    async def host() -> None:
        await _as_trio_guest(opened)()
        await _every_call(box["store"], "used on the host")
        await _as_trio_guest(closed)()

    asyncio.run(host())
    if kind == "postgres":
        servers.drop_schema(url, name)
