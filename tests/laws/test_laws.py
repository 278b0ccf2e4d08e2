"""Algebraic laws of the operators, checked by Hypothesis on both backends."""

from __future__ import annotations

import anyio
import pytest

from hypothesis import given
from hypothesis import strategies as st
from returns.result import Failure, Result, Success

from pipeline import Context, Handler, Message, first, handler, must, noop
from pipeline.failures import AllFailed
from tests.strategies import IntHandler, handlers


@given(a=handlers(), b=handlers(), c=handlers(), x=st.integers(-50, 50))
async def test_then_is_associative(
    a: IntHandler, b: IntHandler, c: IntHandler, x: int
) -> None:
    """Grouping of >> does not change the result."""
    assert await ((a >> b) >> c)(x) == await (a >> (b >> c))(x)


def outcome(r: Result[int, object]) -> int | None:
    """The success value, or None: what concurrent pipelines agree on."""
    return r.unwrap() if isinstance(r, Success) else None


@pytest.mark.slow
@given(
    a=handlers(concurrent=True),
    b=handlers(concurrent=True),
    c=handlers(concurrent=True),
    x=st.integers(-50, 50),
)
async def test_then_is_associative_with_fan_outs(
    a: IntHandler, b: IntHandler, c: IntHandler, x: int
) -> None:
    """With fan-outs inside, grouping of >> still gives the same outcome."""
    left = outcome(await ((a >> b) >> c)(x))
    assert left == outcome(await (a >> (b >> c))(x))


@given(a=handlers(), x=st.integers(-50, 50))
async def test_noop_is_identity_of_then(a: IntHandler, x: int) -> None:
    """noop() is a left and right unit of >>."""
    unit: IntHandler = noop()
    expected = await a(x)
    assert await (unit >> a)(x) == expected
    assert await (a >> unit)(x) == expected


@given(a=handlers(), b=handlers(), x=st.integers(-50, 50))
async def test_then_is_bind(a: IntHandler, b: IntHandler, x: int) -> None:
    """a >> b equals binding b over a's result, as returns would."""
    first_result = await a(x)
    expected = (
        await b(first_result.unwrap())
        if isinstance(first_result, Success)
        else first_result
    )
    assert await (a >> b)(x) == expected


def _writer(
    index: int, gate: anyio.Event, done: anyio.Event, key: str
) -> Handler[Context, Context, str]:
    @handler(name=f"w{index}")
    async def run(ctx: Context) -> Result[Context, str]:
        await gate.wait()
        out = ctx.append(Message.assistant(f"from {index}")).set(key, index)
        done.set()
        return Success(out)

    return run


@given(
    keys=st.lists(st.sampled_from(["a", "b", "c"]), min_size=2, max_size=6),
    data=st.data(),
)
async def test_both_merge_is_independent_of_completion_order(
    keys: list[str], data: st.DataObject
) -> None:
    """& merges in definition order whatever order the branches finish."""
    n = len(keys)
    order = data.draw(st.permutations(range(n)), label="completion order")
    gates = [anyio.Event() for _ in range(n)]
    dones = [anyio.Event() for _ in range(n)]
    branches = [_writer(i, gates[i], dones[i], keys[i]) for i in range(n)]
    base = Context.of(Message.user("q"))
    results: list[Result[Context, str]] = []

    async with anyio.create_task_group() as tg:

        async def run() -> None:
            results.append(await must(*branches)(base))

        tg.start_soon(run)
        for i in order:
            gates[i].set()
            await dones[i].wait()

    merged = results[0].unwrap()
    assert [m.content for m in merged.messages] == [
        "q",
        *(f"from {i}" for i in range(n)),
    ]
    last_writer = {k: i for i, k in enumerate(keys)}
    assert dict(merged.metadata) == last_writer


outcomes = st.lists(
    st.tuples(st.booleans(), st.integers(0, 100)), min_size=1, max_size=6
)


def _outcome(ok: bool, v: int, i: int) -> Handler[int, int, str]:
    @handler(name=f"b{i}")
    async def run(x: int) -> Result[int, str]:
        await anyio.lowlevel.checkpoint()
        return Success(x + v) if ok else Failure(f"no{i}")

    return run


@given(branches=outcomes, x=st.integers(0, 10))
async def test_first_succeeds_iff_some_branch_does(
    branches: list[tuple[bool, int]], x: int
) -> None:
    """A race succeeds exactly when some branch succeeds."""
    race = first(*(_outcome(ok, v, i) for i, (ok, v) in enumerate(branches)))
    out = await race(x)
    if any(ok for ok, _ in branches):
        assert isinstance(out, Success)
        assert out.unwrap() in {x + v for ok, v in branches if ok}
    else:
        assert out == Failure(
            AllFailed(
                tuple(f"no{i}" for i in range(len(branches))),
                path=("first",),
            )
        )


@given(branches=outcomes, x=st.integers(0, 10))
async def test_both_succeeds_iff_every_branch_does(
    branches: list[tuple[bool, int]], x: int
) -> None:
    """An all-must-succeed succeeds exactly when every branch does."""
    par = must(
        *(_outcome(ok, v, i) for i, (ok, v) in enumerate(branches)),
        aggregate=lambda _, outs: Success(outs),
    )
    out = await par(x)
    if all(ok for ok, _ in branches):
        assert out == Success(tuple(x + v for _, v in branches))
    else:
        assert isinstance(out, Failure)
        assert out.failure() in {
            f"no{i}" for i, (ok, _) in enumerate(branches) if not ok
        }


@pytest.mark.slow
@given(
    a=handlers(concurrent=True),
    b=handlers(concurrent=True),
    c=handlers(concurrent=True),
    x=st.integers(-20, 20),
)
async def test_both_is_associative_up_to_flattening(
    a: IntHandler, b: IntHandler, c: IntHandler, x: int
) -> None:
    """(a & b) & c and a & (b & c) agree once their tuples are flattened."""
    left = await ((a & b) & c)(x)
    right = await (a & (b & c))(x)
    assert isinstance(left, Success) == isinstance(right, Success)
    if isinstance(left, Success):
        p, q, r = left.unwrap()
        p2, (q2, r2) = right.unwrap()
        assert (p, q, r) == (p2, q2, r2)


@pytest.mark.slow
@given(
    a=handlers(concurrent=True),
    b=handlers(concurrent=True),
    c=handlers(concurrent=True),
    x=st.integers(-20, 20),
)
async def test_race_of_pure_branches_is_associative(
    a: IntHandler, b: IntHandler, c: IntHandler, x: int
) -> None:
    """Success of a race does not depend on how | is grouped."""
    flat = await ((a | b) | c)(x)
    nested = await (a | (b | c))(x)
    assert isinstance(flat, Success) == isinstance(nested, Success)
