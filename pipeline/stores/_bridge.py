"""An asyncio event loop in a thread of its own, for the server stores.

psycopg's and redis-py's async clients run on asyncio only, and their
connection pools belong to the event loop that opened them.  A server store
therefore runs a client on a loop of its own, in a daemon thread, and the
callers it does not serve on their own loop (trio, other asyncio loops: see
:mod:`pipeline.stores._server`) hand it work from any anyio backend, any
event loop and any thread:

* a caller submits a coroutine function; the loop runs it as a task; when it
  is done, the caller's own event loop is woken, from the task's last step
  (``call_soon_threadsafe`` on asyncio, the trio token's ``run_sync_soon``
  on trio);
* a caller's cancellation (anyio's or asyncio's native ``task.cancel()``)
  never reaches the task: work that was submitted runs whole, so a
  transaction is never abandoned half-way on a pooled connection.  A
  cancelled writer waits for its write to be whole, shielded from anyio
  cancellation (for a bounded time), then raises; a cancelled reader stops
  waiting at once and its answer is dropped;
* closing waits for the work in flight, then stops the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import threading

from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Final, Generic, TypeVar, cast, final

import anyio
import anyio.lowlevel


T = TypeVar("T")

SHIELD_BOUND: Final = 30.0
"""Seconds a write's caller waits for its answer, shielded from anyio
cancellation.  The write itself is never abandoned (it completes on the
store's loop); past this bound a cancelled caller stops waiting for it."""


def waker() -> Callable[[Callable[[], object]], object]:
    """How a foreign thread schedules a call in the caller's event loop."""
    native = anyio.lowlevel.current_token().native_token
    if isinstance(native, asyncio.AbstractEventLoop):
        return native.call_soon_threadsafe
    # A trio token: anyio's only other backend.
    run_sync_soon: Callable[[Callable[[], object]], object] = getattr(  # noqa: B009
        native, "run_sync_soon"
    )
    return run_sync_soon


@final
class _Call(Generic[T]):
    """One piece of work for the loop, and how to tell its caller."""

    __slots__ = ("error", "event", "result", "wake", "work")

    def __init__(
        self,
        work: Callable[[], Coroutine[Any, Any, T]],
        wake: Callable[[Callable[[], object]], object],
    ) -> None:
        self.work = work
        self.wake = wake
        self.event = anyio.Event()
        self.result: T | None = None
        self.error: BaseException | None = None

    async def run(self) -> None:
        """Run the work (as a task of the loop), record its outcome, and
        wake the caller right away: it wakes a turn of the loop sooner
        than from the task's done callbacks."""
        try:
            self.result = await self.work()
        except asyncio.CancelledError:  # the loop is shutting down
            msg = "the store was closed while this call was in flight"
            self.error = RuntimeError(msg)
            raise
        except Exception as error:  # noqa: BLE001  # the caller's to raise
            self.error = error
        except BaseException as error:
            self.error = error
            raise
        finally:
            # (RuntimeError: the caller's loop is gone.)
            with contextlib.suppress(RuntimeError):
                self.wake(self.event.set)


async def wait_out(
    wait: Callable[[], Awaitable[object]], done: Callable[[], bool]
) -> None:
    """Wait (``wait()``, again and again) until a write in flight is
    *done*, its caller already cancelled: shielded from anyio's
    cancellation, and through asyncio's own ``task.cancel()`` too (anyio's
    shield does not stop those on asyncio: each is caught and the wait goes
    on), for at most :data:`SHIELD_BOUND` seconds.  The caller raises its
    cancellation afterwards.  Shielding only once cancelled spares every
    other call a cancel scope and its timer."""
    with anyio.CancelScope(
        shield=True, deadline=anyio.current_time() + SHIELD_BOUND
    ) as scope:
        while not done():
            try:
                await wait()
            except anyio.get_cancelled_exc_class():
                if scope.cancel_called:  # the bound: give up waiting
                    raise


@final
class LoopThread:
    """An asyncio event loop running in a daemon thread named *name*."""

    def __init__(self, name: str) -> None:
        # A selector loop on every platform: psycopg's async connections
        # cannot run on Windows' default proactor loop.
        self._loop = asyncio.SelectorEventLoop()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._closed = False
        self._ended: Callable[[], object] | None = None
        """Called by the thread as its last act (see ``close``)."""
        self._over = False
        """Whether the thread is at its end (its loop closed)."""
        self._thread = threading.Thread(
            target=self._serve, name=name, daemon=True
        )
        self._thread.start()

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_forever()
        finally:
            try:
                self._loop.run_until_complete(self._loop.shutdown_asyncgens())
                self._loop.close()
            finally:
                self._over = True  # (then _ended read: see close)
                ended = self._ended
                if ended is not None:
                    with contextlib.suppress(RuntimeError):
                        # (The caller's loop or run is gone: nobody waits.)
                        ended()

    async def run(
        self,
        work: Callable[[], Coroutine[Any, Any, T]],
        *,
        shield: bool,
    ) -> T:
        """Run ``work()`` on the loop; return what it returned, or raise
        what it raised.

        With *shield*, a cancelled caller waits for it, shielded from anyio
        cancellation (up to :data:`SHIELD_BOUND` seconds), then raises.
        Either way, a cancelled caller leaves the work to finish on the
        loop.
        """
        if self._closed:
            msg = "the store is closed"
            raise RuntimeError(msg)
        return await self._submit(work, shield=shield)

    async def _submit(
        self,
        work: Callable[[], Coroutine[Any, Any, T]],
        *,
        shield: bool,
        last: bool = False,
    ) -> T:
        call = _Call(work, waker())
        self._loop.call_soon_threadsafe(self._start, call, last)
        try:
            await call.event.wait()
        except BaseException:
            if shield and not call.event.is_set():
                # Cancelled with a write in flight: it completes on the
                # loop whatever happens here, and the caller goes on
                # (raising) only once it has.
                await wait_out(call.event.wait, call.event.is_set)
            raise
        if call.error is not None:
            raise call.error
        return cast("T", call.result)  # set, as there is no error

    def _start(self, call: _Call[T], last: bool) -> None:
        task = self._loop.create_task(call.run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        if last:
            # Stop once the task is done (its caller woken at its end),
            # even if the caller has stopped waiting.
            task.add_done_callback(lambda _: self._loop.stop())

    async def drain(self) -> None:
        """Wait (on the loop) for every other task in flight to finish."""
        current = asyncio.current_task()
        while pending := [t for t in self._tasks if t is not current]:
            await asyncio.wait(pending)

    async def close(self, last: Callable[[], Awaitable[None]]) -> None:
        """Let the work in flight finish, run ``last()`` on the loop (to
        close the client), stop the loop and join its thread."""
        if self._closed:
            return
        self._closed = True  # no new work from here on

        async def finish() -> None:
            await self.drain()
            await last()

        # The thread tells the caller's loop when its own loop is closed,
        # its last act: the caller waits for that, not for a worker thread
        # of its own to join it (a hop between threads less: on trio,
        # whose runs each open such a thread, 0.5-1 ms a store's close).
        # (The thread marks itself over, then reads ``_ended``; this sets
        # ``_ended``, then reads the mark: one of the two sees the other.)
        ended = anyio.Event()
        wake = waker()
        self._ended = functools.partial(wake, ended.set)
        with anyio.CancelScope(shield=True):
            try:
                await self._submit(finish, shield=False, last=True)
            finally:
                if not self._over:
                    await ended.wait()
                # Its work is done: this returns as soon as the thread has
                # left its function (waits for no work of the thread's).
                self._thread.join()
