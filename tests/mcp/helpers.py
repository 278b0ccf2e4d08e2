"""Connecting the tests to the in-suite MCP servers (tests/mcp/servers)."""

from __future__ import annotations

import sys

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import anyio.abc

from pipeline.mcp import McpServer, http, stdio


SERVERS = Path(__file__).parent / "servers"
TOOLS = str(SERVERS / "tools.py")
TRANSPORTS = ("stdio", "http")


@asynccontextmanager
async def http_process(
    mode: str = "normal",
) -> AsyncIterator[tuple[str, anyio.abc.Process]]:
    """The tools server on a free loopback port: its URL and process."""
    command = [sys.executable, TOOLS, "--http", "--mode", mode]
    async with await anyio.open_process(command, stderr=None) as process:
        assert process.stdout is not None
        line = b""
        with anyio.fail_after(30):
            while not line.endswith(b"\n"):
                line += await process.stdout.receive(1)
        try:
            yield f"http://127.0.0.1:{int(line)}/mcp", process
        finally:
            if process.returncode is None:
                process.kill()
            with anyio.CancelScope(shield=True):
                await process.wait()


@asynccontextmanager
async def http_server(mode: str = "normal") -> AsyncIterator[str]:
    """The tools server on a free loopback port: its URL."""
    async with http_process(mode) as (url, _):
        yield url


@asynccontextmanager
async def connected(
    transport: str,
    mode: str = "normal",
    *,
    timeout: float | None = None,  # noqa: ASYNC109  # the tools' timeout
) -> AsyncIterator[McpServer]:
    """A connection to the tools server over *transport*, entered."""
    if transport == "stdio":
        server = stdio(
            sys.executable,
            TOOLS,
            "--mode",
            mode,
            name="tools",
            timeout=timeout,
        )
        async with server:
            yield server
        return
    async with (
        http_server(mode) as url,
        http(url, name="tools", timeout=timeout) as server,
    ):
        yield server
