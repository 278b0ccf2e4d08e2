"""A graph over a typed state as a tool: its state in, its final state out."""

from __future__ import annotations

import typing

from typing import Any

import attrs

from .._handler import Handler
from .._offload import note_fold_tool
from .._runners import ok
from .._schema import schema_for
from .._serde import canonical, make_converter
from ..agents import raise_for
from ..errors import AgentFailed
from ..tools import Param, Tool


def state_tool(
    graph: Handler[Any, Any, Any],
    kind: type[Any],
    *,
    name: str | None,
    description: str | None,
) -> Tool:
    """A graph over a typed state as a tool: state in, final state out.

    Each field of the state is an argument of its own type, so a bad one
    is named (never quoted) like any tool's argument."""
    converter = make_converter()
    label = name or graph.name
    hints = typing.get_type_hints(kind)
    fields = attrs.fields(kind)
    aliases = {f.name: f.alias for f in fields}

    async def call(**given: Any) -> str:
        try:
            state = kind(**{aliases[k]: v for k, v in given.items()})
        except (ValueError, TypeError):  # a validator's text may quote it
            msg = f"the arguments do not make a {kind.__name__}"
            raise AgentFailed(msg) from None
        out = await graph(state)
        if not ok(out):
            raise_for(out.failure(), label)
        return canonical(converter.unstructure(out.unwrap())).decode()

    schema = dict(schema_for(kind))
    return note_fold_tool(
        Tool(
            label,
            description
            or f"Run the {graph.name!r} graph on a {kind.__name__}.",
            schema,
            call,
            tuple(
                Param(
                    f.name,
                    hints.get(f.name, Any),
                    f.default is attrs.NOTHING,
                    None,
                )
                for f in fields
            ),
        )
    )
