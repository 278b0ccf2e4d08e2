"""Streaming events while a pipeline runs."""

from __future__ import annotations

import anyio
import pytest

from returns.result import Result, Success

from pipeline import (
    Agent,
    Context,
    Message,
    Note,
    emit,
    graph,
    handler,
    stores,
    stream,
    tool,
)
from pipeline.events import (
    CheckpointSaved,
    Event,
    Finished,
    MessageComplete,
    MessageDelta,
    NodeFinished,
    NodeStarted,
    ToolCallFinished,
    ToolCallStarted,
    listening,
)
from pipeline.failures import ModelError
from pipeline.graph import END
from pipeline.models import DeltaSink, ModelRequest, ModelResponse
from pipeline.testing import Reply, ScriptedModel


@tool
async def lookup(key: str) -> str:
    """Look a key up."""
    return key.upper()


async def test_agent_events_in_order_then_finished() -> None:
    """Deltas, messages and tool calls stream; Finished comes last."""
    model = ScriptedModel(
        Reply.tool_call("lookup", {"key": "k"}),
        Reply.text("all done"),
        chunk=3,
    )
    h = Agent("a", model, tools=[lookup]).handler()
    async with stream(h, Context.of(Message.user("go"))) as events:
        seen: list[Event] = [e async for e in events]
    kinds = [type(e).__name__ for e in seen]
    assert kinds == [
        "MessageComplete",  # the tool-call request
        "ToolCallStarted",
        "ToolCallFinished",
        "MessageComplete",  # the tool result
        "MessageDelta",
        "MessageDelta",
        "MessageDelta",
        "MessageComplete",  # the answer
        "Finished",
    ]
    deltas = "".join(e.text for e in seen if isinstance(e, MessageDelta))
    assert deltas == "all done"
    finished = seen[-1]
    assert isinstance(finished, Finished)
    assert finished.result == events.result
    assert isinstance(seen[2], ToolCallFinished)
    assert seen[2].content == "K"
    assert isinstance(seen[1], ToolCallStarted)
    assert isinstance(seen[0], MessageComplete)


async def test_no_listener_no_streaming() -> None:
    """Without a stream, emit is a no-op and models are not asked to stream."""
    asked: list[bool] = []

    class Probe:
        name = "probe"

        async def generate(
            self, request: ModelRequest, *, on_delta: DeltaSink | None = None
        ) -> Result[ModelResponse, ModelError]:
            asked.append(on_delta is not None)
            return await ScriptedModel(Reply.text("x")).generate(request)

    assert not listening()
    await emit(Note("me", "nobody hears this"))
    await Agent("a", Probe()).run([Message.user("hi")])
    assert asked == [False]


async def test_leaving_early_stops_the_run() -> None:
    """Breaking out of the block cancels the pipeline; nothing leaks."""
    cleaned: list[str] = []

    @handler
    async def chatty(n: int) -> Result[int, str]:
        try:
            for i in range(10**9):
                await emit(Note("chatty", str(i)))
        finally:
            cleaned.append("chatty")
        return Success(n)  # pragma: no cover

    before = len(anyio.get_running_tasks())
    async with stream(chatty, 1) as events:
        async for event in events:
            assert isinstance(event, Note)
            break
    assert cleaned == ["chatty"]
    assert len(anyio.get_running_tasks()) == before
    assert events.result is None


async def test_exceptions_escape_the_block() -> None:
    """An exception in the pipeline propagates out of the async with."""

    @handler
    async def explode(n: int) -> Result[int, str]:
        msg = "kaboom"
        raise KeyError(msg)

    async def drain() -> None:
        async with stream(explode, 1) as events:
            async for _ in events:
                pass

    with pytest.raises(KeyError, match="kaboom"):
        await drain()


async def test_graph_events_reach_the_stream() -> None:
    """A graph inside a streamed handler emits its node and checkpoint events."""

    @handler
    async def bump(n: int) -> Result[int, str]:
        return Success(n + 1)

    g = (
        graph.builder(int)
        .node("bump", bump)
        .entry("bump")
        .edge("bump", END)
        .build()
    )
    store = stores.MemoryStore()

    @handler
    async def run_graph(n: int) -> Result[int, object]:
        out = await g.run(n, store=store)
        return out.map(lambda s: s.state)

    async with stream(run_graph, 1) as events:
        kinds = [type(e) async for e in events]
    assert kinds == [
        CheckpointSaved,
        NodeStarted,
        CheckpointSaved,
        NodeFinished,
        Finished,
    ]
    assert events.result == Success(2)
