"""Edges: where a graph goes after a node, and how that is decided."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeAlias, final

import attrs

from returns.result import Failure

from ..failures import UnknownRoute
from ._model import END


Reducer: TypeAlias = Callable[[Any, tuple[Any, ...]], Any]
"""Merges one field: ``(value before the fan-out, changed values) -> value``."""


@final
@attrs.frozen
class Static:
    """Always go to *to*."""

    to: str


@final
@attrs.frozen
class Route:
    """Go where *router* says: one of *to*."""

    router: Callable[[Any], str]
    to: tuple[str, ...]


@final
@attrs.frozen
class FanOut:
    """Run *to* concurrently; merge; go on at *join*."""

    to: tuple[str, ...]
    join: str
    merge: Callable[[Any, tuple[Any, ...]], Any] | None
    reducers: Mapping[str, Reducer]


Edge: TypeAlias = Static | Route | FanOut


def targets(edge: Edge) -> tuple[str, ...]:
    """Every name *edge* may lead to (a fan-out's branches and its join)."""
    if isinstance(edge, Static):
        return (edge.to,)
    if isinstance(edge, Route):
        return edge.to
    return (*edge.to, edge.join)


Where: TypeAlias = "tuple[tuple[str, ...], str | None] | Failure[UnknownRoute]"
"""``(next nodes, join)`` after a node, or why the router's answer is wrong."""


def advancer(name: str, edge: Edge) -> Callable[[Any], Where]:
    """Where to go after *name*, precomputed per edge kind."""
    if isinstance(edge, Static):
        fixed: Where = ((), None) if edge.to == END else ((edge.to,), None)
        return lambda _state: fixed
    if isinstance(edge, FanOut):
        branches: Where = (edge.to, edge.join)
        return lambda _state: branches
    router, allowed = edge.router, edge.to
    choices: dict[str, Where] = {
        t: (((), None) if t == END else ((t,), None)) for t in allowed
    }

    def route(state: Any) -> Where:
        choice = router(state)
        where = choices.get(choice)
        if where is None:
            return Failure(
                UnknownRoute(name, str(choice), allowed, path=(name,))
            )
        return where

    return route
