"""Agent nodes: an agent's loop as a graph node, with typed state tools."""

from __future__ import annotations

import typing

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import attrs

from returns.result import Failure, Result, Success

from .._context import Message
from .._handler import Handler, ok
from .._serde import STRUCTURE_ERRORS, canonical, make_converter
from ..agents import Agent, AgentError, AgentLike, AgentRun
from ..tools import Tool, _Param


S = TypeVar("S")

_CONVERTER = make_converter()

__all__ = ("agent_node", "state_tools")


class StateToolError(Exception):
    """A state tool was misused; the model sees the message."""


def state_tools(
    cell: list[Any], state_type: type[Any], fields: Sequence[str] | None = None
) -> tuple[Tool, Tool]:
    """``read_state`` and ``write_state`` over ``cell[0]``, a typed attrs state.

    Only *fields* (default: every field that is not an append-only vector)
    are visible.  Writes are decoded into the field's declared type; a wrong
    type is an error result naming the field and the type, and the state is
    left as it was.
    """
    hints = typing.get_type_hints(state_type)
    names = tuple(
        f.name
        for f in attrs.fields(state_type)
        if (fields is None and not _is_log(hints.get(f.name)))
        or (fields is not None and f.name in fields)
    )

    def _check(field: str) -> None:
        if field not in names:
            msg = f"no state field {field!r}; fields: {list(names)}"
            raise StateToolError(msg)

    def read_state(field: str) -> str:
        _check(field)
        return canonical(
            _CONVERTER.unstructure(getattr(cell[0], field))
        ).decode()

    def write_state(field: str, value: Any) -> str:
        _check(field)
        kind = hints[field]
        try:
            typed = _CONVERTER.structure(value, kind)
        except STRUCTURE_ERRORS as exc:
            msg = f"state field {field!r} holds {_name(kind)}; the value does not fit ({type(exc).__name__})"
            raise StateToolError(msg) from None
        alias = next(
            f.alias or f.name
            for f in attrs.fields(state_type)
            if f.name == field
        )
        cell[0] = attrs.evolve(cell[0], **{alias: typed})
        return f"state[{field!r}] updated"

    field_schema = {
        "type": "string",
        "enum": list(names),
        "description": "The state field",
    }
    read = Tool(
        "read_state",
        "Read a field of the shared graph state.",
        {
            "type": "object",
            "properties": {"field": field_schema},
            "required": ["field"],
            "additionalProperties": False,
        },
        read_state,
        (_Param("field", str, True, None),),
    )
    write = Tool(
        "write_state",
        "Write a field of the shared graph state (the value must fit the field's type).",
        {
            "type": "object",
            "properties": {
                "field": field_schema,
                "value": {"description": "The new value"},
            },
            "required": ["field", "value"],
            "additionalProperties": False,
        },
        write_state,
        (_Param("field", str, True, None), _Param("value", Any, True, None)),
    )
    return read, write


def _is_log(t: Any) -> bool:
    return getattr(t, "__origin__", None) is not None and "PVector" in str(t)


def _name(t: Any) -> str:
    return getattr(t, "__name__", None) or str(t).replace("typing.", "")


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
    typed: see :func:`state_tools`); *update* receives the state as the
    tools left it.
    """

    async def run_agent_node(state: S) -> Result[S, AgentError]:
        cell: list[Any] = [state]
        runner: AgentLike = agent
        kind = state_type or type(state)
        if isinstance(agent, Agent) and attrs.has(kind):
            runner = attrs.evolve(
                agent, tools=(*agent.tools, *state_tools(cell, kind, fields))
            )
        out = await runner.run(messages(state))
        if not ok(out):
            return Failure(out.failure())
        return Success(update(cell[0], out.unwrap()))

    return Handler(run_agent_node, name or agent.name)
