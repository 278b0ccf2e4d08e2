"""Running a thread in one place at a time: its lease, held for a run.

:func:`leased` takes the thread's lease in the store before anything runs
(:class:`~pipeline.failures.ThreadBusy` if another runner holds it), renews
it every third of its time to live while the run goes on, and gives it up
at the end.  If a renewal finds the lease taken (this runner stalled past
its expiry and another took over), the run is cancelled at once and ends
with :class:`~pipeline.failures.LeaseLost`: its commits would be refused
anyway, and its side effects should stop.  A runner that dies never gives
its lease up; it expires.

A runner can also stall without noticing: an observer that blocks the
event loop, a long GC pause, SIGSTOP, a swapped-out machine.  Renewals
stop meanwhile, the lease lapses, another runner takes the thread over;
when the stalled one wakes up its next commit is refused, but the step
before that commit would already have run its side effect a second time.
So the run holds its lease as a :class:`Held`, which knows on the runner's
own monotonic clock until when the lease is surely valid (measured from
before the request that took or renewed it, so the store's clock can only
give more), and :meth:`Held.ensure` is called before each step starts
(each node, each agent turn, each batch of tool calls): near expiry it
renews first, and a renewal that fails stops the run before the step.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import sys
import time

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, final

import anyio

from returns.result import Failure, Result, Success

from .._concurrency import asyncio_scope, collapse
from ..failures import LeaseLost
from ._memory import MemoryStore
from ._protocol import CheckpointStore, Lease


T = TypeVar("T")

log = logging.getLogger("pipeline.fold")

RELEASE_BOUND = 5.0
"""Seconds a run's end waits, shielded, to give its lease up."""


@final
class Held:
    """A thread's lease as the runner holding it sees it.

    *lease* is the lease as last taken or renewed; :meth:`ensure` says
    whether a step may start on it.

    .. versionadded:: 0.1.0
    """

    __slots__ = ("_fresh_until", "_store", "_ttl", "lease", "lost")

    def __init__(
        self, store: CheckpointStore, lease: Lease, ttl: float, since: float
    ) -> None:
        self._store = store
        self._ttl = ttl
        self.lease = lease
        """The lease, as last taken or renewed."""
        self.lost = False
        """Whether a renewal found the lease taken (the run must stop)."""
        self._fresh_until = since + ttl

    def renewed(self, lease: Lease, since: float) -> None:
        """Note a renewal whose request left at monotonic time *since*."""
        self.lease = lease
        self._fresh_until = since + self._ttl

    @property
    def margin(self) -> float:
        """Seconds before the lease may lapse at which a step renews it
        first: a third of its time to live (the renewing task renews every
        third, so a runner that keeps up never renews here)."""
        return self._ttl / 3

    async def ensure(self) -> Failure[LeaseLost] | None:
        """``None`` if a step may start now; ``Failure(LeaseLost)`` if the
        lease was lost or may have lapsed and could not be renewed.

        .. versionadded:: 0.1.0
        """
        if self.lost:
            return Failure(LeaseLost(self.lease.thread_id))
        if time.monotonic() < self._fresh_until - self.margin:
            return None
        for _ in range(_RENEWALS):
            since = time.monotonic()
            renewed = await self._store.renew(self.lease, ttl=self._ttl)
            if type(renewed) is not Success:
                break
            self.renewed(renewed.unwrap(), since)
            # A runner stalled while the renewal's answer came back holds
            # a renewal that may have lapsed since: it renews again.
            if time.monotonic() < self._fresh_until:
                return None
        self.lost = True
        log.warning(
            "thread %r: the lease lapsed while this runner stalled and "
            "another took it: stopping before the next step",
            self.lease.thread_id,
        )
        return Failure(LeaseLost(self.lease.thread_id))


_RENEWALS = 3
"""Renewals a step tries before it starts; each must come back before the
lease it grants could lapse (else the store is too slow for the lease's
time to live, and the run stops with `LeaseLost`)."""


def owner() -> str:
    """A name for this runner: host, process, and a random part.

    The host and process part is made once per process (a forked child
    makes its own), not per run; the random part is 48 random bits, as
    many as the first 12 hex digits of a UUID4 held.
    """
    pid = os.getpid()
    if _PREFIX[0] != pid:
        _PREFIX[:] = [pid, f"{socket.gethostname()}:{pid}:"]
    return f"{_PREFIX[1]}{os.urandom(6).hex()}"


_PREFIX: list[Any] = [None, ""]
"""The process this runner's name was made in, and its ``host:pid:``."""


async def leased(
    store: CheckpointStore,
    thread_id: str,
    body: Callable[[Held], Awaitable[Result[T, Any]]],
) -> Result[T, Any]:
    """Run *body* holding the thread's lease; see the module docstring.

    .. versionadded:: 0.1.0
    """
    ttl = store.lease_ttl
    me = owner()
    since = time.monotonic()
    try:
        acquired = await store.acquire(thread_id, me, ttl=ttl)
    except BaseException:
        # Cancelled (natively too) or failed while the store may have
        # granted the lease: claim it again as the same owner (which only
        # extends it, if it was granted) and give it up, so that a cancelled
        # call never leaves the thread locked until the lease expires.
        await _give_up(store, thread_id, me, ttl)
        raise
    if not isinstance(acquired.value_or(None), Lease):
        return Failure(acquired.failure())
    held = Held(store, acquired.unwrap(), ttl, since)
    result: Result[T, Any] | None = None

    keeper = _Keeper(store, held, ttl)
    try:
        if _on_asyncio():
            result = await keeper.on_timer(body)
        else:
            result = await keeper.in_nursery(body)
    except BaseExceptionGroup as group:
        raise collapse(group) from None
    finally:
        if type(store) is MemoryStore:
            # Its calls never wait (no await in them): nothing to bound,
            # no cancellation to hold back (a scope with a deadline is
            # a third of what the lease costs such a run).
            await store.release(held.lease)
        else:
            with anyio.move_on_after(RELEASE_BOUND, shield=True):
                await store.release(held.lease)
    if result is None:  # cancelled: the renewing task found the lease lost
        return Failure(LeaseLost(thread_id))
    # The body ended on its own: every commit it made was checked against
    # the lease by the store, so its result stands even if a renewal after
    # its last commit found the lease taken (a runner stopped between its
    # last commit and its return, whose thread another then found done).
    return result


@final
class _Keeper:
    """The task that renews a run's lease every third of its time to live,
    and the scope it cancels when a renewal finds the lease taken.

    On asyncio the task starts only when the first renewal is due, from a
    timer of the event loop, and the body runs in a cancel scope rather
    than a task group: a run that ends sooner pays for neither a task nor
    a group (~60 us a run).  trio has no timer but a task's, so there the
    task starts with the run, in trio's own nursery, and waits first.  Either
    way the body's end wakes the task and it ends on its own (cheaper
    than cancelling it); a renewal in flight then is cancelled, as
    before, not waited for; and the task never outlives the run.
    """

    __slots__ = ("done", "ended", "held", "renewing", "store", "task", "ttl")

    def __init__(self, store: CheckpointStore, held: Held, ttl: float) -> None:
        self.store = store
        self.held = held
        self.ttl = ttl
        self.done = False
        """Whether the run's body has ended."""
        self.ended: anyio.Event | None = None
        """Set at the body's end, once the task has started."""
        self.renewing = False
        """Whether a renewal is in flight."""
        self.task: asyncio.Task[None] | None = None
        """On asyncio, the task, once its timer has started it."""

    async def in_nursery(
        self, body: Callable[[Held], Awaitable[Result[T, Any]]]
    ) -> Result[T, Any] | None:
        """Run *body* beside the task, in a trio nursery (anyio's task
        group on trio adds a scope and an event a task); ``None`` if the
        task cancelled it."""
        import trio  # noqa: PLC0415 (only where trio runs)

        result: Result[T, Any] | None = None
        async with trio.open_nursery() as nursery:
            scope = nursery.cancel_scope
            nursery.start_soon(self.keep, scope.cancel, True)
            try:
                result = await body(self.held)
            finally:
                self.stop()
            if self.renewing:  # cancelled, as before, not waited for
                scope.cancel()
        return result

    async def on_timer(
        self, body: Callable[[Held], Awaitable[Result[T, Any]]]
    ) -> Result[T, Any] | None:
        """Run *body* in a cancel scope, the task started by an asyncio
        timer when the first renewal is due; ``None`` if the task
        cancelled it."""
        loop = asyncio.get_running_loop()
        with asyncio_scope() as scope:
            timer = loop.call_at(
                loop.time() + self.ttl / 3, self._start, loop, scope
            )
            try:
                return await body(self.held)
            finally:
                timer.cancel()
                self.stop()
                if self.task is not None:
                    await self._join(self.task)
        return None

    def _start(
        self, loop: asyncio.AbstractEventLoop, scope: anyio.CancelScope
    ) -> None:
        """The timer's callback: start the task, its renewal due now."""
        self.task = loop.create_task(self.keep(scope.cancel, False))

    async def _join(self, task: asyncio.Task[None]) -> None:
        """Wait for the task to end (a renewal in flight is cancelled),
        whatever cancels the run meanwhile; raise what the task raised."""
        if self.renewing:
            task.cancel()
        cancelled: BaseException | None = None
        with anyio.CancelScope(shield=True):
            while not task.done():
                try:
                    await asyncio.wait((task,))
                except asyncio.CancelledError as exc:  # natively: stop it
                    cancelled = exc
                    task.cancel()
        if cancelled is not None:
            raise cancelled
        failed = None if task.cancelled() else task.exception()
        if failed is not None:
            raise failed

    def stop(self) -> None:
        """The body has ended: the task must not renew again."""
        self.done = True
        if self.ended is not None:
            self.ended.set()

    async def keep(self, cancel: Callable[[], None], wait_first: bool) -> None:
        """Renew until the body ends; a lost lease, or a store that
        fails, *cancel*s the run."""
        if self.done:  # the body ended before this task first ran
            return
        ended = self.ended = anyio.Event()
        held, ttl = self.held, self.ttl
        try:
            while not self.done:
                if wait_first:
                    with anyio.move_on_after(ttl / 3):
                        await ended.wait()
                        return
                    if ended.is_set():  # the deadline and the end came
                        return
                wait_first = True
                sent = time.monotonic()
                self.renewing = True
                renewed = await self.store.renew(held.lease, ttl=ttl)
                self.renewing = False
                if type(renewed) is not Success:
                    held.lost = True
                    cancel()
                    return
                held.renewed(renewed.unwrap(), sent)
        except Exception:
            cancel()  # as a task group would, for its own task
            raise


def _on_asyncio() -> bool:
    """Whether this task runs on asyncio (anyio runs asyncio or trio)."""
    if "trio" not in sys.modules:
        return True
    import sniffio  # noqa: PLC0415 (trio depends on it)

    # trio names itself in sniffio's thread-local while it runs.
    library = sniffio.thread_local.name or sniffio.current_async_library()
    return library == "asyncio"


async def _give_up(
    store: CheckpointStore, thread_id: str, me: str, ttl: float
) -> None:
    """Release whatever lease *me* may hold on the thread (bounded)."""
    with anyio.CancelScope(shield=True) as scope:
        scope.deadline = anyio.current_time() + RELEASE_BOUND
        try:
            again = await store.acquire(thread_id, me, ttl=ttl)
            if isinstance(again.value_or(None), Lease):
                await store.release(again.unwrap())
        except Exception:  # the store is failing: the lease expires
            log.warning(
                "thread %r: could not give up a lease after a cancelled "
                "claim; it expires by itself",
                thread_id,
                exc_info=True,
            )
