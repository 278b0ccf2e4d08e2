"""Generated graphs end in the same snapshot on Temporal as in process.

Hypothesis draws graph specs: a line of units, each a single action node,
an agent node (a scripted model calling a tool, then answering), a
map_reduce node (an activity per item on Temporal) or a fan-out of such
nodes joined at the next unit.  Each graph runs in
process and as a workflow on the session's dev server (one worker for
the whole test; every generated graph registered with it).
"""

from __future__ import annotations

import uuid

from collections.abc import AsyncIterator
from typing import Literal, TypeAlias

import pytest

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from returns.result import Success
from temporalio.client import Client

from pipeline import Graph
from pipeline.graph import END, GraphBuilder, builder
from pipeline.temporal import Runs, worker
from pipeline.temporal._hosted import host, register
from tests.temporal.graphs import (
    Refused,
    Tally,
    agent_messages,
    agent_update,
    bump,
    mapped,
    note_agent,
)


pytestmark = [pytest.mark.temporal, pytest.mark.slow]

Kind: TypeAlias = Literal["action", "agent", "mapreduce"]
Unit: TypeAlias = tuple[tuple[str, Kind], ...]
"""One node, or several: a fan-out (from the unit before) joined at the
next unit."""


def _sum_counts(before: int, values: tuple[int, ...]) -> int:
    return before + sum(v - before for v in values)


def make(spec: list[Unit]) -> Graph[Tally, object]:
    """The graph *spec* describes (under a fresh name)."""
    b: GraphBuilder[Tally, object] = builder(Tally)
    for unit in spec:
        for name, kind in unit:
            if kind == "action":
                b = b.node(name, bump(name))
            elif kind == "mapreduce":
                b = b.node(name, mapped(name))
            else:
                b = b.agent(
                    name,
                    note_agent(name),
                    messages=agent_messages,
                    update=agent_update,
                )
    b = b.entry(spec[0][0][0])
    for i, unit in enumerate(spec):
        nxt = spec[i + 1] if i + 1 < len(spec) else None
        if len(unit) > 1:
            continue  # wired by the unit before
        ((name, _),) = unit
        if nxt is None:
            b = b.edge(name, END)
        elif len(nxt) == 1:
            b = b.edge(name, nxt[0][0])
        else:
            after = spec[i + 2][0][0] if i + 2 < len(spec) else END
            b = b.fan_out(
                name,
                [n for n, _ in nxt],
                join=after,
                reducers={"count": _sum_counts},
            )
    return b.build(name=f"gen-{uuid.uuid4().hex[:12]}")


def _node(i: int) -> st.SearchStrategy[tuple[str, Kind]]:
    kinds: st.SearchStrategy[Kind] = st.sampled_from(
        ["action", "agent", "mapreduce"]
    )
    return kinds.map(lambda k: (f"{k[:2]}{i}", k))


@st.composite
def specs(draw: st.DrawFn) -> list[Unit]:
    """A line of units; a fan-out never follows a fan-out (its join is a
    node) and never comes first (it fans out from a node)."""
    n = draw(st.integers(1, 6))
    spec: list[Unit] = []
    counter = 0
    for i in range(n):
        fan = i > 0 and len(spec[-1]) == 1 and draw(st.booleans())
        width = draw(st.integers(2, 4)) if fan else 1
        unit = []
        for _ in range(width):
            unit.append(draw(_node(counter)))
            counter += 1
        spec.append(tuple(unit))
    if len(spec[-1]) > 1:
        spec.append(((f"ac{counter}", "action"),))
    return spec


@pytest.fixture(name="runs")
async def _runs(client: Client, queue: str) -> AsyncIterator[Runs]:
    """A worker for the whole test (generated graphs register as drawn)."""
    async with worker(client, [], task_queue=queue, failures=[Refused]):
        yield Runs(client, task_queue=queue, failures=[Refused])


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(spec=specs())
async def test_generated_graphs_end_alike(
    runs: Runs, spec: list[Unit]
) -> None:
    """Every generated graph's final snapshot on Temporal equals its final
    snapshot in process (state, step, node, status), or both fail alike
    (a map_reduce item refuses 13)."""
    g = make(spec)
    register(host(g))
    ended = await (await runs.start(g, Tally())).result()
    done = await g.run(Tally())
    if type(done) is not Success:
        assert type(ended) is not Success
        assert ended.failure() == done.failure()
        return
    remote, local = ended.unwrap(), done.unwrap()
    assert remote.state == local.state
    assert (remote.step, remote.node, remote.status) == (
        local.step,
        local.node,
        local.status,
    )
