"""W3: one step looping on itself until the counter reaches K."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from returns.result import Result, Success

from benchmarks._harness import Case, Settings, measure
from pipeline import handler, loop


@handler
async def inc(x: int) -> Result[int, str]:
    return Success(x + 1)


async def plain_inc(x: int) -> int:
    return x + 1


def _plain(k: int) -> Callable[[], Awaitable[int]]:
    async def run() -> int:
        x = 0
        while x < k:
            x = await plain_inc(x)
        return x

    return run


def _ours(k: int) -> Callable[[], Awaitable[Result[int, object]]]:
    def below(v: int, _: int) -> bool:
        return v < k

    spin = loop(inc, while_=below, limit=k + 1)

    async def run() -> Result[int, object]:
        return await spin(0)

    return run


def cases(sizes: list[int], settings: Settings) -> list[Case]:
    """Measure the loop combinator and a plain while loop at each size."""
    out: list[Case] = []
    for k in sizes:
        for impl, run, expected in (
            ("baseline", _plain(k), k),
            ("pipeline", _ours(k), Success(k)),
        ):
            out.append(
                measure(
                    "W3",
                    "loop",
                    impl,
                    size=k,
                    unit="iteration",
                    run=run,
                    expected=expected,
                    settings=settings,
                )
            )
    return out
