"""W9: many durable runs at once on one SQLite file.

C concurrent threads, each a chain of 10 trivial nodes, every boundary
committed (``synchronous=FULL``) before the next node starts.  The
baseline is plain ``sqlite3`` with the same settings, one connection, one
``BEGIN IMMEDIATE``/insert/``COMMIT`` (one fsync) per boundary, on the
loop.  The unit is a node commit; the figure to read is commits per second
(1e6 / per_unit_us).
"""

from __future__ import annotations

import sqlite3
import tempfile

from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio

from benchmarks._harness import Case, Settings, measure
from benchmarks.w_graph import Counter, chain_graph
from pipeline import stores


NODES = 10


def _ours(folder: Path, c: int) -> Callable[[], Awaitable[int]]:
    g = chain_graph(NODES)
    rounds = [0]

    async def run() -> int:
        rounds[0] += 1
        path = folder / f"ours{c}-{rounds[0]}.db"
        total = 0
        async with stores.SQLiteStore(path) as store:

            async def one(i: int) -> None:
                nonlocal total
                out = await g.run(Counter(), store=store, thread_id=f"t{i}")
                total += out.unwrap().state.n

            async with anyio.create_task_group() as tg:
                for i in range(c):
                    tg.start_soon(one, i)
        for p in folder.glob(f"ours{c}-{rounds[0]}.db*"):
            p.unlink()
        return total

    return run


def _plain(folder: Path, c: int) -> Callable[[], Awaitable[int]]:
    payload = b'{"n":1}' * 8

    async def run() -> int:
        path = folder / f"plain{c}.db"
        for p in folder.glob(f"plain{c}.db*"):
            p.unlink()
        conn = sqlite3.connect(path, isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute(
            "CREATE TABLE log (thread TEXT, step INTEGER, data BLOB, "
            "PRIMARY KEY (thread, step))"
        )
        total = 0
        for step in range(NODES):
            for i in range(c):
                conn.execute("BEGIN IMMEDIATE")
                conn.execute(
                    "INSERT INTO log VALUES (?, ?, ?)",
                    (f"t{i}", step, payload),
                )
                conn.execute("COMMIT")
                total += 1
        conn.close()
        return total

    return run


def cases(settings: Settings, *, quick: bool) -> list[Case]:
    """W9 at C = 10, 100, 1000 concurrent threads (10 and 100 when quick)."""
    folder = Path(tempfile.mkdtemp(prefix="pipeline-w9-"))
    few = Settings(max(3, settings.reps // 2), 1, settings.backend)
    out: list[Case] = []
    for c in [10, 100] if quick else [10, 100, 1000]:
        for impl, run in (
            ("baseline", _plain(folder, c)),
            ("pipeline", _ours(folder, c)),
        ):
            out.append(
                measure(
                    "W9",
                    "sqlite-threads",
                    impl,
                    size=c * NODES,
                    unit="node commit",
                    run=run,
                    expected=c * NODES,
                    settings=few,
                )
            )
    return out
