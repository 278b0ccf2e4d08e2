"""W12: a cached 10-node graph re-run on the same input, beside plain.

Three cases per size, in one run: the graph without a cache (``baseline``:
the same nodes, the same engine), the cached graph re-run on an input it
has seen (``pipeline``: every node a hit), and a dictionary lookup per node
(``dict``: a 64-hex-digit key in a dictionary of as many entries as the
cache holds), the yardstick the target is written in.
"""

from __future__ import annotations

import hashlib

from collections.abc import Awaitable, Callable

from returns.result import Success

from benchmarks._harness import Case, Settings, measure
from benchmarks.w_graph import Counter, _inc
from pipeline import Graph, graph
from pipeline.graph import END, CachePolicy


def _graph(n: int, *, cached: bool) -> Graph[Counter, str]:
    b: graph.GraphBuilder[Counter, str] = graph.builder(Counter)
    for i in range(n):
        policy: CachePolicy[Counter] | None = CachePolicy() if cached else None
        b = b.node(f"s{i}", _inc(f"s{i}"), cache=policy)
    b = b.entry("s0")
    for i in range(n - 1):
        b = b.edge(f"s{i}", f"s{i + 1}")
    return b.edge(f"s{n - 1}", END).build()


def _run(g: Graph[Counter, str]) -> Callable[[], Awaitable[object]]:
    async def run() -> object:
        out = await g.run(Counter())
        return Success(out.unwrap().state.n)

    return run


def _lookups(n: int) -> Callable[[], Awaitable[object]]:
    keys = [hashlib.sha256(str(i).encode()).hexdigest() for i in range(n)]
    table = {k: Counter(i + 1) for i, k in enumerate(keys)}

    async def run() -> object:
        last = None
        for k in keys:
            last = table[k]
        assert last is not None  # noqa: S101
        return Success(last.n)

    return run


def cases(settings: Settings, *, quick: bool) -> list[Case]:
    """Measure the three cases at each size."""
    sizes = [10] if quick else [10, 20]
    out: list[Case] = []
    for n in sizes:
        for impl, run in (
            ("baseline", _run(_graph(n, cached=False))),
            ("pipeline", _run(_graph(n, cached=True))),
            ("dict", _lookups(n)),
        ):
            out.append(
                measure(
                    "W12",
                    "cached re-run",
                    impl,
                    size=n,
                    unit="node",
                    run=run,
                    expected=Success(n),
                    settings=settings,
                )
            )
    return out
