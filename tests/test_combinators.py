"""Named combinators: sequential, must, first, loop, for_each, switch, if_."""

from __future__ import annotations

import sys

from types import FrameType
from typing import Never

import anyio
import pytest

from returns.result import Failure, Result, Success

from pipeline import (
    Condition,
    Context,
    Handler,
    Item,
    MergeStrategy,
    Message,
    condition,
    first,
    for_each,
    handler,
    if_,
    loop,
    metadata_equals,
    must,
    noop,
    safe,
    sequential,
    switch,
    when,
)
from pipeline.errors import ConstructionError
from pipeline.failures import AllFailed, ConditionError, LimitExceeded, Raised
from pipeline.typing import MetaValue


@handler
async def inc(x: int) -> Result[int, str]:
    return Success(x + 1)


@handler
async def boom(x: int) -> Result[int, str]:
    return Failure(f"boom@{x}")


@safe(ZeroDivisionError)
async def invert(x: int) -> float:
    return 1 / x


def test_zero_branches_are_construction_errors() -> None:
    """Combinators that cannot run without children refuse to be built."""
    with pytest.raises(ConstructionError, match="sequential"):
        sequential()
    with pytest.raises(ConstructionError, match="must"):
        must()
    with pytest.raises(ConstructionError, match="first"):
        first()
    with pytest.raises(ConstructionError, match="switch"):
        switch()
    with pytest.raises(ConstructionError, match="while_"):
        loop(inc)
    with pytest.raises(ConstructionError, match="times must be"):
        loop(inc, times=-1)
    with pytest.raises(ConstructionError, match="limit"):
        loop(inc, while_=lambda v, i: True, limit=0)
    with pytest.raises(ConstructionError, match="case 0"):
        switch((inc, inc))  # type: ignore[arg-type]


async def test_sequential_is_named_chain() -> None:
    """sequential() runs in order and names the failure path."""
    seq = sequential(inc, inc, invert, name="calc")
    assert await seq(0) == Success(0.5)
    out = await seq(-2)
    err = out.failure()
    assert isinstance(err, Raised)
    assert out == Failure(Raised(err.exception, path=("calc[2]", "invert")))
    assert repr(seq) == "Handler(calc = inc >> inc >> invert)"


async def test_named_sequence_is_a_unit() -> None:
    """Operators do not flatten a named sequence into their own chain."""
    seq = sequential(inc, inc, name="two")
    chain = seq >> inc >> seq
    assert len(chain.children) == 3
    assert await chain(0) == Success(5)


async def test_nested_failure_path() -> None:
    """A failure deep inside names every level on its way out."""
    inner = sequential(inc, invert, name="inner")
    outer = sequential(inc, inner, name="outer")
    out = await outer(-2)
    err = out.failure()
    assert isinstance(err, Raised)
    assert err.path == ("outer[1]", "inner[1]", "invert")
    assert "outer[1] > inner[1] > invert" in str(out.failure())


async def test_must_custom_aggregator_sees_definition_order() -> None:
    """must() passes outputs in definition order and the input."""
    seen: list[tuple[int, tuple[int, ...]]] = []

    def agg(x: int, outs: tuple[int, ...]) -> Result[int, str]:
        seen.append((x, outs))
        return Success(sum(outs))

    both = must(inc, inc.named("b"), noop(), aggregate=agg, name="sum")
    assert await both(1) == Success(5)
    assert seen == [(1, (2, 2, 1))]


async def test_must_aggregator_not_called_on_failure() -> None:
    """A failing branch means the aggregator never runs."""
    called: list[int] = []

    def agg(x: int, outs: tuple[int, ...]) -> Result[int, str]:
        called.append(x)  # pragma: no cover
        return Success(0)  # pragma: no cover

    assert await must(inc, boom, aggregate=agg)(1) == Failure("boom@1")
    assert called == []


async def test_must_merges_contexts_with_strategy() -> None:
    """must() without an aggregator merges contexts by the strategy."""

    def counts(n: int) -> Handler[Context, Context, str]:
        @handler(name=f"c{n}")
        async def run(ctx: Context) -> Result[Context, str]:
            return Success(ctx.set("n", n).append(Message.assistant(str(n))))

        return run

    base = Context().set("n", 0)
    out = await must(counts(1), counts(2), merge=MergeStrategy.COMBINE)(base)
    ctx = out.unwrap()
    assert ctx.metadata["n"] == 3
    assert [m.content for m in ctx.messages] == ["1", "2"]
    kept = await must(counts(1), counts(2), merge=MergeStrategy.KEEP_EXISTING)(
        base
    )
    assert kept.unwrap().metadata["n"] == 1


async def test_first_named_failure() -> None:
    """first() reports all failures under its name."""
    out = await first(boom, boom.named("b2"), name="either")(4)
    assert out == Failure(AllFailed(("boom@4", "boom@4"), path=("either",)))
    assert await first(boom, inc)(4) == Success(5)


async def test_single_branch_combinators_just_run_it() -> None:
    """One branch is meaningful: it simply runs."""
    assert await first(inc)(1) == Success(2)
    assert await sequential(inc)(1) == Success(2)


# -- loop ---------------------------------------------------------------------


async def test_loop_fixed_times() -> None:
    """times=N runs the body N times."""
    assert await loop(inc, times=7)(0) == Success(7)


async def test_loop_predicate_checked_before_every_iteration() -> None:
    """while_ sees the value and count before each iteration, the first too."""
    seen: list[tuple[int, int]] = []

    def go(v: int, i: int) -> bool:
        seen.append((v, i))
        return i < 2

    assert await loop(inc, times=5, while_=go)(10) == Success(12)
    assert seen == [(10, 0), (11, 1), (12, 2)]
    never = await loop(inc, while_=lambda v, i: False)(3)
    assert never == Success(3)


@pytest.mark.parametrize("limit", [1, 2, 10, 1000])
async def test_open_loop_stops_at_exactly_the_limit(limit: int) -> None:
    """An unbounded loop fails after exactly *limit* body executions."""
    runs: list[int] = []

    @handler
    async def count(x: int) -> Result[int, str]:
        runs.append(x)
        return Success(x + 1)

    out = await loop(count, while_=lambda v, i: True, limit=limit)(0)
    assert out == Failure(LimitExceeded(limit, limit, path=("loop",)))
    assert len(runs) == limit


async def test_loop_predicate_may_stop_at_the_limit() -> None:
    """Stopping exactly at the limit is success, not a limit failure."""
    out = await loop(inc, while_=lambda v, i: i < 5, limit=5)(0)
    assert out == Success(5)


async def test_loop_failure_names_iteration() -> None:
    """A failing iteration stops the loop, located by its index."""

    @safe(ZeroDivisionError)
    async def nonzero(x: int) -> int:
        return x + 0 * (1 // x)

    out = await loop(inc >> nonzero, times=5, name="spin")(-3)
    err = out.failure()
    assert isinstance(err, Raised)
    assert err.path == ("spin[2]", "then[1]", "nonzero")


@pytest.mark.slow
async def test_million_iteration_loop_constant_stack() -> None:
    """A 1,000,000-iteration loop neither recurses nor grows the stack."""
    depths: set[int] = set()

    @handler
    async def step(x: int) -> Result[int, str]:
        if x % 100_000 == 0:
            depths.add(len(_stack()))
        return Success(x + 1)

    out = await loop(step, while_=lambda v, i: v < 1_000_000, limit=2_000_000)(
        0
    )
    assert out == Success(1_000_000)
    assert len(depths) == 1


def _stack() -> list[FrameType]:
    frames: list[FrameType] = []
    frame: FrameType | None = sys._getframe()  # measuring stack depth
    while frame is not None:
        frames.append(frame)
        frame = frame.f_back
    return frames


async def test_long_loop_is_cancellable() -> None:
    """A loop whose body never suspends still yields to cancellation."""
    with anyio.move_on_after(0.05) as scope:
        await loop(inc, while_=lambda v, i: True, limit=10**9)(0)
    assert scope.cancelled_caught


# -- for_each -----------------------------------------------------------------


async def test_for_each_exposes_value_in_order() -> None:
    """The body sees each value, in order, with the threaded state."""
    seen: list[tuple[int, str, int]] = []

    @handler
    async def add_len(item: Item[int, str]) -> Result[int, str]:
        seen.append((item.state, item.value, item.index))
        return Success(item.state + len(item.value))

    assert await for_each(["a", "bb", "ccc"], add_len)(0) == Success(6)
    assert seen == [(0, "a", 0), (1, "bb", 1), (3, "ccc", 2)]
    assert await for_each([], add_len)(9) == Success(9)


async def test_for_each_values_from_state_and_range_value() -> None:
    """Values may come from the state; contexts can carry range_value."""

    @handler
    async def note(item: Item[Context, str]) -> Result[Context, str]:
        ctx = item.state.set("range_value", item.value)
        return Success(ctx.append(Message.user(item.value)))

    words = for_each(lambda ctx: ctx.metadata["words"], note)  # type: ignore[arg-type,return-value]
    out = (await words(Context().set("words", ("x", "y")))).unwrap()
    assert [m.content for m in out.messages] == ["x", "y"]
    assert out.metadata["range_value"] == "y"


async def test_for_each_failure_stops_and_names_index() -> None:
    """The first failing value stops the iteration."""

    @handler
    async def pick(item: Item[int, int]) -> Result[int, str]:
        if item.value < 0:
            return Failure(f"negative {item.value}")
        return Success(item.state + item.value)

    assert await for_each([1, -2, 3], pick)(0) == Failure("negative -2")


# -- switch and if_ -----------------------------------------------------------


def _tag(text: str) -> Handler[Context, Context, str]:
    @handler(name=text)
    async def run(ctx: Context) -> Result[Context, str]:
        return Success(ctx.append(Message.assistant(text)))

    return run


async def test_switch_first_match_wins() -> None:
    """Cases are tried in order; only the first match runs."""
    route = switch(
        (metadata_equals("kind", "bill"), _tag("billing")),
        (when(lambda c: True, name="any"), _tag("catchall")),
        default=_tag("default"),
    )
    out = (await route(Context().set("kind", "bill"))).unwrap()
    assert [m.content for m in out.messages] == ["billing"]
    out = (await route(Context().set("kind", "tech"))).unwrap()
    assert [m.content for m in out.messages] == ["catchall"]


async def test_switch_default_and_pass_through() -> None:
    """No match runs the default; no default passes the input on."""
    is_x = metadata_equals("k", "x")
    with_default = switch((is_x, _tag("x")), default=_tag("d"))
    out = (await with_default(Context())).unwrap()
    assert [m.content for m in out.messages] == ["d"]
    ctx = Context().set("k", "y")
    assert await switch((is_x, _tag("x")))(ctx) == Success(ctx)


async def test_metadata_equals_semantics() -> None:
    """Missing keys are false; lists equal tuples; True is not 1."""
    ctx = Context().set("n", 1).set("l", (1, 2)).set("b", True)
    checks: list[tuple[str, MetaValue, bool]] = [
        ("n", 1, True),
        ("n", 1.0, True),
        ("n", True, False),
        ("b", 1, False),
        ("b", True, True),
        ("l", [1, 2], True),  # type: ignore[list-item]  # untyped input
        ("missing", None, False),
    ]
    for key, value, expected in checks:
        got = await metadata_equals(key, value).check(ctx)
        assert got == Success(expected), (key, value)


async def test_switch_condition_failure_is_typed() -> None:
    """A failing condition stops the switch with ConditionError."""

    async def judge(ctx: Context) -> Result[bool, str]:
        return Failure("judge offline")

    route = switch(
        (condition(judge), _tag("a")), default=_tag("b"), name="route"
    )
    out = await route(Context())
    assert out == Failure(ConditionError(0, "judge offline", path=("route",)))


async def test_if_branches() -> None:
    """if_ runs then, else_, or passes the input through."""
    big: Condition[int, Never] = when(lambda x: x > 10, name="big")
    assert await if_(big, inc, boom)(11) == Success(12)
    assert await if_(big, inc, boom)(1) == Failure("boom@1")
    assert await if_(big, inc)(1) == Success(1)


async def test_combinator_reprs() -> None:
    """Combinators show their structure and options."""
    assert repr(loop(inc, times=3)) == "Handler(loop = loop(inc, times=3))"
    assert "switch(" in repr(switch((when(bool, name="t"), inc)))
    assert repr(must(inc, boom, aggregate=lambda x, o: Success(0))) == (
        "Handler(must = inc & boom)"
    )
