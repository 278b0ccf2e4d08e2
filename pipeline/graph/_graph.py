"""`Graph`: a validated, immutable graph, and a handler like any other.

A ``Graph[S, E]`` *is* a ``Handler[S, S, E | GraphFailure]``: ``await
g(state)`` folds it from *state* to END and returns the final state, so it
composes with ``>>``, ``&``, ``|``, ``.use()``, ``stream()`` and as a node
of another graph.  :meth:`Graph.run` and :meth:`Graph.resume` give the
snapshots and the checkpoints.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeAlias, TypeVar, final, overload

import attrs

from returns.result import Failure, Result, Success

from .._context import Context
from .._handler import Handler
from .._render import svg
from ..agents import prompt_tool
from ..errors import RendererUnavailable
from ..failures import FanOutLimitExceeded, MergeConflict, UnknownRoute
from ..fold import (
    EventSink,
    FoldFailure,
    Gate,
    Observer,
    Runnable,
    Snapshot,
    state_node,
)
from ..stores import CheckpointStore
from ..tools import Tool
from ._draw import dot, mermaid
from ._machine import GraphMachine
from ._model import GraphLimits
from ._tool import state_tool


S = TypeVar("S")
E_co = TypeVar("E_co", covariant=True)
Outer = TypeVar("Outer")
E = TypeVar("E")

GraphFailure: TypeAlias = (
    UnknownRoute | FanOutLimitExceeded | MergeConflict | FoldFailure
)
"""Failures the graph machinery itself can return."""


@final
@attrs.frozen(eq=False, repr=False)
class Graph(
    Handler[S, S, E_co | GraphFailure],
    Runnable[S, GraphLimits, E_co | GraphFailure, GraphMachine[S]],
    Generic[S, E_co],
):
    """A validated graph over state *S* whose nodes fail with *E*.

    Make one with :func:`~pipeline.graph.builder`.  Immutable; one graph
    serves any number of concurrent runs.  As a handler it runs from the
    state it is given to END (no checkpoints of its own; inside a
    checkpointed run it records its progress there): a gate's stop is a
    :class:`~pipeline.failures.RunStopped` failure and a pause a
    :class:`~pipeline.failures.RunPaused` one.

    .. versionadded:: 0.1.0
    """

    state_type: type[S]
    _machine: GraphMachine[S] = attrs.field(alias="machine")
    limits: GraphLimits
    gates: tuple[Gate[S], ...] = ()
    observers: tuple[Observer[S], ...] = ()

    @classmethod
    def make(
        cls,
        machine: GraphMachine[S],
        limits: GraphLimits,
        gates: Sequence[Gate[S]] = (),
        observers: Sequence[Observer[S]] = (),
    ) -> Graph[S, Any]:
        """A graph over *machine* (see :func:`~pipeline.graph.builder`)."""

        def start(state: S) -> Snapshot[S]:
            return machine.admission(state, None)

        return cls.assemble(
            machine.state_type, machine, limits, gates, observers, start, None
        )

    @property
    def nodes(self) -> tuple[str, ...]:
        """Node names, in the order they were added."""
        return tuple(self._machine.nodes)

    # -- the transition -------------------------------------------------------

    def start(self, state: S, *, thread_id: str | None = None) -> Snapshot[S]:
        """The admission snapshot: *state* before the entry node runs."""
        return self._machine.start(state, thread_id)

    async def step(
        self, snap: Snapshot[S]
    ) -> Result[Snapshot[S], E_co | GraphFailure]:
        """Run what *snap* says comes next; return the following snapshot.

        Pure: *snap* is not changed and nothing is written.  The result's
        version is ``snap.version + 1``.
        """
        out = await self._machine.step(snap, self.limits)
        return out if type(out) is Failure else Success(out)

    # -- running ----------------------------------------------------------------

    @staticmethod
    def max_steps(limits: GraphLimits, /) -> int:
        """Steps a run under *limits* may take: ``limits.max_steps``."""
        return limits.max_steps

    async def run(
        self,
        state: S,
        *,
        store: CheckpointStore | None = None,
        thread_id: str | None = None,
        gates: Sequence[Gate[S]] = (),
        observers: Sequence[Observer[S]] = (),
        on_event: EventSink | None = None,
        limits: GraphLimits | None = None,
    ) -> Result[Snapshot[S], E_co | GraphFailure]:
        """Run from *state* to END (or a limit, a stop, an interrupt).

        With a *store*, an admission record (version 0) is committed first,
        then one record per transition, before the next node starts.  The
        result is the last snapshot; its status says how the run ended.
        *gates* and *observers* run after the graph's own; *limits*
        replace the graph's for this run.  :meth:`~pipeline.fold.Runnable.resume` continues a
        thread.
        """
        return await self.fold(
            self.start(state, thread_id=thread_id),
            store=store,
            gates=gates,
            observers=observers,
            on_event=on_event,
            limits=limits,
        )

    def as_tool(
        self, *, name: str | None = None, description: str | None = None
    ) -> Tool:
        """This graph as a tool a model calls (see
        :func:`pipeline.agents.as_tool`): over contexts, it takes a prompt
        and answers with the final text; over another state, it takes the
        state's fields as arguments and answers with the final state as
        JSON."""
        if self.state_type is Context:
            return prompt_tool(self, name=name, description=description)  # type: ignore[arg-type]  # S is Context here
        return state_tool(
            self, self.state_type, name=name, description=description
        )

    @overload
    def as_node(
        self,
        *,
        state: Callable[[Outer], S],
        update: Callable[[Outer, S], Result[Outer, E]],
        name: str | None = None,
    ) -> Handler[Outer, Outer, E_co | GraphFailure | E]: ...

    @overload
    def as_node(
        self,
        *,
        state: Callable[[Outer], S],
        update: Callable[[Outer, S], Outer],
        name: str | None = None,
    ) -> Handler[Outer, Outer, E_co | GraphFailure]: ...

    def as_node(
        self,
        *,
        state: Callable[[Outer], S],
        update: Callable[[Outer, S], Outer | Result[Outer, Any]],
        name: str | None = None,
    ) -> Handler[Outer, Outer, Any]:
        """This graph as a node of a graph over another state (a subgraph),
        or any handler from that state to itself.

        *state* picks this graph's starting state from the outer one;
        *update* folds its typed final state back in, returning the new
        outer state or a ``Result`` of it: a ``Failure`` (say, the final
        state holds no decision) is the node's failure, typed into the
        outer graph's error.  Inside a checkpointed run the subgraph records
        its progress in the run's thread: a step resumed after a crash goes
        on from its last committed node.  (A subgraph over the same state
        needs none of this: add the graph itself with ``.node``.)

        .. versionadded:: 0.1.0
        """

        async def settle(outer: Outer) -> Result[S, Any]:
            return await self.settle(self.start(state(outer)))

        return state_node(name or self.name, settle, update)

    # -- showing ----------------------------------------------------------------

    def __repr__(self) -> str:
        return self._repr(f"{len(self._machine.nodes)} nodes")

    def mermaid(self) -> str:
        """A Mermaid flowchart of the graph."""
        m = self._machine
        return mermaid(self.entry, m.nodes, m.edges, self.gates)

    def dot(self, *, highlight: str | None = None) -> str:
        """The drawing as Graphviz DOT text (see :meth:`draw`).

        .. versionadded:: 0.1.0
        """
        m = self._machine
        return dot(
            self.entry,
            m.nodes,
            m.edges,
            self.gates,
            highlight=highlight,
            title=self.name,
        )

    def draw(self, *, highlight: str | None = None) -> str:
        """The graph as an SVG document, rendered by Graphviz's ``dot``.

        Switch nodes open into their labelled cases, routes show a labelled
        edge per target, fan-outs their branches and join, and a gate given
        ``before=`` stands in front of its nodes.  *highlight* marks one
        node (where a thread stands, say); a name that is not a node is a
        :class:`ValueError`.  Without Graphviz installed:
        :class:`~pipeline.errors.RendererUnavailable`.

        .. versionadded:: 0.1.0
        """
        return svg(self.dot(highlight=highlight))

    def _repr_svg_(self) -> str | None:
        """Jupyter's picture of the graph (none without Graphviz)."""
        try:
            return self.draw()
        except RendererUnavailable:
            return None
