"""The three operators: >>, & and |, and the lifts they compose."""

from __future__ import annotations

import inspect

import anyio
import pytest

from returns.result import Failure, Result, Success

from pipeline import (
    Context,
    Handler,
    Message,
    Par,
    Race,
    handler,
    must,
    noop,
    safe,
)
from pipeline.failures import AllFailed, Raised


@handler
async def inc(x: int) -> Result[int, str]:
    return Success(x + 1)


@handler
async def double(x: int) -> Result[int, str]:
    return Success(x * 2)


@handler
async def boom(x: int) -> Result[int, str]:
    return Failure(f"boom@{x}")


def live_tasks() -> int:
    return len(anyio.get_running_tasks())


# -- lifting ----------------------------------------------------------------


def test_handler_rejects_sync_function_naming_it() -> None:
    """A non-async function given to @handler is a TypeError naming it."""

    def not_async(x: int) -> Result[int, str]:
        return Success(x)

    with pytest.raises(TypeError, match="not_async") as info:
        handler(not_async)  # type: ignore[arg-type]
    assert "async" in str(info.value)


def test_handler_rejects_wrong_arity() -> None:
    """A handler function must take exactly one positional argument."""

    async def two(x: int, y: int) -> Result[int, str]:
        return Success(x + y)

    with pytest.raises(TypeError, match=r"two.*one positional"):
        handler(two)  # type: ignore[arg-type]


def test_handler_accepts_async_callable_object() -> None:
    """An object with ``async def __call__`` lifts like a function."""

    class Adder:
        async def __call__(self, x: int) -> Result[int, str]:
            return Success(x + 10)

    h = handler(Adder())
    assert h.name == "Adder"


def test_safe_refuses_base_exceptions() -> None:
    """safe() never lists cancellation or other BaseExceptions."""
    with pytest.raises(TypeError, match="KeyboardInterrupt"):
        safe(KeyboardInterrupt)  # type: ignore[type-var]
    with pytest.raises(TypeError, match="at least one"):
        safe()


async def test_safe_turns_listed_exceptions_into_failures() -> None:
    """A listed exception becomes Raised, with the original and a path."""
    error = ValueError("bad")

    @safe(ValueError)
    async def parse(text: str) -> int:
        if text == "bad":
            raise error
        return int(text)

    assert await parse("12") == Success(12)
    out = await parse("bad")
    assert out == Failure(Raised(error, path=("parse",)))
    assert out.failure().exception is error


async def test_safe_lets_other_exceptions_propagate() -> None:
    """An exception safe() does not list propagates unchanged."""

    @safe(ValueError)
    async def parse(text: str) -> int:
        raise KeyError(text)

    with pytest.raises(KeyError, match="x"):
        await parse("x")


async def test_returning_a_non_result_is_a_type_error() -> None:
    """A handler that returns a bare value fails loudly, naming where."""

    @handler
    async def sloppy(x: int) -> Result[int, str]:
        return x  # type: ignore[return-value]

    with pytest.raises(TypeError, match=r"then\[1\].*Result"):
        await (inc >> sloppy >> inc)(1)


# -- >> ---------------------------------------------------------------------


async def test_then_feeds_success_forward() -> None:
    """>> runs left then right on the left's output."""
    assert await (inc >> double)(3) == Success(8)
    assert await inc.then(double)(3) == Success(8)


async def test_then_short_circuits_on_failure() -> None:
    """After a failure, later steps do not run."""
    ran: list[int] = []

    @handler
    async def record(x: int) -> Result[int, str]:
        ran.append(x)
        return Success(x)

    assert await (inc >> boom >> record)(1) == Failure("boom@2")
    assert ran == []


async def test_then_failure_path_names_the_step() -> None:
    """A Raised failure inside a chain carries the step's position."""

    @safe(ZeroDivisionError)
    async def invert(x: int) -> float:
        return 1 / x

    chain = inc >> double >> noop() >> invert.named("invert")
    out = await chain(-1)
    err = out.failure()
    assert isinstance(err, Raised)
    assert err.path == ("then[3]", "invert")
    assert "then[3] > invert" in str(err)


async def test_long_chain_runs_in_constant_stack() -> None:
    """A 10,000-step chain neither recurses nor nests."""
    chain = inc
    for _ in range(9_999):
        chain = chain >> inc
    assert len(chain.children) == 10_000
    assert await chain(0) == Success(10_000)


async def test_right_nested_chain_flattens_too() -> None:
    """a >> (b >> c) flattens like (a >> b) >> c."""
    right = inc >> (double >> (inc >> double))
    assert len(right.children) == 4
    assert await right(1) == await (((inc >> double) >> inc) >> double)(1)


# -- & ----------------------------------------------------------------------


async def test_both_returns_flat_typed_tuple() -> None:
    """a & b & c gives a flat tuple in definition order."""
    par = inc & double & noop()
    assert isinstance(par, Par)
    assert len(par.children) == 3
    assert await par(5) == Success((6, 10, 5))


async def test_both_merges_contexts() -> None:
    """Context branches merge: each one's additions once, in order."""

    def says(text: str, key: str) -> Handler[Context, Context, str]:
        @handler(name=text)
        async def run(ctx: Context) -> Result[Context, str]:
            return Success(ctx.append(Message.assistant(text)).set(key, text))

        return run

    base = Context.of(Message.user("q1"), Message.user("q2"))
    out = (
        await must(says("a", "x"), says("b", "y"), says("c", "x"))(base)
    ).unwrap()
    assert [m.content for m in out.messages] == ["q1", "q2", "a", "b", "c"]
    assert dict(out.metadata) == {"x": "c", "y": "b"}
    assert out.run_id == base.run_id
    assert len(base.messages) == 2


async def test_both_sibling_blocked_forever_does_not_delay_failure() -> None:
    """The first failure cancels a sibling that would never finish."""
    cleaned: list[str] = []

    @handler
    async def stuck(x: int) -> Result[int, str]:
        try:
            await anyio.sleep_forever()
        finally:
            cleaned.append("stuck")
        return Success(x)  # pragma: no cover

    before = live_tasks()
    with anyio.fail_after(5):
        out = await (stuck & boom & stuck)(1)
    assert out == Failure("boom@1")
    assert cleaned == ["stuck", "stuck"]
    assert live_tasks() == before


async def test_both_first_failure_wins_and_others_stop() -> None:
    """The failure that happens first is the one returned."""
    order: list[str] = []
    first_failed = anyio.Event()

    @handler
    async def early(x: int) -> Result[int, str]:
        order.append("early")
        first_failed.set()
        return Failure("early")

    @handler
    async def late(x: int) -> Result[int, str]:
        await first_failed.wait()
        await anyio.lowlevel.checkpoint()
        order.append("late")  # pragma: no cover
        return Failure("late")  # pragma: no cover

    assert await (late & early)(0) == Failure("early")
    assert order == ["early"]


async def test_both_callers_cancellation_propagates() -> None:
    """Cancelling the caller cancels the branches; no Failure comes back."""
    started = anyio.Event()
    results: list[object] = []

    @handler
    async def waits(x: int) -> Result[int, str]:
        started.set()
        await anyio.sleep_forever()
        return Success(x)  # pragma: no cover

    before = live_tasks()
    async with anyio.create_task_group() as tg:

        async def run(scope: anyio.CancelScope) -> None:
            with scope:
                results.append(await (waits & waits)(1))

        scope = anyio.CancelScope()
        tg.start_soon(run, scope)
        await started.wait()
        scope.cancel()
    assert scope.cancelled_caught
    assert results == []
    assert live_tasks() == before


async def test_both_unlisted_exception_propagates() -> None:
    """An exception no lift listed escapes & as itself, not as a Failure."""

    @safe(ValueError)
    async def raises(x: int) -> int:
        msg = "unlisted"
        raise RuntimeError(msg)

    @handler
    async def stuck(x: int) -> Result[int, str]:
        await anyio.sleep_forever()
        return Success(x)  # pragma: no cover

    before = live_tasks()
    with pytest.raises(RuntimeError, match="unlisted"):
        await (stuck & raises)(1)
    assert live_tasks() == before


async def test_both_named_twin_and_repr() -> None:
    """both() is &, and the repr shows the grouping."""
    assert await inc.both(double)(1) == await (inc & double)(1)
    assert repr(inc >> double & boom | inc) == (
        "Race(((inc >> double) & boom) | inc)"
    )
    assert repr(inc >> (double & boom)) == "Handler(inc >> (double & boom))"


# -- | ----------------------------------------------------------------------


async def test_race_slow_success_beats_fast_failure() -> None:
    """The first *success* wins even when a failure finished sooner."""
    order: list[str] = []
    failed = anyio.Event()

    @handler
    async def fast_fail(x: int) -> Result[int, str]:
        order.append("fail")
        failed.set()
        return Failure("fast")

    @handler
    async def slow_ok(x: int) -> Result[int, str]:
        await failed.wait()
        order.append("ok")
        return Success(x * 100)

    assert await (fast_fail | slow_ok)(2) == Success(200)
    assert order == ["fail", "ok"]


async def test_race_losers_cleanup_finishes_before_result() -> None:
    """Losers are cancelled and their finally blocks complete first."""
    cleaned: list[str] = []
    won = anyio.Event()

    @handler
    async def loser(x: int) -> Result[int, str]:
        try:
            await anyio.sleep_forever()
        finally:
            # Cleanup that itself has to wait, shielded as good cleanup is.
            with anyio.CancelScope(shield=True):
                await won.wait()
                await anyio.lowlevel.checkpoint()
            cleaned.append("loser")
        return Success(x)  # pragma: no cover

    @handler
    async def winner(x: int) -> Result[int, str]:
        won.set()
        return Success(-x)

    before = live_tasks()
    out = await (loser | winner | loser)(3)
    assert out == Success(-3)
    assert cleaned == ["loser", "loser"]
    assert live_tasks() == before


async def test_race_all_fail_lists_every_failure_in_order() -> None:
    """If every branch fails, one AllFailed lists them in definition order."""
    release = anyio.Event()

    @handler
    async def late(x: int) -> Result[int, str]:
        await release.wait()
        return Failure("late")

    @handler
    async def early(x: int) -> Result[int, str]:
        release.set()
        return Failure("early")

    race = late | early | boom
    assert isinstance(race, Race)
    out = await race(7)
    assert out == Failure(
        AllFailed(("late", "early", "boom@7"), path=("race",))
    )


async def test_race_unlisted_exception_propagates() -> None:
    """An exception from a racing branch is not turned into a failure."""

    @handler
    async def raises(x: int) -> Result[int, str]:
        raise LookupError(x)

    with pytest.raises(LookupError):
        await (boom | raises)(1)


async def test_already_cancelled_caller_gets_no_result() -> None:
    """A caller cancelled before & or | starts sees cancellation."""
    for op in (inc | double, inc & double):
        with anyio.move_on_after(0) as scope:
            await op(1)
            pytest.fail("an operator returned inside a cancelled scope")
        assert scope.cancelled_caught


async def test_race_callers_cancellation_propagates() -> None:
    """Cancelling the caller of | mid-race cancels every branch."""
    started = anyio.Event()
    cleaned: list[int] = []

    @handler
    async def waits(x: int) -> Result[int, str]:
        started.set()
        try:
            await anyio.sleep_forever()
        finally:
            cleaned.append(x)
        return Success(x)  # pragma: no cover

    before = live_tasks()
    results: list[object] = []
    async with anyio.create_task_group() as tg:
        scope = anyio.CancelScope()

        async def run() -> None:
            with scope:
                results.append(await (waits | waits | boom)(1))

        tg.start_soon(run)
        await started.wait()
        scope.cancel()
    assert scope.cancelled_caught
    assert results == []
    assert cleaned == [1, 1]
    assert live_tasks() == before


async def test_precedence_is_pythons() -> None:
    """a >> b & c | d is ((a >> b) & c) | d."""

    @handler
    async def pair_sum(p: tuple[int, int]) -> Result[int, str]:
        return Success(p[0] + p[1])

    combined = inc >> double & inc | boom.named("never")
    explicit = ((inc >> double) & inc) | boom.named("never")
    assert await combined(1) == await explicit(1) == Success((4, 2))
    assert await ((inc & double) >> pair_sum)(3) == Success(10)


# -- & is a tuple by its type; must() merges contexts ----------------------------


@handler
async def keep(ctx: Context) -> Result[Context, str]:
    return Success(ctx.append(Message.assistant("kept")))


@handler
async def maybe(ctx: Context) -> Result[Context | None, str]:
    return Success(ctx.append(Message.assistant("maybe")))


async def test_and_on_contexts_is_the_tuple_its_type_says() -> None:
    """Handler[C, C] & Handler[C, C | None] is a pair at run time too."""
    base = Context.of(Message.user("q"))
    out = (await (keep & maybe)(base)).unwrap()
    assert type(out) is tuple
    assert [len(c.messages) for c in out if c is not None] == [2, 2]
    both = (await (keep & keep & keep)(base)).unwrap()
    assert type(both) is tuple
    assert len(both) == 3


async def test_must_merges_context_branches() -> None:
    """must(a, b) merges the contexts: base, then each branch's messages."""
    base = Context.of(Message.user("q"))
    merged = (await must(keep, keep)(base)).unwrap()
    assert type(merged) is Context
    assert [m.content for m in merged.messages] == ["q", "kept", "kept"]


async def test_must_refuses_a_branch_that_lied_about_its_type() -> None:
    """A non-Context output smuggled in (cast) is a TypeError naming it."""

    @handler
    async def liar(ctx: Context) -> Result[Context, str]:
        return Success(len(ctx.messages))  # type: ignore[arg-type]  # a lie

    with pytest.raises(
        TypeError, match=r"must\[1\] is of type int, not Context"
    ):
        await must(keep, liar)(Context())


async def test_a_handler_call_is_a_coroutine() -> None:
    """Calling a handler gives a coroutine (so type checkers flag no await)."""
    pending = inc(1)
    assert inspect.iscoroutine(pending)
    assert (await pending).unwrap() == 2
