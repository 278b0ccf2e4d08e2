"""Running a thread in one place at a time: its lease, held for a run.

:func:`leased` takes the thread's lease in the store before anything runs
(:class:`~pipeline.failures.ThreadBusy` if another runner holds it), renews
it every third of its time to live while the run goes on, and gives it up
at the end.  If a renewal finds the lease taken (this runner stalled past
its expiry and another took over), the run is cancelled at once and ends
with :class:`~pipeline.failures.LeaseLost`: its commits would be refused
anyway, and its side effects should stop.  A runner that dies never gives
its lease up; it expires.
"""

from __future__ import annotations

import logging
import os
import socket
import uuid

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio

from returns.result import Failure, Result

from .._concurrency import collapse
from ..failures import LeaseLost
from ._protocol import CheckpointStore, Lease


T = TypeVar("T")

log = logging.getLogger("pipeline.fold")

RELEASE_BOUND = 5.0
"""Seconds a run's end waits, shielded, to give its lease up."""


def owner() -> str:
    """A name for this runner: host, process, and a random part."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"


async def leased(
    store: CheckpointStore,
    thread_id: str,
    body: Callable[[Lease], Awaitable[Result[T, Any]]],
) -> Result[T, Any]:
    """Run *body* holding the thread's lease; see the module docstring.

    .. versionadded:: 0.1.0
    """
    ttl = store.lease_ttl
    me = owner()
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
    lease: Lease = acquired.unwrap()
    lost = False
    result: Result[T, Any] | None = None

    async def keep(scope: anyio.CancelScope) -> None:
        nonlocal lease, lost
        while True:
            await anyio.sleep(ttl / 3)
            renewed = await store.renew(lease, ttl=ttl)
            if not isinstance(renewed.value_or(None), Lease):
                lost = True
                scope.cancel()
                return
            lease = renewed.unwrap()

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(keep, tg.cancel_scope)
            result = await body(lease)
            tg.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        raise collapse(group) from None
    finally:
        with anyio.CancelScope(shield=True) as scope:
            scope.deadline = anyio.current_time() + RELEASE_BOUND
            await store.release(lease)
    if lost or result is None:
        return Failure(LeaseLost(thread_id))
    return result


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
