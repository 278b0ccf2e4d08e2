"""`Swarm`: agents handing a conversation to each other, as a handler.

A ``Swarm[T]`` *is* a ``Handler[Context, Context, SwarmFailure]``: it runs
on a context (the entry agent answers first) and returns the context with
the whole conversation, so it composes with ``>>``, ``&``, ``|``,
``.use()``, ``stream()``, as a graph node and as a tool.
:meth:`Swarm.run` and :meth:`Swarm.resume` give snapshots and checkpoints.
"""

from __future__ import annotations

import uuid

from collections.abc import Sequence
from typing import Generic, TypeAlias, TypeVar, final

import attrs

from returns.result import Failure, Result, Success

from .._context import Context
from .._handler import Call, Handler
from ..agents import AgentError
from ..errors import (
    CheckpointDecodeError,
    ConcurrentModification,
    IncompatibleGraph,
    InvalidState,
    LeaseLost,
    RunPaused,
    RunStopped,
    SnapshotNotFound,
    StepLimitExceeded,
    ThreadBusy,
)
from ..fold import _engine
from ..fold._checkpoints import Threads
from ..fold._codec import Codec
from ..fold._engine import EventSink, Hooks, Migration
from ..fold._model import Gate, Observer, Snapshot
from ..fold._store import CheckpointStore, check_thread_id
from ._draw import mermaid
from ._machine import SwarmMachine
from ._model import Limits, SwarmState


T = TypeVar("T")

SwarmFailure: TypeAlias = (
    AgentError
    | RunStopped
    | RunPaused
    | StepLimitExceeded
    | ConcurrentModification
    | IncompatibleGraph
    | CheckpointDecodeError
    | SnapshotNotFound
    | InvalidState
    | ThreadBusy
    | LeaseLost
)
"""What a swarm run may fail with: its agents' failures and the fold's."""


def _handler_call(
    machine: SwarmMachine[T],
    limits: Limits,
    hooks: Hooks[SwarmState[T]],
    initial: T,
) -> Call[Context, Context, SwarmFailure]:
    async def run_swarm(ctx: Context) -> Result[Context, SwarmFailure]:
        out = await _engine.run(
            machine,
            machine.start(ctx, initial, uuid.uuid4().hex),
            limits,
            hooks=hooks,
            max_steps=limits.max_handoffs + 1,
        )
        final = _engine.outcome(out, machine.name)
        if type(final) is not Success:
            return Failure(final.failure())
        return Success(final.unwrap().conversation)

    return run_swarm


@final
@attrs.frozen(eq=False, repr=False)
class Swarm(
    Handler[Context, Context, SwarmFailure],
    Threads[SwarmState[T]],
    Generic[T],
):
    """A validated swarm whose agents share a typed state *T*.

    Make one with :func:`~pipeline.swarm.builder`.  Immutable; one swarm
    serves any number of concurrent runs.  As a handler each run starts
    from the builder's initial state; a gate's stop is a
    :class:`~pipeline.errors.RunStopped` failure and a pause a
    :class:`~pipeline.errors.RunPaused` one (inside a checkpointed run the
    pause is recorded and the enclosing run pauses).

    .. versionadded:: 0.1.0
    """

    initial: T
    _machine: SwarmMachine[T] = attrs.field(alias="machine")
    limits: Limits
    gates: tuple[Gate[SwarmState[T]], ...] = ()
    observers: tuple[Observer[SwarmState[T]], ...] = ()

    @classmethod
    def make(
        cls,
        machine: SwarmMachine[T],
        initial: T,
        limits: Limits,
        gates: Sequence[Gate[SwarmState[T]]] = (),
        observers: Sequence[Observer[SwarmState[T]]] = (),
    ) -> Swarm[T]:
        """A swarm over *machine* (see :func:`~pipeline.swarm.builder`)."""
        hooks = Hooks(tuple(gates), tuple(observers))
        return cls(
            _handler_call(machine, limits, hooks, initial),
            machine.name,
            initial,
            machine,
            limits,
            tuple(gates),
            tuple(observers),
        )

    @property
    def agents(self) -> tuple[str, ...]:
        """Agent names, in the order they were added."""
        return tuple(self._machine.members)

    @property
    def entry(self) -> str:
        """The agent that answers first."""
        return self._machine.entry

    @property
    def fingerprint(self) -> str:
        """Identifies the swarm's shape (and version); stored in records."""
        return self._machine.fingerprint

    @property
    def codec(self) -> Codec[SwarmState[T]]:
        """Encodes this swarm's snapshots to records and back."""
        return self._machine.codec

    def __repr__(self) -> str:
        return (
            f"Swarm({self.name!r}, agents={list(self.agents)}, "
            f"entry={self.entry!r})"
        )

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
            uuid.uuid4().hex
            if thread_id is None
            else check_thread_id(thread_id),
        )

    def _hooks(
        self,
        gates: Sequence[Gate[SwarmState[T]]],
        observers: Sequence[Observer[SwarmState[T]]],
        on_event: EventSink | None,
    ) -> Hooks[SwarmState[T]]:
        return Hooks(
            (*self.gates, *gates), (*self.observers, *observers), on_event
        )

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
    ) -> Result[Snapshot[SwarmState[T]], SwarmFailure]:
        """Run on *ctx* until an agent answers without handing off.

        *state* replaces the builder's initial state for this run.  With a
        *store*, every boundary is committed before the next starts: the
        admission, every agent turn (as progress), every handoff.  *gates*
        see each handoff before it happens (continue, stop, interrupt);
        *observers* see the snapshot after each step (each agent's turn at
        the conversation), once committed.
        """
        return await _engine.run(
            self._machine,
            self.start(ctx, state=state, thread_id=thread_id),
            self.limits,
            store=store,
            hooks=self._hooks(gates, observers, on_event),
            max_steps=self.limits.max_handoffs + 1,
        )

    async def resume(
        self,
        store: CheckpointStore,
        thread_id: str,
        *,
        version: int | None = None,
        answer: object = None,
        migrate: Migration | None = None,
        gates: Sequence[Gate[SwarmState[T]]] = (),
        observers: Sequence[Observer[SwarmState[T]]] = (),
        on_event: EventSink | None = None,
    ) -> Result[Snapshot[SwarmState[T]], SwarmFailure]:
        """Continue a thread from its latest (or a chosen) checkpoint.

        Exactly as :meth:`pipeline.graph.Graph.resume`: an older *version*
        grows a new branch, another fingerprint needs *migrate*, *answer*
        goes to the gate of an interrupted handoff.
        """
        return await _engine.resume_thread(
            self._machine,
            self.limits,
            store=store,
            thread_id=thread_id,
            version=version,
            answer=answer,
            migrate=migrate,
            hooks=self._hooks(gates, observers, on_event),
            max_steps=self.limits.max_handoffs + 1,
        )

    def mermaid(self) -> str:
        """A Mermaid flowchart of the agents and their allowed handoffs."""
        return mermaid(self.entry, self._machine.members)
