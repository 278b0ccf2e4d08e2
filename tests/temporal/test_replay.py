"""Determinism: recorded histories replay through the workflow code.

Temporal re-runs workflow code over a run's history whenever a worker
rebuilds it (after a restart, a cache eviction); code that decides
differently on replay is a ``NondeterminismError``.  Histories recorded
here (interrupts and answers, fan-outs with agents, swarm handoffs,
continue-as-new) and histories committed under ``histories/`` (recorded
by an earlier version: see ``record_histories.py``) must replay.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from temporalio.client import Client, WorkflowHistory
from temporalio.workflow import NondeterminismError

from pipeline.fold import Continue, Decision, Transition
from pipeline.temporal import Hostable, RunOptions, Runs, replayer, worker
from tests.temporal.graphs import (
    APPROVAL,
    FANOUT,
    NESTED,
    RELAY,
    Approval,
    Tally,
    approval_gate,
    approval_graph,
    ask,
    chain,
)


pytestmark = [pytest.mark.temporal, pytest.mark.slow]

HISTORIES = Path(__file__).parent / "histories"
LONG = chain([f"n{i}" for i in range(20)], name="long-replayed")
RECORDED: list[Hostable] = [APPROVAL, FANOUT, RELAY, LONG, NESTED]


async def each(
    histories: list[WorkflowHistory],
) -> AsyncIterator[WorkflowHistory]:
    """*histories* as the async iterator the replayer takes."""
    for h in histories:
        yield h


async def record(client: Client, queue: str) -> list[WorkflowHistory]:
    """Run each recorded machine once; their histories (every run of a
    workflow id that continued as new, too)."""
    runs = Runs(client, task_queue=queue)
    async with worker(client, RECORDED, task_queue=queue):
        approval = await runs.start(APPROVAL, Tally())
        (await approval.paused()).unwrap()
        (await approval.answer(Approval(approved=True, by="ada"))).unwrap()
        nested = await runs.start(NESTED, Tally())
        (await nested.paused()).unwrap()
        (await nested.answer(Approval(approved=True, by="ada"))).unwrap()
        fanout = await runs.start(FANOUT, Tally())
        relay = await runs.start(RELAY, ask("hi"))
        long = await runs.start(
            LONG, Tally(), options=RunOptions(history_bound=100)
        )
        ids = []
        for run in (approval, nested, fanout, relay, long):
            (await run.result()).unwrap()
            ids.append(run.id)
    histories = []
    async for execution in client.list_workflows(
        " OR ".join(f"WorkflowId = '{i}'" for i in ids)
    ):
        handle = client.get_workflow_handle(
            execution.id, run_id=execution.run_id
        )
        histories.append(await handle.fetch_history())
    return histories


async def test_recorded_histories_replay(client: Client, queue: str) -> None:
    """Every history of these runs replays without a nondeterminism error
    (the continued-as-new run of the long chain included)."""
    histories = await record(client, queue)
    assert len(histories) >= 5  # the long chain continued as new
    results = await replayer(RECORDED).replay_workflows(
        each(histories), raise_on_replay_failure=False
    )
    assert dict(results.replay_failures) == {}


async def test_committed_histories_replay() -> None:
    """Histories an earlier version recorded replay through this one."""
    files = sorted(HISTORIES.glob("*.json"))
    assert files
    histories = [
        WorkflowHistory.from_json(f.stem, f.read_text()) for f in files
    ]
    await replayer(RECORDED).replay_workflows(each(histories))


async def test_a_changed_gate_is_caught_on_replay(
    client: Client, queue: str
) -> None:
    """Gates are workflow code: a history recorded with an interrupting
    gate does not replay with a gate that lets the transition through
    (the same fingerprint: gates are not part of a graph's shape)."""

    async def let_through(t: Transition[Tally]) -> Decision:
        return Continue()

    asking = approval_graph("approval-changed", approval_gate)
    runs = Runs(client, task_queue=queue)
    async with worker(client, [asking], task_queue=queue):
        run = await runs.start(asking, Tally())
        (await run.paused()).unwrap()
        (await run.answer(Approval(approved=True, by="ada"))).unwrap()
        (await run.result()).unwrap()
    history = await client.get_workflow_handle(run.id).fetch_history()
    changed = approval_graph("approval-changed", let_through)
    with pytest.raises(NondeterminismError):
        await replayer([changed]).replay_workflow(history)
