"""Middleware: ordering, per-execution wrapping, retry, timeout, logging."""

from __future__ import annotations

import logging

from typing import Never, TypeVar

import anyio
import pytest

from returns.result import Failure, Result, Success

from pipeline import handler, loop, must, sequential
from pipeline.errors import ConstructionError
from pipeline.failures import TimedOut
from pipeline.middleware import Backoff, log, retry, timeout
from pipeline.typing import Call, Middleware


In = TypeVar("In")
Out = TypeVar("Out")
Err = TypeVar("Err")


@handler
async def inc(x: int) -> Result[int, str]:
    return Success(x + 1)


class Recorder(Middleware[Never]):
    """A middleware that records when it runs around which handler."""

    def __init__(self, tag: str, events: list[str]) -> None:
        self.__name__ = tag
        self.tag = tag
        self.events = events

    def __call__(
        self, call: Call[In, Out, Err], name: str, /
    ) -> Call[In, Out, Err]:
        tag, events = self.tag, self.events

        async def run(x: In) -> Result[Out, Err]:
            events.append(f"{tag}>{name}")
            try:
                return await call(x)
            finally:
                events.append(f"{tag}<{name}")

        return run


async def test_first_added_is_outermost() -> None:
    """use(m1, m2) and use(m1).use(m2) both put m1 outermost."""
    events: list[str] = []
    m1, m2 = Recorder("m1", events), Recorder("m2", events)
    await inc.use(m1, m2)(0)
    assert events == ["m1>inc", "m2>inc", "m2<inc", "m1<inc"]
    events.clear()
    await inc.use(m1).use(m2)(0)
    assert events == ["m1>inc", "m2>inc", "m2<inc", "m1<inc"]


async def test_composite_wraps_each_child_each_execution() -> None:
    """On a composite, middleware wraps every child on every run."""
    events: list[str] = []
    seq = sequential(inc, inc.named("second"), name="s").use(
        Recorder("m", events)
    )
    assert await seq(0) == Success(2)
    assert events == ["m>inc", "m<inc", "m>second", "m<second"]
    events.clear()
    spun = loop(inc, times=3).use(Recorder("m", events))
    assert await spun(0) == Success(3)
    assert events == ["m>inc", "m<inc"] * 3


async def test_parent_middleware_wraps_child_composite_whole() -> None:
    """A child composite is wrapped as a unit by its parent's middleware."""
    events: list[str] = []
    inner = sequential(inc, inc, name="inner")
    outer = sequential(inner, inc, name="outer").use(Recorder("m", events))
    await outer(0)
    assert events == ["m>inner", "m<inner", "m>inc", "m<inc"]


async def test_flattening_keeps_middleware_on_its_children() -> None:
    """(a >> b).use(m) >> c wraps a and b, not c."""
    events: list[str] = []
    chain = (inc >> inc.named("b")).use(Recorder("m", events)) >> inc.named(
        "c"
    )
    assert len(chain.children) == 3
    await chain(0)
    assert events == ["m>inc", "m<inc", "m>b", "m<b"]


def flaky(failures: int) -> tuple[list[int], object]:
    calls: list[int] = []

    @handler(name="flaky")
    async def run(x: int) -> Result[int, str]:
        calls.append(x)
        if len(calls) <= failures:
            return Failure(f"try {len(calls)}")
        return Success(x)

    return calls, run


async def test_retry_until_success_and_exact_schedule() -> None:
    """retry() re-runs failures with the computed backoff schedule."""
    slept: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        slept.append(seconds)

    calls, h = flaky(3)
    policy = Backoff(initial=0.5, multiplier=3, maximum=2.0)
    wrapped = h.use(retry(5, backoff=policy, sleep=fake_sleep))  # type: ignore[attr-defined]
    assert await wrapped(7) == Success(7)
    assert len(calls) == 4
    assert slept == [0.5, 1.5, 2.0]
    assert slept == policy.delays(4)


async def test_retry_gives_last_failure_when_exhausted() -> None:
    """After the last attempt the last failure is returned."""
    calls, h = flaky(10)
    wrapped = h.use(retry(3))  # type: ignore[attr-defined]
    assert await wrapped(1) == Failure("try 3")
    assert len(calls) == 3


async def test_retry_predicate_and_exceptions() -> None:
    """Only failures the predicate accepts are retried; exceptions never."""
    calls, h = flaky(10)
    wrapped = h.use(retry(5, when=lambda e: e != "try 2"))  # type: ignore[attr-defined]
    assert await wrapped(1) == Failure("try 2")
    assert len(calls) == 2

    raised: list[int] = []

    @handler
    async def explodes(x: int) -> Result[int, str]:
        raised.append(x)
        raise RuntimeError(x)

    with pytest.raises(RuntimeError):
        await explodes.use(retry(5))(1)
    assert raised == [1]


async def test_retry_jitter_is_seeded() -> None:
    """A seeded jitter gives the same schedule every time."""
    policy = Backoff(initial=1, jitter=0.5, seed=42)
    assert policy.delays(4) == policy.delays(4)
    assert all(
        1 * 2**i <= d <= 1.5 * 2**i for i, d in enumerate(policy.delays(4))
    )


async def test_retry_sleep_is_cancellable() -> None:
    """Cancellation during the backoff sleep propagates."""
    _, h = flaky(10)
    wrapped = h.use(retry(3, backoff=60.0))  # type: ignore[attr-defined]
    with anyio.move_on_after(0.05) as scope:
        await wrapped(1)
    assert scope.cancelled_caught


async def test_timeout_fails_typed_and_cancels() -> None:
    """A handler past its deadline is cancelled and fails with TimedOut."""
    cleaned: list[str] = []

    @handler
    async def slow(x: int) -> Result[int, str]:
        try:
            await anyio.sleep_forever()
        finally:
            cleaned.append("slow")
        return Success(x)  # pragma: no cover

    out = await slow.use(timeout(0.01))(1)
    assert out == Failure(TimedOut(0.01, path=("slow",)))
    assert cleaned == ["slow"]
    assert await inc.use(timeout(5))(1) == Success(2)


async def test_timeout_inside_composite_is_located() -> None:
    """A timeout in a branch of & carries the branch's path."""

    @handler
    async def slow(x: int) -> Result[int, str]:
        await anyio.sleep_forever()
        return Success(x)  # pragma: no cover

    par = must(inc, slow, aggregate=lambda x, o: Success(o), name="p")
    out = await par.use(timeout(0.01))(1)
    assert out == Failure(TimedOut(0.01, path=("p[1]", "slow")))


def test_bad_middleware_arguments() -> None:
    """Nonsense settings are refused when the middleware is made."""
    with pytest.raises(ConstructionError):
        timeout(0)
    with pytest.raises(ConstructionError):
        retry(0)


async def test_log_records_structured_outcomes(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """log() writes start and finish records with structured extras."""
    caplog.set_level(logging.DEBUG, logger="pipeline")

    @handler
    async def nope(x: int) -> Result[int, str]:
        return Failure("no")

    await (inc >> nope).use(log())(1)
    finishes = [
        r
        for r in caplog.records
        if getattr(r, "pipeline_event", "") == "finish"
    ]
    assert [(r.pipeline_handler, r.pipeline_outcome) for r in finishes] == [  # type: ignore[attr-defined]
        ("inc", "success"),
        ("nope", "failure"),
    ]
    assert finishes[1].levelno == logging.WARNING
    assert all(r.pipeline_duration_s >= 0 for r in finishes)  # type: ignore[attr-defined]
    assert repr(log()) == "log"


# -- .use() wraps each child, .wrap() the whole ---------------------------------


def _counter(seen: list[str]) -> Middleware[Never]:
    def middleware(call: Call[In, Out, Err], name: str) -> Call[In, Out, Err]:
        async def run(value: In) -> Result[Out, Err]:
            seen.append(name)
            return await call(value)

        return run

    return middleware


async def test_use_wraps_each_step_wrap_wraps_the_whole() -> None:
    """(a >> b).use(m) runs m per step; (a >> b).wrap(m) once per run."""
    per_step: list[str] = []
    whole: list[str] = []
    chain = inc >> inc.named("inc2")
    assert (await chain.use(_counter(per_step))(0)).unwrap() == 2
    assert (await chain.wrap(_counter(whole))(0)).unwrap() == 2
    assert per_step == ["inc", "inc2"]
    assert len(whole) == 1


async def test_wrap_timeout_bounds_the_whole_chain() -> None:
    """A timeout given with .wrap() is for all steps together."""

    @handler
    async def slow(x: int) -> Result[int, str]:
        await anyio.sleep(0.05)
        return Success(x)

    chain = slow >> slow >> slow
    # Each step is well within 1 s; the three together need 0.15 s at least.
    assert type(await chain.use(timeout(1.0))(1)) is Success
    r = await chain.wrap(timeout(0.12))(1)
    assert type(r) is Failure
    assert isinstance(r.failure(), TimedOut)


def test_use_and_wrap_reprs_differ() -> None:
    """The repr says which form was used."""
    chain = inc >> inc
    assert repr(chain.use(log())) == "Handler((inc >> inc).use(log))"
    assert repr(chain.wrap(log())) == "Handler((inc >> inc).wrap(log))"
    assert repr(inc.use(log())) == "Handler(inc.use(log))"
    assert repr(inc.wrap(log())) == "Handler(inc.use(log))"
