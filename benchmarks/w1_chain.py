"""W1(a): a chain of N distinct `>>` steps, each incrementing a counter."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from returns.result import Result, Success

from benchmarks._harness import Case, Settings, measure
from pipeline import Handler, handler


def _pipeline_step(i: int) -> Handler[int, int, str]:
    @handler(name=f"step{i}")
    async def step(x: int) -> Result[int, str]:
        return Success(x + 1)

    return step


def _plain_step() -> Callable[[int], Awaitable[int]]:
    async def step(x: int) -> int:
        return x + 1

    return step


def _plain(n: int) -> Callable[[], Awaitable[int]]:
    steps = [_plain_step() for _ in range(n)]

    async def run() -> int:
        x = 0
        for f in steps:
            x = await f(x)
        return x

    return run


def _ours(n: int) -> Callable[[], Awaitable[Result[int, str]]]:
    chain = _pipeline_step(0)
    for i in range(1, n):
        chain = chain >> _pipeline_step(i)

    async def run() -> Result[int, str]:
        return await chain(0)

    return run


def cases(sizes: list[int], settings: Settings) -> list[Case]:
    """Measure the chain and its baseline at each size."""
    out: list[Case] = []
    for n in sizes:
        for impl, run, expected in (
            ("baseline", _plain(n), n),
            ("pipeline", _ours(n), Success(n)),
        ):
            out.append(
                measure(
                    "W1",
                    "chain",
                    impl,
                    size=n,
                    unit="step",
                    run=run,
                    expected=expected,
                    settings=settings,
                )
            )
    return out
