"""An MCP server for the tests, written with the official SDK.

``python tools.py [--http] [--mode normal|malformed|misnamed]``: on
stdio, or (``--http``) on a free loopback port, printed on the first line
of its output.  Its tools: ``add`` (text and structured content), ``echo``,
``picture`` (an image), ``fail`` (an error result), ``boom`` (a protocol
error), ``crash`` (the process exits mid-call), ``hang`` (never answers),
``shifty`` (its result does not fit its output schema),
``change`` (the list changes: ``gone`` vanishes, ``late`` appears; a
notification says so), ``gone``, ``calls`` (how many calls reached the
server), and ``ghost``, listed but unknown to the call handler (a lie).
"""

from __future__ import annotations

import argparse
import os
import socket
import sys

from typing import Any

import anyio
import mcp_types as types
import uvicorn

from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.stdio import stdio_server


OBJECT: dict[str, Any] = {"type": "object"}
STATE = {"changed": False, "calls": 0}


def listed(mode: str) -> list[types.Tool]:
    def t(name: str, props: dict[str, Any], required: list[str]) -> types.Tool:
        schema = {"type": "object", "properties": props, "required": required}
        return types.Tool(
            name=name, description=f"the {name} tool", input_schema=schema
        )

    out = [
        t(
            "add",
            {"a": {"type": "integer"}, "b": {"type": "integer", "minimum": 0}},
            ["a"],
        ),
        t("echo", {"text": {"type": "string"}}, ["text"]),
        t("picture", {}, []),
        t("fail", {}, []),
        t("boom", {}, []),
        t("crash", {}, []),
        t("hang", {}, []),
        t("change", {}, []),
        t("calls", {}, []),
        t("ghost", {}, []),
        types.Tool(
            name="shifty",
            description="says it answers a number; does not",
            input_schema={"type": "object", "properties": {}},
            output_schema={
                "type": "object",
                "properties": {"n": {"type": "integer"}},
                "required": ["n"],
            },
        ),
    ]
    out.append(t("late", {}, []) if STATE["changed"] else t("gone", {}, []))
    if mode == "malformed":
        out.append(
            types.Tool.model_construct(
                name="broken",
                description="a schema that is not one",
                input_schema={
                    "type": "object",
                    "properties": {"x": {"type": 7}},
                },
            )
        )
    if mode == "unresolved":
        out.append(t("dangling", {"x": {"$ref": "#/$defs/missing"}}, []))
    if mode == "open":
        out.append(
            types.Tool(
                name="labels",
                description="labels by name: names the schema does not list",
                input_schema={
                    "type": "object",
                    "properties": {"kind": {"type": "string"}},
                    "patternProperties": {"^label_": {"type": "string"}},
                    "additionalProperties": False,
                },
            )
        )
    if mode == "misnamed":
        out.append(t("has space", {}, []))
    return out


def text(value: str) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=value)]
    )


def make(mode: str) -> Server[Any]:  # noqa: C901  # one branch per tool
    async def list_tools(
        ctx: Any, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=listed(mode))

    async def call_tool(  # noqa: C901, PLR0912  # one branch per tool
        ctx: Any, params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        STATE["calls"] += 1
        args = params.arguments or {}
        name = params.name
        if name == "add":
            total = args["a"] + args.get("b", 0)
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=str(total))],
                structured_content={"sum": total},
            )
        if name == "echo":
            return text(args["text"])
        if name == "picture":
            return types.CallToolResult(
                content=[
                    types.TextContent(type="text", text="a dot"),
                    types.ImageContent(
                        type="image",
                        data="iVBORw0KGgo=",
                        mime_type="image/png",
                    ),
                ]
            )
        if name == "fail":
            return types.CallToolResult(
                content=[
                    types.TextContent(type="text", text="the tool says no")
                ],
                is_error=True,
            )
        if name == "boom":
            raise RuntimeError("boom on the server")
        if name == "crash":
            os._exit(3)
        if name == "hang":
            await anyio.sleep_forever()
        if name == "change":
            STATE["changed"] = True
            await ctx.session.send_tool_list_changed()
            return text("changed")
        if name == "shifty":
            return types.CallToolResult(
                content=[types.TextContent(type="text", text="secret-ish")],
                structured_content={"n": "secret-ish"},
            )
        if name == "labels":
            return text(" ".join(sorted(args)))
        if name == "calls":
            return text(str(STATE["calls"] - 1))
        if name == "gone" and not STATE["changed"]:
            return text("still here")
        if name == "late" and STATE["changed"]:
            return text("new here")
        raise ValueError("unknown tool")

    return Server("tools", on_list_tools=list_tools, on_call_tool=call_tool)


async def serve_stdio(server: Server[Any]) -> None:
    options = server.create_initialization_options(
        NotificationOptions(tools_changed=True)
    )
    async with stdio_server() as (read, write):
        await server.run(read, write, options)


def serve_http(server: Server[Any]) -> None:
    app = server.streamable_http_app()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    sys.stdout.write(f"{sock.getsockname()[1]}\n")
    sys.stdout.flush()
    config = uvicorn.Config(app, log_level="error", lifespan="on")
    anyio.run(lambda: uvicorn.Server(config).serve(sockets=[sock]))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", action="store_true")
    parser.add_argument("--mode", default="normal")
    ns = parser.parse_args()
    server = make(ns.mode)
    if ns.http:
        serve_http(server)
    else:
        anyio.run(serve_stdio, server)


if __name__ == "__main__":
    main()
