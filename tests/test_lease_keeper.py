"""The task that renews a run's lease: it renews while a long step runs,
ends with the run without being cancelled (the run's fixed cost), and a
renewal still in flight when the run ends is cancelled, not waited for.

Every interleaving is forced with events, never hoped for with sleeps.
"""

from __future__ import annotations

import contextvars
import os
import re
import time

from typing import Any

import anyio
import pytest

from returns.result import Failure, Result, Success

from pipeline import stores
from pipeline.failures import LeaseLost
from pipeline.stores import _lease
from tests.stores import DelegatingStore


GUARD = 60.0
"""Seconds after which a test that would otherwise hang fails instead."""


class Watched(DelegatingStore):
    """A memory store that counts renewals and signals the *at*-th one;
    with *stall*, that renewal never answers (until cancelled)."""

    def __init__(
        self, ttl: float, at: int = 1, *, stall: bool = False
    ) -> None:
        super().__init__(stores.MemoryStore(lease_ttl=ttl))
        self.at, self.stall = at, stall
        self.renewals = 0
        self.reached = anyio.Event()
        self.cancelled = False

    async def renew(
        self, lease: stores.Lease, *, ttl: float
    ) -> Result[stores.Lease, LeaseLost]:
        self.renewals += 1
        if self.renewals == self.at:
            self.reached.set()
            if self.stall:
                try:
                    await anyio.sleep_forever()
                except anyio.get_cancelled_exc_class():
                    self.cancelled = True
                    raise
        return await super().renew(lease, ttl=ttl)


async def free(store: DelegatingStore) -> bool:
    """Whether another runner can take the thread now (its lease was
    given up)."""
    taken = await store.acquire("t", "other", ttl=60)
    return type(taken) is Success


async def test_a_short_run_renews_nothing_and_gives_its_lease_up() -> None:
    store = Watched(ttl=600)

    async def body(held: stores.Held) -> Result[int, str]:
        assert await held.ensure() is None
        return Success(1)

    with anyio.fail_after(GUARD):
        out = await stores.leased(store, "t", body)
    assert out == Success(1)
    assert store.renewals == 0
    assert await free(store)


async def test_the_lease_is_renewed_while_a_long_step_runs() -> None:
    """The step outlasts two renewals (it waits for them); the renewing
    task goes on meanwhile, then ends with the run."""
    store = Watched(ttl=0.3, at=2)

    async def body(held: stores.Held) -> Result[int, str]:
        await store.reached.wait()
        return Success(2)

    with anyio.fail_after(GUARD):
        out = await stores.leased(store, "t", body)
    assert out == Success(2)
    assert store.renewals >= 2
    assert await free(store)


async def test_a_renewal_in_flight_when_the_run_ends_is_cancelled() -> None:
    """The run ends while a renewal waits for its answer: the renewal is
    cancelled (as it always was), the run's result stands, the lease is
    given up."""
    store = Watched(ttl=0.3, stall=True)

    async def body(held: stores.Held) -> Result[int, str]:
        await store.reached.wait()
        return Success(3)

    with anyio.fail_after(GUARD):
        out = await stores.leased(store, "t", body)
    assert out == Success(3)
    assert store.cancelled
    assert await free(store)


async def test_a_failing_body_stops_the_renewing_task_too() -> None:
    store = Watched(ttl=600)

    async def body(held: stores.Held) -> Result[int, str]:
        raise RuntimeError

    with anyio.fail_after(GUARD), pytest.raises(RuntimeError):
        await stores.leased(store, "t", body)
    assert await free(store)


def test_a_runner_name_is_host_process_and_48_random_bits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    names = {_lease.owner() for _ in range(100)}
    assert len(names) == 100
    pid = os.getpid()
    for name in names:
        assert re.fullmatch(rf".*:{pid}:[0-9a-f]{{12}}", name)
    # A forked child (another pid) names itself, not its parent.
    monkeypatch.setattr(os, "getpid", lambda: pid + 1)
    assert re.fullmatch(rf".*:{pid + 1}:[0-9a-f]{{12}}", _lease.owner())


async def test_a_short_run_leaves_no_timer_behind() -> None:
    """On asyncio the renewing task starts from a timer when the first
    renewal is due; a run that ends sooner cancels the timer: well past
    that time, nothing has renewed (a leftover timer would start a task in
    a closed group)."""
    store = Watched(ttl=0.3)

    async def body(held: stores.Held) -> Result[int, str]:
        return Success(4)

    with anyio.fail_after(GUARD):
        out = await stores.leased(store, "t", body)
        await anyio.sleep(0.3)  # a third of the time to live, three times
    assert out == Success(4)
    assert store.renewals == 0
    assert await free(store)


@pytest.mark.parametrize("body_first", [True, False])
async def test_a_renewing_task_started_as_the_run_ends(
    monkeypatch: pytest.MonkeyPatch, anyio_backend: str, body_first: bool
) -> None:
    """The timer starts the renewing task in the same loop round as the
    body ends, in either order: the run's result stands, the task ends
    with the run (having renewed once if it ran first), the lease is
    given up."""
    store = Watched(ttl=0.3)
    due = anyio.Event()
    start = _lease._Keeper._start

    def started(
        keeper: _lease._Keeper, loop: Any, scope: anyio.CancelScope
    ) -> None:
        if body_first:  # the body is woken before the task is started
            due.set()
        start(keeper, loop, scope)
        due.set()

    monkeypatch.setattr(_lease._Keeper, "_start", started)

    async def body(held: stores.Held) -> Result[int, str]:
        if anyio_backend == "asyncio":
            await due.wait()
        else:  # trio starts the task with the run (it has no timer)
            await store.reached.wait()
        return Success(5)

    with anyio.fail_after(GUARD):
        out = await stores.leased(store, "t", body)
    assert out == Success(5)
    if anyio_backend == "asyncio":
        assert store.renewals == (0 if body_first else 1)
    assert await free(store)


class Taken(DelegatingStore):
    """A memory store whose *at*-th renewal finds the lease taken (or,
    with *fail*, raises): signalled by *reached*."""

    def __init__(
        self, *, fail: bool = False, raising: BaseException | None = None
    ) -> None:
        super().__init__(stores.MemoryStore(lease_ttl=0.3))
        self.fail = fail
        self.raising = raising
        self.reached = anyio.Event()

    async def renew(
        self, lease: stores.Lease, *, ttl: float
    ) -> Result[stores.Lease, LeaseLost]:
        del ttl  # never renewed
        self.reached.set()
        if self.raising is not None:
            raise self.raising
        if self.fail:
            raise OSError("the store is down")
        return Failure(LeaseLost(lease.thread_id))


async def test_a_lost_lease_cancels_a_long_step() -> None:
    """The renewal finds the lease taken while a step runs: the step is
    cancelled, the run ends in LeaseLost, nothing is left running."""
    store = Taken()
    cancelled = False

    async def body(held: stores.Held) -> Result[int, str]:
        nonlocal cancelled
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            cancelled = True
            raise
        return Success(6)  # pragma: no cover

    with anyio.fail_after(GUARD):
        out = await stores.leased(store, "t", body)
    assert out == Failure(LeaseLost("t"))
    assert cancelled


async def test_a_failing_renewal_stops_the_run_with_its_error() -> None:
    store = Taken(fail=True)

    async def body(held: stores.Held) -> Result[int, str]:
        await anyio.sleep_forever()
        return Success(7)  # pragma: no cover

    with anyio.fail_after(GUARD), pytest.raises(OSError, match="down"):
        await stores.leased(store, "t", body)
    assert await free(store)


class Halt(BaseException):
    """Not an ``Exception``: what a store's call might raise to stop all."""


async def test_a_renewal_raising_a_base_exception_stops_the_run_with_it() -> (
    None
):
    """A renewal that raises something other than an ``Exception`` (on
    trio the renewing task is a system task, which must not raise): the
    run raises it, and the trio run goes on (no ``TrioInternalError``)."""
    store = Taken(raising=Halt("stop"))

    async def body(held: stores.Held) -> Result[int, str]:
        await anyio.sleep_forever()
        return Success(7)  # pragma: no cover

    with (
        anyio.fail_after(GUARD) as guard,
        pytest.raises(Halt, match="stop"),
    ):
        await stores.leased(store, "t", body)
    # Stopped by the renewal, not by the guard (the body was left running,
    # unrenewed, until the guard's deadline: found reading a helper's hang).
    assert not guard.cancel_called
    assert await free(store)


async def test_a_run_cancelled_from_outside_waits_for_its_renewal() -> None:
    """The caller cancels the run while a renewal is in flight: the
    renewal is cancelled and has ended when the run has."""
    store = Watched(ttl=0.3, stall=True)

    async def body(held: stores.Held) -> Result[int, str]:
        await anyio.sleep_forever()
        return Success(8)  # pragma: no cover

    with anyio.fail_after(GUARD):
        async with anyio.create_task_group() as tg:

            async def run() -> None:
                await stores.leased(store, "t", body)

            tg.start_soon(run)
            await store.reached.wait()
            tg.cancel_scope.cancel()
    assert store.cancelled
    assert await free(store)


async def test_a_cancelled_run_on_the_memory_store_gives_its_lease_up(
    anyio_backend: str,
) -> None:
    """The memory store's release is awaited without a bound or a shield
    (none of its calls waits): a run cancelled from outside (by anyio, and
    on asyncio by ``task.cancel()`` too) still gives its lease up."""
    store = stores.MemoryStore()
    started = anyio.Event()

    async def body(held: stores.Held) -> Result[int, str]:
        del held
        started.set()
        await anyio.sleep_forever()
        raise AssertionError  # pragma: no cover  # never woken

    with anyio.fail_after(GUARD):
        async with anyio.create_task_group() as tg:
            tg.start_soon(stores.leased, store, "t", body)
            await started.wait()
            tg.cancel_scope.cancel()
    taken = await store.acquire("t", "other", ttl=60)
    assert type(taken) is Success
    if anyio_backend != "asyncio":
        return
    import asyncio  # noqa: PLC0415  # asyncio's own cancellation

    started = anyio.Event()
    task = asyncio.ensure_future(stores.leased(store, "u", body))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    taken = await store.acquire("u", "other", ttl=60)
    assert type(taken) is Success


class Seen(DelegatingStore):
    """A memory store whose renewals note a context variable's value."""

    def __init__(self, ttl: float) -> None:
        super().__init__(stores.MemoryStore(lease_ttl=ttl))
        self.seen: list[str] = []
        self.reached = anyio.Event()

    async def renew(
        self, lease: stores.Lease, *, ttl: float
    ) -> Result[stores.Lease, LeaseLost]:
        self.seen.append(_WHO.get())
        self.reached.set()
        return await super().renew(lease, ttl=ttl)


_WHO: contextvars.ContextVar[str] = contextvars.ContextVar("who", default="")


@pytest.mark.parametrize("anyio_backend", ["trio"])  # trio's timers
async def test_on_trio_short_runs_start_no_task_and_leave_no_timer(
    monkeypatch: pytest.MonkeyPatch, anyio_backend: str
) -> None:
    """On trio one task a trio run keeps the runs' timers: short runs
    start no keeper task, and each takes its timer out as it ends."""
    del anyio_backend
    import trio  # noqa: PLC0415

    started: list[object] = []

    def start(keeper: _lease._Keeper) -> None:
        started.append(keeper)

    monkeypatch.setattr(_lease._Keeper, "start_trio", start)
    store = Watched(ttl=600)

    async def body(held: stores.Held) -> Result[int, str]:
        return Success(1)

    with anyio.fail_after(GUARD):
        for _ in range(20):
            assert await stores.leased(store, "t", body) == Success(1)
    timers = _lease._trio_timers(trio)
    assert timers is _lease._trio_timers(trio)  # one a trio run
    assert timers.due == {}
    assert started == []
    assert store.renewals == 0
    assert await free(store)


@pytest.mark.parametrize("anyio_backend", ["trio"])  # trio's timers
async def test_on_trio_an_earlier_timer_wakes_the_timers_sooner(
    anyio_backend: str,
) -> None:
    """A run of a short time to live starting while one of a long one
    runs is renewed on time: the timers' task wakes for the earlier."""
    del anyio_backend
    slow = Watched(ttl=600)
    fast = Watched(ttl=0.3)
    go = anyio.Event()

    async def waits(held: stores.Held) -> Result[int, str]:
        await go.wait()
        return Success(1)

    async def renewed(held: stores.Held) -> Result[int, str]:
        await fast.reached.wait()
        return Success(2)

    async def short(held: stores.Held) -> Result[int, str]:
        return Success(0)

    with anyio.fail_after(GUARD):
        # The timers' task started, and asleep (nothing due).
        assert await stores.leased(slow, "t0", short) == Success(0)
        for _ in range(3):
            await anyio.lowlevel.checkpoint()
        async with anyio.create_task_group() as tg:
            tg.start_soon(stores.leased, slow, "t", waits)
            await anyio.lowlevel.checkpoint()
            assert await stores.leased(fast, "t", renewed) == Success(2)
            go.set()
    assert fast.renewals >= 1
    assert slow.renewals == 0
    assert await free(slow)
    assert await free(fast)


async def test_the_renewing_task_runs_in_the_runs_context() -> None:
    """The task (a trio system task, an asyncio timer's task) sees the
    context the run started in."""
    store = Seen(ttl=0.3)
    token = _WHO.set("the run")

    async def body(held: stores.Held) -> Result[int, str]:
        await store.reached.wait()
        return Success(3)

    try:
        with anyio.fail_after(GUARD):
            out = await stores.leased(store, "t", body)
    finally:
        _WHO.reset(token)
    assert out == Success(3)
    assert store.seen[:1] == ["the run"]
    assert await free(store)


class Silent(DelegatingStore):
    """A memory store whose renewals never answer (until cancelled)."""

    def __init__(self, ttl: float) -> None:
        super().__init__(stores.MemoryStore(lease_ttl=ttl))

    async def renew(
        self, lease: stores.Lease, *, ttl: float
    ) -> Result[stores.Lease, LeaseLost]:
        del lease, ttl  # never renewed
        await anyio.sleep_forever()
        raise AssertionError  # pragma: no cover  # never answers


async def test_a_renewal_that_never_answers_stops_the_run() -> None:
    """A step that finds its lease stale renews it first; a renewal not
    answered within the lease's time to live could only grant a lease
    lapsed already: the step does not start, the run stops with
    LeaseLost, and does not hang (found attacking)."""
    ttl = 0.2
    store = Silent(ttl)

    async def body(held: stores.Held) -> Result[int, str]:
        # Stale now, as after a stall (its last renewal a lease ago).
        held.renewed(held.lease, time.monotonic() - ttl)
        lapsed = await held.ensure()
        assert lapsed == Failure(LeaseLost("t"))
        return Success(8)

    with anyio.fail_after(GUARD):
        assert await stores.leased(store, "t", body) == Success(8)


@pytest.mark.parametrize("lost", [False, True])
@pytest.mark.parametrize("age", [0.0, 0.5, 0.66, 0.67, 0.9, 1.0, 2.0])
async def test_a_fresh_lease_is_what_ensure_answers_at_once(
    age: float, lost: bool
) -> None:
    """``Held.fresh`` (the engine's and the tools' check before each step
    and batch of calls, no coroutine awaited) is true exactly when
    ``ensure`` would answer ``None`` without asking the store: the lease
    neither lost nor within a third of its time to live of lapsing
    (*age*: the part of it gone since it was taken)."""
    ttl = 30.0
    store = Watched(ttl=ttl)
    taken = await store.acquire("t", "me", ttl=ttl)
    held = stores.Held(
        store, taken.unwrap(), ttl, time.monotonic() - age * ttl
    )
    held.lost = lost
    fresh = held.fresh()
    out = await held.ensure()
    assert fresh == (not lost and age < 2 / 3 - 0.001)
    if fresh:
        assert out is None
        assert store.renewals == 0
    elif lost:
        assert out == Failure(LeaseLost("t"))
        assert store.renewals == 0
    else:  # renewed first (it was not taken: the step goes on)
        assert out is None
        assert store.renewals == 1
        assert held.fresh()
