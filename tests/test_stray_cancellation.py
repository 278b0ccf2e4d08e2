"""A branch that ends in a stray cancellation: the composite raises it.

A stray cancellation is one the caller did not receive: the branch awaited
a future that something else cancelled.  A lone handler (and ``>>``)
raises it; every fan-out must too, once its other branches stopped, and
never return a result with a branch missing (anyio's task group used to
swallow it: ``a & b`` returned sentinels, ``map_reduce`` reduced
``(None, None)``, ``run_tools`` returned fewer messages than calls, and
``stream()`` ended quietly without a result).
"""

from __future__ import annotations

from typing import Any

import anyio
import attrs
import pytest

from pyrsistent import PVector, pvector
from returns.result import Result, Success

from pipeline import (
    Agent,
    Handler,
    Message,
    ToolCall,
    first,
    graph,
    handler,
    map_reduce,
    must,
    stream,
    tool,
)
from pipeline.events import Event, Finished
from pipeline.graph import END
from pipeline.testing import Reply, ScriptedModel
from pipeline.tools import run_tools
from tests.cancelling import stray_cancellation


@handler
async def stray(x: int) -> Result[int, str]:
    await stray_cancellation()


@handler
async def waits(x: int) -> Result[int, str]:
    """Never finishes on its own: only a cancellation stops it."""
    await anyio.Event().wait()
    return Success(x)


def _fan_outs(reduced: list[object]) -> dict[str, Handler[int, Any, Any]]:
    """Each fan-out shape, with the stray branch first and last."""

    def reduce(_: int, rs: tuple[Result[int, str], ...]) -> Result[int, str]:
        reduced.append(rs)
        return Success(len(rs))

    def worker(first_strays: bool) -> Handler[int, int, str]:
        async def work(i: int) -> Result[int, str]:
            return await (stray if (i == 0) == first_strays else waits)(i)

        return handler(work)

    shapes: dict[str, Handler[int, Any, Any]] = {
        "stray & waits": stray & waits,
        "waits & stray": waits & stray,
        "stray | waits": stray | waits,
        "waits | stray": waits | stray,
        "first": first(waits, stray),
        "must": must(stray, waits, aggregate=lambda _, outs: Success(outs)),
    }
    for fail_fast in (False, True):
        for first_strays in (True, False):
            key = f"map_reduce fail_fast={fail_fast} first={first_strays}"
            shapes[key] = map_reduce(
                lambda _: [0, 1],
                worker(first_strays),
                reduce,
                fail_fast=fail_fast,
            )
    return shapes


SHAPES = tuple(_fan_outs([]))


@pytest.mark.parametrize("shape", SHAPES)
async def test_a_stray_cancellation_in_a_branch_propagates(shape: str) -> None:
    """Like a lone handler: the cancellation, never a result or a reduce."""
    reduced: list[object] = []
    composite = _fan_outs(reduced)[shape]
    with pytest.raises(anyio.get_cancelled_exc_class()):
        await composite(1)
    assert reduced == []


async def test_a_lone_handler_and_a_sequence_raise_it_too() -> None:
    """The behaviour the fan-outs now share."""
    for h in (stray, handler(_identity) >> stray, stray >> waits):
        with pytest.raises(anyio.get_cancelled_exc_class()):
            await h(1)


@attrs.frozen
class Trail:
    log: PVector[str] = attrs.field(factory=pvector)


def _node(
    name: str, body: Handler[int, int, str]
) -> Handler[Trail, Trail, str]:
    @handler(name=name)
    async def node(s: Trail) -> Result[Trail, str]:
        r = await body(len(s.log))
        assert type(r) is Success
        return Success(attrs.evolve(s, log=s.log.append(name)))

    return node


async def test_a_stray_cancellation_in_a_graph_fan_out_propagates() -> None:
    """A fan-out branch node: the graph raises it, never merges a sentinel."""
    ok = handler(_identity)
    g = (
        graph.builder(Trail)
        .node("start", _node("start", ok))
        .node("a", _node("a", stray))
        .node("b", _node("b", waits))
        .node("j", _node("j", ok))
        .entry("start")
        .fan_out("start", ["a", "b"], join="j")
        .edge("j", END)
        .build()
    )
    with pytest.raises(anyio.get_cancelled_exc_class()):
        await g.run(Trail())


async def _identity(x: int) -> Result[int, str]:
    return Success(x)


# -- tools ---------------------------------------------------------------------


@tool
async def fetch() -> str:
    """Awaits something another component cancels."""
    await stray_cancellation()


@tool
async def other() -> str:
    """Runs until cancelled."""
    await anyio.Event().wait()
    return "ok"


TOOLS = {"fetch": fetch, "other": other}


@pytest.mark.parametrize(
    "calls",
    [
        [ToolCall("c1", "fetch")],
        [ToolCall("c1", "fetch"), ToolCall("c2", "other")],
        [ToolCall("c1", "other"), ToolCall("c2", "fetch")],
    ],
    ids=["alone", "first", "second"],
)
async def test_run_tools_raises_a_tools_stray_cancellation(
    calls: list[ToolCall],
) -> None:
    """With one call or several: never fewer messages than calls."""
    with pytest.raises(anyio.get_cancelled_exc_class()):
        await run_tools(calls, TOOLS)


async def test_an_agent_never_sends_a_tool_call_without_its_result() -> None:
    """The stray cancellation leaves the agent; no second model request."""
    model = ScriptedModel(
        Reply.tool_calls(("fetch", {}, "a"), ("other", {}, "b")),
        Reply.text("done"),
    )
    agent = Agent("ag", model, tools=[fetch, other])
    with pytest.raises(anyio.get_cancelled_exc_class()):
        await agent.run([Message.user("go")])
    assert len(model.requests) == 1


async def test_run_tools_answers_every_call() -> None:
    """Control: without a cancellation, one message per call, in order."""

    @tool
    async def echo(n: int) -> int:
        """Echo."""
        await anyio.lowlevel.checkpoint()
        return n

    calls = [ToolCall(f"c{i}", "echo", f'{{"n": {i}}}') for i in range(5)]
    out = await run_tools(calls, {"echo": echo})
    assert [m.tool_call_id for m in out] == [c.id for c in calls]
    assert [m.content for m in out] == [str(i) for i in range(5)]


# -- streams -------------------------------------------------------------------


@pytest.mark.parametrize("shape", ["lone", "stray & waits"])
async def test_a_stream_raises_its_runs_stray_cancellation(shape: str) -> None:
    """The run ends in it: the events end, and the block raises it."""
    h = stray if shape == "lone" else stray & waits
    seen: list[Event] = []
    with pytest.raises(anyio.get_cancelled_exc_class()):
        await _read_all(h, seen)
    assert not any(isinstance(e, Finished) for e in seen)


async def _read_all(h: Handler[int, Any, Any], seen: list[Event]) -> None:
    async with stream(h, 1) as events:
        seen.extend([e async for e in events])
