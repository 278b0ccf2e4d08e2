"""Cancelling code the way each backend does it natively, for tests.

anyio's own scopes are not the only way a caller is cancelled: on asyncio
it is ``task.cancel()``, ``asyncio.timeout`` and ``asyncio.wait_for``; on
trio, trio's own scopes and deadlines.  These helpers do it the backend's
way, so a test runs on both backends and still uses native cancellation.
"""

from __future__ import annotations

import asyncio
import contextlib
import math

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Literal, NoReturn

import anyio
import sniffio
import trio


Outcome = Literal["cancelled", "returned"]


def on_trio() -> bool:
    """Whether this runs on trio (else asyncio)."""
    return sniffio.current_async_library() == "trio"


def deadline_error() -> type[BaseException]:
    """What a native deadline raises: ``TimeoutError``, ``TooSlowError``."""
    return trio.TooSlowError if on_trio() else TimeoutError


async def stray_cancellation() -> NoReturn:
    """End in a cancellation that is not the caller's.

    On asyncio, awaiting a future that something else cancelled (the
    red-team reproducer's case); on trio, where that cannot happen, a
    ``Cancelled`` caught inside an inner scope and raised outside it.
    Either way nothing cancelled the caller.
    """
    if not on_trio():
        future = asyncio.get_running_loop().create_future()
        future.cancel()
        await future
    caught: BaseException | None = None
    with anyio.CancelScope() as scope:
        scope.cancel()
        try:
            await anyio.lowlevel.checkpoint()
        except anyio.get_cancelled_exc_class() as exc:
            caught = exc
    assert caught is not None
    raise caught


async def call_pre_cancelled(call: Callable[[], Awaitable[object]]) -> Outcome:
    """Run *call* from a caller whose cancellation is already requested.

    On asyncio the caller's task cancels itself (``Task.cancel()``, not yet
    delivered) and then calls; on trio, the call runs in a trio scope
    cancelled before it.  ``"cancelled"`` if the cancellation reached the
    caller, ``"returned"`` if *call* returned a value.
    """
    if on_trio():
        with trio.CancelScope() as scope:
            scope.cancel()
            await call()
            return "returned"
        return "cancelled"

    async def cancelled_caller() -> None:
        task = asyncio.current_task()
        assert task is not None
        task.cancel()
        await call()

    task = asyncio.get_running_loop().create_task(cancelled_caller())
    try:
        await task
    except asyncio.CancelledError:
        return "cancelled"
    return "returned"


@contextlib.asynccontextmanager
async def native_deadline(
    seconds: float = math.inf,
) -> AsyncIterator[Callable[[], None]]:
    """A deadline of the backend's own in *seconds*; yields "expire now".

    ``asyncio.timeout`` on asyncio, ``trio.fail_after`` on trio: leaving
    the block after it expired raises :func:`deadline_error`.  Calling the
    yielded function makes it due at once (it lands at the next
    checkpoint, wherever the code is then).
    """
    if on_trio():
        with trio.fail_after(seconds) as scope:
            yield lambda: setattr(scope, "deadline", trio.current_time())
        return
    loop = asyncio.get_running_loop()
    delay = None if math.isinf(seconds) else seconds
    async with asyncio.timeout(delay) as cm:

        def expire() -> None:
            if not cm.expired():  # a fired timeout refuses ``reschedule``
                cm.reschedule(loop.time())

        yield expire
