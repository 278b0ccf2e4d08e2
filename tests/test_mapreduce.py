"""map_reduce: bounded concurrency, input order, nothing dropped."""

from __future__ import annotations

import itertools

from collections.abc import AsyncIterator, Iterator

import anyio
import pytest

from hypothesis import given
from hypothesis import strategies as st
from returns.result import Failure, Result, Success

from pipeline import Handler, handler, map_reduce
from pipeline._concurrency import _Eager
from pipeline.errors import ConstructionError
from pipeline.failures import FanOutLimitExceeded
from tests.virtual_clock import VirtualClock


def collect(
    state: int, results: tuple[Result[int, str], ...]
) -> Result[tuple[Result[int, str], ...], str]:
    return Success(results)


def upto(k: int) -> range:
    return range(k)


class Meter:
    """Tracks how many workers run at once."""

    def __init__(self) -> None:
        self.now = 0
        self.peak = 0


def tracked(
    meter: Meter, clock: VirtualClock, delays: list[int], fail: set[int]
) -> Handler[int, int, str]:
    @handler(name="work")
    async def run(i: int) -> Result[int, str]:
        meter.now += 1
        meter.peak = max(meter.peak, meter.now)
        try:
            await clock.sleep(delays[i % len(delays)])
        finally:
            meter.now -= 1
        return Failure(f"item {i}") if i in fail else Success(i * 10)

    return run


@pytest.mark.slow
@given(
    n=st.integers(0, 300),
    concurrency=st.sampled_from([1, 2, 8, 64]),
    delays=st.lists(st.integers(0, 5), min_size=1, max_size=10),
    fail=st.sets(st.integers(0, 299), max_size=10),
)
async def test_bounded_ordered_and_complete(
    n: int, concurrency: int, delays: list[int], fail: set[int]
) -> None:
    """Never more than max_concurrency at once; every item once, in order."""
    meter, clock = Meter(), VirtualClock()
    mr = map_reduce(
        upto,
        tracked(meter, clock, delays, fail),
        collect,
        max_concurrency=concurrency,
    )
    out = (await clock.drive(lambda: mr(n))).unwrap()
    assert meter.peak <= concurrency
    assert len(out) == n
    for i, r in enumerate(out):
        if i in fail:
            assert isinstance(r, Failure)
        else:
            assert r == Success(i * 10)


async def test_ten_thousand_items_none_dropped_or_duplicated() -> None:
    """10,000 items through 8 workers: never more than 8 at once, each
    result once, in input order."""
    seen: list[int] = []
    meter = Meter()

    @handler
    async def work(i: int) -> Result[int, str]:
        meter.now += 1
        meter.peak = max(meter.peak, meter.now)
        seen.append(i)
        await anyio.lowlevel.checkpoint()
        meter.now -= 1
        return Success(i)

    mr = map_reduce(upto, work, collect, max_concurrency=8)
    out = (await mr(10_000)).unwrap()
    assert [r.unwrap() for r in out] == list(range(10_000))
    assert sorted(seen) == list(range(10_000))
    assert meter.peak == 8  # the bound, and reached


async def test_fail_fast_cancels_in_flight_at_once() -> None:
    """With fail_fast the first failure cancels the rest at that instant."""
    meter, clock = Meter(), VirtualClock()
    cancelled_at: list[float] = []

    @handler
    async def work(i: int) -> Result[int, str]:
        try:
            await clock.sleep(1 if i == 3 else 10)
        except anyio.get_cancelled_exc_class():
            cancelled_at.append(clock.now)
            raise
        return Failure("bad 3") if i == 3 else Success(i)

    mr = map_reduce(upto, work, collect, max_concurrency=4, fail_fast=True)
    out = await clock.drive(lambda: mr(8))
    assert out == Failure("bad 3")
    assert cancelled_at == [1.0, 1.0, 1.0]
    assert meter.peak == 0


async def test_too_many_items_rejected_before_any_work() -> None:
    """Over max_items, no worker starts."""
    started: list[int] = []

    @handler
    async def work(i: int) -> Result[int, str]:
        started.append(i)  # pragma: no cover
        return Success(i)  # pragma: no cover

    mr = map_reduce(upto, work, collect, max_items=100)
    out = await mr(101)
    assert out == Failure(FanOutLimitExceeded(101, 100, path=("map_reduce",)))
    assert started == []


def test_bad_settings() -> None:
    """A non-positive concurrency is refused when built."""

    @handler
    async def work(i: int) -> Result[int, str]:
        return Success(i)  # pragma: no cover

    with pytest.raises(ConstructionError):
        map_reduce(upto, work, collect, max_concurrency=0)


# -- async split and reduce; a split that fails is a value ----------------------


@handler
async def double(i: int) -> Result[int, str]:
    return Success(i * 2)


async def test_async_split_and_reduce() -> None:
    """split and reduce may be async def functions."""

    async def split(k: int) -> list[int]:
        await anyio.lowlevel.checkpoint()
        return list(range(k))

    async def total(
        _: int, rs: tuple[Result[int, str], ...]
    ) -> Result[int, str]:
        await anyio.lowlevel.checkpoint()
        return Success(sum(r.unwrap() for r in rs))

    assert (await map_reduce(split, double, total)(4)).unwrap() == 12


async def test_split_returning_a_result() -> None:
    """A Success split runs the items; a Failure split is the failure."""

    def split(k: int) -> Result[list[int], ValueError]:
        if k < 0:
            return Failure(ValueError("negative"))
        return Success(list(range(k)))

    mr = map_reduce(split, double, collect, name="mr")
    ok = await mr(3)
    assert [r.unwrap() for r in ok.unwrap()] == [0, 2, 4]
    bad = await mr(-1)
    assert type(bad) is Failure
    assert isinstance(bad.failure(), ValueError)


async def test_failing_split_runs_no_worker() -> None:
    """When split fails, no worker runs and reduce is not called."""
    ran: list[int] = []

    @handler
    async def work(i: int) -> Result[int, str]:
        ran.append(i)
        return Success(i)

    async def split(_: int) -> Result[list[int], FanOutLimitExceeded]:
        return Failure(FanOutLimitExceeded(9, 1))

    def reduce(_: int, rs: tuple[Result[int, str], ...]) -> Result[int, str]:
        raise AssertionError("reduce ran")  # pragma: no cover

    r = await map_reduce(split, work, reduce, name="mr")(0)
    assert type(r) is Failure
    assert r.failure().path == ("mr[split]",)
    assert ran == []


async def test_reduce_must_return_a_result() -> None:
    """A reduce returning no Result is a TypeError naming the map_reduce."""

    def reduce(_: int, rs: tuple[Result[int, str], ...]) -> Result[int, str]:
        return len(rs)  # type: ignore[return-value]  # the mistake

    with pytest.raises(
        TypeError, match="mr reduce returned an object of type int"
    ):
        await map_reduce(upto, double, reduce, name="mr")(2)


# -- a lazy split is read no further than the limit -----------------------------


async def test_endless_split_is_refused_after_max_items_plus_one() -> None:
    """An endless generator or async generator split is read for
    max_items + 1 items, refused, and closed; no worker runs."""
    read: list[int] = []
    closed: list[str] = []

    def endless(_: int) -> Iterator[int]:
        try:
            for i in itertools.count():
                read.append(i)
                yield i
        finally:
            closed.append("sync")

    async def endless_later(_: int) -> AsyncIterator[int]:
        try:
            for i in itertools.count():
                read.append(i)
                yield i
        finally:
            closed.append("async")

    started: list[int] = []

    @handler
    async def work(i: int) -> Result[int, str]:
        started.append(i)  # pragma: no cover
        return Success(i)  # pragma: no cover

    for split in (endless, endless_later):
        read.clear()
        out = await map_reduce(split, work, collect, max_items=5, name="mr")(0)
        assert out == Failure(FanOutLimitExceeded(6, 5, path=("mr",)))
        assert read == list(range(6))
    assert closed == ["sync", "async"]
    assert started == []


async def test_lazy_split_within_the_limit_runs_every_item() -> None:
    """A generator or async generator split within max_items runs each
    item once, in order."""

    def some(k: int) -> Iterator[int]:
        yield from range(k)

    async def some_later(k: int) -> AsyncIterator[int]:
        for i in range(k):
            yield i

    for split in (some, some_later):
        out = await map_reduce(split, double, collect, max_items=5)(5)
        assert out == Success(tuple(Success(2 * i) for i in range(5)))


async def test_items_that_never_wait_run_in_one_task() -> None:
    """The pool starts one worker, and the others only once it waits:
    items that never wait all run in that one task."""
    tasks: set[int] = set()

    @handler
    async def work(i: int) -> Result[int, str]:
        tasks.add(anyio.get_current_task().id)
        return Success(i)

    mr = map_reduce(upto, work, collect, max_concurrency=8)
    out = (await mr(20)).unwrap()
    assert [r.unwrap() for r in out] == list(range(20))
    assert len(tasks) == 1


@pytest.mark.parametrize("first_waits", [True, False])
async def test_the_pool_reaches_its_bound_once_an_item_waits(
    first_waits: bool,
) -> None:
    """Once an item waits, the other workers start: *k* items that each
    wait for all *k* to be in flight finish (they run at once), whether
    the first item waits or only a later one does."""
    k = 4
    arrived = 0
    everyone = anyio.Event()

    @handler
    async def work(i: int) -> Result[int, str]:
        nonlocal arrived
        if i == 0 and not first_waits:
            return Success(i)
        arrived += 1
        if arrived == k:
            everyone.set()
        await everyone.wait()
        return Success(i)

    n = k if first_waits else k + 1
    mr = map_reduce(upto, work, collect, max_concurrency=k)
    with anyio.fail_after(5):
        out = (await mr(n)).unwrap()
    assert [r.unwrap() for r in out] == list(range(n))


@given(
    plan=st.lists(
        st.tuples(st.integers(0, 3), st.booleans()), min_size=0, max_size=40
    ),
    concurrency=st.sampled_from([1, 2, 3, 16]),
    fail_fast=st.booleans(),
)
async def test_the_lazy_pool_equals_the_items_one_by_one(
    plan: list[tuple[int, bool]], concurrency: int, fail_fast: bool
) -> None:
    """Items that wait (a number of checkpoints) or not, failing or not:
    the pool's results are what running the items one by one gives (or,
    fail-fast, the earliest failure among those that ran), with never more
    than *concurrency* in flight."""
    meter = Meter()

    @handler(name="work")
    async def work(i: int) -> Result[int, str]:
        meter.now += 1
        meter.peak = max(meter.peak, meter.now)
        try:
            for _ in range(plan[i][0]):
                await anyio.lowlevel.checkpoint()
        finally:
            meter.now -= 1
        return Failure(f"item {i}") if plan[i][1] else Success(i * 10)

    mr = map_reduce(
        upto, work, collect, max_concurrency=concurrency, fail_fast=fail_fast
    )
    out = await mr(len(plan))
    expected = tuple(
        Failure(f"item {i}") if bad else Success(i * 10)
        for i, (_, bad) in enumerate(plan)
    )
    assert meter.peak <= concurrency
    if fail_fast and any(bad for _, bad in plan):
        assert isinstance(out, Failure)
        assert out.failure() in {
            f"item {i}" for i, (_, b) in enumerate(plan) if b
        }
    else:
        assert [r.value_or(None) for r in out.unwrap()] == [
            r.value_or(None) for r in expected
        ]
        assert [type(r) for r in out.unwrap()] == [type(r) for r in expected]


async def test_eager_passes_everything_through_and_hooks_once() -> None:
    """``_Eager`` awaits its coroutine as a plain ``await`` would (values
    and cancellations pass through), calling its hook once, at the first
    suspension; a coroutine that never suspends never calls it."""
    hooked: list[str] = []

    async def quick() -> None:
        hooked.append("ran quick")

    await _Eager(quick(), lambda: hooked.append("hook"))
    assert hooked == ["ran quick"]

    async def slow() -> None:
        for _ in range(3):
            await anyio.lowlevel.checkpoint()
        hooked.append("ran slow")

    await _Eager(slow(), lambda: hooked.append("hook"))
    assert hooked == ["ran quick", "hook", "ran slow"]

    stopped: list[str] = []

    async def forever() -> None:
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            stopped.append("cancelled")
            raise

    with anyio.move_on_after(0.01) as scope:
        await _Eager(forever(), lambda: None)
    assert scope.cancelled_caught
    assert stopped == ["cancelled"]


async def test_eager_closes_its_coroutine_when_the_hook_fails() -> None:
    """A hook that raises leaves nothing suspended: the coroutine is
    closed (its ``finally`` runs) and the error goes to the caller."""
    cleaned: list[bool] = []

    async def waits() -> None:
        try:
            await anyio.sleep_forever()
        finally:
            cleaned.append(True)

    def boom() -> None:
        raise RuntimeError("hook")

    with pytest.raises(RuntimeError, match="hook"):
        await _Eager(waits(), boom)
    assert cleaned == [True]


@pytest.mark.parametrize("arg", ["max_concurrency", "max_items"])
def test_a_count_of_the_wrong_type_is_refused_by_name(arg: str) -> None:
    """A ``map_reduce`` count that is not an int is refused where it is
    given, naming the argument (not a bare comparison error)."""

    @handler
    async def work(i: int) -> Result[int, str]:
        return Success(i)  # pragma: no cover

    with pytest.raises(
        ConstructionError,
        match=rf"^map_reduce\({arg}=\.\.\.\): must be an int",
    ):
        map_reduce(upto, work, collect, **{arg: "4"})  # type: ignore[arg-type]
