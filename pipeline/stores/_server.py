"""The life of a store on a database server: opened once, closed once.

A server store's client runs on asyncio.  :class:`ServerStore` owns that
lifecycle for every such store.  Opened on an asyncio loop, the store has
that loop for **home**: :meth:`~ServerStore.open` runs the store's own
``_open`` there (connect, create what is missing), and the calls made on
that loop run there too, each as a task of its own, with no hop between
threads (the hop cost more than the rest of a commit's client side).
Callers on trio, or on other asyncio loops, hand their calls to a
:class:`~pipeline.stores._bridge.LoopThread` (an asyncio loop in a thread
of its own, started by the first such call: a store used only at home
starts none), whose client ``_connect`` makes on its first call; opened on
trio, the store has no home and runs ``_open`` there (trio in guest mode on
an asyncio loop is trio: see :func:`asyncio_loop`).  A store whose client
also runs on trio (``_native``: Redis, see :mod:`pipeline.stores._resp`)
runs trio's calls, and its home loop's, in the caller's own task instead
(its commands hold asyncio's own cancellation back themselves), and
opening on trio starts no thread; PostgreSQL does so for its hot calls
only (``_native_all``), its writes held back by
:func:`~pipeline.stores._firm.held_back` (``_firm``).  Either way a call is
a task the caller's cancellation never reaches (a transaction is never
left half-done): a cancelled writer waits for its write, shielded for a
bounded time, then raises; a cancelled reader stops waiting at once.
:meth:`~ServerStore.aclose` lets the calls in flight finish and runs
``_close`` on each loop, ``async with`` does both.  A subclass supplies
``_open``, ``_connect``, ``_close`` (each for the loop it runs on), its
operations (``_commit``, ``_records``, ..., ``_cache_get`` and
``_cache_put`` for a :class:`~pipeline.stores.StoreCache`), which use the
client of the loop they run on, and a ``__repr__`` (its thread is named
after it).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import threading
import types

from collections.abc import Callable, Coroutine, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any, Self, TypeVar

import anyio
import anyio.lowlevel

from returns.result import Result

from .._concurrency import asyncio_scope
from ..failures import ConcurrentModification, LeaseLost, ThreadBusy
from ._bridge import LoopThread, wait_out
from ._firm import held_back
from ._protocol import Lease, Record, check_thread_id


T = TypeVar("T")


@functools.cache
def trio_module() -> ModuleType:
    """trio, imported once a store is called on it."""
    import trio  # noqa: PLC0415  # only on trio

    return trio


_running_loop: Callable[[], asyncio.AbstractEventLoop | None] = (
    asyncio._get_running_loop  # noqa: SLF001  # in asyncio.__all__
)
_current_task = asyncio.current_task

try:
    import sniffio
except ImportError:  # no trio (which depends on it): no trio run either
    _library: Any = types.SimpleNamespace(name=None)
else:
    _library = sniffio.thread_local


def asyncio_loop() -> asyncio.AbstractEventLoop | None:
    """The caller's asyncio loop, or None on trio.

    asyncio's own look (without the error ``get_running_loop`` raises on
    trio, a microsecond a call), unless trio runs the caller: trio in guest
    mode (``trio.lowlevel.start_guest_run``) runs on an asyncio loop, which
    is then the thread's running loop while the task is trio's.  trio names
    itself in sniffio's thread-local while it runs, its guest ticks too
    (one attribute: sniffio's ``current_async_library`` reads a context
    variable as well), and only then is it read; an asyncio loop run
    from inside trio's (a blocking ``asyncio.run`` in a trio task: trio's
    name is still set) is told apart by its task, as guest runs have no
    asyncio task.
    """
    loop = _running_loop()
    if (
        loop is not None
        and _library.name is not None
        and _library.name == "trio"
        and _current_task(loop) is None  # no asyncio task runs: trio's
    ):
        return None
    return loop


_CLOSED = "the store was closed while this call was in flight"


async def _home_run(
    work: Callable[[], Coroutine[Any, Any, T]],
    waiter: asyncio.Future[T],
    tasks: set[asyncio.Task[Any]],
) -> None:
    """Run ``work()`` (as a task of the home loop) and hand its outcome to
    *waiter* right away: its caller wakes in the next turn of the loop, not
    after the task's done callbacks have run in one turn and woken it in
    another.  A caller that stopped waiting cancelled *waiter*: the outcome
    is dropped (and no exception is left unretrieved)."""
    try:
        out = await work()
    except asyncio.CancelledError:  # the loop is shutting down
        if not waiter.done():
            waiter.set_exception(RuntimeError(_CLOSED))
        raise
    except Exception as e:  # noqa: BLE001  # the caller's to raise
        if not waiter.done():
            waiter.set_exception(e)
    else:
        if not waiter.done():
            waiter.set_result(out)
    finally:
        tasks.discard(asyncio.current_task())


_HOME_POLL = 0.1
"""Seconds between looks at whether the home loop still runs, while another
thread waits for it to close its client."""


def _closed_at_home(
    done: concurrent.futures.Future[None], home: asyncio.AbstractEventLoop
) -> bool:
    """Wait (in a worker thread) for the home loop to close its client:
    whether it did.

    The home loop may stop before it runs the close (``asyncio.run``
    returning: its cleanup cancels the close; ``run_until_complete``
    returning: nothing runs it until the loop runs again), so a stopped
    home loop ends the wait: its client's work is gone with it, and what
    is left of it (connections) the caller closes from where it is."""
    while True:
        try:
            done.result(timeout=_HOME_POLL)
        except concurrent.futures.TimeoutError:
            if not home.is_running():
                done.cancel()
                return False
        except concurrent.futures.CancelledError:
            return False  # cancelled by the home loop's cleanup
        else:
            return True


class ServerStore:
    """The lifecycle every server store shares (see the module)."""

    _loop: LoopThread | None
    _lease_ttl: float
    _home: asyncio.AbstractEventLoop | None = None
    """The asyncio loop the store was opened on, whose calls run there."""
    _closing = False
    _opened = False
    _home_gone = False
    """Whether ``aclose`` found the home loop stopped, or saw it stop
    before it ran the close scheduled there (it may still be running its
    own cleanup): what the store keeps for that loop is then closed from
    where ``_close`` runs (Redis: see ``RedisStore._close``)."""
    _native = False
    """Whether the store's client runs on trio too: its trio callers, and
    its home loop's, run their calls in their own task (see ``_here``), and
    opening on trio starts no thread."""
    _native_all = True
    """Whether every call of a ``_native`` store runs so; else only the hot
    ones (commit, head and the lease's), the others (and opening on trio)
    as for a store that is not native (PostgreSQL: see
    :mod:`pipeline.stores._pq`)."""
    _firm = False
    """Whether a native store's writes on its home loop run held back from
    asyncio's own cancellation by :func:`~pipeline.stores._firm.held_back`,
    under anyio's shield, and on trio under a shield of trio's (else its
    commands hold back every cancellation themselves, anyio's included,
    and on trio each shields itself: Redis)."""

    if TYPE_CHECKING:  # what each store supplies

        async def _open(self) -> None:
            """Prepare the server (create what is missing) and connect a
            client for the running loop."""
            ...

        async def _connect(self) -> None:
            """Connect a client for the running loop (the server is
            prepared)."""
            ...

        async def _close(self) -> None:
            """Disconnect the running loop's client, if it has one."""
            ...

        async def _commit(
            self,
            record: Record,
            expected_head: int | None,
            lease: Lease | None,
        ) -> Result[None, ConcurrentModification | LeaseLost]: ...

        async def _records(
            self, thread_id: str, upto: int | None
        ) -> Sequence[Record]: ...

        async def _head(self, thread_id: str) -> int | None: ...

        async def _threads(self) -> Sequence[str]: ...

        async def _delete(self, thread_id: str) -> None: ...

        async def _acquire(
            self, thread_id: str, owner: str, ttl: float
        ) -> Result[Lease, ThreadBusy]: ...

        async def _renew(
            self, lease: Lease, ttl: float
        ) -> Result[Lease, LeaseLost]: ...

        async def _release(self, lease: Lease) -> None: ...

        async def _cache_get(
            self, key: str, now: float
        ) -> tuple[bytes, str] | None: ...

        async def _cache_put(
            self,
            key: str,
            value: bytes,
            sha: str,
            now: float,
            ttl: float | None,
        ) -> None: ...

    @property
    def lease_ttl(self) -> float:
        """See :attr:`~pipeline.stores.CheckpointStore.lease_ttl`."""
        return self._lease_ttl

    async def open(self) -> None:
        """Connect and prepare the server (create what is missing).

        Raises:
            psycopg.OperationalError: (PostgreSQL) The server cannot be
                reached.
            redis.exceptions.ConnectionError: (Redis) The server cannot be
                reached.
            RuntimeError: The store was opened already (a closed store
                stays closed: make a new one).
        """
        if self._opened:
            msg = f"{self!r} was opened already"
            raise RuntimeError(msg)
        home = asyncio_loop()
        loop = None
        if home is None and not (self._native and self._native_all):
            loop = LoopThread(f"pipeline:{self!r}")  # its thread's name
            try:
                await loop.run(self._open, shield=True)
            except BaseException:
                with anyio.CancelScope(shield=True):
                    await loop.close(self._close)
                raise
        else:
            try:
                with anyio.CancelScope(shield=True):
                    await self._open()
            except BaseException:
                with anyio.CancelScope(shield=True):
                    await self._close()
                raise
        self._home_tasks: set[asyncio.Task[Any]] = set()
        self._thread_ready = loop is not None
        self._thread_lock: asyncio.Lock | None = None
        self._starting = threading.Lock()
        self._home = home
        self._loop = loop
        self._opened = True

    async def aclose(self) -> None:
        """Let the calls in flight finish; disconnect.  Idempotent."""
        if not self._opened or self._closing:
            return
        with self._starting:  # no thread starts from here on
            self._closing = True  # no new work from here on
        home, self._home = self._home, None
        at_home = False  # whether the home loop closed the client
        with anyio.CancelScope(shield=True):
            try:
                if home is not None:
                    if asyncio_loop() is home:
                        at_home = True
                        await self._close_home()
                    elif home.is_running():
                        at_home = True
                        done = asyncio.run_coroutine_threadsafe(
                            self._close_home(), home
                        )
                        at_home = await anyio.to_thread.run_sync(
                            _closed_at_home, done, home
                        )
                    # else (or if it stopped before it closed) the home
                    # loop is gone, and its client's work with it: what
                    # the store keeps for it, other loops and runs is
                    # closed here (below)
            finally:
                self._home_gone = home is not None and not at_home
                # The store's own thread is closed whatever became of the
                # home loop's client: a second aclose() is a no-op.
                if self._loop is not None:
                    await self._loop.close(self._close)
                elif self._native and not at_home:
                    await self._close()

    async def _close_home(self) -> None:
        while self._home_tasks:
            await asyncio.wait(tuple(self._home_tasks))
        await self._close()

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    # -- the store's operations, each on the store's loop -----------------

    async def commit(
        self,
        record: Record,
        *,
        expected_head: int | None,
        lease: Lease | None = None,
    ) -> Result[None, ConcurrentModification | LeaseLost]:
        """See :meth:`~pipeline.stores.CheckpointStore.commit` (atomic on
        the server: one transaction, or one script)."""
        check_thread_id(record.thread_id, "record.thread_id")
        return await self._call(
            functools.partial(self._commit, record, expected_head, lease),
            shield=True,
            hot=True,
        )

    async def records(
        self, thread_id: str, *, upto: int | None = None
    ) -> Sequence[Record]:
        """See :meth:`~pipeline.stores.CheckpointStore.records`."""
        check_thread_id(thread_id)
        if upto is not None and upto < 0:
            return ()
        return await self._call(
            functools.partial(self._records, thread_id, upto), shield=False
        )

    async def head(self, thread_id: str) -> int | None:
        """See :meth:`~pipeline.stores.CheckpointStore.head`."""
        return await self._call(
            functools.partial(self._head, check_thread_id(thread_id)),
            shield=False,
            hot=True,
        )

    async def threads(self) -> Sequence[str]:
        """See :meth:`~pipeline.stores.CheckpointStore.threads`."""
        return await self._call(self._threads, shield=False)

    async def delete(self, thread_id: str) -> None:
        """See :meth:`~pipeline.stores.CheckpointStore.delete` (the server
        reclaims the space as it does: see the store's own notes)."""
        await self._call(
            functools.partial(self._delete, check_thread_id(thread_id)),
            shield=True,
        )

    async def acquire(
        self, thread_id: str, owner: str, *, ttl: float
    ) -> Result[Lease, ThreadBusy]:
        """See :meth:`~pipeline.stores.CheckpointStore.acquire` (on the
        server's clock)."""
        check_thread_id(thread_id)
        return await self._call(
            functools.partial(self._acquire, thread_id, owner, ttl),
            shield=True,
            hot=True,
        )

    async def renew(
        self, lease: Lease, *, ttl: float
    ) -> Result[Lease, LeaseLost]:
        """See :meth:`~pipeline.stores.CheckpointStore.renew` (on the
        server's clock)."""
        check_thread_id(lease.thread_id, "lease.thread_id")
        return await self._call(
            functools.partial(self._renew, lease, ttl), shield=True, hot=True
        )

    async def release(self, lease: Lease) -> None:
        """See :meth:`~pipeline.stores.CheckpointStore.release`."""
        check_thread_id(lease.thread_id, "lease.thread_id")
        await self._call(
            functools.partial(self._release, lease), shield=True, hot=True
        )

    async def cache_get(
        self, key: str, now: float, /
    ) -> tuple[bytes, str] | None:
        """See :meth:`~pipeline.stores.CacheBackend.cache_get`."""
        return await self._call(
            functools.partial(self._cache_get, key, now), shield=False
        )

    async def cache_put(
        self,
        key: str,
        value: bytes,
        sha: str,
        now: float,
        ttl: float | None,
        /,
    ) -> None:
        """See :meth:`~pipeline.stores.CacheBackend.cache_put` (one
        statement or command)."""
        await self._call(
            functools.partial(self._cache_put, key, value, sha, now, ttl),
            shield=True,
        )

    async def _call(
        self,
        work: Callable[[], Coroutine[Any, Any, T]],
        *,
        shield: bool,
        hot: bool = False,
    ) -> T:
        if not self._opened:
            kind = type(self).__name__
            msg = (
                f"{self!r} is not open: use `async with {kind}(...)` "
                f"or `await {kind}.connect(...)`"
            )
            raise RuntimeError(msg)
        if self._closing:
            msg = "the store is closed"
            raise RuntimeError(msg)
        home = self._home
        here = asyncio_loop()
        if (
            self._native
            and (hot or self._native_all)
            and (here is None or here is home)
        ):
            return await self._here(work, shield=shield)
        if home is not None and here is home:
            return await self._at_home(home, work, shield=shield)
        loop = self._loop
        if loop is None:
            loop = self._start_thread()
        if self._thread_ready:
            return await loop.run(work, shield=shield)
        return await loop.run(
            functools.partial(self._on_thread, work), shield=shield
        )

    async def _at_home(
        self,
        home: asyncio.AbstractEventLoop,
        work: Callable[[], Coroutine[Any, Any, T]],
        *,
        shield: bool,
    ) -> T:
        """``work()`` as a task of the caller's (home) loop, which the
        caller's cancellation never reaches (as on the store's thread).

        The caller waits on a future of its own: cancelled (by anyio or by
        asyncio's ``task.cancel()``), it stops waiting and the task goes
        on.  A cancelled writer then waits for the task, shielded for a
        bounded time, and raises: it goes on only once the write is whole
        (stored or refused), as the SQLite store's callers do.  Shielding
        only once cancelled spares every other call a cancel scope and its
        deadline timer.
        """
        waiter: asyncio.Future[T] = home.create_future()
        tasks = self._home_tasks
        task = home.create_task(_home_run(work, waiter, tasks))
        tasks.add(task)
        try:
            return await waiter
        except BaseException:
            if shield and not task.done():
                await wait_out(lambda: asyncio.wait((task,)), task.done)
            raise

    async def _here(
        self, work: Callable[[], Coroutine[Any, Any, T]], *, shield: bool
    ) -> T:
        """``work()`` in the caller's own task (on trio, or on the home
        loop), for a store whose client runs there (``_native``): no hop
        between threads, no task per call.

        A writer goes on until its write is whole (stored or refused),
        then raises if it was cancelled, as at home; the store bounds each
        of the write's commands, so the wait is bounded too.  On trio, a
        shield of trio's own holds the cancellation back (anyio's, on trio,
        is that and a layer more): around the write for a ``_firm`` store,
        else each command enters one itself, only once cancelled (trio's
        cancellation stays until its scope ends, so it is raised here once
        the write is whole), so a write nobody cancels enters no scope
        (Redis's: see ``_resp.Connection``).  On asyncio, anyio cancels a task with
        ``task.cancel()``, asking again at every turn of the loop unless
        the task is shielded; no shield of anyio's holds back asyncio's own
        ``task.cancel()``.  A ``_firm`` store's write runs under anyio's
        shield and :func:`~pipeline.stores._firm.held_back` (a write
        waiting on a firm future cannot enter a shield once cancelled: it
        is told only when the answer comes, and anyio would keep the loop
        turning until then).  Any other's commands hold back every
        cancellation themselves, the rest of a cancelled command's wait
        under anyio's shield (Redis's: see its ``_written``), so no scope
        is entered for a write nobody cancels (anyio's costs more than the
        rest of such a call).  A cancelled reader stops at once (the store
        drops the connection it was reading from).
        """
        if not shield:
            return await work()
        out: list[T] = []  # (a scope may swallow what it ends: no local)
        if asyncio_loop() is None:
            trio = trio_module()
            if self._firm:
                with trio.CancelScope(shield=True):
                    out.append(await work())
            else:  # each command shields itself, once cancelled
                out.append(await work())
            await trio.lowlevel.checkpoint_if_cancelled()
            return out[0]
        if not self._firm:
            return await work()
        # anyio's asyncio scope, its class found once (anyio looks the
        # running library up at every scope it makes: about 1 µs).
        scope = asyncio_scope()
        scope.shield = True
        with scope:
            out.append(await held_back(work()))
        await anyio.lowlevel.checkpoint_if_cancelled()
        return out[0]

    def _start_thread(self) -> LoopThread:
        """The store's thread, started by the first call that needs it (a
        store used only on its home loop never starts one)."""
        with self._starting:  # callers in several threads at once
            if self._closing:
                msg = "the store is closed"
                raise RuntimeError(msg)
            if self._loop is None:
                self._loop = LoopThread(f"pipeline:{self!r}")
            return self._loop

    async def _on_thread(
        self, work: Callable[[], Coroutine[Any, Any, T]]
    ) -> T:
        """``work()`` on the store's thread, connecting its client first
        if this is the thread's first call."""
        if not self._thread_ready:
            if self._thread_lock is None:  # one thread: no race here
                self._thread_lock = asyncio.Lock()
            async with self._thread_lock:
                if not self._thread_ready:
                    await self._connect()
                    self._thread_ready = True
        return await work()
