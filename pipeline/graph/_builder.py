"""Describing a graph: an immutable builder whose ``build()`` validates."""

from __future__ import annotations

import types
import typing

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Generic, Never, TypeVar, final, overload

import attrs
import cattrs

from .._context import Context
from .._decode import strict
from .._handler import Handler
from .._messages import Message
from ..errors import ConstructionError, GraphDefects
from ..fold import Building, Gate
from ._cache import CachePolicy
from ._checks import Plan, defects
from ._edges import Edge, FanOut, Reducer, Route, Static
from ._gate import Before
from ._graph import Graph
from ._machine import GraphMachine
from ._model import GraphLimits


if TYPE_CHECKING:
    from returns.result import Result

    from .._state_tools import Writable
    from ..agents import AgentError, AgentLike, AgentRun


S = TypeVar("S")
E = TypeVar("E")
E2 = TypeVar("E2")
E3 = TypeVar("E3")
E_co = TypeVar("E_co", covariant=True)


@final
@attrs.frozen
class GraphBuilder(Building[S, GraphLimits], Generic[S, E_co]):
    """An immutable graph description; :meth:`build` validates it.

    >>> from pipeline import graph
    >>> b = graph.builder(int)   # the state type

    .. versionadded:: 0.1.0
    """

    state_type: type[S]
    _nodes: tuple[tuple[str, Handler[S, S, Any]], ...] = ()
    _edges: tuple[tuple[str, Edge], ...] = ()
    _caches: tuple[tuple[str, CachePolicy[Any]], ...] = ()

    def node(
        self: GraphBuilder[S, E],
        name: str,
        action: Handler[S, S, E2],
        *,
        cache: CachePolicy[S] | None = None,
    ) -> GraphBuilder[S, E | E2]:
        """Add an action node: a handler from state to new state.

        Any handler fits, a graph or a swarm over the same state included
        (a subgraph: inside a checkpointed run it records its own progress
        in the run's thread).  *cache*: run the node once per input (see
        :class:`~pipeline.graph.CachePolicy`).
        """
        if cache is None:
            return attrs.evolve(self, nodes=(*self._nodes, (name, action)))
        return attrs.evolve(
            self,
            nodes=(*self._nodes, (name, action)),
            caches=(*self._caches, (name, cache)),
        )

    @overload
    def agent(
        self: GraphBuilder[S, E],
        name: str,
        agent: Handler[Context, Context, E2],
        *,
        messages: Callable[[S], Sequence[Message]],
        update: Callable[[S, AgentRun], Result[S, E3]],
        fields: Sequence[str] | None = None,
        writable: Writable = (),
    ) -> GraphBuilder[S, E | E2 | E3]: ...

    @overload
    def agent(
        self: GraphBuilder[S, E],
        name: str,
        agent: AgentLike,
        *,
        messages: Callable[[S], Sequence[Message]],
        update: Callable[[S, AgentRun], Result[S, E3]],
        fields: Sequence[str] | None = None,
        writable: Writable = (),
    ) -> GraphBuilder[S, E | AgentError | E3]: ...

    @overload
    def agent(
        self: GraphBuilder[S, E],
        name: str,
        agent: Handler[Context, Context, E2],
        *,
        messages: Callable[[S], Sequence[Message]],
        update: Callable[[S, AgentRun], S],
        fields: Sequence[str] | None = None,
        writable: Writable = (),
    ) -> GraphBuilder[S, E | E2]: ...

    @overload
    def agent(
        self: GraphBuilder[S, E],
        name: str,
        agent: AgentLike,
        *,
        messages: Callable[[S], Sequence[Message]],
        update: Callable[[S, AgentRun], S],
        fields: Sequence[str] | None = None,
        writable: Writable = (),
    ) -> GraphBuilder[S, E | AgentError]: ...

    def agent(
        self: GraphBuilder[S, E],
        name: str,
        agent: AgentLike | Handler[Context, Context, Any],
        *,
        messages: Callable[[S], Sequence[Message]],
        update: Callable[[S, AgentRun], S | Result[S, Any]],
        fields: Sequence[str] | None = None,
        writable: Writable = (),
    ) -> GraphBuilder[S, Any]:
        """Add an agent node (see :func:`~pipeline.graph.agent_node`).

        *update* returns the new state, or a ``Result`` of it: its failure
        (say, the run's answer did not decode) is the node's, and so one of
        the graph's error types.

        *agent* is an agent, or any handler over contexts (a swarm, say).
        *fields* are what its ``read_state`` tool may read, *writable* the
        fields its ``write_state`` tool may change (none by default).
        """
        from ._agent import make_agent_node  # noqa: PLC0415  # loads on use

        node = make_agent_node(
            agent,
            messages=messages,
            update=update,
            state_type=self.state_type,
            fields=fields,
            writable=writable,
            name=name,
        )
        return self.node(name, node)

    def edge(self, source: str, target: str) -> GraphBuilder[S, E_co]:
        """After *source*, go to *target* (a node name or ``END``)."""
        return attrs.evolve(
            self, edges=(*self._edges, (source, Static(target)))
        )

    def route(
        self,
        source: str,
        router: Callable[[S], str],
        to: Sequence[str] | None = None,
    ) -> GraphBuilder[S, E_co]:
        """After *source*, go where *router* says: one of *to*.

        List ``END`` (``"__end__"``) in *to* if the router may end the run.
        A name outside *to* is an :class:`~pipeline.failures.UnknownRoute`
        failure at run time, never a silent end.

        A router annotated with a ``Literal`` of its targets
        (``-> Literal["billing", "tech", "__end__"]``) needs no *to*: the
        ``Literal`` is the list, and the type checker checks the router's
        body against it.  Given both, *to* must list exactly the
        ``Literal``'s names (a :class:`~pipeline.errors.ConstructionError`
        otherwise: one of them has a typo).
        """
        targets = _route_targets(source, router, to)
        return attrs.evolve(
            self, edges=(*self._edges, (source, Route(router, targets)))
        )

    def fan_out(
        self,
        source: str,
        to: Sequence[str],
        *,
        join: str,
        merge: Callable[[S, tuple[S, ...]], S] | None = None,
        reducers: Mapping[str, Reducer] | None = None,
    ) -> GraphBuilder[S, E_co]:
        """After *source*, run *to* concurrently from the same snapshot.

        Their states merge, then the run goes on at *join* (a node or
        ``END``).  Merging is independent of completion order: a field one
        branch changed takes that value; vectors several branches extended
        get every branch's additions in definition order; contexts merge as
        :func:`~pipeline.must` merges them; any other field several branches
        changed needs a *reducers* entry ``(before, changed_values) ->
        value`` or the step fails with
        :class:`~pipeline.failures.MergeConflict`.  *merge* replaces all of
        this with your own ``(before, outputs) -> state``.
        """
        edge = FanOut(tuple(to), join, merge, dict(reducers or {}))
        return attrs.evolve(self, edges=(*self._edges, (source, edge)))

    def gate(
        self, *gates: Gate[S], before: str | Sequence[str] | None = None
    ) -> GraphBuilder[S, E_co]:
        """Ask *gates* before every transition of every run.

        With *before* (a node name or several), ask them only before a
        transition into one of those nodes (every other transition goes
        on); drawings show such a gate in front of its nodes.  Runs' own
        ``gates=`` come after these.  Gates given here also apply when the
        graph runs as a handler (inside another pipeline).

        .. versionchanged:: 0.1.0
           *before*.
        """
        if before is None:
            return self._gated(gates)
        nodes = (before,) if isinstance(before, str) else tuple(before)
        if not nodes or not all(isinstance(n, str) for n in nodes):
            msg = "gate(before=...): give a node name or a list of them"
            raise ConstructionError(msg)
        return self._gated(tuple(Before(g, nodes) for g in gates))

    def build(
        self,
        *,
        version: str = "1",
        name: str = "graph",
        converter: cattrs.Converter | None = None,
    ) -> Graph[S, E_co]:
        """Validate and freeze the graph.

        *version* is folded into the fingerprint: bump it when a node's
        behaviour changes in a way old checkpoints must not resume across.
        *name* is the graph's name as a handler (in reprs, failure paths,
        and as the key of its progress inside another checkpointed run).
        *converter* writes and reads checkpoints of the state, and reads
        answers: start from :func:`~pipeline.fold.make_converter` and
        register hooks for field types it does not know (see the
        checkpoints docs); one that reads leniently is refused.

        Raises:
            TypeError: *converter* reads leniently (a plain
                ``cattrs.Converter()``: see
                :func:`~pipeline.fold.make_converter`).
            GraphDefects: listing every structural defect found, at once.
        """
        if converter is not None:
            strict(converter, "build(converter=...)")
        limits = GraphLimits() if self._limits is None else self._limits
        plan = Plan(self._nodes, self._edges, self._entry, limits)
        found = defects(plan)
        names = {n for n, _ in self._nodes}
        unknown = sorted(
            {
                n
                for g in self._gates
                if isinstance(g, Before)
                for n in g.nodes
                if n not in names
            }
        )
        if unknown:
            msg = f"gate(before=...) names no node: {', '.join(map(repr, unknown))}"
            raise ConstructionError(msg)
        if found:
            raise GraphDefects(found)
        assert self._entry is not None  # noqa: S101  # validated
        machine = GraphMachine.make(
            name,
            self.state_type,
            dict(self._nodes),
            dict(self._edges),
            self._entry,
            version,
            converter,
            dict(self._caches),
        )
        return Graph.make(machine, limits, self._gates, self._observers)


def builder(state_type: type[S]) -> GraphBuilder[S, Never]:
    """Start describing a graph over *state_type* (an attrs class, say).

    .. versionadded:: 0.1.0
    """
    return GraphBuilder(state_type)


def _literal_targets(router: Callable[..., object]) -> tuple[str, ...] | None:
    """The names of the ``Literal`` *router* is annotated to return."""
    try:
        hints = typing.get_type_hints(router)
    except Exception:  # noqa: BLE001  # unresolvable annotations: no Literal
        return None
    names: list[str] = []
    pending = [hints.get("return")]
    while pending:
        hint = pending.pop()
        origin = typing.get_origin(hint)
        if origin is typing.Literal:
            names.extend(
                a for a in typing.get_args(hint) if isinstance(a, str)
            )
        elif origin in (typing.Union, types.UnionType):
            pending.extend(reversed(typing.get_args(hint)))
        else:
            return None
    return tuple(dict.fromkeys(names))


def _route_targets(
    source: str, router: Callable[..., object], to: Sequence[str] | None
) -> tuple[str, ...]:
    literal = _literal_targets(router)
    if to is None:
        if literal is None:
            msg = (
                f"route({source!r}): give to=[...] or annotate the router's "
                "return type as a Literal of its targets"
            )
            raise ConstructionError(msg)
        return literal
    if literal is not None and set(literal) != set(to):
        extra = sorted(set(to) - set(literal))
        missing = sorted(set(literal) - set(to))
        msg = (
            f"route({source!r}): to= and the router's Literal differ "
            f"(only in to=: {extra}, only in the Literal: {missing})"
        )
        raise ConstructionError(msg)
    return tuple(to)
