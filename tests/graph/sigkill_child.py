"""Child process for the SIGKILL test: runs a graph until its last node,
says so on stdout, then blocks until it is killed."""

from __future__ import annotations

import sys

import anyio

from returns.result import Result

from pipeline import graph, handler
from tests.graph.crashgraphs import make_graph
from tests.graph.helpers import Counted, Runs


def main() -> None:
    """Run graph *seed* against the SQLite file *path*; block in the end."""
    path, seed = sys.argv[1], int(sys.argv[2])

    g = make_graph(seed, Runs())
    # The chain's last node runs exactly once, just before END.
    last = max(
        (n for n in g.nodes if n.startswith("n")), key=lambda n: int(n[1:])
    )
    original = g._calls[last]

    @handler(name=last)
    async def blocking(s: Counted) -> Result[Counted, str]:
        sys.stdout.write("inside-last-node\n")
        sys.stdout.flush()
        await anyio.sleep_forever()
        return await original(s)  # pragma: no cover

    g._calls[last] = blocking._call

    async def run() -> None:
        async with graph.SQLiteStore(path) as store:
            await g.run(Counted(), store=store, thread_id="t")

    anyio.run(run)


if __name__ == "__main__":
    main()
