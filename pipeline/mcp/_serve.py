"""An agent or a graph offered as an MCP server (``pipeline mcp serve``).

The server has one tool, named after the agent or graph.  An agent's tool
takes ``{"message": "..."}`` (one user message) and answers with the
agent's last reply; a graph's takes an object of its state's fields (the
JSON schema of its state type), runs the graph from that state and answers
with the final state (structured content, and the same JSON as text).  A
run that fails is an error result naming the failure's type, never its
text.
"""

from __future__ import annotations

import re

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, final

import attrs
import mcp_types as types

from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.stdio import stdio_server
from returns.result import Success

from .._context import Context
from .._decode import DECODE_ERRORS, explain
from .._messages import Message, Role
from .._schema import schema_for
from .._serde import canonical
from ..agents import Agent
from ..graph._graph import Graph


__all__ = ("serve_stdio",)

_NOT_NAME = re.compile(r"[^A-Za-z0-9_-]")


@final
@attrs.frozen
class Served:
    """The one tool an agent or graph is offered as."""

    name: str
    description: str
    schema: Mapping[str, Any]
    run: Callable[[dict[str, Any]], Awaitable[types.CallToolResult]]


def _served(obj: Agent | Graph[Any, Any]) -> Served:
    """*obj* as the tool its MCP server offers.

    Raises:
        TypeError: *obj* is neither an :class:`~pipeline.Agent` nor a
            :class:`~pipeline.graph.Graph`.
    """
    given: object = obj
    if isinstance(given, Agent):
        return _agent_tool(given)
    if isinstance(given, Graph):
        return _graph_tool(given)
    msg = f"an MCP server offers an Agent or a Graph, not a {type(given).__name__}"
    raise TypeError(msg)


def _label(name: str) -> str:
    return _NOT_NAME.sub("_", name)[:64] or "run"


def _text(text: str, *, error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)], is_error=error
    )


def _agent_tool(agent: Agent) -> Served:
    schema = {
        "type": "object",
        "properties": {
            "message": {"type": "string", "description": "what to ask"}
        },
        "required": ["message"],
        "additionalProperties": False,
    }

    async def run(arguments: dict[str, Any]) -> types.CallToolResult:
        message = arguments.get("message")
        if not isinstance(message, str) or set(arguments) != {"message"}:
            return _text(
                "expected one argument, 'message' (a string)", error=True
            )
        result = await agent(Context.of(Message.user(message)))
        if not isinstance(result, Success):
            failure = result.failure()
            return _text(
                f"agent {agent.name!r} failed: {type(failure).__name__}",
                error=True,
            )
        out: Context = result.unwrap()
        for m in reversed(out.messages):
            if m.role is Role.ASSISTANT and m.content:
                return _text(m.content)
        return _text("")

    return Served(
        _label(agent.name), f"Ask the agent {agent.name!r}.", schema, run
    )


def _graph_tool(graph: Graph[Any, Any]) -> Served:
    kind: Any = graph.state_type
    schema = schema_for(kind)
    converter = graph.codec.converter

    async def run(arguments: dict[str, Any]) -> types.CallToolResult:
        try:
            state = converter.structure(arguments, kind)
        except DECODE_ERRORS as exc:
            problems = "; ".join(explain(exc, kind))
            return _text(f"invalid state: {problems}", error=True)
        result = await graph.run(state)
        if not isinstance(result, Success):
            failure = result.failure()
            return _text(
                f"graph {graph.name!r} failed: {type(failure).__name__}",
                error=True,
            )
        value = converter.unstructure(result.unwrap().state)
        return types.CallToolResult(
            content=[
                types.TextContent(type="text", text=canonical(value).decode())
            ],
            structured_content=value if isinstance(value, dict) else None,
        )

    return Served(
        _label(graph.name), f"Run the graph {graph.name!r}.", schema, run
    )


def _server(tool: Served) -> Server[Any]:
    listed = types.Tool(
        name=tool.name,
        description=tool.description,
        input_schema=dict(tool.schema),
    )

    async def list_tools(
        _ctx: Any, _params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[listed])

    async def call_tool(
        _ctx: Any, params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        if params.name != tool.name:
            return _text(
                f"unknown tool; available: [{tool.name!r}]", error=True
            )
        return await tool.run(dict(params.arguments or {}))

    return Server(tool.name, on_list_tools=list_tools, on_call_tool=call_tool)


async def serve_stdio(obj: Agent | Graph[Any, Any]) -> None:
    """Offer *obj*, an :class:`~pipeline.Agent` or a
    :class:`~pipeline.Graph`, as an MCP server on standard input and
    output, until the client closes them (``pipeline mcp serve
    MODULE:OBJECT`` runs this).  Its one tool is named after *obj*: an
    agent's takes ``{"message": "..."}`` and answers with the agent's
    last reply; a graph's takes its state's fields and answers with the
    final state.

    Raises:
        TypeError: *obj* is neither an agent nor a graph.

    .. versionadded:: 0.1.0
    """
    server = _server(_served(obj))
    options = server.create_initialization_options(NotificationOptions())
    async with stdio_server() as (read, write):
        await server.run(read, write, options)
