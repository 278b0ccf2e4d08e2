"""Child process for the SIGSTOP trials (tests/test_zombie_steps.py).

Runs the ten-node chain on a thread with short leases; each node writes
its name to the effects log, then to stdout (the parent counts those lines
to pick the instant of its SIGSTOP).  At the end it prints how the run
ended: ``done`` or the failure's class name.
"""

from __future__ import annotations

import sys

from pathlib import Path

import anyio

from returns.result import Result, Success

from pipeline import Graph, graph, handler
from pipeline.graph import END
from tests.graph.store_urls import open_store
from tests.test_zombie_steps import NODES, TTL, Trail


def chain(log: Path) -> Graph[Trail, str]:
    """The chain of the stalled-observer test, reporting each node."""
    b: graph.GraphBuilder[Trail, str] = graph.builder(Trail).entry(NODES[0])
    effects = log.open("a", buffering=1)
    for name, nxt in zip(NODES, [*NODES[1:], END], strict=True):

        @handler(name=name)
        async def node(s: Trail, name: str = name) -> Result[Trail, str]:
            effects.write(name + "\n")
            sys.stdout.write(name + "\n")
            sys.stdout.flush()
            await anyio.lowlevel.checkpoint()
            return Success(Trail(s.n + 1))

        b = b.node(name, node).edge(name, nxt)
    return b.build()


def main() -> None:
    """argv: store spec, effects log path, thread id."""
    spec, log, thread_id = sys.argv[1], Path(sys.argv[2]), sys.argv[3]

    async def run() -> None:
        async with open_store(spec, lease_ttl=TTL) as store:
            sys.stdout.write("ready\n")
            sys.stdout.flush()
            out = await chain(log).run(
                Trail(), store=store, thread_id=thread_id
            )
        ended = (
            "done" if type(out) is Success else type(out.failure()).__name__
        )
        sys.stdout.write(f"ended {ended}\n")
        sys.stdout.flush()

    anyio.run(run)


if __name__ == "__main__":
    main()
