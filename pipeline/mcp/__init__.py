"""MCP tools: an agent calls the tools of Model Context Protocol servers,
and ``pipeline mcp serve`` offers an agent or a graph as one.

Needs the ``mcp`` extra (``pip install 'typed-pipeline[mcp]'``), the
official MCP SDK.

.. versionadded:: 0.1.0
"""

from __future__ import annotations

from .._extras import require


require("pipeline.mcp", "the MCP SDK", "mcp", ("mcp", "jsonschema"))

from ._client import CONNECT_TIMEOUT, McpServer, http, stdio  # noqa: E402
from ._serve import serve_stdio  # noqa: E402


__all__ = ("CONNECT_TIMEOUT", "McpServer", "http", "serve_stdio", "stdio")
