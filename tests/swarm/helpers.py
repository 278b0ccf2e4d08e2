"""Shared swarm-test helpers: contexts, scripted replies, a typed state."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

import attrs

from returns.result import Result

from pipeline import Context, Message, Role, Swarm, stream
from pipeline.events import Event, Handoff
from pipeline.failures import ModelError
from pipeline.models import ModelRequest, ModelResponse
from pipeline.swarm import SwarmFailure
from pipeline.testing import Reply


T = TypeVar("T")

Step = Callable[[ModelRequest], ModelResponse | ModelError]
"""A scripted model step computed from the request it answers."""

PREFIX = "transfer_to_"


@attrs.frozen
class Mission:
    """A typed swarm state: one string field agents write."""

    mission: str = ""


def ask(*texts: str) -> Context:
    """A context holding one user message per text."""
    return Context.of(*(Message.user(t) for t in texts))


def transfer(target: str, *, call_id: str | None = None) -> ModelResponse:
    """A reply asking to hand the conversation to *target*."""
    return Reply.tool_call(PREFIX + target, call_id=call_id)


def offered(request: ModelRequest) -> list[str]:
    """The names of the tools a request offers, in order."""
    return [t.name for t in request.tools]


def transfers_offered(request: ModelRequest) -> list[str]:
    """The transfer tools a request offers, in order."""
    return [n for n in offered(request) if n.startswith(PREFIX)]


def refused(message: Message) -> bool:
    """Whether *message* is an error result (what a refusal looks like)."""
    return message.role is Role.TOOL and message.content.startswith("error:")


def contents(messages: Sequence[Message]) -> list[str]:
    """The content of every message, in order."""
    return [m.content for m in messages]


async def streamed(
    team: Swarm[T], ctx: Context
) -> tuple[list[Event], Result[Context, SwarmFailure]]:
    """Run *team* as a handler under :func:`stream`: its events and result."""
    async with stream(team, ctx) as events:
        seen = [e async for e in events]
    assert events.result is not None
    return seen, events.result


def handoffs(events: Sequence[Event]) -> list[Handoff]:
    """The Handoff events among *events*, in order."""
    return [e for e in events if isinstance(e, Handoff)]
