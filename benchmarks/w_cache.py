"""W12: a cached 10-node graph re-run on the same input, beside plain.

Three cases per size, in one run: the graph without a cache (``baseline``:
the same nodes, the same engine), the cached graph re-run on an input it
has seen (``pipeline``: every node a hit), and a dictionary lookup per node
(``dict``: a 64-hex-digit key in a dictionary of as many entries as the
cache holds), the yardstick the target is written in.

The variant ``cached sqlite`` keeps the entries in a SQLite file (a
``StoreCache`` on a ``SQLiteStore``, WAL, ``synchronous=FULL``): beside the
same uncached graph, and a plain ``sqlite3`` point query per node on the
same file and table (``sqlite``: what each lookup reads, without the
store's writer thread).
"""

from __future__ import annotations

import contextlib
import hashlib
import shutil
import sqlite3
import tempfile

from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import anyio

from returns.result import Success

from benchmarks._harness import Case, Settings, measure
from benchmarks.w_graph import Counter, _inc
from pipeline import Graph, graph, stores
from pipeline.graph import END, CachePolicy


def _graph(
    n: int, *, cached: bool, store: stores.StoreCache | None = None
) -> Graph[Counter, str]:
    b: graph.GraphBuilder[Counter, str] = graph.builder(Counter)
    for i in range(n):
        policy: CachePolicy[Counter] | None = None
        if store is not None:
            policy = CachePolicy(store=store)
        elif cached:
            policy = CachePolicy()
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


def _point_queries(path: Path) -> Callable[[], Awaitable[object]]:
    """A plain ``sqlite3`` read of each entry the cached graph reads."""
    conn = sqlite3.connect(path, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    keys = [k for (k,) in conn.execute("SELECT key FROM cache")]

    async def run() -> object:
        found = 0
        for k in keys:
            row = conn.execute(
                "SELECT data, checksum FROM cache WHERE key = ? "
                "AND (expires IS NULL OR expires >= ?)",
                (k, 0.0),
            ).fetchone()
            found += row is not None
        return Success(found)

    return run


@contextlib.contextmanager
def _sqlite_cache() -> Iterator[tuple[Path, stores.SQLiteStore]]:
    where = Path(tempfile.mkdtemp(prefix="w12-"))
    store = stores.SQLiteStore(where / "cache.db")
    try:
        yield where / "cache.db", store
    finally:
        anyio.run(store.aclose)
        shutil.rmtree(where, ignore_errors=True)


def _in_sqlite(settings: Settings, sizes: list[int]) -> list[Case]:
    """The variant ``cached sqlite`` (see the module)."""
    out: list[Case] = []
    for n in sizes:
        with _sqlite_cache() as (path, store):
            cached = _run(
                _graph(n, cached=True, store=stores.StoreCache(store))
            )
            anyio.run(cached, backend=settings.backend)  # fill the cache
            out += _measured(
                settings,
                "cached sqlite",
                n,
                baseline=_run(_graph(n, cached=False)),
                pipeline=cached,
                sqlite=_point_queries(path),
            )
    return out


def _measured(
    settings: Settings,
    variant: str,
    n: int,
    **runs: Callable[[], Awaitable[object]],
) -> list[Case]:
    """Each of *runs* (by implementation) measured at size *n*."""
    return [
        measure(
            "W12",
            variant,
            impl,
            size=n,
            unit="node",
            run=run,
            expected=Success(n),
            settings=settings,
        )
        for impl, run in runs.items()
    ]


def cases(settings: Settings, *, quick: bool) -> list[Case]:
    """Measure the three cases at each size, in memory and in SQLite."""
    sizes = [10] if quick else [10, 20]
    out: list[Case] = []
    for n in sizes:
        out += _measured(
            settings,
            "cached re-run",
            n,
            baseline=_run(_graph(n, cached=False)),
            pipeline=_run(_graph(n, cached=True)),
            dict=_lookups(n),
        )
    return [*out, *_in_sqlite(settings, sizes)]
