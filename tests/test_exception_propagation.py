"""F1 (RELIABILITY.md): exceptions propagate as themselves, never as values."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from returns.result import Failure, Result

from pipeline import first, handler, loop, must
from tests.strategies import IntHandler, handlers


class Boom(Exception):
    """An ordinary exception no lift lists."""


class Abort(BaseException):
    """A BaseException that is not cancellation (like KeyboardInterrupt)."""


def raiser(exc: BaseException) -> IntHandler:
    @handler(name="raiser")
    async def run(x: int) -> Result[int, str]:
        raise exc

    return run


shapes = st.sampled_from(["then-left", "then-right", "must", "first", "loop"])


@given(
    a=handlers(concurrent=True),
    b=handlers(concurrent=True),
    shape=shapes,
    base=st.booleans(),
    x=st.integers(-20, 20),
)
async def test_unlisted_exceptions_propagate_unchanged(
    a: IntHandler, b: IntHandler, shape: str, base: bool, x: int
) -> None:
    """Wherever a raising handler sits, its exception escapes as itself."""
    exc: BaseException = Abort("stop") if base else Boom("boom")
    r = raiser(exc)
    pipeline = {
        "then-left": r >> a,
        "then-right": a >> r >> b,
        "must": must(a, r, b, aggregate=lambda _, outs: Failure("agg")),
        "first": first(a, r, b),
        "loop": loop(a >> r, times=2),
    }[shape]
    try:
        out: Result[int, object] = await pipeline(x)
    except (Boom, Abort) as e:
        out = Failure(e)  # checked just below: it must be *exc* itself
    if isinstance(out, Failure) and out.failure() is exc:
        return
    # Only a failure before the raiser was reached may return normally.
    assert isinstance(out, Failure)
    assert shape in {"then-right", "loop"}
    assert not isinstance(out.failure(), BaseException)
