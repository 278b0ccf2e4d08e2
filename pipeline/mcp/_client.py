"""A connection to one MCP server, whose tools an agent calls.

``async with stdio("python", "-m", "myserver") as server:`` then
``Agent("a", model, tools=await server.tools())``.

The connection is an async context manager (the server process, or the
HTTP session, lives as long as the block).  Its tools are listed once and
cached; when the server says its list changed, the next :meth:`tools` (or
call) lists them again.  Each call checks its arguments against the
server's schema first, runs under the tool's timeout, and maps the result
to text; a server that dies mid-call gives an error result and a
:class:`~pipeline.events.McpServerLost` event, never a hang.
"""

from __future__ import annotations

import logging

from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, NoReturn, final
from urllib.parse import urlsplit

import anyio
import anyio.abc
import anyio.lowlevel
import mcp_types as types
import pydantic

from mcp import Client, MCPError, StdioServerParameters

from ..errors import (
    ConstructionError,
    MalformedToolSchema,
    McpUnavailable,
    ToolError,
)
from ..events import McpServerLost, emit, listening
from ..tools import Param, Tool
from ._arguments import ArgumentSchema
from ._results import result_text


__all__ = ("CONNECT_TIMEOUT", "McpServer", "http", "stdio")

CONNECT_TIMEOUT = 30.0
"""Seconds :func:`stdio` and :func:`http` wait, by default, for a server
to start and finish the handshake.

.. versionadded:: 0.1.0
"""

_LOG = logging.getLogger("pipeline.mcp")
_MAX_PAGES = 100
_GONE = (
    anyio.ClosedResourceError,
    anyio.BrokenResourceError,
    anyio.EndOfStream,
)


@final
class McpServer:
    """A connection to one MCP server; make one with :func:`stdio` or
    :func:`http` and enter it with ``async with``.

    *name* names the server in errors and events.  *timeout* (seconds)
    bounds each tool call (the model gets an error result when it runs
    out) and the first listing; *connect_timeout* (seconds, default
    ``CONNECT_TIMEOUT``, 30 s; ``None`` for no bound) bounds starting the
    server and the protocol's handshake (past it, entering raises
    :class:`~pipeline.errors.McpUnavailable`); *prefix* is put before every tool's name
    as the model sees it (``"fs_"``: the server's ``read`` is ``fs_read``),
    to keep two servers' tools apart.

    .. versionadded:: 0.1.0
    """

    def __init__(
        self,
        name: str,
        server: StdioServerParameters | str,
        *,
        timeout: float | None = None,
        prefix: str = "",
        connect_timeout: float | None = CONNECT_TIMEOUT,
    ) -> None:
        for what, value in (
            ("timeout", timeout),
            ("connect_timeout", connect_timeout),
        ):
            if value is not None and not value > 0:
                msg = f"MCP server {name!r}: {what} must be a positive number"
                raise ConstructionError(msg)
        self.name = name
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.prefix = prefix
        self._server = server
        self._client: Client | None = None
        self._schemas: dict[str, ArgumentSchema] = {}
        self._tools: tuple[Tool, ...] = ()
        self._stale = True
        self._lost = False
        self._lock = anyio.Lock()
        self._changed = anyio.Event()
        self._closing = anyio.Event()
        self._group: anyio.abc.TaskGroup | None = None
        self._calls: set[anyio.CancelScope] = set()

    def __repr__(self) -> str:
        return f"McpServer({self.name})"

    async def __aenter__(self) -> McpServer:
        if self._group is not None or self._closing.is_set():
            msg = f"MCP server {self.name!r}: a connection is entered once"
            raise ConstructionError(msg)
        # The SDK's client lives in a task of its own: a transport that
        # fails (an HTTP server gone) ends that task, never the caller's.
        group = anyio.create_task_group()
        await group.__aenter__()
        self._group = group
        limit: float | None = None
        try:
            # The handshake is bounded too: a server that never answers
            # ``initialize`` (a silent process, a port that accepts and
            # says nothing) must not hang the caller for ever.
            limit = self.connect_timeout
            with anyio.fail_after(limit):
                await group.start(self._host)
            limit = self.timeout
            with anyio.fail_after(limit):
                await self.tools()
        except BaseException as exc:
            self._closing.set()
            self._group = None
            group.cancel_scope.cancel()
            await group.__aexit__(None, None, None)
            if isinstance(exc, TimeoutError):
                within = "" if limit is None else f" within {limit:g} s"
                msg = f"MCP server {self.name!r} did not answer{within}"
                raise McpUnavailable(msg) from exc
            if isinstance(exc, Exception) and not isinstance(
                exc, MalformedToolSchema
            ):
                # The SDK's error (often an exception group) may quote
                # the URL, a token in it included: named by type only.
                msg = (
                    f"MCP server {self.name!r} could not be reached "
                    f"({_kind(exc)})"
                )
                raise McpUnavailable(msg) from exc
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        group, self._group = self._group, None
        self._closing.set()
        if group is None:
            return None
        return await group.__aexit__(exc_type, exc, tb)

    async def _host(
        self,
        *,
        task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        started = False
        try:
            async with Client(
                self._server,
                mode="legacy",
                cache=None,
                message_handler=self._on_message,
            ) as client:
                self._client = client
                started = True
                task_status.started()
                await self._closing.wait()
        except Exception:
            if not started:
                raise
            # The transport failed: calls under way end as "went away".
            _LOG.warning("MCP server %r: the connection failed", self.name)
        finally:
            self._lost = True
            self._client = None
            for scope in tuple(self._calls):
                scope.cancel()

    @property
    def connected(self) -> bool:
        """Whether the connection is open (entered, and the server has
        not gone away)."""
        return self._client is not None and not self._lost

    async def tools(self) -> tuple[Tool, ...]:
        """The server's tools, as :class:`~pipeline.Tool` values an
        :class:`~pipeline.Agent` takes: listed once, then from the cache
        until the server says the list changed.

        Raises:
            MalformedToolSchema: a listed tool has a name models refuse,
                or an input schema that is not a JSON schema of an object.
        """
        async with self._lock:
            if self._stale:
                await self._list()
            return self._tools

    async def changed(self) -> None:
        """Wait until the server has said its tool list changed since the
        last listing (at once if it has): :meth:`tools` then lists them
        again.  Build a new agent from them to offer the new list."""
        if not self._stale:
            await self._changed.wait()

    async def _list(self) -> None:
        client = self._live()
        found: dict[str, types.Tool] = {}
        cursor: str | None = None
        for _ in range(_MAX_PAGES):
            page = await client.list_tools(cursor=cursor, cache_mode="refresh")
            for t in page.tools:
                found[t.name] = t
            cursor = page.next_cursor
            if cursor is None:
                break
        schemas = {
            t.name: ArgumentSchema.of(self.name, t.name, t.input_schema)
            for t in found.values()
        }
        self._stale = False
        self._schemas = schemas
        self._tools = tuple(
            self._tool(found[n], s) for n, s in schemas.items()
        )

    def _tool(self, listed: types.Tool, schema: ArgumentSchema) -> Tool:
        remote = listed.name
        params = tuple(
            Param(p, Any, p in schema.required, None)
            for p in schema.properties
        )

        async def call(**arguments: Any) -> str:
            return await self._call(remote, arguments)

        label = self.prefix + remote
        return Tool(
            label,
            listed.description or listed.title or remote,
            dict(schema.schema),
            call,
            params,
            self.timeout,
            extra_arguments=schema.open,
        )

    def _live(self) -> Client:
        if self._client is None or self._lost:
            msg = f"MCP server {self.name!r} is not connected"
            raise ToolError(msg)
        return self._client

    async def _call(self, tool: str, arguments: Mapping[str, Any]) -> str:
        client = self._live()
        if self._stale:
            try:
                await self.tools()
            except MalformedToolSchema as exc:
                raise ToolError(str(exc)) from None
        schema = self._schemas.get(tool)
        if schema is None:
            msg = f"MCP server {self.name!r} no longer offers tool {tool!r}"
            raise ToolError(msg)
        problems = schema.problems(arguments)
        if problems:
            msg = f"invalid arguments for {tool!r}: " + "; ".join(problems)
            raise ToolError(msg)
        result = await self._send(client, tool, arguments)
        text = result_text(result)
        if result.is_error:
            raise ToolError(text or f"tool {tool!r} failed on the server")
        return text

    async def _send(  # noqa: RET503  # _gone never returns
        self, client: Client, tool: str, arguments: Mapping[str, Any]
    ) -> types.CallToolResult:
        scope = anyio.CancelScope()
        self._calls.add(scope)
        try:
            with scope:
                return await self._request(client, tool, arguments)
        finally:
            self._calls.discard(scope)
        await self._gone(tool)  # the connection ended under the call

    async def _request(
        self, client: Client, tool: str, arguments: Mapping[str, Any]
    ) -> types.CallToolResult:
        try:
            return await client.call_tool(tool, dict(arguments))
        except MCPError as exc:
            if exc.code == types.CONNECTION_CLOSED:
                await self._gone(tool)
            msg = (
                f"MCP server {self.name!r} refused the call to {tool!r} "
                f"(JSON-RPC error {exc.code})"
            )
            raise ToolError(msg) from None
        except _GONE:
            await self._gone(tool)
        except pydantic.ValidationError:
            msg = (
                f"MCP server {self.name!r} answered {tool!r} with a result "
                "that does not fit the protocol"
            )
            raise ToolError(msg) from None
        except RuntimeError:
            # The SDK's word for structured content that its tool's listed
            # output schema refuses (its text quotes the content).
            msg = (
                f"MCP server {self.name!r} answered {tool!r} with a result "
                "that does not fit the tool's output schema"
            )
            raise ToolError(msg) from None

    async def _gone(self, tool: str) -> NoReturn:
        self._lost = True
        _LOG.warning("MCP server %r went away during %r", self.name, tool)
        if listening():
            await emit(McpServerLost(self.name, tool))
        msg = f"MCP server {self.name!r} went away during the call"
        raise ToolError(msg)

    async def _on_message(self, message: object) -> None:
        inner = getattr(message, "root", message)
        if isinstance(inner, types.ToolListChangedNotification):
            self._stale = True
            changed, self._changed = self._changed, anyio.Event()
            changed.set()
        await anyio.lowlevel.checkpoint()


def _kind(exc: BaseException) -> str:
    """The innermost error's type name, through exception groups."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    if isinstance(exc, MCPError):
        return f"{type(exc).__name__} {exc.code}"
    return type(exc).__name__


def stdio(
    command: str,
    *args: str,
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
    name: str | None = None,
    timeout: float | None = None,
    prefix: str = "",
    connect_timeout: float | None = CONNECT_TIMEOUT,
) -> McpServer:
    """An MCP server run as a subprocess (*command* *args*), spoken to on
    its standard input and output.  *env* is added to a minimal
    environment (the SDK's: ``PATH``, ``HOME`` and a few more, never the
    whole of yours).  See :class:`McpServer` for the rest.

    .. versionadded:: 0.1.0
    """
    params = StdioServerParameters(
        command=command,
        args=list(args),
        env=None if env is None else dict(env),
        cwd=cwd,
    )
    return McpServer(
        name or Path(args[-1] if args else command).stem,
        params,
        timeout=timeout,
        prefix=prefix,
        connect_timeout=connect_timeout,
    )


def http(
    url: str,
    *,
    name: str | None = None,
    timeout: float | None = None,
    prefix: str = "",
    connect_timeout: float | None = CONNECT_TIMEOUT,
) -> McpServer:
    """An MCP server at *url*, spoken to over streamable HTTP.  See
    :class:`McpServer` for the rest.

    .. versionadded:: 0.1.0
    """
    return McpServer(
        name or urlsplit(url).netloc.rpartition("@")[2],
        url,
        timeout=timeout,
        prefix=prefix,
        connect_timeout=connect_timeout,
    )
