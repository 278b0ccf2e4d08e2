"""MCP tools against real MCP servers (tests/mcp/servers, written with the
official SDK), over stdio and over streamable HTTP on loopback: listing,
calling, errors, a crash mid-call, a hang past the timeout, malformed
schemas, a server that lies about its tools, the change notification,
cancellation."""

from __future__ import annotations

import asyncio
import json
import socket
import sys

import anyio
import anyio.abc
import pytest

from pipeline import Agent, Context, Message, Tool
from pipeline.errors import MalformedToolSchema, McpUnavailable
from pipeline.events import McpServerLost, ToolCallFinished, stream
from pipeline.mcp import http, stdio
from pipeline.testing import Reply, ScriptedModel
from tests.mcp.helpers import TRANSPORTS, connected


pytestmark = [
    pytest.mark.slow,
    pytest.mark.parametrize("transport", TRANSPORTS),
]


def by_name(tools: tuple[Tool, ...]) -> dict[str, Tool]:
    return {t.name: t for t in tools}


async def test_lists_and_calls(transport: str) -> None:
    async with connected(transport) as server:
        tools = by_name(await server.tools())
        assert sorted(tools) == [
            "add", "boom", "calls", "change", "crash", "echo", "fail",
            "ghost", "gone", "hang", "picture", "shifty",
        ]  # fmt: skip
        add = tools["add"]
        assert add.description == "the add tool"
        assert add.parameters["required"] == ["a"]
        assert await server.tools() is await server.tools()  # cached
        # Structured content is the result; text blocks are joined, an
        # image is a placeholder naming its type and size.
        assert await add.call('{"a": 2, "b": 3}') == ('{"sum":5}', False)
        assert await tools["echo"].call('{"text": "hi"}') == ("hi", False)
        assert await tools["picture"].call("{}") == (
            "a dot\n[image: image/png, 8 bytes]",
            False,
        )
        # The tool's own error result reaches the model as it is.
        assert await tools["fail"].call("{}") == (
            "error: the tool says no",
            True,
        )
        # A protocol error is named by its code, its text withheld.
        text, failed = await tools["boom"].call("{}")
        assert failed
        assert "boom" in text
        assert "on the server" not in text


async def test_arguments_are_checked_against_the_schema(
    transport: str,
) -> None:
    async with connected(transport) as server:
        tools = by_name(await server.tools())
        add = tools["add"]
        secret = "hunter2-value"  # noqa: S105  # must never be echoed
        cases = {
            json.dumps({"a": secret}): "argument 'a': type must be 'integer'",
            '{"a": 1, "b": -7}': "argument 'b': minimum must be 0",
            '{"b": 1}': "missing required argument 'a'",
            json.dumps({"a": 1, "c": secret}): "unknown argument(s) ['c']",
        }
        for arguments, expected in cases.items():
            text, failed = await add.call(arguments)
            assert failed
            assert expected in text
            assert secret not in text
            assert "-7" not in text
        # None of them reached the server.
        assert await tools["calls"].call("{}") == ("0", False)


async def test_arguments_the_schema_allows_by_pattern(transport: str) -> None:
    """A schema that takes names by pattern (patternProperties) or any
    name (additionalProperties: a schema) gets them: they were refused as
    "unknown argument(s)" before the schema was asked."""
    async with connected(transport, "open") as server:
        labels = by_name(await server.tools())["labels"]
        assert labels.extra_arguments
        assert await labels.call(
            '{"kind": "bug", "label_a": "x", "label_b": "y"}'
        ) == ("kind label_a label_b", False)
        # The schema still refuses what it refuses, naming no value.
        text, failed = await labels.call('{"label_a": 3}')
        assert failed
        assert text == (
            "error: invalid arguments for 'labels': "
            "argument 'label_a': type must be 'string'"
        )
        text, failed = await labels.call('{"other": "s3cr3t"}')
        assert failed
        assert "s3cr3t" not in text
        # A schema that declares no additionalProperties stays strict.
        add = by_name(await server.tools())["add"]
        assert not add.extra_arguments
        assert (await add.call('{"a": 1, "c": 2}'))[1]


async def test_a_server_that_lies(transport: str) -> None:
    """A listed tool the server does not know; a tool that vanished."""
    async with connected(transport) as server:
        tools = by_name(await server.tools())
        text, failed = await tools["ghost"].call("{}")
        assert failed
        assert "refused the call to 'ghost'" in text
        assert "unknown tool" not in text  # the server's words withheld
        text, failed = await tools["shifty"].call("{}")
        assert (text, failed) == (
            (
                "error: MCP server 'tools' answered 'shifty' with a result "
                "that does not fit the tool's output schema"
            ),
            True,
        )
        assert await tools["gone"].call("{}") == ("still here", False)
        assert await tools["change"].call("{}") == ("changed", False)
        with anyio.fail_after(10):
            await server.changed()
        # The old agent's tool: the relisted server no longer has it.
        text, failed = await tools["gone"].call("{}")
        assert (text, failed) == (
            "error: MCP server 'tools' no longer offers tool 'gone'",
            True,
        )
        fresh = by_name(await server.tools())
        assert "late" in fresh
        assert "gone" not in fresh
        assert await fresh["late"].call("{}") == ("new here", False)


async def test_an_agent_calls_mcp_tools(transport: str) -> None:
    async with connected(transport) as server:
        model = ScriptedModel(
            Reply.tool_call("add", {"a": 20, "b": 22}), Reply.text("42")
        )
        agent = Agent("a", model, tools=await server.tools())
        out = (await agent(Context.of(Message.user("add")))).unwrap()
        tool_message = out.messages[-2]
        assert tool_message.content == '{"sum":42}'
        assert out.messages[-1].content == "42"


async def test_crash_mid_call(transport: str) -> None:
    async with connected(transport) as server:
        tools = await server.tools()
        model = ScriptedModel(Reply.tool_call("crash"), Reply.text("sorry"))
        agent = Agent("a", model, tools=tools)
        seen: list[object] = []
        with anyio.fail_after(20):
            async with stream(agent, Context.of(Message.user("go"))) as events:
                seen.extend([e async for e in events])
        assert McpServerLost("tools", "crash") in seen
        (finished,) = [e for e in seen if isinstance(e, ToolCallFinished)]
        assert finished.is_error
        assert finished.content == (
            "error: MCP server 'tools' went away during the call"
        )
        assert not server.connected
        # Later calls fail at once.
        text, failed = await by_name(tools)["echo"].call('{"text": "x"}')
        assert (text, failed) == (
            "error: MCP server 'tools' is not connected",
            True,
        )


async def test_hang_past_the_timeout(transport: str) -> None:
    # The timeout bounds the first listing too: not so short that a busy
    # machine (CI's three interpreters at once) misses it.
    async with connected(transport, timeout=2) as server:
        tools = by_name(await server.tools())
        with anyio.fail_after(20):
            text, failed = await tools["hang"].call("{}")
        assert (text, failed) == (
            "error: tool 'hang' timed out after 2 s",
            True,
        )
        # The connection is still good.
        assert await tools["echo"].call('{"text": "up"}') == ("up", False)


async def test_cancellation(transport: str, anyio_backend: str) -> None:
    async with connected(transport) as server:
        tools = by_name(await server.tools())
        hang = tools["hang"]
        if anyio_backend == "asyncio":
            task = asyncio.create_task(hang.call("{}"))
            asyncio.get_running_loop().call_later(0.3, task.cancel)
            with anyio.fail_after(20), pytest.raises(asyncio.CancelledError):
                await task
        else:
            with anyio.fail_after(20), anyio.move_on_after(0.3) as scope:
                await hang.call("{}")
            assert scope.cancelled_caught
        assert await tools["echo"].call('{"text": "up"}') == ("up", False)


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        (
            "malformed",
            (
                "MCP server 'tools': tool 'broken': the input schema is "
                "not a JSON schema at properties/x/type"
            ),
        ),
        ("misnamed", "lists a tool whose name is not 1-64 letters"),
        (
            "unresolved",
            (
                r"MCP server 'tools': tool 'dangling': the input schema's "
                r"\$ref at properties/x does not resolve within it"
            ),
        ),
    ],
)
async def test_malformed_schema(
    transport: str, mode: str, expected: str
) -> None:
    with pytest.raises(MalformedToolSchema, match=expected):
        async with connected(transport, mode):
            pass


async def test_a_server_that_is_not_there(transport: str) -> None:
    """A process that exits at once, a port nobody serves: an error on
    entering, never a hang."""
    if transport == "stdio":
        server = stdio(sys.executable, "-c", "raise SystemExit(3)", name="x")
    else:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        server = http(f"http://127.0.0.1:{port}/mcp", name="x")
    with anyio.fail_after(20), pytest.raises(McpUnavailable) as raised:
        async with server:
            pass
    assert not server.connected
    assert str(raised.value).startswith("MCP server 'x' could not be reached")


async def test_a_server_that_never_answers(transport: str) -> None:
    """A process that says nothing, a port that accepts and never
    answers: the handshake is bounded by connect_timeout (it hung for
    ever)."""
    timeout = 0.5
    message = ""
    server = stdio(
        sys.executable,
        "-c",
        "import time; time.sleep(60)",
        name="x",
        connect_timeout=timeout,
    )
    if transport == "stdio":
        with anyio.fail_after(20), pytest.raises(McpUnavailable) as raised:
            async with server:
                pass
        message = str(raised.value)
    else:
        listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
        port = listener.extra(anyio.abc.SocketAttribute.local_port)  # noqa: S610
        held: list[anyio.abc.SocketStream] = []

        async def hold(stream: anyio.abc.SocketStream) -> None:
            async with stream:
                held.append(stream)  # accepted, never answered
                await anyio.sleep_forever()

        async with listener, anyio.create_task_group() as tg:
            tg.start_soon(listener.serve, hold)
            server = http(
                f"http://127.0.0.1:{port}/mcp?token=s3cr3t",
                name="x",
                connect_timeout=timeout,
            )
            with (
                anyio.fail_after(20),
                pytest.raises(McpUnavailable) as raised,
            ):
                async with server:
                    pass
            message = str(raised.value)
            tg.cancel_scope.cancel()
        assert held  # the request did reach the silent server
    assert message == "MCP server 'x' did not answer within 0.5 s"
    assert "s3cr3t" not in message
    assert not server.connected
