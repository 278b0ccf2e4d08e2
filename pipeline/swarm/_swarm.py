"""`Swarm`: agents handing a conversation to each other, as a handler.

A ``Swarm[T]`` *is* a ``Handler[Context, Context, SwarmFailure]``: it runs
on a context (the entry agent answers first) and returns the context with
the whole conversation, so it composes with ``>>``, ``&``, ``|``,
``.use()``, ``stream()``, as a graph node and as a tool.
:meth:`Swarm.run` and :meth:`Swarm.resume` give snapshots and checkpoints.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeAlias, TypeVar, final, overload

import attrs

from returns.result import Result

from .._context import Context
from .._handler import Handler
from .._render import svg
from ..agents import AgentError
from ..errors import RendererUnavailable
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
from ._draw import dot, mermaid
from ._machine import SwarmMachine
from ._model import SwarmLimits, SwarmState


T = TypeVar("T")
Outer = TypeVar("Outer")
E = TypeVar("E")

SwarmFailure: TypeAlias = AgentError | FoldFailure
"""What a swarm run may fail with: its agents' failures and the fold's."""


def _conversation(state: SwarmState[Any]) -> Context:
    return state.conversation


@final
@attrs.frozen(eq=False, repr=False)
class Swarm(
    Handler[Context, Context, SwarmFailure],
    Runnable[SwarmState[T], SwarmLimits, SwarmFailure, SwarmMachine[T]],
    Generic[T],
):
    """A validated swarm whose agents share a typed state *T*.

    Make one with :func:`~pipeline.swarm.builder`.  Immutable; one swarm
    serves any number of concurrent runs.  As a handler each run starts
    from the builder's initial state; a gate's stop is a
    :class:`~pipeline.failures.RunStopped` failure and a pause a
    :class:`~pipeline.failures.RunPaused` one (inside a checkpointed run the
    pause is recorded and the enclosing run pauses).

    .. versionadded:: 0.1.0
    """

    initial: T
    _machine: SwarmMachine[T] = attrs.field(alias="machine")
    limits: SwarmLimits
    gates: tuple[Gate[SwarmState[T]], ...] = ()
    observers: tuple[Observer[SwarmState[T]], ...] = ()

    @classmethod
    def make(
        cls,
        machine: SwarmMachine[T],
        initial: T,
        limits: SwarmLimits,
        gates: Sequence[Gate[SwarmState[T]]] = (),
        observers: Sequence[Observer[SwarmState[T]]] = (),
    ) -> Swarm[T]:
        """A swarm over *machine* (see :func:`~pipeline.swarm.builder`)."""

        def start(ctx: Context) -> Snapshot[SwarmState[T]]:
            return machine.start(ctx, initial, None)

        return cls.assemble(
            initial, machine, limits, gates, observers, start, _conversation
        )

    @property
    def agents(self) -> tuple[str, ...]:
        """Agent names, in the order they were added."""
        return tuple(self._machine.members)

    def start(
        self,
        ctx: Context,
        *,
        state: T | None = None,
        thread_id: str | None = None,
    ) -> Snapshot[SwarmState[T]]:
        """The admission snapshot: the entry agent is about to answer *ctx*."""
        return self._machine.start(
            ctx,
            self.initial if state is None else state,
            thread_id,
        )

    @staticmethod
    def max_steps(limits: SwarmLimits, /) -> int:
        """Steps a run under *limits* may take: every handoff it allows, and
        the turn of the agent that answers last."""
        return limits.max_handoffs + 1

    async def run(
        self,
        ctx: Context,
        *,
        state: T | None = None,
        store: CheckpointStore | None = None,
        thread_id: str | None = None,
        gates: Sequence[Gate[SwarmState[T]]] = (),
        observers: Sequence[Observer[SwarmState[T]]] = (),
        on_event: EventSink | None = None,
        limits: SwarmLimits | None = None,
    ) -> Result[Snapshot[SwarmState[T]], SwarmFailure]:
        """Run on *ctx* until an agent answers without handing off.

        *state* replaces the builder's initial state for this run.  With a
        *store*, every boundary is committed before the next starts: the
        admission, every agent turn (as progress), every handoff.  *gates*
        see each handoff before it happens (continue, stop, interrupt);
        *observers* see the snapshot after each step (each agent's turn at
        the conversation), once committed; *limits* replace the swarm's
        for this run.  :meth:`~pipeline.fold.Runnable.resume` continues a thread.
        """
        return await self.fold(
            self.start(ctx, state=state, thread_id=thread_id),
            store=store,
            gates=gates,
            observers=observers,
            on_event=on_event,
            limits=limits,
        )

    @overload
    def as_node(  # type: ignore[overload-overlap]  # a Result state: unsupported
        self,
        *,
        context: Callable[[Outer], Context],
        update: Callable[[Outer, SwarmState[T]], Result[Outer, E]],
        state: Callable[[Outer], T] | None = None,
        name: str | None = None,
    ) -> Handler[Outer, Outer, SwarmFailure | E]: ...

    @overload
    def as_node(
        self,
        *,
        context: Callable[[Outer], Context],
        update: Callable[[Outer, SwarmState[T]], Outer],
        state: Callable[[Outer], T] | None = None,
        name: str | None = None,
    ) -> Handler[Outer, Outer, SwarmFailure]: ...

    def as_node(
        self,
        *,
        context: Callable[[Outer], Context],
        update: Callable[[Outer, SwarmState[T]], Outer | Result[Outer, Any]],
        state: Callable[[Outer], T] | None = None,
        name: str | None = None,
    ) -> Handler[Outer, Outer, Any]:
        """This swarm as a node of a graph over another state (or any
        handler from that state to itself) that hands *update* the swarm's
        typed final :class:`~pipeline.swarm.SwarmState`, not only its
        conversation.

        *context* picks the conversation the entry agent answers from the
        outer state; *state*, if given, the swarm's typed state to start
        from (the builder's initial state otherwise).  *update* folds the
        final state back into the outer one, returning the new outer state
        or a ``Result`` of it: a ``Failure`` (say, the shared state did not
        hold what the graph needs) is the node's failure, typed into the
        graph's error.  Inside a checkpointed run every agent turn is
        recorded in the run's thread: a step resumed after a crash goes on
        from the last committed turn.

        .. versionadded:: 0.1.0
        """

        async def settle(outer: Outer) -> Result[SwarmState[T], Any]:
            own = None if state is None else state(outer)
            return await self.settle(self.start(context(outer), state=own))

        return state_node(name or self.name, settle, update)

    def __repr__(self) -> str:
        return self._repr(f"agents={list(self.agents)}")

    def mermaid(self) -> str:
        """A Mermaid flowchart of the agents and their allowed handoffs."""
        return mermaid(self.entry, self._machine.members)

    def dot(self, *, highlight: str | None = None) -> str:
        """The drawing as Graphviz DOT text (see :meth:`draw`).

        .. versionadded:: 0.1.0
        """
        return dot(
            self.entry,
            self._machine.members,
            self.gates,
            highlight=highlight,
            title=self.name,
        )

    def draw(self, *, highlight: str | None = None) -> str:
        """The swarm as an SVG document, rendered by Graphviz's ``dot``:
        its agents, each allowed handoff as a labelled edge, the handoff
        gates on those edges.  *highlight* marks one agent (a name that is
        not an agent is a :class:`ValueError`).  Without Graphviz
        installed: :class:`~pipeline.errors.RendererUnavailable`.

        .. versionadded:: 0.1.0
        """
        return svg(self.dot(highlight=highlight))

    def _repr_svg_(self) -> str | None:
        """Jupyter's picture of the swarm (none without Graphviz)."""
        try:
            return self.draw()
        except RendererUnavailable:
            return None
