"""``map_reduce`` nodes as activities: split, one activity per item, reduce.

A graph node whose handler is a :func:`~pipeline.map_reduce` runs, on
Temporal, as three kinds of step activity: *split* (counts the items and
checks ``max_items``), one *item* activity per item (at most
``max_concurrency`` at a time, taken in order, as in process) and
*reduce* (the reduce, then the node's edge).  An item activity re-derives
its item by splitting the node's input again, so items never cross the
wire and *split* must be deterministic; its output crosses as JSON and is
structured back into the worker's output type for *reduce*.  So the
worker's output type must be known: a graph's state type, a context (an
agent, a swarm), or the ``Result[O, E]`` annotation of an ``@handler``
function.  Other map_reduce nodes run whole, in one activity.
"""

from __future__ import annotations

import typing

from typing import Any, final, get_args, get_origin

import attrs

from returns.result import Failure, Result, Success

from .._context import Context
from .._handler import Handler
from .._mapreduce import MapReduce
from .._runners import located
from .._serde import STRUCTURE_ERRORS, canonical
from ..agents import Agent
from ..failures import InvalidState
from ..graph._graph import Graph
from ..swarm._swarm import Swarm
from ._failures import Kinds
from ._hosted import Hosted
from ._wire import ItemDone, StepDone


@final
@attrs.frozen
class Mapped:
    """A map_reduce node, ready to run as activities."""

    node: str
    spec: MapReduce
    worker: Handler[Any, Any, Any]
    output: Any


def output_type(worker: Handler[Any, Any, Any]) -> Any | None:
    """What *worker* returns on success, if it can be known."""
    if isinstance(worker, Graph):
        graph: Graph[Any, Any] = worker
        return graph.state_type
    if isinstance(worker, (Agent, Swarm)):
        return Context
    if worker._kind != "leaf" or worker._middleware:
        return None
    try:
        hints = typing.get_type_hints(worker._call)
    except (NameError, TypeError, AttributeError):
        return None
    ret = hints.get("return")
    if get_origin(ret) is Result:
        return get_args(ret)[0]
    return None


def mapped(hosted: Hosted, node: str) -> Mapped | None:
    """Node *node* of *hosted* as a distributed map_reduce, if it is one."""
    if hosted.kind != "graph":
        return None
    handler = hosted.machine.nodes.get(node)
    if (
        handler is None
        or handler._kind != "map_reduce"
        or not isinstance(handler._build, MapReduce)
        or handler._middleware
    ):
        return None
    worker = handler._children[0]
    output = output_type(worker)
    if output is None:
        return None
    return Mapped(node, handler._build, worker, output)


async def split(m: Mapped, state: Any, kinds: Kinds) -> StepDone:
    """How many items there are (or the node's failure: a failing split,
    too many items, see :meth:`MapReduce.items`)."""
    items = await m.spec.items(state)
    if type(items) is not Success:
        return StepDone(failure=kinds.encode(located(items, m.node).failure()))
    return StepDone(count=len(items.unwrap()))


async def item(
    m: Mapped, state: Any, index: int, hosted: Hosted, kinds: Kinds
) -> StepDone:
    """Run the worker on item *index*: its output as JSON, or its failure
    (located at the item, as in process)."""
    split_out = await m.spec.items(state)
    items = split_out.unwrap() if type(split_out) is Success else []
    if index >= len(items):
        failure = InvalidState(
            m.node,
            f"{m.spec.label}[{index}]",
            "an item of a deterministic split",
            "split gave fewer items than before",
        )
        return StepDone(failure=kinds.encode(failure))
    r = await m.worker._call(items[index])
    if type(r) is not Success:
        where = f"{m.spec.label}[{index}]"
        return StepDone(
            item=ItemDone(failure=kinds.encode(located(r, where).failure()))
        )
    try:
        value = hosted.codec.converter.unstructure(r.unwrap())
        canonical(value)
    except (ValueError, TypeError, RecursionError, OverflowError) as exc:
        failure = InvalidState(
            m.node,
            f"{m.spec.label}[{index}]",
            _name(m.output),
            type(exc).__name__,
        )
        return StepDone(failure=kinds.encode(failure))
    return StepDone(item=ItemDone(value=value))


async def reduce(
    m: Mapped,
    state: Any,
    items: tuple[ItemDone | None, ...],
    hosted: Hosted,
    kinds: Kinds,
) -> Any:
    """The state the reduce makes of the items' results, or the node's
    failure (the first item's, under ``fail_fast``)."""
    results: list[Any] = []
    for i, done in enumerate(items):
        if done is None:
            results.append(None)  # not run: a failure stopped the rest
        elif done.failure is not None:
            results.append(Failure(kinds.decode(done.failure)))
        else:
            try:
                value = hosted.codec.converter.structure(done.value, m.output)
            except STRUCTURE_ERRORS:
                return Failure(
                    InvalidState(
                        m.node,
                        f"{m.spec.label}[{i}]",
                        _name(m.output),
                        "does not decode",
                    )
                )
            results.append(Success(value))
    if m.spec.fail_fast:
        for r in results:
            if type(r) is Failure:
                return located(r, m.node)
    out = await m.spec.reduced(state, tuple(results))
    if type(out) is not Success:
        return located(out, m.node)
    return out.unwrap()


def _name(kind: Any) -> str:
    return getattr(kind, "__qualname__", None) or str(kind)
