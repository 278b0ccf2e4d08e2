"""An MCP tool result as the text a tool message carries.

Structured content, when the server sends it, is the result (canonical
JSON); otherwise the content blocks are joined, one per line: text as it
is, an image, audio or binary resource as a placeholder naming its media
type and size (a tool message's content is text), a resource link by its
URI, an embedded text resource by its text.
"""

from __future__ import annotations

from typing import Any

import mcp_types as types

from .._serde import canonical, unicode_safe


__all__ = ("result_text",)


def result_text(result: types.CallToolResult) -> str:
    """*result* (successful or not) as one text for the model."""
    if result.structured_content is not None and not result.is_error:
        return canonical(result.structured_content).decode()
    return "\n".join(block_text(b) for b in result.content)


def block_text(block: Any) -> str:
    """One content block as text (a placeholder for binary data)."""
    if isinstance(block, types.TextContent):
        return unicode_safe(block.text)
    if isinstance(block, types.ImageContent):
        return f"[image: {block.mime_type}, {_size(block.data)} bytes]"
    if isinstance(block, types.AudioContent):
        return f"[audio: {block.mime_type}, {_size(block.data)} bytes]"
    if isinstance(block, types.ResourceLink):
        return f"[resource: {block.uri}]"
    if isinstance(block, types.EmbeddedResource):
        inner = block.resource
        if isinstance(inner, types.TextResourceContents):
            return unicode_safe(inner.text)
        kind = inner.mime_type or "application/octet-stream"
        return f"[resource: {inner.uri}, {kind}, {_size(inner.blob)} bytes]"
    return f"[{type(block).__name__}]"


def _size(b64: str) -> int:
    """Bytes that base64 text decodes to (counted, not decoded)."""
    pad = len(b64) - len(b64.rstrip("="))
    return len(b64) * 3 // 4 - pad
