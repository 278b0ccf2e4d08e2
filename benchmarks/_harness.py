"""Timing harness: medians after warm-up, JSON lines, a final table."""

from __future__ import annotations

import asyncio
import gc
import json
import statistics
import time
import tracemalloc

from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

import anyio
import attrs
import sniffio


_T = TypeVar("_T")


@attrs.frozen
class Case:
    """One measured case; printed as a JSON line."""

    workload: str
    variant: str
    impl: str
    size: int
    unit: str
    reps: int
    median_s: float
    per_unit_us: float
    bytes_stored: int | None = None
    peak_bytes: int | None = None

    def line(self) -> str:
        """The JSON line for this case."""
        return json.dumps(attrs.asdict(self))


@attrs.frozen
class Settings:
    """How hard to measure: repetitions, minimum units per timing, backend."""

    reps: int
    min_units: int
    backend: str


def _timer(
    workload: str,
    variant: str,
    impl: str,
    *,
    size: int,
    run: Callable[[], Awaitable[Any]],
    expected: object,
    settings: Settings,
) -> Callable[[], Awaitable[float]]:
    """One timing of *run*: seconds per run, after a warm-up run whose
    result is checked.  Small sizes repeat the run inside one timing so
    that each timing covers at least *min_units* units: per-unit figures
    stay above timer noise."""
    inner = max(1, settings.min_units // max(size, 1))

    async def timed() -> float:
        result = await run()  # warm-up, and check the work was done
        if result != expected:
            msg = (
                f"{workload}/{variant}/{impl}/{size}: wrong result {result!r}"
            )
            raise AssertionError(msg)
        gc.collect()
        start = time.perf_counter()
        for _ in range(inner):
            await run()
        return (time.perf_counter() - start) / inner

    return timed


def _peak(
    run: Callable[[], Awaitable[Any]], size: int, backend: str
) -> int | None:
    """The peak of traced memory over one run (``None`` past 100,000
    units: tracing them would take too long)."""
    if size > 100_000:
        return None

    async def peak() -> int:
        gc.collect()
        tracemalloc.start()
        try:
            await run()
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    return anyio.run(peak, backend=backend)


def _case(
    workload: str,
    variant: str,
    impl: str,
    size: int,
    unit: str,
    times: list[float],
    peak_bytes: int | None,
) -> Case:
    median = statistics.median(times)
    return Case(
        workload,
        variant,
        impl,
        size,
        unit,
        len(times),
        median,
        median / size * 1e6,
        None,
        peak_bytes,
    )


def measure(
    workload: str,
    variant: str,
    impl: str,
    *,
    size: int,
    unit: str,
    run: Callable[[], Awaitable[Any]],
    expected: object,
    settings: Settings,
) -> Case:
    """Time *run* (checking its result) and return the median case."""
    timed = _timer(
        workload,
        variant,
        impl,
        size=size,
        run=run,
        expected=expected,
        settings=settings,
    )
    backend = settings.backend
    times = [anyio.run(timed, backend=backend) for _ in range(settings.reps)]
    return _case(
        workload, variant, impl, size, unit, times, _peak(run, size, backend)
    )


def measure_pair(
    workload: str,
    variant: str,
    *,
    size: int,
    unit: str,
    baseline: Callable[[], Awaitable[Any]],
    ours: Callable[[], Awaitable[Any]],
    expected: object,
    settings: Settings,
) -> tuple[Case, Case]:
    """The baseline's case and ours, timed in turn: each repetition times
    both, the first of them alternating (baseline first, then ours first),
    so that a drift of the machine (a disk's flushes, another process)
    weighs on both sides alike.  The medians are of each side's timings."""
    timers = {
        impl: _timer(
            workload,
            variant,
            impl,
            size=size,
            run=run,
            expected=expected,
            settings=settings,
        )
        for impl, run in (("baseline", baseline), ("pipeline", ours))
    }
    backend = settings.backend
    times: dict[str, list[float]] = {"baseline": [], "pipeline": []}
    for rep in range(settings.reps):
        order = (
            ("baseline", "pipeline")
            if rep % 2 == 0
            else ("pipeline", "baseline")
        )
        for impl in order:
            times[impl].append(anyio.run(timers[impl], backend=backend))
    base, mine = (
        _case(
            workload,
            variant,
            impl,
            size,
            unit,
            times[impl],
            _peak(run, size, backend),
        )
        for impl, run in (("baseline", baseline), ("pipeline", ours))
    )
    return base, mine


def table(cases: list[Case]) -> str:
    """A plain-text table pairing each pipeline case with its baseline."""
    base = {
        (c.workload, c.variant, c.size): c
        for c in cases
        if c.impl == "baseline"
    }
    rows = [
        "workload variant        size     pipeline µs/unit  baseline µs/unit  overhead µs  ratio"
    ]
    for c in cases:
        if c.impl != "pipeline":
            continue
        b = base.get((c.workload, c.variant, c.size))
        if b is None:
            rows.append(
                f"{c.workload:<8} {c.variant:<14} {c.size:>8} {c.per_unit_us:>17.3f}"
            )
            continue
        over = c.per_unit_us - b.per_unit_us
        ratio = (
            c.per_unit_us / b.per_unit_us if b.per_unit_us else float("inf")
        )
        rows.append(
            f"{c.workload:<8} {c.variant:<14} {c.size:>8} {c.per_unit_us:>17.3f}"
            f" {b.per_unit_us:>17.3f} {over:>12.3f} {ratio:>6.1f}x"
        )
    return "\n".join(rows)


async def gather(coros: list[Coroutine[Any, Any, _T]]) -> list[_T]:
    """The plain baseline's concurrency: `asyncio.gather` on asyncio, a
    nursery (trio's own primitive, no anyio layer) on trio."""
    if sniffio.current_async_library() == "asyncio":
        return await asyncio.gather(*coros)
    import trio  # noqa: PLC0415 - only on trio

    results: list[Any] = [None] * len(coros)

    async def one(i: int, coro: Coroutine[Any, Any, _T]) -> None:
        results[i] = await coro

    async with trio.open_nursery() as nursery:
        for i, coro in enumerate(coros):
            nursery.start_soon(one, i, coro)
    return results
