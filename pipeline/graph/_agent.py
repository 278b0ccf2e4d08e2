"""Agent nodes: an agent's loop as a graph node, with typed state tools."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar, overload

import attrs

from returns.result import Failure, Result, Success

from .._context import Context
from .._handler import Handler
from .._messages import Message, Role, Usage
from .._runners import ok
from .._state_tools import Writable, state_tools
from ..agents import (
    Agent,
    AgentError,
    AgentLike,
    AgentRun,
    ParallelAgent,
    SequentialAgent,
)
from ..errors import ConstructionError
from ..fold import Cell, Codec
from ..tools import Tool


S = TypeVar("S")
E = TypeVar("E")
E2 = TypeVar("E2")

__all__ = ("agent_node", "state_tools")


@overload
def agent_node(
    agent: Handler[Context, Context, E],
    *,
    messages: Callable[[S], Sequence[Message]],
    update: Callable[[S, AgentRun], Result[S, E2]],
    state_type: type[S] | None = None,
    fields: Sequence[str] | None = None,
    writable: Writable = (),
    name: str | None = None,
) -> Handler[S, S, E | E2]: ...


@overload
def agent_node(  # type: ignore[overload-overlap]  # a Result state: unsupported
    agent: AgentLike,
    *,
    messages: Callable[[S], Sequence[Message]],
    update: Callable[[S, AgentRun], Result[S, E2]],
    state_type: type[S] | None = None,
    fields: Sequence[str] | None = None,
    writable: Writable = (),
    name: str | None = None,
) -> Handler[S, S, AgentError | E2]: ...


@overload
def agent_node(
    agent: Handler[Context, Context, E],
    *,
    messages: Callable[[S], Sequence[Message]],
    update: Callable[[S, AgentRun], S],
    state_type: type[S] | None = None,
    fields: Sequence[str] | None = None,
    writable: Writable = (),
    name: str | None = None,
) -> Handler[S, S, E]: ...


@overload
def agent_node(
    agent: AgentLike,
    *,
    messages: Callable[[S], Sequence[Message]],
    update: Callable[[S, AgentRun], S],
    state_type: type[S] | None = None,
    fields: Sequence[str] | None = None,
    writable: Writable = (),
    name: str | None = None,
) -> Handler[S, S, AgentError]: ...


def agent_node(
    agent: AgentLike | Handler[Context, Context, Any],
    *,
    messages: Callable[[S], Sequence[Message]],
    update: Callable[[S, AgentRun], S | Result[S, Any]],
    state_type: type[S] | None = None,
    fields: Sequence[str] | None = None,
    writable: Writable = (),
    name: str | None = None,
) -> Handler[S, S, Any]:
    """Run *agent* as a graph node.

    *agent* is an agent (anything with ``run(messages)``) or any handler
    over contexts: a swarm, a graph over contexts, ``agent >> polish``.
    *messages* picks what it sees from the state; *update* folds its run
    back in (say, appending its messages), returning the new state or a
    ``Result`` of it: a ``Failure`` (the answer did not decode, say) is
    the node's failure (a state type that is itself a ``Result`` cannot
    be told apart, so it is not supported).  When *agent* is an
    :class:`~pipeline.Agent` and the state an attrs class (a
    :class:`~pipeline.Context` included), it also gets a ``read_state``
    tool over *fields* (default: every field but append-only logs; a
    context's metadata, by key) and, when *writable* lists some, a
    ``write_state`` tool that may change those only (writes are typed: see
    :func:`state_tools`).  The agent's own tools override them by name;
    *update* receives the state as the tools left it.

    Inside a checkpointed run every turn is a record, and the state the
    tools left is committed with it: a resumed node continues the
    conversation with the writes of its committed turns.

    .. versionadded:: 0.1.0
    """
    return make_agent_node(
        agent,
        messages=messages,
        update=update,
        state_type=state_type,
        fields=fields,
        writable=writable,
        name=name,
    )


def make_agent_node(
    agent: AgentLike | Handler[Context, Context, Any],
    *,
    messages: Callable[[S], Sequence[Message]],
    update: Callable[[S, AgentRun], S | Result[S, Any]],
    state_type: type[S] | None = None,
    fields: Sequence[str] | None = None,
    writable: Writable = (),
    name: str | None = None,
) -> Handler[S, S, Any]:
    """:func:`agent_node`, untyped in its error (the builder's)."""
    label = name or agent.name
    if (
        state_type is not None
        and attrs.has(state_type)
        and isinstance(agent, Agent)
    ):
        # Refuse unknown or forbidden fields now, not at the first run.
        state_tools(_Unset(), state_type, fields, writable=writable)
    if writable and not isinstance(agent, Agent):
        msg = f"agent node {label!r}: writable= needs an Agent (it gets the tools)"
        raise ConstructionError(msg)
    codecs: list[Codec[Any]] = []

    def codec_for(kind: type[Any]) -> Codec[Any]:
        if not codecs:
            codecs.append(Codec(kind))
        return codecs[0]

    async def run_agent_node(state: S) -> Result[S, Any]:
        kind = state_type or type(state)
        tooled = isinstance(agent, Agent) and attrs.has(kind)
        if not tooled:
            out = await _converse(agent, messages(state))
            if not ok(out):
                return Failure(out.failure())
            return _updated(update(state, out.unwrap()))
        assert isinstance(agent, Agent)  # noqa: S101  # tooled
        opened = Cell.open(label, codec_for(kind), state)
        if not ok(opened):
            return Failure(opened.failure())
        cell = opened.unwrap()
        tools: dict[str, Tool] = {
            t.name: t
            for t in state_tools(cell, kind, fields, writable=writable)
        }
        tools.update(_own(agent))
        token = cell.enter()
        try:
            out = await agent.converse(messages(state), tools)
        finally:
            cell.leave(token)
        if not ok(out):
            return Failure(out.failure())
        return _updated(update(cell.value, out.unwrap()))

    return Handler(run_agent_node, label)


async def _converse(
    agent: AgentLike | Handler[Context, Context, Any],
    messages: Sequence[Message],
) -> Result[AgentRun, Any]:
    if isinstance(agent, (Agent, ParallelAgent, SequentialAgent)) or not (
        isinstance(agent, Handler)
    ):
        return await agent.run(messages)
    # A fixed run id: a resumed node must give the handler the same input,
    # or what it committed inside the node would not be found again.
    ctx = Context.of(*messages, run_id=agent.name)
    out = await agent(ctx)
    if not ok(out):
        return Failure(out.failure())
    added = tuple(out.unwrap().messages[len(ctx.messages) :])
    # What the handler's model calls left on its messages: each assistant
    # message is one call, with its usage.
    replies = [m for m in added if m.role is Role.ASSISTANT]
    usage = sum((m.usage or Usage() for m in replies), Usage())
    return Success(AgentRun(agent.name, added, usage, len(replies)))


def _updated(new: S | Result[S, Any]) -> Result[S, Any]:
    """What *update* returned, as the node's result."""
    if isinstance(new, Result):
        return new  # pyright: ignore[reportUnknownVariableType]
    return Success(new)


class _Unset:
    value: Any = None


def _own(agent: Agent) -> Mapping[str, Tool]:
    return {t.name: t for t in agent.tools}
