"""Type-level contract of pipeline.temporal. Checked, never executed."""

# pyright: reportUnnecessaryTypeIgnoreComment=error

from __future__ import annotations

from collections.abc import Mapping
from typing import assert_type

import attrs

from returns.result import Result, Success
from temporalio.client import Client
from temporalio.worker import Replayer, Worker

from pipeline import Context, Graph, Swarm, handler
from pipeline.failures import InvalidState, RemoteFailure
from pipeline.fold import Snapshot
from pipeline.graph import END, GraphFailure, builder
from pipeline.swarm import SwarmFailure, SwarmState
from pipeline.temporal import (
    NodeOptions,
    PipelineWorker,
    Run,
    RunOptions,
    Runs,
    calls_queue,
    replayer,
    worker,
)


@attrs.frozen
class State:
    n: int = 0


class Boom: ...


@handler
async def bump(s: State) -> Result[State, Boom]:
    return Success(State(s.n + 1))


g = builder(State).node("a", bump).entry("a").edge("a", END).build()
assert_type(g, Graph[State, Boom])


async def graphs(client: Client) -> None:
    runs = Runs(client, task_queue="q")
    run = await runs.start(g, State(), options=RunOptions())
    assert_type(run, Run[State, Boom | GraphFailure])
    assert_type(
        await run.result(),
        Result[Snapshot[State], Boom | GraphFailure | RemoteFailure],
    )
    assert_type(await run.snapshot(), Result[Snapshot[State], RemoteFailure])
    assert_type(await run.paused(), Result[Snapshot[State], RemoteFailure])
    assert_type(
        await run.answer({"ok": True}),
        Result[None, InvalidState | RemoteFailure],
    )
    assert_type(runs.attach(g, run.id), Run[State, Boom | GraphFailure])
    await runs.start(g, 3)  # type: ignore[misc]  # not the graph's state
    await runs.start(g, State(), options=NodeOptions())  # type: ignore[call-overload]


async def swarms(client: Client, s: Swarm[None], ctx: Context) -> None:
    runs = Runs(client)
    run = await runs.start(s, ctx)
    assert_type(run, Run[SwarmState[None], SwarmFailure])
    await runs.start(s, State())  # type: ignore[call-overload]  # swarms run on contexts


def workers(client: Client, s: Swarm[None]) -> None:
    assert_type(worker(client, [g, s], task_queue="q"), PipelineWorker)
    assert_type(worker(client, {"named": g}), PipelineWorker)
    assert_type(worker(client, [g]).steps, Worker)
    assert_type(calls_queue("q"), str)
    worker(client, [g], max_concurrent_calls="10")  # type: ignore[arg-type]  # a count
    assert_type(replayer([g]), Replayer)
    worker(client, [bump])  # type: ignore[list-item]  # a handler is not hosted


def call_options() -> None:
    options = RunOptions(
        calls=NodeOptions(start_to_close=60),
        agents={"writer": NodeOptions()},
        tools={"refund": NodeOptions()},
    )
    assert_type(options.calls, NodeOptions)
    assert_type(options.tools, Mapping[str, NodeOptions])
    RunOptions(calls={"refund": NodeOptions()})  # type: ignore[arg-type]  # one NodeOptions
    RunOptions(tools=NodeOptions())  # type: ignore[arg-type]  # by tool name
