"""Child process for the two-process test: fifty resumers of one thread."""

from __future__ import annotations

import sys

from pathlib import Path

import anyio

from returns.result import Success

from pipeline.failures import StaleAnswer, ThreadBusy
from pipeline.stores import DEFAULT_LEASE_TTL
from tests.graph.store_urls import open_store
from tests.test_durability import _stop_before_b, counting_graph


def main() -> None:
    """Resume thread "t" of the store argv[1] names fifty times at once."""
    spec, log = sys.argv[1], Path(sys.argv[2])
    g = counting_graph(log)

    async def run() -> None:
        async with open_store(spec, lease_ttl=DEFAULT_LEASE_TTL) as store:

            async def resumer() -> None:
                out = await g.resume(
                    store, "t", answer="yes", gates=[_stop_before_b]
                )
                if not isinstance(out, Success):
                    # Busy, or another's answer went first (none waits).
                    assert isinstance(
                        out.failure(), ThreadBusy | StaleAnswer
                    ), out

            async with anyio.create_task_group() as tg:
                for _ in range(50):
                    tg.start_soon(resumer)

    anyio.run(run)


if __name__ == "__main__":
    main()
