"""Simultaneous outcomes are reported the same way on every run.

Branches that fail (or succeed, in a race) in the same scheduling round,
such as timeouts falling due at the same instant, used to be reported in
the order the scheduler happened to run them: on trio, at random.  The
earliest branch in definition order is reported now.
"""

from __future__ import annotations

import time

from typing import Any

import anyio
import pytest

from returns.result import Failure, Result, Success

from pipeline import Handler, first, handler, map_reduce, must
from pipeline.failures import AllFailed, TimedOut
from pipeline.middleware import timeout


TRIALS = 8
BLOCK = 0.06  # longer than every timeout below: all fall due at once


@handler
async def forever(x: int) -> Result[int, str]:
    await anyio.sleep(3600)
    return Success(x)


@handler
async def block_loop(x: int) -> Result[int, str]:
    # Hold the event loop after every branch has started: when it runs
    # again, all the deadlines have passed in the same instant.
    time.sleep(BLOCK)  # noqa: ASYNC251  # the point: block the loop
    await anyio.sleep(3600)
    return Success(x)


def _timed(name: str, seconds: float) -> Handler[int, int, str | TimedOut]:
    return forever.named(name).use(timeout(seconds))


def _culprit(r: Result[Any, Any]) -> str:
    assert type(r) is Failure
    err = r.failure()
    assert isinstance(err, TimedOut)
    return err.path[-1]


async def test_simultaneous_timeouts_in_and_report_the_first_branch() -> None:
    """a & b & c timing out at once is a's timeout, every time.

    The deadlines run the other way (c's is earliest), so the scheduler
    wakes c first: the old rule (first to report wins) said c.
    """
    comp = (
        _timed("a", 0.03) & _timed("b", 0.02) & _timed("c", 0.01) & block_loop
    )
    culprits = {_culprit(await comp(1)) for _ in range(TRIALS)}
    assert culprits == {"a"}


@pytest.mark.slow
async def test_simultaneous_timeouts_in_must_and_map_reduce() -> None:
    """must and fail-fast map_reduce follow the same rule."""
    via_must = must(
        _timed("a", 0.03),
        _timed("b", 0.02),
        _timed("c", 0.01),
        block_loop,
        aggregate=lambda _, outs: Success(outs),
    )
    branches = [_timed("a", 0.03), _timed("b", 0.02), _timed("c", 0.01)]

    @handler
    async def item(i: int) -> Result[int, str | TimedOut]:
        if i == 3:
            return await block_loop(i)
        return await branches[i](i)

    via_map: Handler[int, int, Any] = map_reduce(
        lambda _: [0, 1, 2, 3],
        item,
        lambda _, rs: Success(len(rs)),
        fail_fast=True,
    )
    for comp in (via_must, via_map):
        culprits = {_culprit(await comp(1)) for _ in range(TRIALS)}
        assert culprits == {"a"}, comp


async def test_simultaneous_successes_in_a_race_pick_the_first() -> None:
    """Race branches finishing in the same round: the first one wins."""

    def after(value: int, seconds: float) -> Handler[int, int, str]:
        @handler(name=f"after{value}")
        async def run(_: int) -> Result[int, str]:
            await anyio.sleep(seconds)
            return Success(value)

        return run

    @handler
    async def hold(x: int) -> Result[int, str]:
        time.sleep(BLOCK)  # noqa: ASYNC251  # every sleep below ends at once
        await anyio.sleep(3600)
        return Success(x)

    race = first(after(1, 0.03), after(2, 0.02), after(3, 0.01), hold)
    winners = {(await race(0)).unwrap() for _ in range(TRIALS)}
    assert winners == {1}


@pytest.mark.parametrize("anyio_backend", ["trio"])
async def test_all_failed_lists_failures_in_definition_order() -> None:
    """When every branch of a race fails, AllFailed is in definition order."""
    race = _timed("a", 0.03) | _timed("b", 0.02) | _timed("c", 0.01)
    r = await race(1)
    assert type(r) is Failure
    err = r.failure()
    assert isinstance(err, AllFailed)
    assert [f.path[-1] for f in err.failures] == ["a", "b", "c"]
