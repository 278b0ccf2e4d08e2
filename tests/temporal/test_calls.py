"""An agent's model calls and tool calls are activities of their own."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import anyio
import pytest

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from pipeline.temporal import (
    ActivityRetry,
    NodeOptions,
    RunOptions,
    Runs,
    calls_queue,
    worker,
)
from tests.temporal.graphs import EFFECTS_ENV, FANOUT, FLAKY, TURNS, Tally


pytestmark = [pytest.mark.temporal, pytest.mark.slow]

_SCHEDULED = EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
_STARTED = EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED


async def _activities(
    client: Client, run_id: str
) -> list[tuple[str, str, int]]:
    """Every activity of the run: its type, its queue and the attempt that
    finished it."""
    history = await client.get_workflow_handle(run_id).fetch_history()
    scheduled = {}
    out = []
    for event in history.events:
        if event.event_type == _SCHEDULED:
            s = event.activity_task_scheduled_event_attributes
            scheduled[event.event_id] = (
                s.activity_type.name,
                s.task_queue.name,
            )
        elif event.event_type == _STARTED:
            a = event.activity_task_started_event_attributes
            kind, queue = scheduled[a.scheduled_event_id]
            out.append((kind, queue, a.attempt))
    return out


@pytest.fixture(name="effects")
def _effects(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "effects"
    path.touch()
    monkeypatch.setenv(EFFECTS_ENV, str(path))
    return path


async def test_each_model_call_and_tool_call_is_an_activity(
    client: Client, queue: str, effects: Path
) -> None:
    """An agent node with two tool calls: two step activities on the task
    queue, three model calls and two tool calls on its calls queue; the
    run ends as in process."""
    async with worker(client, [TURNS], task_queue=queue):
        run = await Runs(client, task_queue=queue).start(TURNS, Tally())
        with anyio.fail_after(60):
            final = (await run.result()).unwrap()
    kinds = Counter((k, q) for k, q, _ in await _activities(client, run.id))
    assert kinds == Counter(
        {
            ("pipeline.step", queue): 2,
            ("pipeline.call", calls_queue(queue)): 5,
        }
    )
    assert Counter((await anyio.Path(effects).read_text()).split()) == Counter(
        {"model": 3, "tool1": 1, "tool2": 1}
    )
    await anyio.Path(effects).write_text("")
    assert final.state == (await TURNS.run(Tally())).unwrap().state


async def test_a_raising_tool_is_retried_as_itself(
    client: Client, queue: str, effects: Path
) -> None:
    """A tool whose exception propagates is retried under its own policy:
    its activity's second attempt answers; the node's step runs once, and
    no model call is made again."""
    options = RunOptions(
        default=NodeOptions(retry=ActivityRetry(attempts=1)),
        tools={
            "flaky": NodeOptions(retry=ActivityRetry(initial=0.1, attempts=3))
        },
    )
    async with worker(client, [FLAKY], task_queue=queue):
        run = await Runs(client, task_queue=queue).start(
            FLAKY, Tally(), options=options
        )
        with anyio.fail_after(60):
            final = (await run.result()).unwrap()
    attempts = sorted((k, a) for k, _, a in await _activities(client, run.id))
    assert attempts == [
        ("pipeline.call", 1),  # the first model call
        ("pipeline.call", 1),  # the second
        ("pipeline.call", 2),  # the tool, answered by its second attempt
        ("pipeline.step", 1),  # before
        ("pipeline.step", 1),  # the agent node, once
    ]
    assert Counter((await anyio.Path(effects).read_text()).split()) == Counter(
        {"before": 1, "model": 2, "flaky": 2}
    )
    assert final.state.notes[-1] == "caller:steady"


async def test_steps_waiting_for_calls_never_starve_them(
    client: Client, queue: str
) -> None:
    """One slot for steps, one for calls: an agent branch holds the step
    slot while its calls run on the calls queue's slot, and the fan-out
    finishes as in process."""
    async with worker(
        client,
        [FANOUT],
        task_queue=queue,
        max_concurrent_activities=1,
        max_concurrent_calls=1,
    ):
        run = await Runs(client, task_queue=queue).start(FANOUT, Tally())
        with anyio.fail_after(60):
            final = (await run.result()).unwrap()
    assert final.state == (await FANOUT.run(Tally())).unwrap().state
