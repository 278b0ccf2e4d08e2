"""Graph workloads W1(b), W2, W3, W4, W5 and W6 beside plain Python."""

from __future__ import annotations

import sqlite3
import tempfile

from collections.abc import Awaitable, Callable
from pathlib import Path

import attrs

from returns.result import Result, Success

from benchmarks._harness import Case, Settings, gather, measure
from pipeline import (
    Context,
    Graph,
    Handler,
    Message,
    graph,
    handler,
    map_reduce,
    stores,
)
from pipeline._serde import canonical, make_converter
from pipeline.graph import END


@attrs.frozen
class Counter:
    """The benchmark state: one counter."""

    n: int = 0


def _inc(name: str) -> Handler[Counter, Counter, str]:
    @handler(name=name)
    async def run(s: Counter) -> Result[Counter, str]:
        return Success(Counter(s.n + 1))

    return run


def chain_graph(n: int) -> Graph[Counter, str]:
    """N distinct nodes with static edges."""
    b: graph.GraphBuilder[Counter, str] = graph.builder(Counter)
    for i in range(n):
        b = b.node(f"s{i}", _inc(f"s{i}"))
    b = b.entry("s0")
    for i in range(n - 1):
        b = b.edge(f"s{i}", f"s{i + 1}")
    return b.edge(f"s{n - 1}", END).build()


def loop_graph(bound: list[int]) -> Graph[Counter, str]:
    """One node looping on itself until the counter reaches ``bound[0]``."""

    def again(s: Counter) -> str:
        return "spin" if s.n < bound[0] else END

    return (
        graph.builder(Counter)
        .node("spin", _inc("spin"))
        .entry("spin")
        .route("spin", again, to=["spin", END])
        .build()
    )


def fan_graph(n: int) -> Graph[Counter, str]:
    """One node fanning out to N branches; a join sums them."""

    def branch(i: int) -> Handler[Counter, Counter, str]:
        @handler(name=f"b{i}")
        async def run(s: Counter) -> Result[Counter, str]:
            return Success(Counter(s.n + i))

        return run

    @handler
    async def src(s: Counter) -> Result[Counter, str]:
        return Success(s)

    b: graph.GraphBuilder[Counter, str] = graph.builder(Counter).node(
        "src", src
    )
    for i in range(n):
        b = b.node(f"b{i}", branch(i))

    def total(before: Counter, outs: tuple[Counter, ...]) -> Counter:
        return Counter(before.n + sum(o.n - before.n for o in outs))

    return (
        b.entry("src")
        .fan_out("src", [f"b{i}" for i in range(n)], join=END, merge=total)
        .build()
    )


@handler
async def say(ctx: Context) -> Result[Context, str]:
    return Success(ctx.append(Message.assistant("x")))


def history_graph(k: int) -> Graph[Context, str]:
    """A loop of K steps, each appending one message."""

    def again(c: Context) -> str:
        return "say" if len(c.messages) < k else END

    return (
        graph.builder(Context)
        .node("say", say)
        .entry("say")
        .route("say", again, to=["say", END])
        .build()
    )


def _plain_chain(n: int) -> Callable[[], Awaitable[int]]:
    async def step(x: int) -> int:
        return x + 1

    steps = [step] * n

    async def run() -> int:
        x = 0
        for f in steps:
            x = await f(x)
        return x

    return run


def w1(sizes: list[int], settings: Settings) -> list[Case]:
    """W1(b): a chain of N graph nodes."""
    out: list[Case] = []
    for n in sizes:
        g = chain_graph(n)
        limits = graph.GraphLimits(
            max_steps=n + 1
        )  # the default is 1,000 steps

        async def ours(
            g: Graph[Counter, str] = g, limits: graph.GraphLimits = limits
        ) -> int:
            return (await g.run(Counter(), limits=limits)).unwrap().state.n

        out.append(
            measure(
                "W1",
                "graph",
                "baseline",
                size=n,
                unit="step",
                run=_plain_chain(n),
                expected=n,
                settings=settings,
            )
        )
        out.append(
            measure(
                "W1",
                "graph",
                "pipeline",
                size=n,
                unit="step",
                run=ours,
                expected=n,
                settings=settings,
            )
        )
    return out


def w2(sizes: list[int], settings: Settings) -> list[Case]:
    """W2: fan-out to N branches and join (graph and map_reduce, the latter
    also as the node of a graph checkpointed in memory)."""
    out: list[Case] = []
    for n in sizes:
        g = fan_graph(n)
        limits = graph.GraphLimits(max_fanout=max(n, 1))

        async def ours(
            g: Graph[Counter, str] = g, limits: graph.GraphLimits = limits
        ) -> int:
            return (await g.run(Counter(), limits=limits)).unwrap().state.n

        @handler
        async def value(i: int) -> Result[int, str]:
            return Success(i)

        def total(
            _: int, results: tuple[Result[int, str], ...]
        ) -> Result[int, str]:
            return Success(sum(r.unwrap() for r in results))

        def split(k: int) -> range:
            return range(k)

        mr = map_reduce(
            split, value, total, max_concurrency=16, max_items=max(n, 1)
        )

        async def ours_mr(
            mr: Handler[int, int, object] = mr, n: int = n
        ) -> int:
            return (await mr(n)).unwrap()

        async def plain(n: int = n) -> int:
            async def branch(i: int) -> int:
                return i

            return sum(await gather([branch(i) for i in range(n)]))

        expected = n * (n - 1) // 2
        out.append(
            measure(
                "W2",
                "fan-out",
                "baseline",
                size=n,
                unit="branch",
                run=plain,
                expected=expected,
                settings=settings,
            )
        )
        out.append(
            measure(
                "W2",
                "fan-out",
                "pipeline",
                size=n,
                unit="branch",
                run=ours,
                expected=expected,
                settings=settings,
            )
        )
        out.append(
            measure(
                "W2",
                "map_reduce",
                "baseline",
                size=n,
                unit="branch",
                run=plain,
                expected=expected,
                settings=settings,
            )
        )
        out.append(
            measure(
                "W2",
                "map_reduce",
                "pipeline",
                size=n,
                unit="branch",
                run=ours_mr,
                expected=expected,
                settings=settings,
            )
        )
        out.extend(_w2_memory(n, mr, plain, settings))
    return out


def _w2_memory(
    n: int,
    mr: Handler[int, int, object],
    plain: Callable[[], Awaitable[int]],
    settings: Settings,
) -> list[Case]:
    """W2 ``map_reduce-memory``: *mr* as the node of a graph checkpointed
    in memory; its items ask nothing, so it must cost next to what it
    costs unjournaled (*plain*: the same run's ``gather`` baseline)."""
    held = (
        graph.builder(int).node("mr", mr).entry("mr").edge("mr", END).build()
    )

    async def ours() -> int:
        store = stores.MemoryStore()
        return (await held.run(n, store=store, thread_id="m")).unwrap().state

    return [
        measure(
            "W2",
            "map_reduce-memory",
            impl,
            size=n,
            unit="branch",
            run=run,
            expected=n * (n - 1) // 2,
            settings=settings,
        )
        for impl, run in (("baseline", plain), ("pipeline", ours))
    ]


def w3(sizes: list[int], settings: Settings) -> list[Case]:
    """W3: one node looping on itself via a conditional edge."""
    out: list[Case] = []
    bound = [0]
    g = loop_graph(bound)
    for k in sizes:
        limits = graph.GraphLimits(max_steps=k + 1)

        async def ours(k: int = k, limits: graph.GraphLimits = limits) -> int:
            bound[0] = k
            return (await g.run(Counter(), limits=limits)).unwrap().state.n

        async def plain(k: int = k) -> int:
            async def step(x: int) -> int:
                return x + 1

            x = 0
            while x < k:
                x = await step(x)
            return x

        out.append(
            measure(
                "W3",
                "graph-loop",
                "baseline",
                size=k,
                unit="iteration",
                run=plain,
                expected=k,
                settings=settings,
            )
        )
        out.append(
            measure(
                "W3",
                "graph-loop",
                "pipeline",
                size=k,
                unit="iteration",
                run=ours,
                expected=k,
                settings=settings,
            )
        )
    return out


def w4(sizes: list[int], settings: Settings) -> list[Case]:
    """W4: K steps, each appending one message to an immutable history."""
    out: list[Case] = []
    for k in sizes:
        g = history_graph(k)
        limits = graph.GraphLimits(max_steps=k + 1)

        async def ours(
            g: Graph[Context, str] = g, limits: graph.GraphLimits = limits
        ) -> int:
            return len(
                (await g.run(Context(), limits=limits)).unwrap().state.messages
            )

        async def plain(k: int = k) -> int:
            async def step(msgs: list[Message]) -> list[Message]:
                msgs.append(Message.assistant("x"))
                return msgs

            msgs: list[Message] = []
            while len(msgs) < k:
                msgs = await step(msgs)
            return len(msgs)

        out.append(
            measure(
                "W4",
                "history",
                "baseline",
                size=k,
                unit="step",
                run=plain,
                expected=k,
                settings=settings,
            )
        )
        out.append(
            measure(
                "W4",
                "history",
                "pipeline",
                size=k,
                unit="step",
                run=ours,
                expected=k,
                settings=settings,
            )
        )
    return out


def _sqlite_baseline(
    path: Path, n: int, payload: bytes
) -> Callable[[], Awaitable[int]]:
    """Plain sqlite3 with the store's own settings (WAL, synchronous=FULL):
    one insert and one commit (one fsync) per step, on the loop."""

    async def run() -> int:
        for p in path.parent.glob(path.name + "*"):
            p.unlink()
        conn = sqlite3.connect(path, isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute("CREATE TABLE log (step INTEGER PRIMARY KEY, data BLOB)")
        for i in range(n):
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("INSERT INTO log VALUES (?, ?)", (i, payload))
            conn.execute("COMMIT")
        conn.close()
        return n

    return run


def w5(settings: Settings, quick: bool) -> list[Case]:
    """W5: checkpoint after every step, in memory and in SQLite."""
    out: list[Case] = []
    tmp = Path(tempfile.mkdtemp(prefix="pipeline-bench-"))
    n = 100
    k = 200 if quick else 1000
    chain = chain_graph(n)
    hist = history_graph(k)
    payload = b'{"n":1}' * 30

    async def memory_chain() -> int:
        store = stores.MemoryStore()
        return (await chain.run(Counter(), store=store)).unwrap().state.n

    async def sqlite_chain() -> int:
        path = tmp / "chain.db"
        for p in tmp.glob("chain.db*"):
            p.unlink()
        async with stores.SQLiteStore(path) as store:
            return (await chain.run(Counter(), store=store)).unwrap().state.n

    few = Settings(max(3, settings.reps // 2), 1, settings.backend)
    out.append(
        measure(
            "W5",
            "chain-memory",
            "baseline",
            size=n,
            unit="step",
            run=_plain_chain(n),
            expected=n,
            settings=settings,
        )
    )
    out.append(
        measure(
            "W5",
            "chain-memory",
            "pipeline",
            size=n,
            unit="step",
            run=memory_chain,
            expected=n,
            settings=settings,
        )
    )
    out.append(
        measure(
            "W5",
            "chain-sqlite",
            "baseline",
            size=n,
            unit="step",
            run=_sqlite_baseline(tmp / "base.db", n, payload),
            expected=n,
            settings=few,
        )
    )
    out.append(
        measure(
            "W5",
            "chain-sqlite",
            "pipeline",
            size=n,
            unit="step",
            run=sqlite_chain,
            expected=n,
            settings=few,
        )
    )

    limits = graph.GraphLimits(max_steps=k + 1)
    stored: list[int] = []

    async def memory_hist() -> int:
        store = stores.MemoryStore()
        done = (
            await hist.run(
                Context(), store=store, thread_id="h", limits=limits
            )
        ).unwrap()
        stored[:] = [sum(len(r.data) for r in await store.records("h"))]
        return len(done.state.messages)

    conv = make_converter()
    log_bytes = sum(
        len(canonical(conv.unstructure(Message.assistant("x")))) + 1
        for _ in range(k)
    )

    async def plain_log() -> int:
        msgs: list[Message] = []
        for _ in range(k):
            msgs.append(Message.assistant("x"))
        return len(msgs)

    base = measure(
        "W5",
        "history-memory",
        "baseline",
        size=k,
        unit="step",
        run=plain_log,
        expected=k,
        settings=settings,
    )
    ours = measure(
        "W5",
        "history-memory",
        "pipeline",
        size=k,
        unit="step",
        run=memory_hist,
        expected=k,
        settings=settings,
    )
    out.append(attrs.evolve(base, bytes_stored=log_bytes))
    out.append(attrs.evolve(ours, bytes_stored=stored[0]))
    return out


def w6(settings: Settings) -> list[Case]:
    """W6: a 3-node graph run 1000 times, one after another and at once."""
    g = chain_graph(3)
    runs = 1000

    async def sequential() -> int:
        total = 0
        for _ in range(runs):
            total += (await g.run(Counter())).unwrap().state.n
        return total

    async def one() -> int:
        return (await g.run(Counter())).unwrap().state.n

    async def concurrent() -> int:
        # The same concurrency primitive as the baseline's `gather`.
        return sum(await gather([one() for _ in range(runs)]))

    async def plain_run(x: int) -> int:
        async def step(v: int) -> int:
            return v + 1

        for _ in range(3):
            x = await step(x)
        return x

    async def plain_sequential() -> int:
        return sum([await plain_run(0) for _ in range(runs)])

    async def plain_concurrent() -> int:
        return sum(await gather([plain_run(0) for _ in range(runs)]))

    few = Settings(settings.reps, runs, settings.backend)
    expected = 3 * runs
    return [
        measure(
            "W6",
            "sequential",
            "baseline",
            size=runs,
            unit="run",
            run=plain_sequential,
            expected=expected,
            settings=few,
        ),
        measure(
            "W6",
            "sequential",
            "pipeline",
            size=runs,
            unit="run",
            run=sequential,
            expected=expected,
            settings=few,
        ),
        measure(
            "W6",
            "concurrent",
            "baseline",
            size=runs,
            unit="run",
            run=plain_concurrent,
            expected=expected,
            settings=few,
        ),
        measure(
            "W6",
            "concurrent",
            "pipeline",
            size=runs,
            unit="run",
            run=concurrent,
            expected=expected,
            settings=few,
        ),
    ]


def cases(settings: Settings, *, quick: bool) -> list[Case]:
    """Every graph workload at the sizes BENCHMARKS.md lists."""
    w1_sizes = [10, 100, 1000] if quick else [10, 100, 1000, 10_000]
    w2_sizes = [10, 100, 1000] if quick else [10, 100, 1000, 10_000]
    w3_sizes = [100, 1000, 10_000] if quick else [100, 1000, 10_000, 1_000_000]
    w4_sizes = [100, 1000, 10_000] if quick else [100, 1000, 10_000, 100_000]
    out: list[Case] = []
    for batch in (
        w1(w1_sizes, settings),
        w2(w2_sizes, settings),
        w3(w3_sizes, settings),
        w4(w4_sizes, settings),
        w5(settings, quick),
        w6(settings),
    ):
        out.extend(batch)
    return out
