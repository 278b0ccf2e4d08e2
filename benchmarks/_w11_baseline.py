"""W11's baseline: a hand-written Temporal workflow calling 10 activities.

What a Temporal user writes without pipeline: an ``int`` in, each
activity adds one, the default data converter.  Kept apart from W11's
driver so Temporal's sandbox imports nothing else with it.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import activity, workflow


NODES = 10


@activity.defn(name="w11.inc")
async def inc(n: int) -> int:
    """The node's work: add one."""
    return n + 1


@workflow.defn(name="w11.chain")
class Chain:
    """Ten activities in sequence, each on the last one's result."""

    @workflow.run
    async def run(self, n: int) -> int:
        """Run the chain from *n*."""
        for _ in range(NODES):
            n = await workflow.execute_activity(
                inc, n, start_to_close_timeout=timedelta(seconds=60)
            )
        return n
