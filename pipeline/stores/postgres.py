"""PostgreSQL checkpoint store: for runners on several processes or machines.

psycopg 3's async connections (``psycopg.AsyncConnection``), reused from a
small pool of the store's own per event loop (see ``_Pool``).  Three tables
in the store's *schema*::

    pipeline_checkpoints(thread_id, version, parent, data bytea, checksum)
        primary key (thread_id, version), plus a partial index on the
        thread ids of version 0 (every thread has one) for threads()
    pipeline_leases(thread_id primary key, owner, token, expires float8)
    pipeline_cache(key primary key, expires float8, checksum, data bytea)
        the entries of a :class:`~pipeline.stores.StoreCache`

Every change to a thread (commit, acquire, renew, release, delete) is one
transaction that first takes a transaction-scoped **advisory lock** on a
hash of the schema and the thread id (``pg_advisory_xact_lock``), then
reads the thread's head and lease and decides (the same decisions as every
store: :func:`~pipeline.stores.take`, :func:`~pipeline.stores.holds`).
So the writers of one thread queue on that lock, writers of different
threads do not wait for each other, and no row exists only to be locked
(a deleted thread leaves nothing behind).  The primary key is a second
guard: two records of one version can never both be stored.  Leases run on
the **server's clock** (``clock_timestamp()``, read under the lock), so
runners on machines whose clocks differ still agree on who holds a thread.

A commit, an acquisition, a renewal and a release are each **one
statement**, one round trip: a function of the schema's
(``pipeline_commit_v2``, ``pipeline_acquire_v1``, ...) that does all of the
above in the statement's own transaction.  A function's name carries its
version, so stores of two releases can share a schema, and a store opening
a schema an earlier release made adds the functions it lacks (which needs
the right to create them there, as creating the tables did).  Every write
waits for the disk (as the server's ``synchronous_commit`` says) except a
release's, which the next durable write flushes with it (see
``_LEASE_FUNCTIONS``: a server crash can forget only a release nothing
durable came after, and the lease then lapses as its holder's would).

**A runner stopped inside a transaction** (SIGSTOP, a swapped-out VM, a
debugger) would hold its thread's lock for as long as it stays stopped.
The server ends a transaction that idles longer than a lease lasts (at
least two seconds: ``idle_in_transaction_session_timeout``), so the others
wait no longer than that.  When the stopped runner wakes up, its
transaction is gone and nothing of it was stored; it runs once more on a
fresh connection and finds its lease taken over (``LeaseLost``).

**asyncio and trio.** The hot calls (a commit, a head, a lease call: one
statement each) run in the caller's own task, on the asyncio loop the store
was opened on and natively on trio: spoken through libpq
(:mod:`pipeline.stores._pq`) on connections psycopg made and configured,
with no task per call and no hop between threads.  A pool belongs to the
loop (or trio run) that uses it (see ``_Pools``); a trio run's connections
are made on the store's thread, once each.  The other calls (records,
threads, delete, the cache) and the opening on trio use psycopg's async
API: on the home loop, each as a task of its own; from trio, or from other
loops or threads, on an asyncio loop of the store's own, in a daemon
thread, with a pool of its own (one hop between threads per call).  A
caller's cancellation (anyio's, or asyncio's native ``task.cancel()``)
never cuts a write: a write in the caller's task holds it back until its
reply is in (:mod:`pipeline.stores._firm`), then raises; one in a task of
its own runs to its end there.  A cancelled read stops at once, and a
connection left half-read is dropped, never returned to the pool (see
:mod:`pipeline.stores._server`).
"""

from __future__ import annotations

from .._extras import require


require(
    __name__,
    "psycopg 3 and psycopg-pool",
    "postgres",
    ("psycopg", "psycopg_pool"),
)

import asyncio
import collections
import contextlib
import functools
import math
import threading
import weakref

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, LiteralString, TypeVar, final

import anyio
import psycopg

from psycopg import sql
from psycopg.pq import TransactionStatus
from psycopg_pool import PoolTimeout
from returns.result import Failure, Result, Success

from ..failures import ConcurrentModification, LeaseLost, ThreadBusy
from . import _pq
from ._poll import readable
from ._protocol import (
    DEFAULT_LEASE_TTL,
    Lease,
    LeaseRow,
    Record,
    check_lease_ttl,
    holds,
    take,
)
from ._server import ServerStore, asyncio_loop, trio_module


__all__ = ("PostgresStore",)

T = TypeVar("T")
_Conn = psycopg.AsyncConnection[tuple[Any, ...]]

_LOCK = sql.SQL("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))")


_COMMIT = "pipeline_commit_v1"
_COMMIT_ARGS = "text, text, bigint, bigint, bytea, text, bigint, text, bigint"
_COMMIT_FUNCTION = """
CREATE OR REPLACE FUNCTION {commit}(
    p_thread text, p_lock text, p_version bigint, p_parent bigint,
    p_data bytea, p_checksum text, p_expected bigint,
    p_owner text, p_token bigint
) RETURNS TABLE (outcome text, head bigint)
LANGUAGE plpgsql VOLATILE AS $body$
DECLARE
    h bigint;
    o text;
    t bigint;
BEGIN
    -- Each statement reads afresh (read committed, a volatile function):
    -- what the lock's previous holder committed is seen.
    PERFORM pg_advisory_xact_lock(hashtextextended(p_lock, 0));
    SELECT max(c.version) INTO h FROM {ck} AS c WHERE c.thread_id = p_thread;
    IF p_owner IS NOT NULL THEN
        SELECT l.owner, l.token INTO o, t
        FROM {leases} AS l WHERE l.thread_id = p_thread;
        IF o IS DISTINCT FROM p_owner OR t IS DISTINCT FROM p_token THEN
            RETURN QUERY SELECT 'lease'::text, h;
            RETURN;
        END IF;
    END IF;
    IF h IS DISTINCT FROM p_expected
        OR p_version <> coalesce(h + 1, 0) THEN
        RETURN QUERY SELECT 'head'::text, h;
        RETURN;
    END IF;
    INSERT INTO {ck} (thread_id, version, parent, data, checksum)
    VALUES (p_thread, p_version, p_parent, p_data, p_checksum);
    RETURN QUERY SELECT 'stored'::text, h;
END
$body$
"""
"""The previous release's commit (schema versions 1 to 3), kept so that
its stores find it in a schema this release made: the same decisions as
``_COMMIT_V2_FUNCTION``, each read first, then the insert."""


_COMMIT_V2 = "pipeline_commit_v2"
_COMMIT_V2_FUNCTION = """
CREATE OR REPLACE FUNCTION {commit}(
    p_thread text, p_lock text, p_version bigint, p_parent bigint,
    p_data bytea, p_checksum text, p_expected bigint,
    p_owner text, p_token bigint
) RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $body$
DECLARE
    h bigint;
BEGIN
    -- Each statement reads afresh (read committed, a volatile function):
    -- what the lock's previous holder committed is seen.
    PERFORM pg_advisory_xact_lock(hashtextextended(p_lock, 0));
    -- The whole decision in the insert's WHERE: the version follows the
    -- expected head, the lease is the caller's, the head is the expected.
    INSERT INTO {ck} (thread_id, version, parent, data, checksum)
    SELECT p_thread, p_version, p_parent, p_data, p_checksum
    WHERE CASE WHEN p_version > 0 THEN p_expected = p_version - 1
            ELSE p_version = 0 AND p_expected IS NULL END
        AND (p_owner IS NULL OR EXISTS (
            SELECT FROM {leases} AS l WHERE l.thread_id = p_thread
            AND l.owner = p_owner AND l.token = p_token))
        AND (SELECT max(c.version) FROM {ck} AS c
             WHERE c.thread_id = p_thread) IS NOT DISTINCT FROM p_expected;
    IF FOUND THEN
        RETURN -1;
    END IF;
    -- Refused: why (still under the lock), the lease before the head.
    IF p_owner IS NOT NULL AND NOT EXISTS (
        SELECT FROM {leases} AS l WHERE l.thread_id = p_thread
        AND l.owner = p_owner AND l.token = p_token) THEN
        RETURN -2;
    END IF;
    SELECT max(c.version) INTO h FROM {ck} AS c WHERE c.thread_id = p_thread;
    RETURN coalesce(h, -3);
END
$body$
"""
"""A commit in one round trip: the thread's lock, its head and lease
checked, the record inserted, in one statement's transaction (the caller's
connection is in autocommit).  One number back: ``_STORED`` (-1),
``_LEASE`` (-2, the lease is not the caller's), else the head it found
(``_NO_HEAD``, -3: none).  The insert goes first, its WHERE the whole
decision (two statements when it is stored); the reason is read only when
nothing was (schema version 4: about 12 µs of the server's work less per
commit than ``pipeline_commit_v1``'s reads, then insert, then a row set).
The name carries a version: a change of its body is a new function, so
stores of two releases can share a schema."""

_STORED = -1
_LEASE = -2
_NO_HEAD = -3


_LEASE_FUNCTION = """
CREATE OR REPLACE FUNCTION {name}({params})
RETURNS TABLE (
    row_owner text, row_token bigint, row_expires float8, server_now float8
)
LANGUAGE plpgsql VOLATILE AS $body$
DECLARE
    o text;
    t bigint;
    e float8;
    n float8;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended(p_lock, 0));
    n := extract(epoch FROM clock_timestamp())::float8;
    SELECT l.owner, l.token, l.expires INTO o, t, e
    FROM {leases} AS l WHERE l.thread_id = p_thread;
    {change}
    RETURN QUERY SELECT o, t, e, n;
END
$body$
"""
"""A change of a thread's lease in one round trip, as its own transaction:
the thread's lock, its lease row read on the server's clock, the change
made if the store's decision (``take``, ``holds``) allows it.  It returns
the row as it found it (nulls if none) and the clock, from which the caller
makes its answer with that same decision (so the decision's Python is the
answer's only source, and the SQL only repeats it to write)."""

_LEASE_FUNCTIONS: tuple[
    tuple[LiteralString, LiteralString, str, LiteralString], ...
] = (
    (
        "pipeline_acquire_v1",
        "p_thread text, p_lock text, p_owner text, p_ttl float8",
        "text, text, text, double precision",
        # take(): granted unless another owner's lease is live; the live
        # owner keeps its token, anyone else gets the next one.
        """IF o IS NULL OR e <= n OR o = p_owner THEN
        INSERT INTO {leases} AS l (thread_id, owner, token, expires)
        VALUES (
            p_thread, p_owner,
            CASE WHEN o = p_owner AND e > n THEN t
                ELSE coalesce(t, 0) + 1 END,
            n + p_ttl)
        ON CONFLICT (thread_id) DO UPDATE SET owner = EXCLUDED.owner,
            token = EXCLUDED.token, expires = EXCLUDED.expires;
    END IF;""",
    ),
    (
        "pipeline_renew_v1",
        (
            "p_thread text, p_lock text, p_owner text, p_token bigint, "
            "p_ttl float8"
        ),
        "text, text, text, bigint, double precision",
        # holds(): extended if still the caller's.
        """IF o = p_owner AND t = p_token THEN
        UPDATE {leases} AS l SET expires = n + p_ttl
        WHERE l.thread_id = p_thread;
    END IF;""",
    ),
    (
        "pipeline_release_v2",
        "p_thread text, p_lock text, p_owner text, p_token bigint",
        "text, text, text, bigint",
        # holds(): expired now if still the caller's (its token stays, for
        # the next holder's to grow from).  Its commit does not wait for
        # the disk (one fsync less per run; see below).
        """IF o = p_owner AND t = p_token THEN
        PERFORM set_config('synchronous_commit', 'off', true);
        UPDATE {leases} AS l SET expires = 0.0
        WHERE l.thread_id = p_thread;
    END IF;""",
    ),
    (
        "pipeline_release_v1",
        "p_thread text, p_lock text, p_owner text, p_token bigint",
        "text, text, text, bigint",
        # The previous release's, for its stores sharing the schema.
        """IF o = p_owner AND t = p_token THEN
        UPDATE {leases} AS l SET expires = 0.0
        WHERE l.thread_id = p_thread;
    END IF;""",
    ),
)
"""Each lease function (schema version 3): its name (with a version, as
the commit function's), parameters, their types, and its change.  The
first three are this release's acquire, renew and release; the last is
the previous release's release, kept so that its stores find their
functions in a schema this release made (a store of either release
opening the other's schema creates nothing).

A release commits without waiting for the disk (``synchronous_commit =
off`` for its own transaction only), and no other write does.  Such a
commit is visible at once but reaches the disk a moment later (the server's
WAL writer flushes it within ``wal_writer_delay``), so a server crash in
between forgets it.  The write-ahead log is one sequence: any later commit
that waits for the disk (every record's, every acquisition's and
renewal's) flushes the release with it.  So a crash can forget only a
release that nothing durable came after, and then the lease is as its
holder had it: held until it expires, as when a runner dies without
releasing.  Nothing depends on a release having happened: the runner that
released has stopped running the thread, and a runner that acquired the
thread after it did so durably, flushing the release too.  An acquisition
or a renewal must wait for the disk: a runner starts a step on the lease
it took, and a forgotten lease would let another runner take the thread
and run the same step at the same time."""


@final
class _Statements:
    """The store's SQL, with its schema's tables in it."""

    def __init__(self, schema: str) -> None:
        ck = sql.Identifier(schema, "pipeline_checkpoints")
        leases = sql.Identifier(schema, "pipeline_leases")
        cache = sql.Identifier(schema, "pipeline_cache")
        commit = sql.Identifier(schema, _COMMIT)
        commit_v2 = sql.Identifier(schema, _COMMIT_V2)
        self.tables = (
            sql.SQL(
                "CREATE TABLE IF NOT EXISTS {} ("
                "thread_id text NOT NULL, "
                "version bigint NOT NULL, "
                "parent bigint, "
                "data bytea NOT NULL, "
                "checksum text NOT NULL, "
                "PRIMARY KEY (thread_id, version))"
            ).format(ck),
            sql.SQL(
                "CREATE INDEX IF NOT EXISTS {} ON {} (thread_id) "
                "WHERE version = 0"
            ).format(sql.Identifier("pipeline_checkpoints_threads"), ck),
            sql.SQL(
                "CREATE TABLE IF NOT EXISTS {} ("
                "thread_id text PRIMARY KEY, "
                "owner text NOT NULL, "
                "token bigint NOT NULL, "
                "expires double precision NOT NULL)"
            ).format(leases),
            sql.SQL(
                "CREATE TABLE IF NOT EXISTS {} ("
                "key text PRIMARY KEY, "
                "expires double precision, "
                "checksum text NOT NULL, "
                "data bytea NOT NULL)"
            ).format(cache),
            sql.SQL(_COMMIT_FUNCTION).format(
                commit=commit, ck=ck, leases=leases
            ),
        )
        # Schema version 2: the lease's changes in one statement each;
        # version 3: a release that does not wait for the disk; version 4:
        # a commit that inserts first (pipeline_commit_v2).  A schema an
        # earlier release made (version 1: no lease functions; version 2:
        # no pipeline_release_v2; version 3: no pipeline_commit_v2) gets
        # what it lacks when a store of this release opens it.
        self.upgrades = (
            sql.SQL(_COMMIT_V2_FUNCTION).format(
                commit=commit_v2, ck=ck, leases=leases
            ),
            *(
                sql.SQL(_LEASE_FUNCTION).format(
                    name=sql.Identifier(schema, name),
                    params=sql.SQL(params),
                    leases=leases,
                    change=sql.SQL(change).format(leases=leases),
                )
                for name, params, _, change in _LEASE_FUNCTIONS
            ),
        )
        self.names = (
            f"{_quote(schema)}.pipeline_checkpoints",
            f"{_quote(schema)}.pipeline_checkpoints_threads",
            f"{_quote(schema)}.pipeline_leases",
            f"{_quote(schema)}.pipeline_cache",
        )
        self.functions = (
            f"{_quote(schema)}.{_COMMIT}({_COMMIT_ARGS})",
            f"{_quote(schema)}.{_COMMIT_V2}({_COMMIT_ARGS})",
            *(
                f"{_quote(schema)}.{name}({types})"
                for name, _, types, _ in _LEASE_FUNCTIONS
            ),
        )
        # Which of the schema's objects exist: sent with the first
        # connection's settings (see _configure), in their round trip.
        self.check = sql.SQL("SELECT {}").format(
            sql.SQL(", ").join(
                [
                    sql.SQL("to_regclass({})").format(sql.Literal(name))
                    for name in self.names
                ]
                + [
                    sql.SQL("to_regprocedure({})").format(sql.Literal(name))
                    for name in self.functions
                ]
            )
        )
        # The statements of one call each, by name (see PostgresStore._one).
        self.calls: dict[str, sql.Composed] = {
            "commit": sql.SQL(
                "SELECT {}(%s, %s, %s, %s, %s, %s, %s, %s, %s)"
            ).format(commit_v2),
            **{
                name: sql.SQL("SELECT * FROM {}({})").format(
                    sql.Identifier(schema, function),
                    sql.SQL(", ").join(
                        [sql.Placeholder()] * len(types.split(","))
                    ),
                )
                for name, (function, _, types, _) in zip(
                    ("acquire", "renew", "release"),
                    _LEASE_FUNCTIONS[:3],  # not the previous release's
                    strict=True,
                )
            },
        }
        self.records = sql.SQL(
            "SELECT version, parent, data, checksum FROM {} "
            "WHERE thread_id = %(t)s "
            "AND (%(upto)s::bigint IS NULL OR version <= %(upto)s::bigint) "
            "ORDER BY version"
        ).format(ck)
        self.head = sql.SQL(
            "SELECT max(version) FROM {} WHERE thread_id = %s"
        ).format(ck)
        self.threads = sql.SQL(
            "SELECT thread_id FROM {} WHERE version = 0"
        ).format(ck)
        self.cache_get = sql.SQL(
            "SELECT data, checksum FROM {} WHERE key = %s "
            "AND (expires IS NULL OR expires >= %s)"
        ).format(cache)
        self.cache_put = sql.SQL(
            "INSERT INTO {} (key, expires, checksum, data) "
            "VALUES (%s, %s, %s, %s) "
            "ON CONFLICT (key) DO UPDATE SET expires = EXCLUDED.expires, "
            "checksum = EXCLUDED.checksum, data = EXCLUDED.data"
        ).format(cache)
        self.delete = (
            sql.SQL("DELETE FROM {} WHERE thread_id = %s").format(ck),
            sql.SQL("DELETE FROM {} WHERE thread_id = %s").format(leases),
        )
        self.hot: dict[str, sql.Composed] = {**self.calls, "head": self.head}
        """The statements of the hot calls, by name (see ``_one``)."""
        self.rendered: dict[tuple[str, str], tuple[bytes, bytes]] = {}
        """Each hot call's statement name and text as libpq takes them,
        by call and client encoding (rendered once: see ``_one``)."""
        self.settings: dict[tuple[int, bool, str, bool], bytes] = {}
        """A new connection's settings query, by its settings and client
        encoding, with the check or not (see :func:`_configure`)."""


@functools.lru_cache(maxsize=64)
def _statements(schema: str) -> _Statements:
    """The SQL of *schema*'s stores, made once: its composing costs a
    store (or a W5 run, which opens one) some 0.2 ms of the client's CPU,
    and rendering it as many again.  Shared by the stores of a schema
    (across threads: nothing in it changes but its caches of rendered
    text, filled once, where a race renders the same bytes twice)."""
    return _Statements(schema)


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _lease_row(
    owner: str | None, token: int | None, expires: float | None
) -> LeaseRow | None:
    if owner is None or token is None or expires is None:
        return None
    return LeaseRow(owner, token, expires)


_STALL_FLOOR = 2.0
"""Seconds a transaction may idle at least, however short the leases."""


_GENERIC_PLANS = 120000
"""The first server version with ``plan_cache_mode`` (12)."""


async def _configure(
    conn: _Conn,
    statements: _Statements,
    *,
    stall: float,
    then: sql.Composable | None = None,
) -> tuple[Any, ...] | None:
    """Set *conn* up for the store (see below), and run the query *then*
    (no parameters; always *statements*' check when given) in the same
    round trip: its row, if given."""
    # Each statement under the thread's lock must see what the previous
    # holder committed: read committed, whatever the server's default.
    await conn.set_isolation_level(psycopg.IsolationLevel.READ_COMMITTED)
    # The same for a commit's single statement, which runs in autocommit
    # (in its own transaction, at the session's default level).  And a
    # runner stopped inside a transaction (SIGSTOP, a swapped-out VM)
    # would hold its thread's advisory lock for as long as it stays
    # stopped, and every other runner of the thread would queue behind it
    # for ever: the server ends such a transaction once it has idled
    # longer than a lease lasts (the runner's lease has lapsed by then).
    # And the server plans the statements in the schema's functions once
    # per connection, not afresh for each of their first five calls (a
    # custom plan each, then a generic one: every statement of ours looks
    # rows up by key, so the generic plan is the one the server keeps
    # anyway; about 0.5 ms less per connection; PostgreSQL 12 and later).
    # All in one round trip (no parameters: one simple query).
    # (Rendered once per settings and encoding: composing and rendering
    # it cost more of the client's CPU than its round trip.)
    millis = math.ceil(stall * 1000)
    generic = conn.info.server_version >= _GENERIC_PLANS
    key = (millis, generic, conn.info.encoding, then is not None)
    query = statements.settings.get(key)
    if query is None:
        query = statements.settings[key] = (
            sql.SQL(
                "SET default_transaction_isolation = 'read committed'; "
                "SET idle_in_transaction_session_timeout = {}{}{}"
            )
            .format(
                sql.Literal(millis),
                sql.SQL(
                    "; SET plan_cache_mode = force_generic_plan"
                    if generic
                    else ""
                ),
                sql.SQL("") if then is None else sql.SQL("; {}").format(then),
            )
            .as_bytes(conn)
        )
    cur = await conn.execute(query)
    if then is None:
        return None
    while cur.nextset():  # to the last statement's result: *then*'s
        pass
    return await cur.fetchone()


def _readable(conn: _Conn) -> bool:
    """Whether an idle *conn* has something to read: the server ended it
    (or sent what it sends unasked, rarely: the connection is dropped
    either way and the next one made afresh)."""
    return readable(conn.pgconn.socket)


async def _twice(attempt: Callable[[bool], Awaitable[T]]) -> T:
    """``attempt(False)``, then ``attempt(True)`` (on a fresh connection)
    if its connection broke: for work that can run twice with the same
    outcome.  A pool that timed out is not retried."""
    for retry in (True, False):
        try:
            return await attempt(not retry)
        except PoolTimeout:
            raise
        except psycopg.OperationalError:
            if not retry:
                raise
    raise AssertionError  # pragma: no cover  # the loop returns or raises


@final
class _Pool:
    """The connections of one event loop: the idle ones in a list, up to
    *size* in all, each configured once (see :func:`_configure`).

    What a store needs of a pool and no more: a checkout is a ``pop`` and a
    return an ``append`` (no lock, statistics, logging or background
    tasks, which cost a PostgreSQL commit more than its own client work),
    and a store's first connection, which checks its tables, stays as the
    pool's.  A connection that comes back broken, closed or inside a
    transaction is closed (the server rolls back what it left), and its
    place is free: the next caller connects afresh.  So is an idle one the
    server closed meanwhile (``pg_terminate_backend``, a restart,
    ``idle_session_timeout``), found before it is handed out: an idle
    connection has nothing to read, and one the server ended has its
    goodbye (an error, then the end of the stream) waiting.  A caller finding all
    *size* in use waits for one, up to *timeout* seconds
    (``PoolTimeout``).  *cursors* keeps what each connection needs for the
    store's one-statement calls (its :class:`~pipeline.stores._pq.Wire`),
    dropped with its connection.  It serves one asyncio loop or one trio
    run (it waits with anyio's primitives), and its connections are closed
    without waiting (``close`` awaits nothing), so a trio run's pool closes
    them too.
    """

    __slots__ = (
        "_closed",
        "_connect",
        "_count",
        "_idle",
        "_timeout",
        "_waiting",
        "cursors",
    )

    def __init__(
        self,
        connect: Callable[[], Awaitable[_Conn]],
        size: int,
        timeout: float,
    ) -> None:
        self._connect = connect
        self._count = size  # places left: connections not yet made
        self._timeout = timeout
        self._idle: list[_Conn] = []
        self._waiting: collections.deque[_Waiter] = collections.deque()
        self._closed = False
        self.cursors: dict[_Conn, _pq.Wire] = {}

    async def get(self, *, fresh: bool = False) -> _Conn:
        """An idle connection, or a new one if there is room, or the next
        one returned.  *fresh*: a new connection (in an idle one's place
        if need be), for a call to run again after its connection broke.
        """
        if idle := self._idle:
            if not fresh and not _readable(idle[-1]):
                return idle.pop()  # the common case, inline
            if conn := await self._take_idle(fresh):
                return conn
        if self._count > 0:
            self._count -= 1
        elif conn := await self._wait():
            return conn
        # A place is free for this caller: connect in it (unless the store
        # closed meanwhile: a caller queued for a connection then connects
        # no more, as on trio, where the store's thread is gone).
        if self._closed:
            self._free()
            msg = "the store is closed"
            raise RuntimeError(msg)
        try:
            return await self._connect()
        except BaseException:
            self._free()
            raise

    async def _wait(self) -> _Conn | None:
        """The next connection returned, or None if its place was freed
        instead (the caller connects in it)."""
        waiter = _Waiter()
        self._waiting.append(waiter)
        try:
            if await waiter.wait(self._timeout):
                return waiter.given
        except BaseException:
            # Cancelled, perhaps just after a connection (or a place) was
            # handed over: pass it on, or it is lost.
            if waiter.done:
                if waiter.given is None:
                    self._free()
                else:
                    self._hand_on(waiter.given)
            else:
                waiter.done = True  # gone: skipped by the hand-overs
            raise
        waiter.done = True  # timed out: skipped by the hand-overs
        msg = f"no connection free after {self._timeout} s"
        raise PoolTimeout(msg)

    async def _take_idle(self, fresh: bool) -> _Conn | None:
        """An idle connection the server has not ended, if any (none if
        *fresh*: then one idle connection makes room for a new one).
        Those it ended are closed, their places free."""
        idle = self._idle
        while idle:
            conn = idle.pop()
            if not fresh and not _readable(conn):
                return conn
            self._count += 1
            self._drop_wire(conn)
            await conn.close()
            if fresh:
                break
        return None

    async def put(self, conn: _Conn) -> None:
        """Take *conn* back: to a waiting caller, to the idle list, or
        closed if it is not fit for another call."""
        if (
            self._closed
            or conn.pgconn.transaction_status != TransactionStatus.IDLE
        ):
            self._drop_wire(conn)
            await conn.close()
            self._free()
            return
        self._hand_on(conn)

    def _drop_wire(self, conn: _Conn) -> None:
        """Forget *conn*'s wire, its socket no longer watched: before the
        connection is closed (a socket closed while the loop watches it
        would leave the loop's selector a stale entry for its number)."""
        wire = self.cursors.pop(conn, None)
        if wire is not None:
            wire.unwatch()

    def _hand_on(self, conn: _Conn) -> None:
        """Give a fit *conn* to the first caller still waiting, else keep
        it idle."""
        while self._waiting:
            waiter = self._waiting.popleft()
            if not waiter.done:  # else it timed out or was cancelled
                waiter.give(conn)
                return
        self._idle.append(conn)

    def adopt(self, conn: _Conn) -> None:
        """Take *conn*, made elsewhere, as one of the pool's own."""
        self._count -= 1
        self._hand_on(conn)

    def _free(self) -> None:
        """A connection's place is free: for a waiting caller to connect
        in, else for the next."""
        while self._waiting:
            waiter = self._waiting.popleft()
            if not waiter.done:
                waiter.give(None)
                return
        self._count += 1

    @contextlib.asynccontextmanager
    async def connection(self, *, fresh: bool = False) -> AsyncIterator[_Conn]:
        """A connection for the block (see :meth:`get`), returned after
        it."""
        conn = await self.get(fresh=fresh)
        wire = self.cursors.get(conn)
        if wire is not None:
            # psycopg's waits take the socket's reader, then remove it.
            wire.unwatch_reader()
        try:
            yield conn
        finally:
            await self.put(conn)

    async def close(self) -> None:
        """Close the idle connections (and those returned from now on)."""
        self._closed = True
        idle, self._idle = self._idle, []
        for conn in idle:
            # (Those in use are dropped as they come back: see put.)
            self._drop_wire(conn)
            await conn.close()

    def abandon(self, where: object = None) -> None:
        """Close the idle connections (and those returned from now on) from
        any thread: their loop or run may be over.  Given *where* (the
        pool's asyncio loop, or its trio run's token) while it runs, they
        are closed there, at its next turn: a caller of its may be taking
        one, or be handed one with its wire, meanwhile (the wires of those
        in use stay theirs)."""
        self._closed = True
        if isinstance(where, asyncio.AbstractEventLoop):
            if where.is_running():
                try:
                    where.call_soon_threadsafe(self._finish_idle)
                except RuntimeError:
                    pass  # closed meanwhile: nobody takes one any more
                else:
                    return
        elif where is not None:
            token: Any = where  # a trio run's
            try:
                token.run_sync_soon(self._finish_idle)
            except trio_module().RunFinishedError:
                pass  # the run is over: nobody takes one any more
            else:
                return
        self._finish_idle()

    def _finish_idle(self) -> None:
        """Close the idle connections, without waiting (their wires no
        longer watch their sockets: see ``_drop_wire``)."""
        idle, self._idle = self._idle, []
        for conn in idle:
            self._drop_wire(conn)
            conn.pgconn.finish()


@final
class _Waiter:
    """A caller waiting for a connection (or a place to make one in).

    On asyncio it waits on a future and a timer of the loop's, not on a
    cancel scope's deadline: a write's wait runs held back from asyncio's
    cancellation (see :mod:`pipeline.stores._firm`), which would hold such
    a deadline back too."""

    __slots__ = ("_wake", "done", "given")

    def __init__(self) -> None:
        self.given: _Conn | None = None
        self.done = False
        self._wake: Callable[[], object] | None = None

    def give(self, conn: _Conn | None) -> None:
        self.done = True
        self.given = conn
        if self._wake is not None:
            self._wake()

    async def wait(self, seconds: float) -> bool:
        """Until given (True), or for *seconds* (False)."""
        loop = asyncio_loop()
        if loop is None:  # trio
            event = anyio.Event()
            self._wake = event.set
            with anyio.move_on_after(seconds):
                await event.wait()
            return self.done
        future = loop.create_future()
        self._wake = functools.partial(_settle, future)
        timer = loop.call_later(seconds, _settle, future)
        try:
            await future
        finally:
            timer.cancel()
        return self.done


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


@final
class _Pools(weakref.WeakKeyDictionary[object, _Pool]):
    """The store's pool of each asyncio loop and each trio run, made on its
    first use (by *make*); one whose loop or run is gone is closed with it
    (the store keeps neither alive)."""

    def __init__(self, make: Callable[[object], _Pool]) -> None:
        super().__init__()
        self._make = make

    def __getitem__(self, where: object) -> _Pool:
        pool = self.get(where)
        if pool is None:
            pool = self[where] = self._make(where)
            weakref.finalize(where, pool.abandon)
        return pool


_NAME_BYTES = 63
"""The longest name PostgreSQL keeps whole (``NAMEDATALEN`` - 1): it cuts
a longer one short without an error."""


def _check_schema(schema: object) -> None:
    """Raise ``ValueError`` unless *schema* can name a schema as it is.

    Two names longer than PostgreSQL keeps that share their first 63 bytes
    would be one schema, yet lock the same thread with different keys:
    two runners could both hold its lease."""
    if not isinstance(schema, str):
        msg = f"schema must be a str, not a {type(schema).__name__}"
        raise TypeError(msg)
    try:
        size = len(schema.encode())
    except UnicodeEncodeError:
        size = -1  # a lone surrogate: no UTF-8 for it
    if not 0 < size <= _NAME_BYTES or "\x00" in schema:
        got = "not UTF-8" if size < 0 else f"{size} bytes"
        msg = (
            f"schema must be 1 to {_NAME_BYTES} bytes of UTF-8 without NUL "
            f"(PostgreSQL cuts longer names short), not {got}"
        )
        raise ValueError(msg)


def _trio_run() -> object:
    """The running trio run (its token: one per run)."""
    from trio.lowlevel import current_trio_token  # noqa: PLC0415  # on trio

    return current_trio_token()


@final
class PostgresStore(ServerStore):
    """A :class:`~pipeline.stores.CheckpointStore` in a PostgreSQL database,
    for runners on several processes or machines.

    *conninfo* is a libpq connection string or URL
    (``"postgresql://user@host/db"``).  The store keeps its tables in
    *schema* (created with them if missing; give each application or test
    its own to keep their threads apart; at most 63 bytes, which is all
    PostgreSQL keeps of a name, else ``ValueError``), holds up to *pool_size*
    connections, and waits up to *pool_timeout* seconds for a connection
    (to the server, or from the pool).  Leases run on the server's clock.

    Open it before use, and close it after::

        async with PostgresStore(url) as store:
            ...
        store = await PostgresStore.connect(url)  # the same, opened
        await store.aclose()

    It works on asyncio and trio alike (see
    :mod:`pipeline.stores.postgres`).  A commit is durable on return (as the
    server's ``synchronous_commit`` makes it).  A commit that raises (the
    connection broke) may or may not have landed: read the thread's head to
    know.

    Deleting a thread deletes its rows; PostgreSQL reclaims their space
    when it vacuums the tables (their bytes stay in the files until then,
    and in the write-ahead log and backups as the server keeps them).

    .. versionadded:: 0.1.0
    """

    def __init__(
        self,
        conninfo: str,
        *,
        schema: str = "public",
        pool_size: int = 10,
        pool_timeout: float = 30.0,
        lease_ttl: float = DEFAULT_LEASE_TTL,
    ) -> None:
        if pool_size < 1:
            msg = f"pool_size must be at least 1, not {pool_size}"
            raise ValueError(msg)
        _check_schema(schema)
        self._conninfo = conninfo
        self.schema = schema
        self._pool_size = pool_size
        self._timeout = pool_timeout
        self._lease_ttl = check_lease_ttl(lease_ttl)
        self._sql = _statements(schema)
        self._loop = None
        self._rendered: dict[str, tuple[bytes, bytes]] = {}
        """The hot calls' statements as libpq takes them (see ``_one``)."""
        self._pools = _Pools(self._new_pool)
        self._first: _Conn | None = None
        """The connection that checked the tables, for the first pool."""
        self._first_lock = threading.Lock()

    @classmethod
    async def connect(
        cls,
        conninfo: str,
        *,
        schema: str = "public",
        pool_size: int = 10,
        pool_timeout: float = 30.0,
        lease_ttl: float = DEFAULT_LEASE_TTL,
    ) -> PostgresStore:
        """A store on *conninfo*, opened (close it with ``aclose()``).

        Raises:
            psycopg.OperationalError: The server cannot be reached.
        """
        store = cls(
            conninfo,
            schema=schema,
            pool_size=pool_size,
            pool_timeout=pool_timeout,
            lease_ttl=lease_ttl,
        )
        await store.open()
        return store

    def __repr__(self) -> str:
        return f"PostgresStore(schema={self.schema!r})"

    # -- the loop's side -------------------------------------------------------

    # The hot calls (commit, head, the lease's) run in the caller's own
    # task, on its home loop or on trio (see _one); the others, and the
    # opening on trio, as for a store that is not native.
    _native = True
    _native_all = False
    _firm = True

    async def _open(self) -> None:
        # One connection checks the tables (a wrong address fails here) and
        # stays as the first pool's (see _new_pool).
        # (Its settings and the check of the tables in one round trip.)
        conn, found = await self._connected(self._sql.check)
        try:
            await self._create_tables(conn, found)
        except BaseException:
            await conn.close()
            raise
        self._first = conn

    async def _connect(self) -> None:
        pass  # each loop's pool is made on its first use

    def _new_pool(self, where: object) -> _Pool:
        """A pool for *where* (an asyncio loop, or a trio run whose
        connections are made on the store's thread), with the connection
        that checked the tables if it is the first.  None once the store
        is closing: a call in flight then (a lease call run once more on a
        fresh connection, say) would make one that nobody closes."""
        if self._closing:
            msg = "the store is closed"
            raise RuntimeError(msg)
        connect = (
            self._new_connection
            if isinstance(where, asyncio.AbstractEventLoop)
            else self._made_on_thread
        )
        pool = _Pool(connect, self._pool_size, self._timeout)
        with self._first_lock:
            first, self._first = self._first, None
        if first is not None:
            pool.adopt(first)
        return pool

    async def _made_on_thread(self) -> _Conn:
        """A new connection for a trio run: made and configured by psycopg
        on the store's thread (once per connection), then spoken to from
        trio itself (see _one)."""
        loop = self._loop or self._start_thread()
        return await loop.run(
            functools.partial(self._on_thread, self._new_connection),
            shield=True,
        )

    async def _new_connection(self) -> _Conn:
        conn, _ = await self._connected(None)
        return conn

    async def _connected(
        self, then: sql.Composable | None
    ) -> tuple[_Conn, tuple[Any, ...] | None]:
        """A new connection, configured (see :func:`_configure`), and the
        row of the query *then* run with its settings."""
        conn = await psycopg.AsyncConnection.connect(
            self._conninfo,
            autocommit=True,
            connect_timeout=math.ceil(self._timeout),
        )
        try:
            found = await _configure(
                conn,
                self._sql,
                stall=max(self._lease_ttl, _STALL_FLOOR),
                then=then,
            )
        except BaseException:
            await conn.close()
            raise
        return conn, found

    async def _create_tables(
        self, conn: _Conn, found: tuple[Any, ...] | None
    ) -> None:
        """Create what *found* (the check's row) says is missing."""
        if found is not None and None not in found:
            return  # nothing to create (and maybe no right to create it)
        async with conn.transaction():
            # Several processes may open a new store at once: the catalog
            # does not take concurrent CREATE ... IF NOT EXISTS well.
            await conn.execute(_LOCK, ("pipeline-schema",))
            cur = await conn.execute(
                "SELECT 1 FROM pg_namespace WHERE nspname = %s",
                (self.schema,),
            )
            if await cur.fetchone() is None:
                await conn.execute(
                    sql.SQL("CREATE SCHEMA {}").format(
                        sql.Identifier(self.schema)
                    )
                )
            for statement in (*self._sql.tables, *self._sql.upgrades):
                await conn.execute(statement)

    async def _close(self) -> None:
        # The idle connections of every other loop and trio run go now
        # (their loops and runs may be over; a wire holds its loop, so a
        # loop that ended would never be collected, nor its pool closed
        # with it); a call in flight closes its own when it ends.
        loop = asyncio_loop()
        for where, pool in list(self._pools.items()):
            if where is not loop:
                pool.abandon(where)
        with self._first_lock:
            first, self._first = self._first, None
        if first is not None:
            await first.close()
        if loop is not None and loop in self._pools:
            await self._pools.pop(loop).close()

    def _connection(
        self, *, fresh: bool = False
    ) -> contextlib.AbstractAsyncContextManager[_Conn]:
        # The pool of the loop this runs on (the home loop's, or the
        # store's thread's).
        return self._pools[asyncio.get_running_loop()].connection(fresh=fresh)

    def _lock_key(self, thread_id: str) -> str:
        return f"{self.schema}/{thread_id}"

    async def _lock(self, conn: _Conn, thread_id: str) -> None:
        await conn.execute(_LOCK, (self._lock_key(thread_id),))

    async def _one(
        self,
        call: str,
        args: Sequence[object],
        *,
        fresh: bool = False,
        write: bool = False,
    ) -> tuple[Any, ...]:
        """The one row of one statement (a function's call, in autocommit:
        its own transaction; or a read), on a connection of the running
        loop's (or trio run's) pool (a new one if *fresh*), spoken to in
        the caller's own task (see :mod:`pipeline.stores._pq`).  *call*
        names the statement (see ``_Statements.calls``, ``_hot``); a
        *write* on asyncio waits on firm futures (it runs held back from
        asyncio's cancellation: see :mod:`pipeline.stores._firm`)."""
        loop = asyncio_loop()
        pool = self._pools[_trio_run() if loop is None else loop]
        conn = await pool.get(fresh=fresh)  # no context manager: hot path
        try:
            rendered = self._rendered.get(call)
            if rendered is None:
                rendered = self._rendered[call] = self._render(call, conn)
            wire = pool.cursors.get(conn)
            if wire is None:
                wire = pool.cursors[conn] = _pq.Wire(conn)
            row = await wire.row(
                *rendered, args, loop=loop, firm=write and loop is self._home
            )
        finally:
            await pool.put(conn)
        assert row is not None  # noqa: S101  # one row, always
        return row

    def _render(self, call: str, conn: _Conn) -> tuple[bytes, bytes]:
        """The name and text of *call*'s statement, rendered once per
        schema and encoding, from the store's SQL (whose placeholders are
        psycopg's), numbered as libpq takes them."""
        statements = self._sql
        key = (call, conn.info.encoding)
        rendered = statements.rendered.get(key)
        if rendered is None:
            query = _pq.numbered(statements.hot[call].as_bytes(conn))
            rendered = statements.rendered[key] = (
                f"pipeline_{call}".encode(),
                query,
            )
        return rendered

    async def _again(
        self,
        call: str,
        args: Sequence[object],
        *,
        write: bool,
    ) -> tuple[Any, ...]:
        """``_one(call, args)``, once more on a fresh connection if its
        connection broke: for a statement that can run twice with the same
        outcome (a read; a lease call)."""
        return await _twice(
            lambda fresh: self._one(call, args, fresh=fresh, write=write)
        )

    async def _lease_call(
        self, call: str, args: Sequence[object]
    ) -> tuple[LeaseRow | None, float]:
        """A lease function's call: the lease row it found, and the
        server's clock.

        The lease functions can run twice with the same outcome (a second
        acquisition by the same owner finds its own live lease and keeps
        its token; a renewal or release that landed still holds), so a
        call whose connection broke, which may or may not have landed,
        runs once more on a fresh connection, as a transaction that broke
        before its end did when these were several statements.
        """
        owner, token, expires, now = await self._again(call, args, write=True)
        return _lease_row(owner, token, expires), now

    async def _locked(
        self, thread_id: str, work: Callable[[_Conn], Awaitable[T]]
    ) -> T:
        """*work* in one transaction under *thread_id*'s lock.

        A transaction that broke before its COMMIT was sent stored
        nothing: the server ended it (its runner stalled inside it longer
        than a lease lasts, see :func:`_configure`) or the connection
        dropped.  It runs once more, on a fresh connection, where it sees
        what happened meanwhile (a lease taken over, a head that moved).
        A COMMIT that broke may or may not have landed: that error is
        raised, as is a second break.
        """
        for retry in (True, False):
            sent = False
            try:
                conn: _Conn
                async with (
                    self._connection(fresh=not retry) as conn,
                    conn.transaction(),
                ):
                    await self._lock(conn, thread_id)
                    out = await work(conn)
                    sent = True
            except PoolTimeout:
                raise
            except (
                psycopg.OperationalError,
                psycopg.errors.IdleInTransactionSessionTimeout,
            ):
                if sent or not retry:
                    raise
            else:
                return out
        raise AssertionError  # pragma: no cover  # the loop returns or raises

    async def _commit(
        self, record: Record, expected_head: int | None, lease: Lease | None
    ) -> Result[None, ConcurrentModification | LeaseLost]:
        # One statement, one round trip: the server's function takes the
        # thread's lock, checks the lease and the head and inserts, in the
        # statement's own transaction (see _COMMIT_V2_FUNCTION).
        thread = record.thread_id
        args = (
            thread,
            self._lock_key(thread),
            record.version,
            record.parent,
            record.data,
            record.checksum,
            expected_head,
            None if lease is None else lease.owner,
            None if lease is None else lease.token,
        )
        (outcome,) = await self._one("commit", args, write=True)
        if outcome == _STORED:
            return Success(None)
        if outcome == _LEASE:
            return Failure(LeaseLost(thread))
        head = None if outcome == _NO_HEAD else outcome
        return Failure(ConcurrentModification(thread, expected_head, head))

    async def _cache_get(
        self, key: str, now: float
    ) -> tuple[bytes, str] | None:
        conn: _Conn
        async with self._connection() as conn:
            cur = await conn.execute(
                self._sql.cache_get, (key, now), binary=True
            )
            row = await cur.fetchone()
        return None if row is None else (bytes(row[0]), str(row[1]))

    async def _cache_put(
        self, key: str, value: bytes, sha: str, now: float, ttl: float | None
    ) -> None:
        expires = None if ttl is None else now + ttl
        conn: _Conn
        async with self._connection() as conn:
            await conn.execute(self._sql.cache_put, (key, expires, sha, value))

    async def _read(self, read: Callable[[_Conn], Awaitable[T]]) -> T:
        """*read* (statements that change nothing) on a pooled connection;
        once more on a fresh one if that connection broke (the server
        ended it a moment before the pool could tell: a read is always
        safe to run again)."""

        async def attempt(fresh: bool) -> T:
            async with self._connection(fresh=fresh) as conn:
                return await read(conn)

        return await _twice(attempt)

    async def _records(
        self, thread_id: str, upto: int | None
    ) -> Sequence[Record]:
        async def read(conn: _Conn) -> list[Any]:
            cur = await conn.execute(
                self._sql.records, {"t": thread_id, "upto": upto}, binary=True
            )
            return await cur.fetchall()

        rows = await self._read(read)
        return tuple(
            Record(thread_id, version, parent, bytes(data), checksum)
            for version, parent, data, checksum in rows
        )

    async def _head(self, thread_id: str) -> int | None:
        # A read: once more on a fresh connection if its connection broke.
        (head,) = await self._again("head", (thread_id,), write=False)
        return head  # type: ignore[no-any-return]

    async def _threads(self) -> Sequence[str]:
        async def read(conn: _Conn) -> list[Any]:
            cur = await conn.execute(self._sql.threads)
            return await cur.fetchall()

        rows = await self._read(read)
        # Python's order (code points), not the database's collation.
        return sorted(str(thread) for (thread,) in rows)

    async def _delete(self, thread_id: str) -> None:
        async def work(conn: _Conn) -> None:
            for statement in self._sql.delete:
                await conn.execute(statement, (thread_id,))

        await self._locked(thread_id, work)

    async def _acquire(
        self, thread_id: str, owner: str, ttl: float
    ) -> Result[Lease, ThreadBusy]:
        # The function took the lease if take() grants it, on the row it
        # found (see _ACQUIRE_FUNCTION): the answer is take()'s.
        row, now = await self._lease_call(
            "acquire",
            (thread_id, self._lock_key(thread_id), owner, ttl),
        )
        return take(row, thread_id, owner, ttl, now)

    async def _renew(
        self, lease: Lease, ttl: float
    ) -> Result[Lease, LeaseLost]:
        thread = lease.thread_id
        row, now = await self._lease_call(
            "renew",
            (thread, self._lock_key(thread), lease.owner, lease.token, ttl),
        )
        if not holds(row, lease):
            return Failure(LeaseLost(thread))
        return Success(Lease(thread, lease.owner, lease.token, now + ttl))

    async def _release(self, lease: Lease) -> None:
        thread = lease.thread_id
        await self._lease_call(
            "release",
            (thread, self._lock_key(thread), lease.owner, lease.token),
        )
