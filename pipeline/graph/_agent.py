"""Agent nodes: an agent's loop as a graph node, with typed state tools."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import attrs

from returns.result import Failure, Result, Success

from .._context import Message
from .._handler import Handler, ok
from .._state_tools import state_tools
from ..agents import Agent, AgentError, AgentLike, AgentRun
from ..fold._codec import Codec
from ..fold._journal import Cell
from ..tools import Tool


S = TypeVar("S")

__all__ = ("agent_node", "state_tools")


def agent_node(
    agent: AgentLike,
    *,
    messages: Callable[[S], Sequence[Message]],
    update: Callable[[S, AgentRun], S],
    state_type: type[S] | None = None,
    fields: Sequence[str] | None = None,
    name: str | None = None,
) -> Handler[S, S, AgentError]:
    """Run *agent* as a graph node.

    *messages* picks what the agent sees from the state; *update* folds its
    run back in (say, appending its messages).  When *agent* is an
    :class:`~pipeline.agents.Agent` and the state an attrs class, it also
    gets ``read_state``/``write_state`` tools over *fields* (writes are
    typed: see :func:`state_tools`; the agent's own tools override them by
    name); *update* receives the state as the tools left it.

    Inside a checkpointed run every turn is a record, and the state the
    tools left is committed with it: a resumed node continues the
    conversation with the writes of its committed turns.
    """
    label = name or agent.name
    codecs: list[Codec[Any]] = []

    def codec_for(kind: type[Any]) -> Codec[Any]:
        if not codecs:
            codecs.append(Codec(kind))
        return codecs[0]

    async def run_agent_node(state: S) -> Result[S, AgentError]:
        kind = state_type or type(state)
        tooled = isinstance(agent, Agent) and attrs.has(kind)
        if not tooled:
            out = await agent.run(messages(state))
            if not ok(out):
                return Failure(out.failure())
            return Success(update(state, out.unwrap()))
        assert isinstance(agent, Agent)  # noqa: S101  # tooled
        opened = Cell.open(label, codec_for(kind), state)
        if not ok(opened):
            return Failure(opened.failure())
        cell = opened.unwrap()
        tools: dict[str, Tool] = {
            t.name: t for t in state_tools(cell, kind, fields)
        }
        tools.update(_own(agent))
        token = cell.enter()
        try:
            out = await agent.converse(messages(state), tools)
        finally:
            cell.leave(token)
        if not ok(out):
            return Failure(out.failure())
        return Success(update(cell.value, out.unwrap()))

    return Handler(run_agent_node, label)


def _own(agent: Agent) -> Mapping[str, Tool]:
    return {t.name: t for t in agent.tools}
