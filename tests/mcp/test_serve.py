"""``pipeline mcp serve``: an agent and a graph offered as MCP servers on
stdio, called by the official MCP client."""

from __future__ import annotations

import subprocess
import sys

from pathlib import Path

import anyio
import mcp_types as types
import pytest

from mcp import Client, StdioServerParameters


pytestmark = pytest.mark.slow

ROOT = Path(__file__).parents[2]


def serving(ref: str) -> Client:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "pipeline", "mcp", "serve", ref],
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT)},
    )
    return Client(params, mode="legacy")


def text(result: types.CallToolResult) -> str:
    (block,) = result.content
    assert isinstance(block, types.TextContent)
    return block.text


async def test_an_agent_as_an_mcp_server() -> None:
    with anyio.fail_after(60):
        async with serving("tests.mcp.served:agent") as client:
            (listed,) = (await client.list_tools()).tools
            assert listed.name == "helper"
            assert listed.input_schema["required"] == ["message"]
            result = await client.call_tool("helper", {"message": "hi"})
            assert not result.is_error
            assert text(result) == "hello from the agent"
            wrong = await client.call_tool("helper", {"text": "hi"})
            assert wrong.is_error
            assert text(wrong) == "expected one argument, 'message' (a string)"


async def test_a_graph_as_an_mcp_server() -> None:
    with anyio.fail_after(60):
        async with serving("tests.mcp.served:graph") as client:
            (listed,) = (await client.list_tools()).tools
            assert listed.input_schema["required"] == ["text"]
            result = await client.call_tool(
                listed.name, {"text": "a charge I do not know"}
            )
            assert not result.is_error
            assert result.structured_content == {
                "text": "a charge I do not know",
                "category": "billing",
                "reply": "About your billing issue",
                "sent": True,
            }
            wrong = await client.call_tool(listed.name, {"text": 3})
            assert wrong.is_error
            assert "text" in text(wrong)
            assert "3" not in text(wrong)


def test_not_an_agent_nor_a_graph() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pipeline",
            "mcp",
            "serve",
            "tests.mcp.served:number",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode != 0
    assert (
        "tests.mcp.served:number is a int, not an agent or a graph"
        in done.stderr
    )
