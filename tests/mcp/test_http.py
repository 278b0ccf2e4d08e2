"""Streamable HTTP only: the server goes away between two calls."""

from __future__ import annotations

import anyio
import pytest

from pipeline import Agent, Context, Message
from pipeline.events import McpServerLost, stream
from pipeline.mcp import http
from pipeline.testing import Reply, ScriptedModel
from tests.mcp.helpers import http_process


pytestmark = pytest.mark.slow


async def test_the_server_goes_away_between_calls() -> None:
    """The transport's failure ends the connection's own task, not the
    caller's: the next call is an error result and an event, the block
    leaves cleanly."""
    async with http_process() as (url, process), http(url, name="h") as server:
        tools = await server.tools()
        process.kill()
        await process.wait()
        model = ScriptedModel(
            Reply.tool_call("echo", {"text": "x"}), Reply.text("gone")
        )
        agent = Agent("a", model, tools=tools)
        with anyio.fail_after(20):
            async with stream(agent, Context.of(Message.user("go"))) as events:
                seen = [e async for e in events]
        assert McpServerLost("h", "echo") in seen
        assert model.requests[1].messages[-1].content == (
            "error: MCP server 'h' went away during the call"
        )
        assert not server.connected
