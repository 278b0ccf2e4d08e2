"""Messages of a conversation and their parts: roles, tool calls, usage.

A light module on purpose: model adapters, tools, events and histories
need messages without the context machinery.
"""

from __future__ import annotations

import enum

from collections.abc import Iterable
from typing import final

import attrs


__all__ = ("Message", "Role", "ToolCall", "Usage")


@final
class Role(enum.StrEnum):
    """Who wrote a message.

    .. versionadded:: 0.1.0
    """

    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"


@final
@attrs.frozen
class ToolCall:
    """A model's request to call a tool; *arguments* is a JSON object text.

    .. versionadded:: 0.1.0
    """

    id: str
    name: str
    arguments: str = "{}"


@final
@attrs.frozen
class Usage:
    """Token usage reported by a model for one response.

    .. versionadded:: 0.1.0
    """

    input_tokens: int = 0
    output_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
        )


def _to_tool_calls(calls: Iterable[ToolCall]) -> tuple[ToolCall, ...]:
    return tuple(calls)


@final
@attrs.frozen
class Message:
    """One message of a conversation.

    >>> Message.user("hi")
    Message(role=<Role.USER: 'user'>, content='hi', name=None, tool_calls=(), \
tool_call_id=None, usage=None, agent=None)

    *agent* names the agent whose run added it (its answers and the results
    of its tool calls), so the sub-agents' work stays attributable inside a
    merged conversation.  Providers never see it.

    .. versionadded:: 0.1.0
    """

    role: Role = attrs.field(converter=Role)
    content: str = ""
    name: str | None = None
    tool_calls: tuple[ToolCall, ...] = attrs.field(
        default=(), converter=_to_tool_calls
    )
    tool_call_id: str | None = None
    usage: Usage | None = None
    agent: str | None = None

    @classmethod
    def system(cls, content: str) -> Message:
        """A system message."""
        return cls(Role.SYSTEM, content)

    @classmethod
    def user(cls, content: str, *, name: str | None = None) -> Message:
        """A user message."""
        return cls(Role.USER, content, name)

    @classmethod
    def assistant(
        cls,
        content: str = "",
        *,
        name: str | None = None,
        tool_calls: Iterable[ToolCall] = (),
        usage: Usage | None = None,
    ) -> Message:
        """An assistant message, possibly asking for tool calls."""
        return cls(
            Role.ASSISTANT, content, name, tuple(tool_calls), None, usage
        )

    @classmethod
    def tool(
        cls,
        content: str,
        *,
        tool_call_id: str,
        name: str | None = None,
        agent: str | None = None,
    ) -> Message:
        """The result of a tool call, answering *tool_call_id*."""
        return cls(Role.TOOL, content, name, (), tool_call_id, None, agent)
