"""The PostgreSQL store's hot calls spoken through libpq in the caller's own
task (pipeline.stores._pq): cancelled at each of the driver's waits in turn
(anyio's scopes, asyncio's ``task.cancel()``, ``asyncio.timeout`` and
``wait_for``, trio's scopes), the server ending a connection in the middle of
a call, a store used from trio, then asyncio, then trio again; and the
asyncio driver that holds a write's cancellation back (stores/_firm.py)."""

from __future__ import annotations

import asyncio
import contextlib
import functools

from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import anyio
import pytest

from psycopg.pq import TransactionStatus
from returns.pipeline import is_successful
from returns.result import Success

from pipeline.stores import Record
from tests import servers


pytestmark = pytest.mark.anyio

Cancel = Callable[[], Awaitable[None]]


def rec(thread: str, version: int) -> Record:
    parent = None if version == 0 else version - 1
    return Record(thread, version, parent, b"{}", f"sum-{version}")


@contextlib.contextmanager
def cancelled_at(k: int, cancel: Cancel) -> Iterator[list[int]]:
    """Each call of the driver's wait (``Wire._wait``) counted; the *k*-th
    (from 0) runs *cancel* first (the call then waits, as it would)."""
    from pipeline.stores import _pq  # noqa: PLC0415

    seen = [0]
    original = _pq.Wire._wait

    async def wait(self: Any, *args: Any, **kwargs: Any) -> None:
        if seen[0] == k:
            await cancel()
        seen[0] += 1
        await original(self, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_pq.Wire, "_wait", wait)
        yield seen


def _fit(store: Any) -> None:
    """Every idle connection of every pool of the store is fit for the
    next call: idle on the server, nothing half-read."""
    for pool in store._pools.values():
        for conn in pool._idle:
            assert not conn.closed
            assert conn.pgconn.transaction_status == TransactionStatus.IDLE
        assert all(not c.closed for c in pool.cursors)


async def _each_wait(url: str, call: Any) -> None:
    """For each wait of a commit on a new connection (its statement sent
    whole, unnamed), of its second (prepared, then run) and third (run),
    and of a read: *call* runs the call with a cancellation at that wait
    (see the callers), on a new store each time; what must hold after it,
    holds."""
    name = servers.namespace()
    try:
        for k in range(3):
            async with servers.postgres_store(
                url, schema=name, drop=False
            ) as store:
                t = f"t{k}"
                commits = [
                    functools.partial(
                        store.commit,
                        rec(t, v),
                        expected_head=None if v == 0 else v - 1,
                    )
                    for v in range(3)
                ]
                head = functools.partial(store.head, t)
                # A new connection: one wait, the unnamed statement's.
                with cancelled_at(k, call.cancel) as seen:
                    out = await call(store, commits[0])
                assert seen[0] == 1
                assert out == ("cancelled" if k == 0 else "returned")
                assert await store.head(t) == 0  # the write is whole
                _fit(store)
                # Its second: the preparing's wait, then the run's.
                with cancelled_at(k, call.cancel) as seen:
                    out = await call(store, commits[1])
                assert seen[0] == 2
                assert out == ("returned" if k >= 2 else "cancelled")
                assert await store.head(t) == 1
                _fit(store)
                with cancelled_at(k, call.cancel) as seen:
                    out = await call(store, commits[2])
                assert out == ("cancelled" if k == 0 else "returned")
                assert await store.head(t) == 2
                _fit(store)
                with cancelled_at(k, call.cancel) as seen:
                    out = await call(store, head)
                assert out == ("cancelled" if k == 0 else "returned")
                _fit(store)  # a cancelled reader's connection is dropped
                assert await store.commit(
                    rec(t, 3), expected_head=2
                ) == Success(None)
                assert await store.head(t) == 3
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(servers.drop_schema, url, name)


class _ByScope:
    """Cancelled by an anyio cancel scope around the call (asyncio, trio)."""

    def __init__(self) -> None:
        self.scope: anyio.CancelScope | None = None

    async def cancel(self) -> None:
        assert self.scope is not None
        self.scope.cancel()

    async def __call__(
        self, store: Any, call: Callable[[], Awaitable[object]]
    ) -> str:
        del store
        with anyio.CancelScope() as self.scope:
            await call()
            return "returned"
        return "cancelled"


class _ByTask:
    """Cancelled by asyncio's own ``task.cancel()`` of the caller's task."""

    async def cancel(self) -> None:
        task = asyncio.current_task()
        assert task is not None
        task.cancel()

    async def __call__(
        self, store: Any, call: Callable[[], Awaitable[object]]
    ) -> str:
        del store
        task = asyncio.ensure_future(call())
        try:
            await task
        except asyncio.CancelledError:
            assert task.cancelled()
            return "cancelled"
        return "returned"


class _ByTimeout:
    """Cancelled by ``asyncio.timeout`` expiring (rescheduled to now)."""

    def __init__(self) -> None:
        self.timeout: asyncio.Timeout | None = None

    async def cancel(self) -> None:
        assert self.timeout is not None
        self.timeout.reschedule(asyncio.get_running_loop().time())

    async def __call__(
        self, store: Any, call: Callable[[], Awaitable[object]]
    ) -> str:
        del store
        try:
            async with asyncio.timeout(None) as self.timeout:
                await call()
        except TimeoutError:
            return "cancelled"
        return "returned"


_WAIT_FOR = 10.0
"""``_ByWaitFor``'s timeout: longer than any call takes on a loaded
machine (a 10 ms one timed out calls it did not mean to cancel)."""


class _ByWaitFor:
    """Cancelled by ``asyncio.wait_for`` timing out.  Its timeout is longer
    than any call takes; at the wait to cancel, the loop's clock is moved
    on past it (never back: the timers due later stay due later) and the
    wait stalls a moment, so the timeout comes first, whatever the
    machine's speed."""

    async def cancel(self) -> None:
        loop = asyncio.get_running_loop()
        clock = loop.time
        loop.time = lambda: clock() + _WAIT_FOR  # type: ignore[method-assign]
        await asyncio.sleep(0.5)

    async def __call__(
        self, store: Any, call: Callable[[], Awaitable[object]]
    ) -> str:
        del store
        try:
            await asyncio.wait_for(call(), _WAIT_FOR)
        except TimeoutError:
            return "cancelled"
        return "returned"


@pytest.mark.postgres
async def test_postgres_cancelled_by_a_scope_at_each_wait(
    postgres_url: str,
) -> None:
    """Cancelled by an anyio scope at any of the driver's waits: a write
    goes on until it is whole, then raises; a read stops at once and its
    connection is dropped; the store goes on (on asyncio and trio)."""
    call = _ByScope()
    await _each_wait(postgres_url, call)


@pytest.mark.postgres
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.parametrize("how", [_ByTask, _ByTimeout, _ByWaitFor])
async def test_postgres_natively_cancelled_at_each_wait(
    postgres_url: str, anyio_backend: str, how: type[Any]
) -> None:
    """The same, cancelled by asyncio's own means (``task.cancel()``, a
    timeout, ``wait_for``), which anyio's shield does not hold back."""
    del anyio_backend
    await _each_wait(postgres_url, how())


@pytest.mark.postgres
async def test_postgres_cancelled_while_connecting(
    postgres_url: str, anyio_backend: str
) -> None:
    """A writer cancelled while its connection is being made (the pool
    empty) still writes, then raises; a reader stops."""
    async with servers.postgres_store(postgres_url) as store:
        scope = anyio.CancelScope()
        on_trio = anyio_backend == "trio"
        attr = "_made_on_thread" if on_trio else "_new_connection"
        original = getattr(store, attr)

        async def connect() -> Any:
            scope.cancel()
            return await original()

        # The pool of this loop or run is made on the first call, with no
        # connection: the commit's is made then.
        assert store._first is not None
        await store._first.close()
        store._first = None
        setattr(store, attr, connect)
        with scope:
            await store.commit(rec("t", 0), expected_head=None)
        assert scope.cancelled_caught
        delattr(store, attr)
        assert await store.head("t") == 0
        _fit(store)
    if on_trio:
        return
    async with servers.postgres_store(postgres_url) as store:
        original = store._new_connection

        async def natively() -> Any:
            task = asyncio.current_task()
            assert task is not None
            task.cancel()  # asyncio's own
            return await original()

        assert store._first is not None
        await store._first.close()
        store._first = None
        store._new_connection = natively  # type: ignore[method-assign]
        task = asyncio.ensure_future(
            store.commit(rec("t", 0), expected_head=None)
        )
        with pytest.raises(asyncio.CancelledError):
            await task
        del store._new_connection
        assert await store.head("t") == 0
        _fit(store)


@pytest.mark.postgres
async def test_postgres_server_ends_the_connection_mid_call(
    postgres_url: str,
) -> None:
    """The server ends the connection while a commit waits for its reply
    (held on the server behind the thread's lock, which another session
    holds): the commit raises psycopg's OperationalError (its outcome
    unknown, as documented: here nothing was stored), the connection is
    dropped, and the next calls run on a new one."""
    import psycopg  # noqa: PLC0415

    async with servers.postgres_store(postgres_url) as store:
        await store.commit(rec("t", 0), expected_head=None)
        (pid,) = [
            c.info.backend_pid
            for pool in store._pools.values()
            for c in pool._idle
        ]
        holder = await anyio.to_thread.run_sync(
            functools.partial(psycopg.connect, postgres_url, autocommit=True)
        )
        try:
            await anyio.to_thread.run_sync(
                holder.execute,
                "SELECT pg_advisory_lock(hashtextextended(%s, 0))",
                (store._lock_key("t"),),
            )

            async def end() -> None:
                await anyio.to_thread.run_sync(_terminate, postgres_url, pid)

            with (
                cancelled_at(0, end),
                pytest.raises(psycopg.OperationalError),
            ):
                await store.commit(rec("t", 1), expected_head=0)
        finally:
            await anyio.to_thread.run_sync(holder.close)
        _fit(store)
        assert await store.head("t") == 0
        assert await store.commit(rec("t", 1), expected_head=0) == Success(
            None
        )


def _terminate(url: str, pid: int) -> None:
    import psycopg  # noqa: PLC0415

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT pg_terminate_backend(%s, 10000)", (pid,))


@pytest.mark.postgres
def test_postgres_store_used_from_trio_then_asyncio_then_trio(
    postgres_url: str,
) -> None:
    """One store, opened on trio, then used from asyncio (through its
    thread), then from a new trio run (a pool of its own; the first run's
    connections closed as it ended), then closed from trio."""

    async def make() -> Any:
        from pipeline.stores.postgres import PostgresStore  # noqa: PLC0415

        return await PostgresStore.connect(postgres_url, schema=name)

    async def commits(store: Any, versions: range) -> int | None:
        for v in versions:
            out = await store.commit(
                rec("t", v), expected_head=None if v == 0 else v - 1
            )
            assert out == Success(None)
        head: int | None = await store.head("t")
        return head

    name = servers.namespace()
    try:
        store = anyio.run(make, backend="trio")
        assert anyio.run(commits, store, range(3), backend="trio") == 2
        first = [c for p in store._pools.values() for c in p._idle]
        assert anyio.run(commits, store, range(3, 6), backend="asyncio") == 5
        assert anyio.run(commits, store, range(6, 9), backend="trio") == 8
        import gc  # noqa: PLC0415

        gc.collect()  # the first run's token, and with it its pool
        assert all(c.closed for c in first)
        live = [c for p in store._pools.values() for c in p._idle]
        assert live
        anyio.run(store.aclose, backend="trio")
        assert all(c.closed for c in live)
    finally:
        servers.drop_schema(postgres_url, name)


def test_held_back_holds_task_cancel_until_the_end() -> None:
    """``held_back``: cancelled (``task.cancel()``, several times) while
    its coroutine waits for a future of another's, or for a firm one, or
    takes a bare turn of the loop, the coroutine goes on to its end with
    what it waited for, then the (first) cancellation is raised; not
    cancelled, it returns what the coroutine returned or raises what it
    raised."""
    from pipeline.stores._firm import Firm, held_back  # noqa: PLC0415

    async def main() -> None:
        loop = asyncio.get_running_loop()
        for kind in ("plain", "firm", "turn"):
            steps: list[str] = []
            release: asyncio.Future[int] = (
                Firm(loop=loop) if kind == "firm" else loop.create_future()
            )

            async def work(
                kind: str = kind,
                steps: list[str] = steps,
                release: asyncio.Future[int] = release,
            ) -> int:
                if kind == "turn":
                    for _ in range(3):
                        await asyncio.sleep(0)
                    steps.append("turned")
                    return 7
                got = await release
                steps.append("got")
                await asyncio.sleep(0)
                return got

            async def run(work: Any = work) -> int:
                out: int = await held_back(work())
                return out

            task = asyncio.ensure_future(run())
            await asyncio.sleep(0)
            task.cancel()
            task.cancel()
            await asyncio.sleep(0)
            assert not task.done()
            if kind != "turn":
                release.set_result(7)
            with pytest.raises(asyncio.CancelledError):
                await task
            assert steps == (["turned"] if kind == "turn" else ["got"])

        async def fails() -> None:
            await asyncio.sleep(0)
            raise KeyError("k")

        assert await held_back(asyncio.sleep(0, 5)) == 5
        with pytest.raises(KeyError):
            await held_back(fails())

    asyncio.run(main())


@pytest.mark.postgres
async def test_postgres_native_write_waits_for_the_pool_within_its_timeout(
    postgres_url: str, anyio_backend: str
) -> None:
    """A write on the native path finding every connection in use waits no
    longer than the pool's timeout (``PoolTimeout``), though it runs held
    back from asyncio's cancellation; the pool goes on serving."""
    from psycopg_pool import PoolTimeout  # noqa: PLC0415

    from pipeline.stores.postgres import PostgresStore, _trio_run  # noqa: PLC0415

    name = servers.namespace()
    try:
        async with PostgresStore(
            postgres_url, schema=name, pool_size=1, pool_timeout=0.05
        ) as store:
            where = (
                _trio_run()
                if anyio_backend == "trio"
                else asyncio.get_running_loop()
            )
            pool = store._pools[where]
            held = await pool.get()
            with pytest.raises(PoolTimeout):
                await store.commit(rec("t", 0), expected_head=None)
            await pool.put(held)
            assert await store.commit(
                rec("t", 0), expected_head=None
            ) == Success(None)
            assert await store.head("t") == 0
    finally:
        await anyio.to_thread.run_sync(servers.drop_schema, postgres_url, name)


@pytest.mark.postgres
async def test_postgres_prepares_again_a_statement_the_server_dropped(
    postgres_url: str,
) -> None:
    """A statement the server no longer has prepared (``DEALLOCATE``,
    ``DISCARD ALL`` by a proxy) is prepared again and run: nothing ran the
    first time, so the call is whole once."""
    from psycopg import pq  # noqa: PLC0415

    async with servers.postgres_store(postgres_url) as store:
        # (Prepared at its second call: see the next test.)
        await store.commit(rec("t", 0), expected_head=None)
        await store.commit(rec("t", 1), expected_head=0)
        (conn,) = [c for p in store._pools.values() for c in p._idle]
        result = conn.pgconn.exec_(b"DEALLOCATE pipeline_commit")
        assert result.status == pq.ExecStatus.COMMAND_OK
        assert await store.commit(rec("t", 2), expected_head=1) == Success(
            None
        )
        assert await store.head("t") == 2
        assert [c for p in store._pools.values() for c in p._idle] == [conn]


class _Counted:
    """A libpq connection whose sending calls are counted by name."""

    def __init__(self, pgconn: Any) -> None:
        self._pgconn = pgconn
        self.sent: list[str] = []

    def __getattr__(self, name: str) -> Any:
        if name.startswith("send_"):
            self.sent.append(name)
        return getattr(self._pgconn, name)


@pytest.mark.postgres
async def test_postgres_runs_a_statement_first_in_one_round_trip(
    postgres_url: str,
) -> None:
    """A statement's first call on a connection is one round trip (sent
    unnamed: parsed, bound and run at once), not a prepare and then a run:
    a run's acquisition and release come once a connection (a W5 run opens
    a store).  Its second call prepares it for the calls to come."""
    async with servers.postgres_store(postgres_url) as store:
        assert await store.head("t") is None  # the connection's wire made
        ((wire, *_),) = [
            list(p.cursors.values()) for p in store._pools.values()
        ]
        counted = _Counted(wire._pgconn)
        wire._pgconn = counted  # type: ignore[assignment]
        lease = (await store.acquire("t", "me", ttl=10)).unwrap()
        await store.release(lease)
        assert counted.sent == ["send_query_params"] * 2
        counted.sent.clear()
        lease = (await store.acquire("t", "me", ttl=10)).unwrap()
        for v in range(3):
            assert await store.commit(
                rec("t", v), expected_head=v - 1 if v else None, lease=lease
            ) == Success(None)
        assert counted.sent == [
            "send_prepare",  # the acquisition's second call
            "send_query_prepared",
            "send_query_params",  # the commit's first
            "send_prepare",
            "send_query_prepared",
            "send_query_prepared",
        ]
        assert await store.head("t") == 2
        assert not is_successful(await store.acquire("t", "other", ttl=10))


def _watched_fds_open() -> None:
    """On asyncio, every socket the loop's selector watches is open: no
    connection was closed while its reader stayed (its number's entry
    would be stale, and a new socket of that number never watched)."""
    import os  # noqa: PLC0415

    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return  # trio: the store registers nothing that stays
    selector = loop._selector  # type: ignore[attr-defined]
    for fd in list(selector.get_map()):
        os.fstat(fd)  # raises if closed


@pytest.mark.postgres
async def test_postgres_hot_and_psycopg_calls_share_a_connection(
    postgres_url: str, anyio_backend: str
) -> None:
    """One connection (pool_size=1) spoken to in turn by the hot calls
    (libpq, the socket's reader kept from one call to the next on asyncio)
    and by psycopg's async API (records, threads, delete, the cache: its
    waits take the socket's reader and remove it): every call answers
    promptly, and the loop watches no closed socket."""
    from pipeline.stores.postgres import PostgresStore  # noqa: PLC0415

    name = servers.namespace()
    wire: Any = None
    try:
        async with PostgresStore(
            postgres_url, schema=name, pool_size=1
        ) as store:
            with anyio.fail_after(10):
                for round_ in range(3):
                    t = f"t{round_}"
                    lease = (await store.acquire(t, "me", ttl=60)).unwrap()
                    for v in range(3):
                        out = await store.commit(
                            rec(t, v),
                            expected_head=v - 1 if v else None,
                            lease=lease,
                        )
                        assert out == Success(None)
                        assert len(await store.records(t)) == v + 1
                        assert await store.head(t) == v
                    assert t in await store.threads()
                    await store.release(lease)
                    await store.delete(t)
                    assert await store.head(t) is None
                    _watched_fds_open()
            if anyio_backend == "asyncio":  # (trio's other calls: a thread)
                (pool,) = store._pools.values()
                (wire,) = pool.cursors.values()
                assert len(pool._idle) == 1
                assert wire._watched is not None  # kept after the call
                await store.records("t0")
                assert wire._watched is None  # psycopg's call came last
                await store.head("t0")
                assert wire._watched is not None  # kept after the call
        _watched_fds_open()  # closed: its reader removed first
        if wire is not None:  # asyncio
            assert wire._watched is None
            assert wire._timer is None
    finally:
        await anyio.to_thread.run_sync(servers.drop_schema, postgres_url, name)


@pytest.mark.postgres
async def test_postgres_idle_connection_ended_by_the_server(
    postgres_url: str, anyio_backend: str
) -> None:
    """The server ends an idle connection whose socket the loop watches
    (asyncio): its reader, with no call waiting, stops watching (no loop
    turning on a socket readable for ever), the connection is dropped
    before the next call, which runs on a new one."""
    import time  # noqa: PLC0415

    async with servers.postgres_store(postgres_url) as store:
        await store.commit(rec("t", 0), expected_head=None)
        (pool,) = store._pools.values()
        (conn,) = pool._idle
        wire = pool.cursors[conn]
        if anyio_backend == "asyncio":
            assert wire._watched is not None
        await anyio.to_thread.run_sync(
            _terminate, postgres_url, conn.info.backend_pid
        )
        cpu = time.process_time()
        await anyio.sleep(0.3)  # the goodbye arrives; the loop idles
        assert time.process_time() - cpu < 0.2
        assert wire._watched is None
        assert await store.commit(rec("t", 1), expected_head=0) == Success(
            None
        )
        assert conn.closed
        assert conn not in pool.cursors
        _watched_fds_open()
        _fit(store)


@pytest.mark.postgres
async def test_postgres_call_bounded_across_calls(
    postgres_url: str, anyio_backend: str
) -> None:
    """Each call waits for its reply up to the bound (``_pq.BOUND``), from
    its own start: a connection's timer, set by an earlier call, moves on
    to a later call's deadline rather than cutting it short; a call past
    its bound raises OperationalError and its connection is dropped; the
    next call runs on a new one."""
    import psycopg  # noqa: PLC0415

    from pipeline.stores import _pq  # noqa: PLC0415

    bound = 0.6
    async with servers.postgres_store(postgres_url) as store:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(_pq, "BOUND", bound)
            await store.commit(rec("t", 0), expected_head=None)
            await anyio.sleep(bound / 2)
            holder = await anyio.to_thread.run_sync(
                functools.partial(
                    psycopg.connect, postgres_url, autocommit=True
                )
            )
            key = store._lock_key("t")

            def lock() -> None:
                holder.execute(
                    "SELECT pg_advisory_lock(hashtextextended(%s, 0))", (key,)
                )

            try:
                await anyio.to_thread.run_sync(lock)
                start = anyio.current_time()
                with (
                    anyio.fail_after(10),
                    pytest.raises(psycopg.OperationalError, match="no reply"),
                ):
                    # (refused when the server gets to it: it goes on
                    # there, behind the lock, after the client gave up)
                    await store.commit(rec("t", 5), expected_head=4)
                waited = anyio.current_time() - start
                assert bound * 0.9 <= waited < bound * 3
            finally:
                await anyio.to_thread.run_sync(holder.close)
            _fit(store)
            _watched_fds_open()
            assert await store.head("t") == 0
            assert await store.commit(rec("t", 1), expected_head=0) == Success(
                None
            )
