"""Child process for the SIGKILL test: runs a graph until its last node,
says so on stdout, then blocks until it is killed."""

from __future__ import annotations

import sys

import anyio

from pipeline import stores
from tests.graph.crashgraphs import make_graph
from tests.graph.helpers import Counted, Runs


def main() -> None:
    """Run graph *seed* against the SQLite file *path*; block in the end."""
    path, seed = sys.argv[1], int(sys.argv[2])

    # The chain's last node runs exactly once, just before END.
    last = max(
        (n for n in make_graph(seed, Runs()).nodes if n.startswith("n")),
        key=lambda n: int(n[1:]),
    )

    async def block(name: str, _: Counted) -> None:
        if name == last:
            sys.stdout.write("inside-last-node\n")
            sys.stdout.flush()
            await anyio.sleep_forever()

    g = make_graph(seed, Runs(), block)

    async def run() -> None:
        # A short lease: the killed run's lease lapses soon after it dies.
        async with stores.SQLiteStore(path, lease_ttl=0.5) as store:
            await g.run(Counted(), store=store, thread_id="t")

    anyio.run(run)


if __name__ == "__main__":
    main()
