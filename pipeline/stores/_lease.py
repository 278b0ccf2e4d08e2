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
import contextvars
import logging
import math
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

    __slots__ = (
        "_fresh_until",
        "_renew_at",
        "_store",
        "_ttl",
        "lease",
        "lost",
    )

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
        # When a step must renew first (see margin), computed as ensure
        # computed it at each step: the same float.
        self._renew_at = self._fresh_until - ttl / 3

    def renewed(self, lease: Lease, since: float) -> None:
        """Note a renewal whose request left at monotonic time *since*."""
        self.lease = lease
        self._fresh_until = since + self._ttl
        self._renew_at = self._fresh_until - self._ttl / 3

    def fresh(self) -> bool:
        """Whether a step may start now without asking the store: the
        lease is not lost, nor within :attr:`margin` of lapsing (what
        :meth:`ensure` answers at once, without a coroutine to await: a
        run asks before each step and each batch of tool calls).

        .. versionadded:: 0.1.0
        """
        return not self.lost and time.monotonic() < self._renew_at

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
        if time.monotonic() < self._renew_at:  # _fresh_until - margin
            return None
        for _ in range(_RENEWALS):
            since = time.monotonic()
            renewed: Result[Lease, LeaseLost] | None = None
            # Not answered within the lease's time to live, the renewal
            # could grant a lease lapsed already: as good as refused (a
            # store that never answers stops the run, not hangs it).
            with anyio.move_on_after(self._ttl):
                renewed = await self._store.renew(self.lease, ttl=self._ttl)
            if renewed is None or type(renewed) is not Success:
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
            result = await keeper.on_trio_timer(body)
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
    a group (~60 us a run).  trio has no timer but a task's, so there one
    system task a trio run keeps the timers of every run in it
    (:class:`_TrioTimers`) and starts a keeper's task, a system task in
    the run's context, when its first renewal is due.  Either way the
    body's end wakes the task and it ends on its own (cheaper than
    cancelling it); a renewal in flight then is cancelled, as before,
    not waited for; and the task never outlives the run (the run joins
    it, and raises what it raised).
    """

    __slots__ = (
        "context",
        "done",
        "ended",
        "failed",
        "finished",
        "held",
        "renewing",
        "scope",
        "store",
        "task",
        "task_scope",
        "ttl",
    )

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
        # On trio: the run's context and scope (the task runs in the one
        # and cancels the other), the task's own scope, whether it has
        # ended (set once it has started) and what it raised.
        self.context: contextvars.Context | None = None
        self.scope: Any = None
        self.task_scope: Any = None
        self.finished: Any = None
        self.failed: BaseException | None = None

    async def on_trio_timer(
        self, body: Callable[[Held], Awaitable[Result[T, Any]]]
    ) -> Result[T, Any] | None:
        """Run *body* in a trio cancel scope, the task started when the
        first renewal is due by the trio run's lease timers (one system
        task a trio run: trio has no timer of its own, and a nursery and a
        task a run cost most of a short run's lease); ``None`` if the task
        cancelled it.  As on asyncio, the task is joined before the run
        ends, and what it raised is raised."""
        import trio  # noqa: PLC0415 (only where trio runs)

        timers = _trio_timers(trio)
        with trio.CancelScope() as scope:
            self.scope = scope
            self.context = contextvars.copy_context()
            timers.add(self, trio.current_time() + self.ttl / 3)
            try:
                return await body(self.held)
            finally:
                timers.discard(self)
                self.stop()
                if self.finished is not None:
                    await self._join_trio(trio)
        return None

    def start_trio(self) -> None:
        """The trio timers' call, the first renewal due: start the task
        (a system task, in the run's context; joined by the run)."""
        import trio  # noqa: PLC0415 (only where trio runs)

        self.finished = trio.Event()
        trio.lowlevel.spawn_system_task(
            self._trio_task, name="pipeline lease keeper", context=self.context
        )

    async def _trio_task(self) -> None:
        """The task on trio: :meth:`keep`, in a scope the run cancels (a
        renewal in flight at its end); what it raises is kept for the run
        (a system task must not raise)."""
        import trio  # noqa: PLC0415 (only where trio runs)

        try:
            with trio.CancelScope() as self.task_scope:
                if self.done:  # the run ended before this task first ran
                    return
                await self.keep(self.scope.cancel, False)
        except trio.Cancelled:
            raise  # the trio run is ending: its system tasks are cancelled
        except BaseException as exc:  # noqa: BLE001  # raised by the run
            # Anything, not only an Exception (a store's KeyboardInterrupt,
            # say): a system task that raises crashes the trio run.
            self.failed = exc
        finally:
            self.finished.set()

    async def _join_trio(self, trio: Any) -> None:
        """Wait for the trio task to end (a renewal in flight is
        cancelled), shielded; raise what it raised."""
        if self.renewing and self.task_scope is not None:
            self.task_scope.cancel()
        with trio.CancelScope(shield=True):
            await self.finished.wait()
        if self.failed is not None:
            raise self.failed

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
        except anyio.get_cancelled_exc_class():
            raise  # the run ended (a renewal in flight), or its loop is
        except BaseException:
            # Anything else the store raised, not only an Exception (a
            # KeyboardInterrupt, a BaseException of its own): the run is
            # stopped, as a task group would stop it for its own task,
            # and raises it once the body has ended (else the body would
            # run on, unrenewed, until something else stopped it).
            cancel()
            raise


@final
class _TrioTimers:
    """A trio run's timers for its lease keepers: one system task that
    sleeps until the earliest keeper's first renewal is due and starts
    that keeper's task (:meth:`_Keeper.start_trio`).  A run adds its
    keeper as it starts and takes it out as it ends: a run that ends
    sooner costs an entry in a dict, and nothing outlives it."""

    __slots__ = ("due", "wake")

    def __init__(self) -> None:
        self.due: dict[_Keeper, float] = {}
        """Keepers not started yet, and when their first renewal is due."""
        self.wake: Any = None
        """The scope the task sleeps in (its deadline: the earliest due)."""

    def add(self, keeper: _Keeper, at: float) -> None:
        """Start *keeper*'s task at trio time *at* (unless taken out)."""
        self.due[keeper] = at
        wake = self.wake
        if wake is not None and at < wake.deadline:
            wake.deadline = at

    def discard(self, keeper: _Keeper) -> None:
        """Take *keeper* out (its run ended), if not started yet."""
        self.due.pop(keeper, None)

    async def serve(self, trio: Any) -> None:
        """Sleep until the earliest keeper is due; start the keepers due."""
        due = self.due
        while True:
            with trio.CancelScope(
                deadline=min(due.values(), default=math.inf)
            ) as self.wake:
                await trio.sleep_forever()
            now = trio.current_time()
            for keeper, at in list(due.items()):
                if at <= now:
                    del due[keeper]
                    keeper.start_trio()


def _trio_timers(trio: Any) -> _TrioTimers:
    """The running trio run's lease timers (their task started with the
    first leased run)."""
    var = _TRIO_TIMERS[0]
    if var is None:
        var = _TRIO_TIMERS[0] = trio.lowlevel.RunVar("pipeline_lease_timers")
    timers: _TrioTimers | None = var.get(None)
    if timers is None:
        timers = _TrioTimers()
        var.set(timers)
        trio.lowlevel.spawn_system_task(
            timers.serve, trio, name="pipeline lease timers"
        )
    return timers


_TRIO_TIMERS: list[Any] = [None]
"""The ``trio.lowlevel.RunVar`` of each trio run's timers, once made."""


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
