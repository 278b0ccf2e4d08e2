"""`Graph`: a validated, immutable graph, and a handler like any other.

A ``Graph[S, E]`` *is* a ``Handler[S, S, E | GraphFailure]``: ``await
g(state)`` folds it from *state* to END and returns the final state, so it
composes with ``>>``, ``&``, ``|``, ``.use()``, ``stream()`` and as a node
of another graph.  :meth:`Graph.run` and :meth:`Graph.resume` give the
snapshots and the checkpoints.
"""

from __future__ import annotations

import uuid

from collections.abc import Sequence
from typing import Any, Generic, TypeAlias, TypeVar, final

import attrs

from returns.result import Failure, Result, Success

from .._handler import Call, Handler
from ..errors import (
    CheckpointDecodeError,
    ConcurrentModification,
    FanOutLimitExceeded,
    IncompatibleGraph,
    InvalidState,
    LeaseLost,
    MergeConflict,
    RunPaused,
    RunStopped,
    SnapshotNotFound,
    StepLimitExceeded,
    ThreadBusy,
    UnknownRoute,
)
from ..fold import _engine
from ..fold._checkpoints import Threads
from ..fold._codec import Codec
from ..fold._engine import EventSink, Hooks, Migration
from ..fold._model import Gate, Observer, Snapshot
from ..fold._store import CheckpointStore, check_thread_id
from ._draw import mermaid
from ._machine import GraphMachine
from ._model import Limits


S = TypeVar("S")
E_co = TypeVar("E_co", covariant=True)

GraphFailure: TypeAlias = (
    UnknownRoute
    | StepLimitExceeded
    | FanOutLimitExceeded
    | MergeConflict
    | ConcurrentModification
    | IncompatibleGraph
    | CheckpointDecodeError
    | SnapshotNotFound
    | RunStopped
    | RunPaused
    | InvalidState
    | ThreadBusy
    | LeaseLost
)
"""Failures the graph machinery itself can return."""


def _handler_call(
    machine: GraphMachine[S], limits: Limits, hooks: Hooks[S]
) -> Call[S, S, Any]:
    async def run_graph(state: S) -> Result[S, Any]:
        out = await _engine.run(
            machine,
            machine.start(state, uuid.uuid4().hex),
            limits,
            hooks=hooks,
            max_steps=limits.max_steps,
        )
        return _engine.outcome(out, machine.name)

    return run_graph


@final
@attrs.frozen(eq=False, repr=False)
class Graph(Handler[S, S, E_co | GraphFailure], Threads[S], Generic[S, E_co]):
    """A validated graph over state *S* whose nodes fail with *E*.

    Make one with :func:`~pipeline.graph.builder`.  Immutable; one graph
    serves any number of concurrent runs.  As a handler it runs from the
    state it is given to END (no checkpoints of its own; inside a
    checkpointed run it records its progress there): a gate's stop is a
    :class:`~pipeline.errors.RunStopped` failure and a pause a
    :class:`~pipeline.errors.RunPaused` one.

    .. versionadded:: 0.1.0
    """

    state_type: type[S]
    _machine: GraphMachine[S] = attrs.field(alias="machine")
    limits: Limits
    gates: tuple[Gate[S], ...] = ()
    observers: tuple[Observer[S], ...] = ()

    @classmethod
    def make(
        cls,
        machine: GraphMachine[S],
        limits: Limits,
        gates: Sequence[Gate[S]] = (),
        observers: Sequence[Observer[S]] = (),
    ) -> Graph[S, Any]:
        """A graph over *machine* (see :func:`~pipeline.graph.builder`)."""
        hooks = Hooks(tuple(gates), tuple(observers))
        return cls(
            _handler_call(machine, limits, hooks),
            machine.name,
            machine.state_type,
            machine,
            limits,
            tuple(gates),
            tuple(observers),
        )

    @property
    def nodes(self) -> tuple[str, ...]:
        """Node names, in the order they were added."""
        return tuple(self._machine.nodes)

    @property
    def entry(self) -> str:
        """The node runs start at."""
        return self._machine.entry

    @property
    def fingerprint(self) -> str:
        """Identifies the graph's shape (and version); stored in records."""
        return self._machine.fingerprint

    @property
    def codec(self) -> Codec[S]:
        """Encodes this graph's snapshots to records and back."""
        return self._machine.codec

    def __repr__(self) -> str:
        return (
            f"Graph({self.name!r}, {len(self._machine.nodes)} nodes, "
            f"entry={self.entry!r}, fingerprint={self.fingerprint[:12]})"
        )

    # -- the transition -------------------------------------------------------

    def start(self, state: S, *, thread_id: str | None = None) -> Snapshot[S]:
        """The admission snapshot: *state* before the entry node runs."""
        return self._machine.start(
            state,
            uuid.uuid4().hex
            if thread_id is None
            else check_thread_id(thread_id),
        )

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

    def _hooks(
        self,
        gates: Sequence[Gate[S]],
        observers: Sequence[Observer[S]],
        on_event: EventSink | None,
    ) -> Hooks[S]:
        return Hooks(
            (*self.gates, *gates), (*self.observers, *observers), on_event
        )

    async def run(
        self,
        state: S,
        *,
        store: CheckpointStore | None = None,
        thread_id: str | None = None,
        gates: Sequence[Gate[S]] = (),
        observers: Sequence[Observer[S]] = (),
        on_event: EventSink | None = None,
        limits: Limits | None = None,
    ) -> Result[Snapshot[S], E_co | GraphFailure]:
        """Run from *state* to END (or a limit, a stop, an interrupt).

        With a *store*, an admission record (version 0) is committed first,
        then one record per transition, before the next node starts.  The
        result is the last snapshot; its status says how the run ended.
        *gates* and *observers* run after the graph's own.
        """
        limits = limits or self.limits
        return await _engine.run(
            self._machine,
            self.start(state, thread_id=thread_id),
            limits,
            store=store,
            hooks=self._hooks(gates, observers, on_event),
            max_steps=limits.max_steps,
        )

    async def resume(
        self,
        store: CheckpointStore,
        thread_id: str,
        *,
        version: int | None = None,
        answer: object = None,
        migrate: Migration | None = None,
        gates: Sequence[Gate[S]] = (),
        observers: Sequence[Observer[S]] = (),
        on_event: EventSink | None = None,
        limits: Limits | None = None,
    ) -> Result[Snapshot[S], E_co | GraphFailure]:
        """Continue a thread from its latest (or a chosen) checkpoint.

        Resuming from an older *version* grows a new branch inside the
        thread; older records never change.  A checkpoint written by a
        graph with another fingerprint is refused with
        :class:`~pipeline.errors.IncompatibleGraph` unless *migrate* maps
        it to this graph.  *answer* goes to the gate of an interrupted
        transition (or to the nested run that paused inside it).
        """
        limits = limits or self.limits
        return await _engine.resume_thread(
            self._machine,
            limits,
            store=store,
            thread_id=thread_id,
            version=version,
            answer=answer,
            migrate=migrate,
            hooks=self._hooks(gates, observers, on_event),
            max_steps=limits.max_steps,
        )

    # -- drawing ----------------------------------------------------------------

    def mermaid(self) -> str:
        """A Mermaid flowchart of the graph."""
        return mermaid(self.entry, self._machine.nodes, self._machine.edges)
