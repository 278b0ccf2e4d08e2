"""What ``build()`` checks: small named checks, each reporting its defects.

Every check sees the same :class:`Plan` (what the builder collected) and
yields :class:`~pipeline.errors.GraphDefect` values; ``build()`` runs them
all and reports every defect at once.
"""

from __future__ import annotations

import collections

from collections.abc import Callable, Iterator
from functools import cached_property
from typing import Any, TypeAlias, cast, final

import attrs

from .._handler import Handler
from ..errors import GraphDefect
from ._edges import Edge, FanOut, Route, targets
from ._model import END, GraphLimits


@final
@attrs.frozen
class Plan:
    """A graph as the builder collected it, before validation."""

    nodes: tuple[tuple[str, Handler[Any, Any, Any]], ...]
    edges: tuple[tuple[str, Edge], ...]
    entry: str | None
    limits: GraphLimits


@final
class Shape:
    """What the checks derive from a plan, computed once."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.names: dict[str, Handler[Any, Any, Any]] = {}
        for name, action in plan.nodes:
            self.names.setdefault(name, action)
        self.edges: dict[str, Edge] = {}
        for source, edge in plan.edges:
            self.edges.setdefault(source, edge)
        self.branches = {
            t
            for e in self.edges.values()
            if isinstance(e, FanOut)
            for t in e.to
        }

    @cached_property
    def successors(self) -> dict[str, set[str]]:
        """Where each node may go next (a branch goes to its join)."""
        succ: dict[str, set[str]] = {n: set() for n in self.names}
        for source, edge in self.edges.items():
            if source not in succ:
                continue
            if isinstance(edge, FanOut):
                succ[source].update(edge.to)
                for t in edge.to:
                    if t in succ:
                        succ[t].add(edge.join)
            else:
                succ[source].update(targets(edge))
        return succ

    @cached_property
    def reachable(self) -> set[str]:
        """Nodes reachable from the entry (empty without a valid entry)."""
        entry = self.plan.entry
        if entry is None or entry not in self.names:
            return set()
        seen = {entry}
        queue = collections.deque([entry])
        while queue:
            for nxt in self.successors.get(queue.popleft(), ()):
                if nxt != END and nxt not in seen:
                    seen.add(nxt)
                    queue.append(nxt)
        return seen


Check: TypeAlias = Callable[[Shape], Iterator[GraphDefect]]


def node_names(shape: Shape) -> Iterator[GraphDefect]:
    """END is reserved; a name is added once; a node is a handler."""
    seen: set[str] = set()
    for name, action in shape.plan.nodes:
        if name == END:
            yield GraphDefect("reserved name", name, "END cannot be a node")
        elif name in seen:
            yield GraphDefect("duplicate node", name, "added more than once")
        elif not isinstance(cast("object", action), Handler):
            yield GraphDefect(
                "not a handler", name, f"got {type(action).__name__}"
            )
        seen.add(name)


def edge_sources(shape: Shape) -> Iterator[GraphDefect]:
    """An edge leaves a node that exists; a node has one outgoing edge."""
    seen: set[str] = set()
    for source, _ in shape.plan.edges:
        if source not in shape.names:
            yield GraphDefect(
                "unknown node", source, "edge from a node that does not exist"
            )
        if source in seen:
            yield GraphDefect(
                "several edges",
                source,
                "a node has one outgoing edge (use route or fan_out to branch)",
            )
        seen.add(source)


def edge_targets(shape: Shape) -> Iterator[GraphDefect]:
    """Every edge leads to a node that exists, or to END."""
    for source, edge in shape.edges.items():
        for target in targets(edge):
            if target != END and target not in shape.names:
                yield GraphDefect(
                    "unknown node",
                    target,
                    f"edge from {source!r} to a node that does not exist",
                )


def routes(shape: Shape) -> Iterator[GraphDefect]:
    """A route names at least one target."""
    for source, edge in shape.edges.items():
        if isinstance(edge, Route) and not edge.to:
            yield GraphDefect(
                "empty route", source, "route needs at least one target"
            )


def fan_outs(shape: Shape) -> Iterator[GraphDefect]:
    """A fan-out has distinct node branches, no more than the limit."""
    limit = shape.plan.limits.max_fanout
    for source, edge in shape.edges.items():
        if not isinstance(edge, FanOut):
            continue
        if not edge.to:
            yield GraphDefect(
                "empty fan-out", source, "fan_out needs at least one branch"
            )
        if END in edge.to:
            yield GraphDefect(
                "fan-out to END",
                source,
                "branches must be nodes; use join=END",
            )
        if len(edge.to) > limit:
            yield GraphDefect(
                "fan-out too wide",
                source,
                f"{len(edge.to)} branches > limit {limit}",
            )
        if len(set(edge.to)) != len(edge.to):
            yield GraphDefect(
                "duplicate branch", source, "a fan-out lists a branch twice"
            )


def outgoing(shape: Shape) -> Iterator[GraphDefect]:
    """A branch continues at its join; every other node has an edge."""
    for name in shape.names:
        if name in shape.branches and name in shape.edges:
            yield GraphDefect(
                "branch with edges",
                name,
                "fan-out branches continue at the join; remove their own edge",
            )
        elif name not in shape.branches and name not in shape.edges:
            yield GraphDefect(
                "dead end",
                name,
                "no outgoing edge (add an edge to END to finish there)",
            )


def entry(shape: Shape) -> Iterator[GraphDefect]:
    """The entry is given, and is a node."""
    start = shape.plan.entry
    if start is None:
        yield GraphDefect("missing entry", "", "call .entry(name)")
    elif start not in shape.names:
        yield GraphDefect("unknown node", start, "entry is not a node")


def reachability(shape: Shape) -> Iterator[GraphDefect]:
    """Every node can be reached from the entry."""
    seen = shape.reachable
    if not seen:
        return  # no valid entry: reported by `entry`
    hint = ""
    if any(isinstance(e, Route) for e in shape.edges.values()):
        hint = " (if a router returns this name, list it in that route's to=[...])"
    for n in shape.names:
        if n not in seen:
            yield GraphDefect(
                "unreachable",
                n,
                f"no path from the entry {shape.plan.entry!r}{hint}",
            )


def exits(shape: Shape) -> Iterator[GraphDefect]:
    """From every reachable node some path leads to END.

    A node whose edge leads to a node that does not exist is reported by
    `edge_targets`, not here as a cycle.
    """
    succ = shape.successors
    dangling = {
        n
        for n, nexts in succ.items()
        if any(t != END and t not in shape.names for t in nexts)
    }
    ways_out = {END} | dangling
    changed = True
    while changed:
        changed = False
        for n, nexts in succ.items():
            if n not in ways_out and nexts & ways_out:
                ways_out.add(n)
                changed = True
    for n in shape.names:
        if n in shape.reachable and n not in ways_out:
            yield GraphDefect(
                "no way out",
                n,
                "every path from here cycles forever; no path to END",
            )


CHECKS: tuple[Check, ...] = (
    node_names,
    edge_sources,
    edge_targets,
    routes,
    fan_outs,
    outgoing,
    entry,
    reachability,
    exits,
)


def defects(plan: Plan) -> list[GraphDefect]:
    """Every defect every check finds, in check order."""
    shape = Shape(plan)
    return [d for check in CHECKS for d in check(shape)]
