"""SQLite checkpoint store: the embedded default.

Stdlib :mod:`sqlite3` in WAL mode with ``synchronous=FULL`` (a commit is on
disk before its caller goes on).  A store file is the ``.db`` file *and* its
``-wal`` file: copy both, or neither.

One **writer thread** owns the connection and does every operation, so the
connection is never used by two threads at once, whatever happens to the
callers: a caller cancelled while its work is in flight (natively too,
``task.cancel()``) leaves that work to finish on the writer, whole.

**Group commit**: the writer takes every job waiting when it is free and
runs all the writes among them (commits, lease changes) in one transaction,
so many threads' records share one fsync; each caller goes on only once its
own record is durable, and each record is still checked (compare-and-set,
lease) on its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import sqlite3
import sys
import threading
import time

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar, Final, final

import anyio
import attrs

from returns.result import Failure, Result, Success

from ..errors import ConstructionError
from ..failures import ConcurrentModification, LeaseLost, ThreadBusy
from ._bridge import wait_out
from ._protocol import (
    DEFAULT_LEASE_TTL,
    Lease,
    LeaseRow,
    Record,
    check_lease_ttl,
    check_thread_id,
    holds,
    take,
)


_SCHEMA = (
    """
    CREATE TABLE IF NOT EXISTS checkpoints (
        thread_id TEXT NOT NULL,
        version INTEGER NOT NULL,
        parent INTEGER,
        data BLOB NOT NULL,
        checksum TEXT NOT NULL,
        PRIMARY KEY (thread_id, version)
    ) WITHOUT ROWID
    """,
    """
    CREATE TABLE IF NOT EXISTS leases (
        thread_id TEXT NOT NULL PRIMARY KEY,
        owner TEXT NOT NULL,
        token INTEGER NOT NULL,
        expires REAL NOT NULL
    ) WITHOUT ROWID
    """,
    """
    CREATE TABLE IF NOT EXISTS cache (
        key TEXT NOT NULL PRIMARY KEY,
        expires REAL,
        checksum TEXT NOT NULL,
        data BLOB NOT NULL
    ) WITHOUT ROWID
    """,
)

_CACHE = 100_000
"""Threads whose head and lease the writer remembers between transactions."""

_READ_TIMEOUT = 5.0
"""Seconds a cache lookup waits for the file (a WAL reader waits only
while another connection recovers or truncates the log)."""

_INSERTS: Final = {
    1 << i: "INSERT INTO checkpoints VALUES "  # noqa: S608  # no value in it
    + ", ".join(["(?, ?, ?, ?, ?)"] * (1 << i))
    for i in range(8)
}
"""One statement inserting 1, 2, 4, ... 128 records (640 parameters at
most: within every SQLite's limit); a batch of n records takes one of each
bit set in n (100 = 64 + 32 + 4: three statements)."""

_Row = tuple[str, int, int | None, bytes, str]
"""A checked record as the writer inserts it (a ``checkpoints`` row)."""

_COMMITTED: Final[Success[None]] = Success(None)
"""A commit's answer: immutable, so one for every commit."""


def _check_ttl(ttl: float) -> None:
    """Refuse a lease length SQLite cannot store (NaN is stored as NULL); 0
    or less is a lease already lapsed, as in every store."""
    if ttl != ttl:  # noqa: PLR0124  # NaN
        msg = "ttl must be a number of seconds, not NaN"
        raise ValueError(msg)


_INPUT_ERRORS: Final = (
    ValueError,  # UnicodeEncodeError: a lone surrogate
    TypeError,
    OverflowError,
    sqlite3.InterfaceError,
    sqlite3.IntegrityError,  # NaN stored as NULL
)
"""What one write's bad arguments raise: that write fails, not its batch."""

_WRITES = frozenset({"commit", "acquire", "renew", "release", "cache_put"})


class _Job:
    """One operation for the writer, and how to tell its caller it is done.

    The caller parks on its own library's primitive (an asyncio future,
    or trio's task parking) and the writer's wake-up, run on the caller's
    loop, resumes it: no event object per job, and no lookup of the
    library per wait.  *done* is set (on that loop) once the writer has
    finished the job, whether or not the caller still waits for it.
    """

    __slots__ = ("args", "done", "error", "kind", "result")

    # Set by each kind's __init__ (one call per job, not two).
    kind: str
    args: tuple[Any, ...]
    result: Any
    error: BaseException | None
    done: bool
    post: Callable[..., object]
    """Runs a callback on the caller's loop, from any thread."""

    async def wait(self) -> None:
        """Return once the writer has finished the job (a checkpoint)."""
        raise NotImplementedError  # pragma: no cover  # abstract

    def wake(self) -> None:
        """Mark the job done and resume its waiting caller (on its loop)."""
        raise NotImplementedError  # pragma: no cover  # abstract


@final
class _AsyncioJob(_Job):
    """A job whose caller runs on asyncio: it awaits a future of its loop."""

    __slots__ = ("future", "loop", "post")

    def __init__(
        self, kind: str, args: tuple[Any, ...], loop: asyncio.AbstractEventLoop
    ) -> None:
        self.kind, self.args, self.done = kind, args, False
        self.result, self.error = None, None
        self.loop = loop
        self.post = loop.call_soon_threadsafe
        self.future: asyncio.Future[None] | None = None

    async def wait(self) -> None:
        if not self.done:
            # A fresh future for each wait: one a cancellation ended is done.
            self.future = future = self.loop.create_future()
            await future

    def wake(self) -> None:
        self.done = True
        future = self.future
        if future is not None and not future.done():
            future.set_result(None)


@final
class _TrioJob(_Job):
    """A job whose caller runs on trio: its task parks until rescheduled."""

    __slots__ = ("post", "task")

    lowlevel: ClassVar[Any] = None
    """``trio.lowlevel``, bound by :func:`_job` when trio first calls."""

    def __init__(
        self, kind: str, args: tuple[Any, ...], post: Callable[..., object]
    ) -> None:
        self.kind, self.args, self.done = kind, args, False
        self.result, self.error = None, None
        self.post = post
        self.task: Any = None

    async def wait(self) -> None:
        lowlevel = self.lowlevel
        if self.done:
            await lowlevel.checkpoint()
            return
        self.task = lowlevel.current_task()
        await lowlevel.wait_task_rescheduled(self._abort)

    def _abort(self, _raise_cancel: object) -> object:
        self.task = None  # cancelled: nobody to resume
        return self.lowlevel.Abort.SUCCEEDED

    def wake(self) -> None:
        self.done = True
        task, self.task = self.task, None
        if task is not None:
            self.lowlevel.reschedule(task)


def _job(kind: str, args: tuple[Any, ...]) -> _Job:
    """A job for the library running the caller (asyncio's or trio's)."""
    # anyio runs on asyncio or trio; trio depends on sniffio, which says
    # which of them runs this task (without trio, it is asyncio).
    if "trio" in sys.modules:
        import sniffio  # noqa: PLC0415
        import trio  # noqa: PLC0415

        # trio names itself in sniffio's thread-local while it runs (what
        # current_async_library reads first): one attribute, not a call.
        library = sniffio.thread_local.name or sniffio.current_async_library()
        if library == "trio":
            _TrioJob.lowlevel = trio.lowlevel
            token = trio.lowlevel.current_trio_token()
            return _TrioJob(kind, args, token.run_sync_soon)
    return _AsyncioJob(kind, args, asyncio.get_running_loop())


def _wake_all(jobs: list[_Job]) -> None:
    """Resume every caller of a batch on one event loop (run on that loop)."""
    for job in jobs:
        job.wake()


def _done(jobs: list[_Job]) -> None:
    """Tell the callers of *jobs* that they are done: one wake-up per event
    loop, not one per job (each is a write to the loop's wake-up socket,
    and a group commit answers many callers on one loop at once)."""
    by_loop: dict[Callable[..., object], list[_Job]] = {}
    for job in jobs:
        by_loop.setdefault(job.post, []).append(job)
    for post, group in by_loop.items():
        with contextlib.suppress(RuntimeError):  # the caller's loop is gone
            post(_wake_all, group)


@final
class SQLiteStore:
    """A durable :class:`~pipeline.stores.CheckpointStore` in one SQLite file.

    *synchronous* may be ``"FULL"`` (default: durable across power loss),
    ``"NORMAL"`` (durable across process crashes in WAL mode) or ``"OFF"``.
    Several processes may share the file (SQLite locks it for each write).
    A process stopped inside a write (SIGSTOP, a debugger) keeps the lock
    until it goes on or dies: SQLite has no server to end its transaction,
    so the others wait for it up to 60 seconds each, then fail with
    ``sqlite3.OperationalError``; use a server store where runners may
    stall.  Close it with :meth:`aclose` (or use ``async with``).

    .. versionadded:: 0.1.0
    """

    def __init__(
        self,
        path: str | Path,
        *,
        synchronous: str = "FULL",
        lease_ttl: float = DEFAULT_LEASE_TTL,
    ) -> None:
        if synchronous not in {"FULL", "NORMAL", "OFF"}:
            msg = "synchronous must be FULL, NORMAL or OFF"
            raise ConstructionError(msg)
        self.path = Path(path)
        self._lease_ttl = check_lease_ttl(lease_ttl)
        # Opened here, so that a bad path fails now; used only by the writer.
        self._conn = sqlite3.connect(
            self.path,
            check_same_thread=False,
            isolation_level=None,
            timeout=60,
        )
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute(f"PRAGMA synchronous={synchronous}")
        for statement in _SCHEMA:
            self._conn.execute(statement)
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        # The writer's own view of heads and leases (see _write).
        self._heads: dict[str, int | None] = {}
        self._leases: dict[str, LeaseRow | None] = {}
        self._data_version: int | None = None
        # The records of the transaction in progress, checked, to insert.
        self._rows: list[_Row] = []
        self._closed = False
        # Cache lookups read in the caller's thread, each thread on a
        # read-only connection of its own (a WAL reader never waits for
        # the writer): a hit costs a point query, not a hop to the writer.
        self._local = threading.local()
        self._readers: list[sqlite3.Connection] = []
        self._readers_lock = threading.Lock()
        self._writer = threading.Thread(
            target=self._serve,
            name=f"pipeline-sqlite:{self.path.name}",
            daemon=True,
        )
        self._writer.start()

    @property
    def lease_ttl(self) -> float:
        """See :attr:`~pipeline.stores.CheckpointStore.lease_ttl`."""
        return self._lease_ttl

    # -- the caller's side ------------------------------------------------------

    async def _call(self, kind: str, *args: Any, shield: bool = False) -> Any:
        if self._closed:
            msg = f"SQLiteStore({str(self.path)!r}) is closed"
            raise RuntimeError(msg)
        job = _job(kind, args)
        self._jobs.put(job)
        try:
            await job.wait()
        except BaseException:
            if shield and not job.done:
                # Cancelled (anyio's or native) with a write in flight: it
                # completes on the writer whatever happens here, and the
                # caller goes on (raising) only once it has.
                await wait_out(job.wait, lambda: job.done)
            raise
        if job.error is not None:
            raise job.error
        return job.result

    async def commit(
        self,
        record: Record,
        *,
        expected_head: int | None,
        lease: Lease | None = None,
    ) -> Result[None, ConcurrentModification | LeaseLost]:
        """See :meth:`~pipeline.stores.CheckpointStore.commit` (durable on
        return; commits waiting together share one transaction).

        Raises:
            InvalidThreadId: the record's thread id cannot be stored (checked
                here: a value SQLite cannot bind would fail the writes it
                shares a transaction with).
        """
        check_thread_id(record.thread_id, "record.thread_id")
        out: Result[
            None, ConcurrentModification | LeaseLost
        ] = await self._call(
            "commit", record, expected_head, lease, shield=True
        )
        return out

    async def records(
        self, thread_id: str, *, upto: int | None = None
    ) -> Sequence[Record]:
        """See :meth:`~pipeline.stores.CheckpointStore.records`."""
        check_thread_id(thread_id)
        rows: Sequence[Record] = await self._call("records", thread_id, upto)
        return rows

    async def head(self, thread_id: str) -> int | None:
        """See :meth:`~pipeline.stores.CheckpointStore.head`."""
        head: int | None = await self._call("head", check_thread_id(thread_id))
        return head

    async def threads(self) -> Sequence[str]:
        """See :meth:`~pipeline.stores.CheckpointStore.threads`."""
        names: Sequence[str] = await self._call("threads")
        return names

    async def delete(self, thread_id: str) -> None:
        """See :meth:`~pipeline.stores.CheckpointStore.delete`; the space is
        reclaimed too (no trace of the thread in the file or the WAL)."""
        await self._call("delete", check_thread_id(thread_id), shield=True)

    async def acquire(
        self, thread_id: str, owner: str, *, ttl: float
    ) -> Result[Lease, ThreadBusy]:
        """See :meth:`~pipeline.stores.CheckpointStore.acquire`."""
        check_thread_id(thread_id)
        _check_ttl(ttl)
        out: Result[Lease, ThreadBusy] = await self._call(
            "acquire", thread_id, owner, ttl, shield=True
        )
        return out

    async def renew(
        self, lease: Lease, *, ttl: float
    ) -> Result[Lease, LeaseLost]:
        """See :meth:`~pipeline.stores.CheckpointStore.renew`."""
        check_thread_id(lease.thread_id, "lease.thread_id")
        _check_ttl(ttl)
        out: Result[Lease, LeaseLost] = await self._call(
            "renew", lease, ttl, shield=True
        )
        return out

    async def release(self, lease: Lease) -> None:
        """See :meth:`~pipeline.stores.CheckpointStore.release`."""
        check_thread_id(lease.thread_id, "lease.thread_id")
        await self._call("release", lease, shield=True)

    async def cache_get(
        self, key: str, now: float, /
    ) -> tuple[bytes, str] | None:
        """See :meth:`~pipeline.stores.CacheBackend.cache_get` (the file's
        ``cache`` table, read in the caller's thread: one point query)."""
        if self._closed:
            msg = f"SQLiteStore({str(self.path)!r}) is closed"
            raise RuntimeError(msg)
        rows = (
            self._reader()
            .execute(
                "SELECT data, checksum FROM cache "
                "WHERE key = ? AND (expires IS NULL OR expires >= ?)",
                (key, now),
            )
            .fetchall()  # all: the statement is done, no snapshot kept
        )
        return (bytes(rows[0][0]), str(rows[0][1])) if rows else None

    def _reader(self) -> sqlite3.Connection:
        """This thread's read-only connection to the file."""
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(
                self.path,
                check_same_thread=False,  # closed by aclose, in any thread
                isolation_level=None,
                timeout=_READ_TIMEOUT,
            )
            conn.execute("PRAGMA query_only=ON")
            with self._readers_lock:
                self._readers.append(conn)
            self._local.conn = conn
        return conn

    async def cache_put(
        self,
        key: str,
        value: bytes,
        sha: str,
        now: float,
        ttl: float | None,
        /,
    ) -> None:
        """See :meth:`~pipeline.stores.CacheBackend.cache_put` (written with
        the commits waiting beside it, in one transaction)."""
        expires = None if ttl is None else now + ttl
        await self._call("cache_put", key, value, sha, expires, shield=True)

    async def aclose(self) -> None:
        """Finish the work submitted so far; close the connection."""
        if self._closed:
            return
        job = _job("close", ())
        self._closed = True
        self._jobs.put(job)
        with anyio.CancelScope(shield=True):
            await job.wait()
        with self._readers_lock:
            readers, self._readers = self._readers, []
        for conn in readers:
            conn.close()

    async def __aenter__(self) -> SQLiteStore:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    # -- the writer's side ------------------------------------------------------

    def _serve(self) -> None:
        closing: _Job | None = None
        while closing is None:
            first = self._jobs.get()
            if first is None:  # pragma: no cover  # never queued
                continue
            batch = [first]
            while True:
                try:
                    job = self._jobs.get_nowait()
                except queue.Empty:
                    break
                if job is not None:
                    batch.append(job)
            closing = next((j for j in batch if j.kind == "close"), None)
            writes = [j for j in batch if j.kind in _WRITES]
            if writes:
                self._write(writes)
            for job in batch:
                if job.kind not in _WRITES and job.kind != "close":
                    self._read(job)
            _done([job for job in batch if job is not closing])
        self._conn.close()
        _done([closing])

    def _write(self, jobs: list[_Job]) -> None:
        """Every write waiting, in one transaction (one fsync).

        Heads and leases read in earlier transactions are kept, and trusted
        for as long as no other connection (another process on the file)
        has written since: SQLite's ``data_version`` says whether one has.
        The records, each checked on its own, are inserted together at the
        end, in a few multi-row statements (see :meth:`_insert`).
        """
        conn = self._conn
        now = time.time()
        heads, leases = self._heads, self._leases
        try:
            conn.execute("BEGIN IMMEDIATE")
            (version,) = conn.execute("PRAGMA data_version").fetchone()
            if version != self._data_version or len(heads) > _CACHE:
                heads.clear()
                leases.clear()
                self._data_version = version
            rows = self._rows
            for job in jobs:
                try:
                    job.result = _WRITERS[job.kind](
                        self, heads, leases, now, *job.args
                    )
                except _INPUT_ERRORS as exc:
                    # The job's own input (a value SQLite cannot bind or
                    # keep): its statement failed alone and SQLite undid
                    # it, before the job changed anything; the other
                    # callers' writes go on.
                    job.error = exc
            if rows:
                self._insert(rows)
            conn.execute("COMMIT")
        except BaseException as exc:  # noqa: BLE001  # handed to every caller
            with contextlib.suppress(sqlite3.Error):
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
            heads.clear()  # what this transaction cached never happened
            leases.clear()
            for job in jobs:
                job.result = None
                job.error = exc
        finally:
            self._rows.clear()

    def _insert(self, rows: list[_Row]) -> None:
        """Insert checked records in a few statements, not one per record.

        Each statement is a cursor, a call into SQLite and a hand-back of
        the GIL that the writer must then take again from the callers'
        busy event loop: a batch of 100 records costs 3, not 100.
        """
        start, left = 0, len(rows)
        while left:
            size = min(128, 1 << (left.bit_length() - 1))
            self._conn.execute(
                _INSERTS[size],
                [v for row in rows[start : start + size] for v in row],
            )
            start += size
            left -= size

    def _lease(
        self, leases: dict[str, LeaseRow | None], thread_id: str
    ) -> LeaseRow | None:
        if thread_id not in leases:
            row = self._conn.execute(
                "SELECT owner, token, expires FROM leases WHERE thread_id = ?",
                (thread_id,),
            ).fetchone()
            leases[thread_id] = None if row is None else LeaseRow(*row)
        return leases[thread_id]

    def _put_lease(
        self, leases: dict[str, LeaseRow | None], lease: Lease
    ) -> None:
        self._conn.execute(
            "INSERT OR REPLACE INTO leases VALUES (?, ?, ?, ?)",
            (lease.thread_id, lease.owner, lease.token, lease.expires),
        )
        leases[lease.thread_id] = LeaseRow(
            lease.owner, lease.token, lease.expires
        )

    def _commit(
        self,
        heads: dict[str, int | None],
        leases: dict[str, LeaseRow | None],
        _now: float,
        record: Record,
        expected_head: int | None,
        lease: Lease | None,
    ) -> Result[None, ConcurrentModification | LeaseLost]:
        thread = record.thread_id
        if lease is not None and not holds(self._lease(leases, thread), lease):
            return Failure(LeaseLost(thread))
        if thread not in heads:
            (heads[thread],) = self._conn.execute(
                "SELECT MAX(version) FROM checkpoints WHERE thread_id = ?",
                (thread,),
            ).fetchone()
        head = heads[thread]
        if head != expected_head or record.version != (
            0 if head is None else head + 1
        ):
            return Failure(ConcurrentModification(thread, expected_head, head))
        self._rows.append(
            (
                thread,
                record.version,
                record.parent,
                record.data,
                record.checksum,
            )
        )
        heads[thread] = record.version
        return _COMMITTED

    def _acquire(
        self,
        _heads: dict[str, int | None],
        leases: dict[str, LeaseRow | None],
        now: float,
        thread_id: str,
        owner: str,
        ttl: float,
    ) -> Result[Lease, ThreadBusy]:
        out = take(self._lease(leases, thread_id), thread_id, owner, ttl, now)
        if type(out) is Success:
            self._put_lease(leases, out.unwrap())
        return out

    def _renew(
        self,
        _heads: dict[str, int | None],
        leases: dict[str, LeaseRow | None],
        now: float,
        lease: Lease,
        ttl: float,
    ) -> Result[Lease, LeaseLost]:
        if not holds(self._lease(leases, lease.thread_id), lease):
            return Failure(LeaseLost(lease.thread_id))
        renewed = attrs.evolve(lease, expires=now + ttl)
        self._put_lease(leases, renewed)
        return Success(renewed)

    def _release(
        self,
        _heads: dict[str, int | None],
        leases: dict[str, LeaseRow | None],
        _now: float,
        lease: Lease,
    ) -> None:
        if holds(self._lease(leases, lease.thread_id), lease):
            self._put_lease(leases, attrs.evolve(lease, expires=0.0))

    def _cache_put(
        self,
        _heads: dict[str, int | None],
        _leases: dict[str, LeaseRow | None],
        _now: float,
        key: str,
        value: bytes,
        sha: str,
        expires: float | None,
    ) -> None:
        self._conn.execute(
            "INSERT OR REPLACE INTO cache VALUES (?, ?, ?, ?)",
            (key, expires, sha, value),
        )

    def _read(self, job: _Job) -> None:
        try:
            job.result = getattr(self, f"_do_{job.kind}")(*job.args)
        except BaseException as exc:  # noqa: BLE001  # handed to the caller
            job.error = exc

    def _do_records(self, thread_id: str, upto: int | None) -> list[Record]:
        rows = self._conn.execute(
            "SELECT version, parent, data, checksum FROM checkpoints "
            "WHERE thread_id = ? AND version <= ? ORDER BY version",
            (thread_id, upto if upto is not None else 2**62),
        ).fetchall()
        return [Record(thread_id, v, p, bytes(d), c) for v, p, d, c in rows]

    def _do_head(self, thread_id: str) -> int | None:
        (head,) = self._conn.execute(
            "SELECT MAX(version) FROM checkpoints WHERE thread_id = ?",
            (thread_id,),
        ).fetchone()
        return head  # type: ignore[no-any-return]

    def _do_threads(self) -> list[str]:
        rows = self._conn.execute(
            "SELECT DISTINCT thread_id FROM checkpoints ORDER BY thread_id"
        ).fetchall()
        return [r[0] for r in rows]

    def _do_delete(self, thread_id: str) -> None:
        self._heads.pop(thread_id, None)
        self._leases.pop(thread_id, None)
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute(
                "DELETE FROM checkpoints WHERE thread_id = ?", (thread_id,)
            )
            conn.execute(
                "DELETE FROM leases WHERE thread_id = ?", (thread_id,)
            )
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        # Leave no trace of the thread's bytes in the file or the WAL.
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.execute("VACUUM")


_WRITERS: Final[dict[str, Callable[..., Any]]] = {
    kind: getattr(SQLiteStore, f"_{kind}") for kind in _WRITES
}
"""Each write's method on the writer, by kind (no name built per job)."""
