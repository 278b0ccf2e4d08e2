"""One conformance suite every CheckpointStore must pass."""

from __future__ import annotations

import asyncio
import math

from pathlib import Path
from typing import Any

import anyio
import pytest

from returns.result import Success

from pipeline import stores
from pipeline.failures import ConcurrentModification, LeaseLost, ThreadBusy
from pipeline.stores import Lease, Record, _sqlite
from tests.servers import StoreFactory


def rec(thread: str, version: int, payload: bytes = b"{}") -> Record:
    parent = None if version == 0 else version - 1
    return Record(thread, version, parent, payload, f"sum-{version}")


async def test_commit_is_compare_and_set(make_store: StoreFactory) -> None:
    """A record commits only on the expected head, as head + 1."""
    async with make_store() as store:
        assert await store.head("t") is None
        assert await store.commit(rec("t", 0), expected_head=None) == Success(
            None
        )
        assert await store.commit(rec("t", 1), expected_head=0) == Success(
            None
        )
        stale = await store.commit(rec("t", 1, b"other"), expected_head=0)
        assert stale.failure() == ConcurrentModification("t", 0, 1)
        skip = await store.commit(rec("t", 5), expected_head=1)
        assert isinstance(skip.failure(), ConcurrentModification)
        again = await store.commit(rec("t", 0), expected_head=None)
        assert isinstance(again.failure(), ConcurrentModification)
        assert await store.head("t") == 1


async def test_records_in_order_and_upto(make_store: StoreFactory) -> None:
    """records() returns what was committed, in version order."""
    async with make_store() as store:
        for v in range(5):
            await store.commit(
                rec("t", v, f"p{v}".encode()),
                expected_head=v - 1 if v else None,
            )
        rows = await store.records("t")
        assert [r.version for r in rows] == [0, 1, 2, 3, 4]
        assert rows[3] == rec("t", 3, b"p3")
        assert [r.version for r in await store.records("t", upto=2)] == [
            0,
            1,
            2,
        ]
        assert list(await store.records("missing")) == []


async def test_threads_and_delete(make_store: StoreFactory) -> None:
    """Threads are listed; delete removes one and reads create nothing."""
    async with make_store() as store:
        await store.commit(rec("b", 0), expected_head=None)
        await store.commit(rec("a", 0), expected_head=None)
        assert list(await store.threads()) == ["a", "b"]
        await store.delete("a")
        await store.delete("never")
        for _ in range(100):
            assert list(await store.records("ghost")) == []
            assert await store.head("ghost") is None
        assert list(await store.threads()) == ["b"]


@pytest.mark.parametrize(
    ("bad", "problem"),
    [
        (None, "a NoneType, not a str"),
        (123, "a int, not a str"),
        (b"bytes", "a bytes, not a str"),
        ("", "0 characters"),
        ("x" * 100_000, "100000 characters"),
        ("nul\x00", "it holds NUL"),
        ("lone\ud800", "a lone surrogate"),
    ],
)
async def test_every_call_refuses_a_thread_id_no_store_keeps(
    make_store: StoreFactory, bad: object, problem: str
) -> None:
    """A thread id no store can keep is refused by every call taking one
    (a lease's too), readers as writers (``InvalidThreadId`` naming the argument, never the
    value): a wrong type or a typo'd value in a read is an error, not a
    thread that reads as empty (found attacking: readers returned nothing)."""
    from pipeline.errors import InvalidThreadId  # noqa: PLC0415

    async with make_store() as store:
        calls: dict[str, Any] = {
            "record.thread_id": lambda: store.commit(
                rec(bad, 0),  # type: ignore[arg-type]
                expected_head=None,
            ),
            "thread_id": lambda: store.head(bad),  # type: ignore[arg-type]
        }
        for name, call in (
            *calls.items(),
            ("thread_id", lambda: store.records(bad)),  # type: ignore[arg-type]
            ("thread_id", lambda: store.records(bad, upto=0)),  # type: ignore[arg-type]
            ("thread_id", lambda: store.delete(bad)),  # type: ignore[arg-type]
            ("thread_id", lambda: store.acquire(bad, "me", ttl=30.0)),  # type: ignore[arg-type]
            (
                "lease.thread_id",
                lambda: store.renew(stores.Lease(bad, "me", 1, 0.0), ttl=30.0),  # type: ignore[arg-type]
            ),
            (
                "lease.thread_id",
                lambda: store.release(stores.Lease(bad, "me", 1, 0.0)),  # type: ignore[arg-type]
            ),
        ):
            with pytest.raises(InvalidThreadId) as info:
                await call()
            message = str(info.value)
            assert message.startswith(f"{name} cannot name a thread: ")
            assert problem in message
            if isinstance(bad, str) and len(bad) > 3:
                assert bad not in message  # never echoed
        assert list(await store.threads()) == []  # nothing was written


@pytest.mark.parametrize("bad", ["", "x" * 100_000, "nul\x00", "lone\ud800"])
async def test_a_leased_id_of_loose_equality_lets_no_bad_id_through(
    make_store: StoreFactory, bad: str
) -> None:
    """A thread leased under a ``str`` subclass whose ``__eq__`` and
    ``__hash__`` match an id no store keeps does not let that id through
    ``renew`` or ``release`` (the memory store skips the check for an id
    it holds a lease on, and kept the subclass as the key: attack18 F4)."""
    from pipeline.errors import InvalidThreadId  # noqa: PLC0415

    class Loose(str):
        __slots__ = ()

        def __eq__(self, other: object) -> bool:
            return isinstance(other, str)

        def __hash__(self) -> int:
            return hash(bad)

    async with make_store() as store:
        leased = (await store.acquire(Loose("ok"), "me", ttl=30.0)).unwrap()
        forged = stores.Lease(bad, "me", leased.token, leased.expires)
        with pytest.raises(InvalidThreadId):
            await store.renew(forged, ttl=30.0)
        with pytest.raises(InvalidThreadId):
            await store.release(forged)


async def test_concurrent_writers_one_winner_per_version(
    make_store: StoreFactory,
) -> None:
    """100 writers racing on one head: exactly one commits each version."""
    async with make_store() as store:
        await store.commit(rec("t", 0), expected_head=None)
        wins: list[int] = []

        async def writer(i: int) -> None:
            r = await store.commit(
                rec("t", 1, f"w{i}".encode()), expected_head=0
            )
            if isinstance(r, Success):
                wins.append(i)

        async with anyio.create_task_group() as tg:
            for i in range(100):
                tg.start_soon(writer, i)
        assert len(wins) == 1
        rows = await store.records("t")
        assert [r.version for r in rows] == [0, 1]
        assert rows[1].data == f"w{wins[0]}".encode()


def _all_bytes(folder: Path) -> bytes:
    return b"".join(p.read_bytes() for p in folder.iterdir())


async def test_sqlite_delete_leaves_no_bytes(tmp_path: Path) -> None:
    """After delete, the thread's bytes are gone from the file and WAL."""
    path = tmp_path / "c.db"
    canary = b"CANARY-7f3a9c01d2e4b5a6"
    async with stores.SQLiteStore(path) as store:
        await store.commit(rec("secret", 0, canary), expected_head=None)
        await store.commit(rec("secret", 1, canary + b"-1"), expected_head=0)
        await store.commit(rec("other", 0, b"keep"), expected_head=None)
        await store.delete("secret")
    blobs = _all_bytes(tmp_path)
    assert canary not in blobs
    assert b"keep" in blobs


async def test_sqlite_survives_reopen(tmp_path: Path) -> None:
    """Committed records are there after closing and reopening the file."""
    path = tmp_path / "c.db"
    async with stores.SQLiteStore(path) as store:
        await store.commit(rec("t", 0, b"x"), expected_head=None)
    async with stores.SQLiteStore(path, synchronous="NORMAL") as store:
        assert [r.data for r in await store.records("t")] == [b"x"]
    with pytest.raises(ValueError, match="synchronous"):
        stores.SQLiteStore(path, synchronous="sometimes")


async def test_sqlite_cancelled_commit_goes_on_only_once_durable(
    tmp_path: Path,
) -> None:
    """A commit whose caller is cancelled with it in flight completes, and
    the caller raises only once the record is in the file (another
    connection reads it then)."""
    import sqlite3  # noqa: PLC0415

    path = tmp_path / "c.db"
    async with stores.SQLiteStore(path) as store:
        for v in range(20):
            with anyio.CancelScope() as scope:
                scope.cancel()
                await store.commit(
                    rec("t", v), expected_head=v - 1 if v else None
                )
            assert scope.cancelled_caught
            conn = sqlite3.connect(path)
            try:
                (head,) = conn.execute(
                    "SELECT MAX(version) FROM checkpoints"
                ).fetchone()
            finally:
                conn.close()
            assert head == v
        assert await store.head("t") == 19


def _durable(path: Path) -> bool:
    """Whether another connection reads version 0 as the file's head."""
    import sqlite3  # noqa: PLC0415

    conn = sqlite3.connect(path)
    try:
        (head,) = conn.execute(
            "SELECT MAX(version) FROM checkpoints"
        ).fetchone()
    finally:
        conn.close()
    return bool(head == 0)


async def test_sqlite_commit_cancelled_twice_goes_on_only_once_durable(
    tmp_path: Path, anyio_backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A caller cancelled a second time while it waits, shielded, for its
    commit in flight (a second native ``task.cancel()`` on asyncio, which
    anyio's shield does not stop; an outer scope on either backend) still
    goes on only once its record is durable.  The writer is held on a
    gate, so the commit stays in flight for as long as the test needs."""
    import threading  # noqa: PLC0415

    path = tmp_path / "c.db"
    gate, entered = threading.Event(), threading.Event()

    commit = _sqlite._WRITERS["commit"]  # pyright: ignore[reportPrivateUsage]

    def held(*args: object) -> object:  # on the writer's thread
        entered.set()
        gate.wait()
        return commit(*args)

    monkeypatch.setitem(_sqlite._WRITERS, "commit", held)  # pyright: ignore[reportPrivateUsage]
    async with stores.SQLiteStore(path) as store:
        finished = anyio.Event()
        cancels: list[object] = []

        async def caller() -> None:
            try:
                with anyio.CancelScope() as outer:
                    with anyio.CancelScope() as inner:
                        if not cancels:  # natively on asyncio: set
                            cancels[:] = [outer.cancel, inner.cancel]
                        await store.commit(rec("t", 0), expected_head=None)
            finally:
                finished.set()

        task: asyncio.Task[None] | None = None
        async with anyio.create_task_group() as tg:
            if anyio_backend == "asyncio":
                task = asyncio.get_running_loop().create_task(caller())
                cancels[:] = [task.cancel, task.cancel]
            else:
                tg.start_soon(caller)
            try:
                await anyio.to_thread.run_sync(entered.wait)
                for cancel in cancels[::-1]:  # the inner scope first
                    cancel()  # type: ignore[operator]
                    await anyio.wait_all_tasks_blocked()
                went_on = finished.is_set()
                was_durable = _durable(path)
            finally:
                gate.set()  # the writer goes on, whatever failed
            assert not went_on  # still waiting for its record
            assert not was_durable
            await finished.wait()
            assert _durable(path)
            if task is not None:
                with pytest.raises(asyncio.CancelledError):
                    await task


async def test_sqlite_group_commit_wakes_each_loop_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The writer answers a batch of callers on one event loop with one
    wake-up of that loop, and every caller gets its own answer."""
    from pipeline.stores import _sqlite  # noqa: PLC0415

    batches: list[int] = []
    wakes: list[int] = []
    write, done = _sqlite.SQLiteStore._write, _sqlite._done

    def counted_write(self: _sqlite.SQLiteStore, jobs: list[object]) -> None:
        batches.append(len(jobs))
        write(self, jobs)  # type: ignore[arg-type]

    def counted_done(jobs: list[_sqlite._Job]) -> None:
        wakes.append(len({job.post for job in jobs}))
        done(jobs)

    monkeypatch.setattr(_sqlite.SQLiteStore, "_write", counted_write)
    monkeypatch.setattr(_sqlite, "_done", counted_done)
    async with stores.SQLiteStore(tmp_path / "c.db") as store:
        outs: dict[int, object] = {}

        async def writer(i: int) -> None:
            outs[i] = await store.commit(
                rec(f"t{i}", 0), expected_head=None if i % 2 else 0
            )

        async with anyio.create_task_group() as tg:
            for i in range(50):
                tg.start_soon(writer, i)
    assert max(batches) > 1  # some commits shared a transaction
    assert {w for w in wakes if w} == {1}  # one loop: one wake-up a batch
    for i in range(50):
        if i % 2:
            assert outs[i] == Success(None)
        else:
            assert isinstance(outs[i].failure(), ConcurrentModification)  # type: ignore[attr-defined]


def _finished(job: _sqlite._Job) -> bool:  # pyright: ignore[reportPrivateUsage]
    """Whether the writer finished *job* (read afresh: no narrowing)."""
    return job.done


async def test_sqlite_job_parks_on_its_loop(anyio_backend: str) -> None:
    """A job belongs to the library running its caller (asyncio's or
    trio's): woken from another thread, as the writer does, through its
    loop, it resumes the caller."""
    from pipeline.stores import _sqlite  # noqa: PLC0415

    job = _sqlite._job("head", ())  # pyright: ignore[reportPrivateUsage]
    assert type(job).__name__.lower().startswith(f"_{anyio_backend}")
    assert not _finished(job)

    def writer() -> None:
        job.post(_sqlite._wake_all, [job])  # pyright: ignore[reportPrivateUsage]

    await anyio.to_thread.run_sync(writer)
    with anyio.fail_after(5):
        await job.wait()
    assert _finished(job)
    await job.wait()  # done already: returns at once


async def test_sqlite_job_cancelled_then_woken(anyio_backend: str) -> None:
    """A caller cancelled while parked leaves at once (nothing resumes it
    later by mistake); waiting again, it goes on once the writer wakes the
    job, whether the wake-up comes before or after it waits again."""
    from pipeline.stores import _sqlite  # noqa: PLC0415

    for wake_first in (False, True):
        job = _sqlite._job("commit", ())  # pyright: ignore[reportPrivateUsage]
        with anyio.CancelScope() as scope:
            scope.cancel()
            await job.wait()
        assert scope.cancelled_caught
        assert not _finished(job)
        if wake_first:
            job.wake()  # the loop runs the wake-up before the caller waits
            assert _finished(job)
            with anyio.fail_after(5):
                await job.wait()
        else:
            async with anyio.create_task_group() as tg:
                tg.start_soon(job.wait)
                await anyio.wait_all_tasks_blocked()
                job.post(_sqlite._wake_all, [job])  # pyright: ignore[reportPrivateUsage]
            assert _finished(job)
        job.wake()  # a second wake-up of a finished job is harmless


async def test_leases_one_holder_at_a_time(make_store: StoreFactory) -> None:
    """A free thread is leased with the next token; its holder may take it
    again; anyone else is told the thread is busy."""
    async with make_store() as store:
        first = (await store.acquire("t", "a", ttl=60)).unwrap()
        assert (first.thread_id, first.owner, first.token) == ("t", "a", 1)
        again = (await store.acquire("t", "a", ttl=60)).unwrap()
        assert again.token == 1
        assert again.expires >= first.expires
        busy = await store.acquire("t", "b", ttl=60)
        assert isinstance(busy.failure(), ThreadBusy)
        assert 0 < busy.failure().expires_in <= 60
        await store.release(again)
        taken = (await store.acquire("t", "b", ttl=60)).unwrap()
        assert (taken.owner, taken.token) == ("b", 2)
        await store.release(again)  # no longer its lease: a no-op
        assert isinstance(
            (await store.acquire("t", "c", ttl=60)).failure(), ThreadBusy
        )


async def test_expired_lease_is_taken_and_fenced(
    make_store: StoreFactory,
) -> None:
    """A lease that expired is taken by the next runner; the old holder's
    commits and renewals are refused from then on (LeaseLost)."""
    async with make_store() as store:
        old = (await store.acquire("t", "old", ttl=0)).unwrap()  # expired
        assert await store.commit(
            rec("t", 0), expected_head=None, lease=old
        ) == Success(None)
        new = (await store.acquire("t", "new", ttl=60)).unwrap()
        assert new.token == old.token + 1
        late = await store.commit(rec("t", 1), expected_head=0, lease=old)
        assert late.failure() == LeaseLost("t")
        assert (await store.renew(old, ttl=60)).failure() == LeaseLost("t")
        assert await store.commit(
            rec("t", 1), expected_head=0, lease=new
        ) == Success(None)
        renewed = (await store.renew(new, ttl=120)).unwrap()
        assert renewed.token == new.token
        assert renewed.expires >= new.expires
        assert await store.head("t") == 1


async def test_delete_drops_the_lease(make_store: StoreFactory) -> None:
    """Deleting a thread frees its lease too."""
    async with make_store() as store:
        lease = (await store.acquire("t", "a", ttl=60)).unwrap()
        await store.commit(rec("t", 0), expected_head=None, lease=lease)
        await store.delete("t")
        assert isinstance(
            (await store.acquire("t", "b", ttl=60)).unwrap(), Lease
        )
        assert list(await store.threads()) == []


async def test_concurrent_acquirers_one_winner(
    make_store: StoreFactory,
) -> None:
    """100 runners racing for one thread: exactly one holds it."""
    async with make_store() as store:
        won: list[str] = []

        async def runner(i: int) -> None:
            out = await store.acquire("t", f"r{i}", ttl=60)
            if isinstance(out, Success):
                won.append(out.unwrap().owner)

        async with anyio.create_task_group() as tg:
            for i in range(100):
                tg.start_soon(runner, i)
        assert len(won) == 1


async def test_natively_cancelled_commits_keep_the_store_whole(
    make_store: StoreFactory, anyio_backend: str
) -> None:
    """Commits cancelled natively (task.cancel) at random instants while
    others run: every commit lands whole or not at all, none fails for an
    unrelated reason, and the store goes on working."""
    if anyio_backend != "asyncio":
        return  # native task cancellation is asyncio's
    import asyncio  # noqa: PLC0415
    import random  # noqa: PLC0415

    rng = random.Random(7)
    async with make_store() as store:
        landed: dict[str, object] = {}

        async def write(thread: str) -> None:
            for v in range(5):
                out = await store.commit(
                    rec(thread, v), expected_head=v - 1 if v else None
                )
                landed[thread] = out
                if not isinstance(out, Success):
                    return

        tasks = [asyncio.ensure_future(write(f"t{i}")) for i in range(20)]
        for _ in range(30):
            await asyncio.sleep(0)
            victim = rng.choice(tasks)
            victim.cancel()
        results = await asyncio.gather(*tasks, return_exceptions=True)
        assert all(
            r is None or isinstance(r, asyncio.CancelledError) for r in results
        )
        for i in range(20):
            rows = await store.records(f"t{i}")
            assert [r.version for r in rows] == list(range(len(rows)))
        for out in landed.values():
            assert out == Success(None)
        assert await store.commit(rec("after", 0), expected_head=None) == (
            Success(None)
        )


async def test_sqlite_batch_insert_equals_one_by_one(tmp_path: Path) -> None:
    """The writer's multi-row inserts (one statement per power of two)
    store exactly the rows, in order, that one insert each would, for
    every batch size up to past two full statements of 128."""
    import sqlite3  # noqa: PLC0415

    for n in [*range(10), 63, 64, 65, 127, 128, 129, 255, 256, 300]:
        path = tmp_path / f"b{n}.db"
        store = stores.SQLiteStore(path)
        rows = [
            (
                f"t{i % 7}",
                i,
                i - 1 if i else None,
                bytes([i % 256]) * 3,
                f"s{i}",
            )
            for i in range(n)
        ]
        # Straight on the connection: the writer thread sits idle meanwhile.
        store._insert(rows)  # pyright: ignore[reportPrivateUsage]
        await store.aclose()
        conn = sqlite3.connect(path)
        try:
            got = conn.execute(
                "SELECT thread_id, version, parent, data, checksum "
                "FROM checkpoints ORDER BY version"
            ).fetchall()
        finally:
            conn.close()
        assert got == rows


async def test_sqlite_one_writes_bad_input_fails_that_write_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Writes that share a group commit: one whose arguments SQLite cannot
    bind or keep fails alone, with an error of its own; the others in the
    same transaction are committed.  The public calls refuse such
    arguments before queueing them (``InvalidThreadId``, a ``ttl`` that
    cannot last); the writer's own guard is reached here through the
    store's queue.  The writer is held on a gate until every write is
    queued, so they share one batch."""
    import sqlite3  # noqa: PLC0415
    import threading  # noqa: PLC0415

    from pipeline.errors import InvalidThreadId  # noqa: PLC0415

    gate, entered = threading.Event(), threading.Event()
    commit = _sqlite._WRITERS["commit"]  # pyright: ignore[reportPrivateUsage]

    def held(store: object, *args: object) -> object:  # the writer's thread
        if not entered.is_set():  # only the first write waits
            entered.set()
            gate.wait()
        return commit(store, *args)

    monkeypatch.setitem(_sqlite._WRITERS, "commit", held)  # pyright: ignore[reportPrivateUsage]
    outcomes: dict[str, object] = {}

    async def call(name: str, work: Any) -> None:
        try:
            outcomes[name] = await work
        except (ValueError, sqlite3.Error) as exc:
            outcomes[name] = exc

    bad = "bad\ud800"
    async with stores.SQLiteStore(tmp_path / "b.db") as store:
        with pytest.raises(InvalidThreadId, match=r"record\.thread_id"):
            await store.commit(rec(bad, 0), expected_head=None)
        with pytest.raises(ValueError, match=r"^ttl must be"):
            await store.acquire("t", "me", ttl=float("nan"))
        with pytest.raises(ValueError, match=r"^ttl must be"):
            await store.renew(Lease("t", "me", 1, 0.0), ttl=float("nan"))
        writes = {
            "good": store.commit(rec("good", 0), expected_head=None),
            "bad id": store._call(  # pyright: ignore[reportPrivateUsage]
                "commit", rec(bad, 0), None, None, shield=True
            ),
            "nan": store._call(  # pyright: ignore[reportPrivateUsage]
                "acquire", "t", "me", float("nan"), shield=True
            ),
            "lease": store.acquire("u", "me", ttl=30.0),
        }
        async with anyio.create_task_group() as tg:
            tg.start_soon(
                call,
                "first",
                store.commit(rec("first", 0), expected_head=None),
            )
            await anyio.to_thread.run_sync(entered.wait)
            for name, work in writes.items():
                tg.start_soon(call, name, work)
            await anyio.wait_all_tasks_blocked()  # all queued behind "first"
            gate.set()
        assert outcomes["first"] == outcomes["good"] == Success(None)
        # What SQLite raised for them (its module may report a stale
        # message for a value it could not bind: the type is its own).
        assert isinstance(outcomes["bad id"], ValueError | sqlite3.Error)
        assert isinstance(outcomes["nan"], sqlite3.IntegrityError)
        assert isinstance(outcomes["lease"], Success)
        assert await store.threads() == ["first", "good"]
        # The failed acquire left no lease: the thread is free.
        assert isinstance(await store.acquire("t", "other", ttl=30.0), Success)


@pytest.mark.parametrize("ttl", [0, -7.25, float("nan"), "30", True, None])
async def test_a_store_refuses_a_lease_ttl_that_cannot_last(
    tmp_path: Path, ttl: object
) -> None:
    """``lease_ttl`` must be a number of seconds above 0 (``inf``: never
    lapses); anything else is a ``ConstructionError`` naming it, never
    showing the value, raised where the store is made."""
    from pipeline.errors import ConstructionError  # noqa: PLC0415
    from pipeline.stores.postgres import PostgresStore  # noqa: PLC0415
    from pipeline.stores.redis import RedisStore  # noqa: PLC0415

    makers: list[Any] = [
        lambda t: stores.MemoryStore(lease_ttl=t),
        lambda t: stores.SQLiteStore(tmp_path / "t.db", lease_ttl=t),
        lambda t: PostgresStore("postgresql://127.0.0.1:1/x", lease_ttl=t),
        lambda t: RedisStore("redis://127.0.0.1:1", lease_ttl=t),
    ]
    for make in makers:
        with pytest.raises(
            ConstructionError, match=r"^lease_ttl must be"
        ) as err:
            make(ttl)
        assert str(err.value) in {  # the value never shown
            "lease_ttl must be more than 0 seconds",
            f"lease_ttl must be a number of seconds, not a {type(ttl).__name__}",
        }
    async with stores.SQLiteStore(
        tmp_path / "inf.db", lease_ttl=math.inf
    ) as store:
        assert store.lease_ttl == math.inf


def test_sqlite_refuses_an_unknown_synchronous_level_without_echoing_it(
    tmp_path: Path,
) -> None:
    """``synchronous`` is one of SQLite's levels; a wrong one is refused
    by name, its value never shown."""
    from pipeline.errors import ConstructionError  # noqa: PLC0415

    with pytest.raises(ConstructionError) as err:
        stores.SQLiteStore(tmp_path / "s.db", synchronous="secret-ish")
    assert "secret-ish" not in str(err.value)
    assert "synchronous" in str(err.value)


def _driven(coro: Any) -> Any:
    """The outcome of a store call that never waits (the memory store's),
    driven to its end without an event loop."""
    try:
        coro.send(None)
    except StopIteration as stop:
        return stop.value
    coro.close()  # pragma: no cover  # it waited
    raise AssertionError("a memory store's call waited")  # pragma: no cover


@pytest.mark.parametrize("call", ["acquire", "commit"])
def test_a_memory_store_shared_by_threads_keeps_its_invariants(
    call: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One memory store shared by threads (each with a loop of its own,
    say): a call of another thread's that comes while one call is half-way
    through waits for its end, so one owner gets a thread's lease and one
    record of version 0 is kept (two owners got one lease, and an accepted
    record was lost, in 1% of racing rounds: found attacking).  The other
    thread's call is made from inside the first, at the point where the
    race was; it is given half a second to finish, which it does only if
    nothing holds it back."""
    import threading  # noqa: PLC0415

    from pipeline.stores import Record, _memory, record_checksum  # noqa: PLC0415

    store = stores.MemoryStore(lease_ttl=30)

    def record(owner: str) -> Record:
        data = owner.encode()
        return Record("t", 0, None, data, record_checksum("t", 0, None, data))

    lease = None
    if call == "commit":
        lease = _driven(store.acquire("t", "a", ttl=30)).unwrap()

    def work(owner: str) -> Any:
        if call == "acquire":
            return store.acquire("t", owner, ttl=30)
        return store.commit(record(owner), expected_head=None, lease=lease)

    theirs: list[object] = []
    inside: list[threading.Thread] = []
    point = "take" if call == "acquire" else "holds"
    original = getattr(_memory, point)

    def halfway(*args: Any) -> Any:
        if not inside:  # the first call, half-way: the other thread's now
            other = threading.Thread(
                target=lambda: theirs.append(_driven(work("b"))), daemon=True
            )
            inside.append(other)
            other.start()
            other.join(timeout=0.5)
        return original(*args)

    monkeypatch.setattr(_memory, point, halfway)
    mine = _driven(work("a"))
    inside[0].join(timeout=30)
    assert not inside[0].is_alive()
    assert isinstance(mine, Success)
    assert len(theirs) == 1
    assert not isinstance(theirs[0], Success)  # it came second
    if call == "acquire":
        assert isinstance(theirs[0].failure(), ThreadBusy)  # type: ignore[attr-defined]
    else:
        assert isinstance(theirs[0].failure(), ConcurrentModification)  # type: ignore[attr-defined]
        assert _driven(store.records("t")) == (record("a"),)
