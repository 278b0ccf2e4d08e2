"""Fault scenarios F2 and F3 (RELIABILITY.md) under a virtual clock."""

from __future__ import annotations

import anyio
import pytest

from hypothesis import given
from hypothesis import strategies as st
from returns.result import Failure, Result, Success

from pipeline import Handler, first, handler, must
from pipeline.failures import AllFailed
from tests.virtual_clock import VirtualClock


class Log:
    """What each branch did, in virtual time."""

    def __init__(self, clock: VirtualClock) -> None:
        self.clock = clock
        self.finished: dict[int, float] = {}
        self.cleaned: dict[int, float] = {}


def branch(
    i: int, latency: int, outcome: str, log: Log
) -> Handler[int, int, str]:
    """Sleep *latency*, then succeed, fail, or raise; record cleanup time."""

    @handler(name=f"b{i}")
    async def run(x: int) -> Result[int, str]:
        try:
            await log.clock.sleep(latency)
            log.finished[i] = log.clock.now
            if outcome == "raise":
                msg = f"b{i}"
                raise RuntimeError(msg)
            if outcome == "fail":
                return Failure(f"b{i}")
            return Success(x + i)
        finally:
            log.cleaned[i] = log.clock.now

    return run


@given(
    latencies=st.lists(st.integers(1, 50), min_size=2, max_size=64),
    data=st.data(),
    raises=st.booleans(),
)
async def test_f2_fail_fast_cancels_at_the_failure_instant(
    latencies: list[int], data: st.DataObject, raises: bool
) -> None:
    """One branch fails at t: all others stop at t, none leak, all clean up."""
    k = len(latencies)
    j = data.draw(st.integers(0, k - 1), label="failing branch")
    t = latencies[j]
    clock = VirtualClock()
    log = Log(clock)
    outcome = "raise" if raises else "fail"
    par = must(
        *(
            branch(i, lat, outcome if i == j else "ok", log)
            for i, lat in enumerate(latencies)
        ),
        aggregate=lambda x, outs: Success(sum(outs)),
    )
    before = len(anyio.get_running_tasks())
    if raises:
        with pytest.raises(RuntimeError, match=f"^b{j}$"):
            await clock.drive(lambda: par(0))
    else:
        out = await clock.drive(lambda: par(0))
        assert out == Failure(f"b{j}")
    assert len(anyio.get_running_tasks()) == before
    assert set(log.cleaned) == set(range(k))  # every finally ran
    for i, lat in enumerate(latencies):
        if lat < t:
            assert log.finished[i] == lat
        elif lat > t:
            assert i not in log.finished  # cancelled before finishing
            assert log.cleaned[i] == t  # at the failure instant, 0 delay


@given(
    spec=st.lists(
        st.tuples(st.integers(1, 30), st.booleans()), min_size=2, max_size=32
    )
)
async def test_f3_race_returns_earliest_success(
    spec: list[tuple[int, bool]],
) -> None:
    """The earliest success wins (ties by order); losers are cancelled."""
    clock = VirtualClock()
    log = Log(clock)
    race = first(
        *(
            branch(i, lat, "ok" if ok else "fail", log)
            for i, (lat, ok) in enumerate(spec)
        )
    )
    before = len(anyio.get_running_tasks())
    out = await clock.drive(lambda: race(100))
    assert len(anyio.get_running_tasks()) == before
    assert set(log.cleaned) == set(range(len(spec)))
    winners = [(lat, i) for i, (lat, ok) in enumerate(spec) if ok]
    if winners:
        lat, i = min(winners)
        assert out == Success(100 + i)
        for other, (other_lat, _) in enumerate(spec):
            if other_lat > lat:
                assert other not in log.finished
                assert log.cleaned[other] == lat
    else:
        failures = tuple(f"b{i}" for i in range(len(spec)))
        assert out == Failure(AllFailed(failures, path=("first",)))
