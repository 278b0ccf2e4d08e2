"""map_reduce nodes on Temporal: an activity per item, the same result."""

from __future__ import annotations

import pytest

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from pipeline.graph import END, builder
from pipeline.temporal import Runs, worker
from tests.temporal.graphs import Refused, Tally, bump, mapped


pytestmark = [pytest.mark.temporal, pytest.mark.slow]


async def test_items_are_activities_of_their_own(
    client: Client, queue: str
) -> None:
    """Split, one activity per item, reduce: the run ends as in process."""
    g = (
        builder(Tally)
        .node("a", bump("a"))
        .node("m", mapped("m"))
        .entry("a")
        .edge("a", "m")
        .edge("m", END)
        .build(name="mapped")
    )
    async with worker(client, [g], task_queue=queue):
        run = await Runs(client, task_queue=queue).start(g, Tally(count=2))
        remote = (await run.result()).unwrap()
        history = await client.get_workflow_handle(run.id).fetch_history()
    local = (await g.run(Tally(count=2))).unwrap()
    assert remote.state == local.state
    scheduled = [
        e
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]
    # a, split, 4 items (count 3 at m: 0..3), reduce
    assert len(scheduled) == 1 + 1 + 4 + 1


@pytest.mark.parametrize("fail_fast", [False, True])
async def test_an_item_failure_ends_as_in_process(
    client: Client, queue: str, fail_fast: bool
) -> None:
    """An item's failure value reaches the reduce (or, under fail_fast,
    ends the node) as in process, located at the item and the node."""
    g = (
        builder(Tally)
        .node("m", mapped("m", fail_fast=fail_fast))
        .entry("m")
        .edge("m", END)
        .build(name=f"mapped-failing-{fail_fast}")
    )
    async with worker(client, [g], task_queue=queue, failures=[Refused]):
        runs = Runs(client, task_queue=queue, failures=[Refused])
        out = await (await runs.start(g, Tally(count=13))).result()
    local = await g.run(Tally(count=13))
    assert out == local
    assert out.failure() == Refused("square", "13")
