"""Child process for the SIGKILL trials: many threads in flight at once.

Runs the seeded crash graphs of seeds ``first .. first + n - 1`` at the
same time, each on its own thread of the store, writing every node
execution to an effects log (an external side effect that survives the
process) and, once it is there, to stdout (the parent counts those lines
to pick the instant of the kill), then waits to be killed.
"""

from __future__ import annotations

import sys

from pathlib import Path

import anyio

from pipeline import Graph
from tests.graph.crashgraphs import make_graph
from tests.graph.helpers import Counted, Hook, Runs
from tests.graph.store_urls import open_store


def main() -> None:
    """argv: store spec, first seed, count, effects log path."""
    spec, first, n, log = (
        sys.argv[1],
        int(sys.argv[2]),
        int(sys.argv[3]),
        Path(sys.argv[4]),
    )

    async def run() -> None:
        effects = log.open("a", buffering=1)  # noqa: ASYNC230  # before any run

        def hook_for(seed: int) -> Hook:
            async def hook(name: str, s: Counted) -> None:
                line = f"{seed} {name} {s.count}\n"
                effects.write(line)
                sys.stdout.write(line)
                sys.stdout.flush()
                await anyio.lowlevel.checkpoint()

            return hook

        graphs = [
            (seed, make_graph(seed, Runs(), hook_for(seed)))
            for seed in range(first, first + n)
        ]
        async with open_store(spec, lease_ttl=0.4) as store:

            async def one(seed: int, g: Graph[Counted, str]) -> None:
                await g.run(Counted(), store=store, thread_id=f"s{seed}")

            sys.stdout.write("ready\n")
            sys.stdout.flush()
            async with anyio.create_task_group() as tg:
                for seed, g in graphs:
                    tg.start_soon(one, seed, g)
            sys.stdout.write("finished\n")
            sys.stdout.flush()
            await anyio.sleep_forever()

    anyio.run(run)


if __name__ == "__main__":
    main()
