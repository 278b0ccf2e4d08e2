"""Seeded random graphs for crash tests (also run by the SIGKILL child)."""

from __future__ import annotations

import random

from pipeline import Graph, graph
from pipeline.graph import END
from tests.graph.helpers import Counted, Hook, Runs, step


def make_graph(
    seed: int, runs: Runs, hook: Hook | None = None
) -> Graph[Counted, str]:
    """A graph of 3-8 chained nodes with seeded loops and fan-outs.

    Loops go back while the counter is below a seeded bound, so every run
    ends; nodes record their executions in *runs* and call *hook* as they
    start.
    """
    rng = random.Random(seed)
    n = rng.randint(3, 8)
    b: graph.GraphBuilder[Counted, str] = graph.builder(Counted)
    for i in range(n):
        b = b.node(f"n{i}", step(f"n{i}", runs, hook))
    b = b.entry("n0")
    for i in range(n - 1):
        kind = rng.choice(["static", "static", "loop", "fan"])
        nxt = f"n{i + 1}"
        if kind == "loop" and i > 0:
            back = f"n{rng.randint(0, i)}"
            bound = rng.randint(2, 12)

            def router(
                s: Counted,
                back: str = back,
                nxt: str = nxt,
                bound: int = bound,
            ) -> str:
                return back if s.count < bound else nxt

            b = b.route(f"n{i}", router, to=[back, nxt])
        elif kind == "fan":
            left, right = f"f{i}a", f"f{i}b"
            b = b.node(left, step(left, runs, hook)).node(
                right, step(right, runs, hook)
            )
            b = b.fan_out(
                f"n{i}",
                [left, right],
                join=nxt,
                reducers={"count": lambda before, vals: before + len(vals)},
            )
        else:
            b = b.edge(f"n{i}", nxt)
    return b.edge(f"n{n - 1}", END).build()
