"""Type-level contract of pipeline.mcp. Not executed."""

# pyright: reportUnnecessaryTypeIgnoreComment=error

from __future__ import annotations

from typing import assert_type

from pipeline import Agent, Context, Graph, Tool
from pipeline.events import Event, McpServerLost
from pipeline.mcp import McpServer, http, serve_stdio, stdio
from pipeline.testing import ScriptedModel


async def positive(graph: Graph[Context, str]) -> None:
    server = stdio("python", "server.py", env={"A": "1"}, timeout=5.0)
    assert_type(server, McpServer)
    assert_type(http("http://127.0.0.1:8000/mcp", prefix="fs_"), McpServer)
    async with server as entered:
        assert_type(entered, McpServer)
        tools = await entered.tools()
        assert_type(tools, tuple[Tool, ...])
        assert_type(await tools[0].call("{}"), tuple[str, bool])
        Agent("a", ScriptedModel(), tools=tools)
        await entered.changed()
        assert_type(server.name, str)
        assert_type(entered.connected, bool)
    events: list[Event] = [McpServerLost("server", "tool")]
    assert_type(events[0], Event)
    await serve_stdio(Agent("a", ScriptedModel()))
    await serve_stdio(graph)


async def negative() -> None:
    stdio("python", 3)  # type: ignore[arg-type]
    http(b"http://x")  # type: ignore[arg-type]
    stdio("python", timeout="5")  # type: ignore[arg-type]
    async with stdio("python") as server:
        server.tools()[0]  # type: ignore[index]
    await serve_stdio(ScriptedModel())  # type: ignore[arg-type]
