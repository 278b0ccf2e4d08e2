"""map_reduce: bounded concurrency, input order, nothing dropped."""

from __future__ import annotations

import anyio
import pytest

from hypothesis import given
from hypothesis import strategies as st
from returns.result import Failure, Result, Success

from pipeline import Handler, handler, map_reduce
from pipeline.errors import ConstructionError, FanOutLimitExceeded
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
