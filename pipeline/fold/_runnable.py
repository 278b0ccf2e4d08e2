"""The folds users run: one base for graphs and swarms.

A :class:`Runnable` is a machine made into a value a user holds: it runs
(:meth:`Runnable.fold`, behind each kind's own ``run``), resumes, reads
its threads back (:class:`~pipeline.fold._checkpoints.Threads`: ``load``,
``history``, ``fork``), carries its own gates, observers and limits, and is
a handler too (:func:`handler_call`).  A new kind of fold adds only its
builder, its machine (the step), its ``start`` and its drawing.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import (
    TYPE_CHECKING,
    Any,
    Generic,
    Protocol,
    Self,
    TypeAlias,
    TypeVar,
)

import attrs

from returns.result import Failure, Result, Success

from .._context import random_id
from .._handler import Call, Handler
from ..failures import (
    CheckpointDecodeError,
    ConcurrentModification,
    IncompatibleGraph,
    InvalidState,
    LeaseLost,
    RunPaused,
    RunStopped,
    SnapshotNotFound,
    StaleAnswer,
    StepLimitExceeded,
    ThreadBusy,
)
from ..runs import scope, traced_by_default
from ..stores import CheckpointStore, check_thread_id
from . import _engine
from ._checkpoints import Threads
from ._codec import Codec
from ._engine import (
    NO_HOOKS,
    EventSink,
    Hooks,
    Machine,
    Migration,
    checked_author,
)
from ._model import NULL_ANSWER, Gate, Observer, Snapshot


FoldFailure: TypeAlias = (
    StepLimitExceeded
    | RunStopped
    | RunPaused
    | ConcurrentModification
    | IncompatibleGraph
    | CheckpointDecodeError
    | SnapshotNotFound
    | InvalidState
    | ThreadBusy
    | LeaseLost
    | StaleAnswer
)
"""What a fold users run may fail with whatever its steps do: a limit, a
gate's stop or question (as a handler), the checkpoints and the lease, an
answer for a question not pending."""

S = TypeVar("S")
L = TypeVar("L")
L_contra = TypeVar("L_contra", contravariant=True)
F_co = TypeVar("F_co", covariant=True)
M = TypeVar("M", bound="Shaped[Any, Any]")
In = TypeVar("In")
Out = TypeVar("Out")
Outer = TypeVar("Outer")


class Shaped(Machine[S, L_contra], Protocol[S, L_contra]):
    """A machine a user runs: it also says where runs start."""

    @property
    def entry(self) -> str:
        """The node (or agent) a run starts at."""
        ...


@attrs.frozen(eq=False)
class MachineBase(Generic[S]):
    """What the machine of every fold users run is known by: its name, the
    node (or agent) runs start at, the codec of its snapshots and the
    fingerprint of its shape.  Subclasses add their step and what it needs.

    .. versionadded:: 0.1.0
    """

    name: str
    entry: str
    codec: Codec[S]
    fingerprint: str

    def admission(self, state: S, thread_id: str | None) -> Snapshot[S]:
        """The snapshot a run starts from: *state* before the entry runs,
        on thread *thread_id* (checked) or a new one."""
        return Snapshot.first(
            random_id()  # new_thread, inlined: once a run
            if thread_id is None
            else check_thread_id(thread_id),
            state,
            (self.entry,),
            self.fingerprint,
        )


def new_thread(thread_id: str | None) -> str:
    """*thread_id*, checked, or a fresh one.

    .. versionadded:: 0.1.0
    """
    return random_id() if thread_id is None else check_thread_id(thread_id)


def handler_call(
    machine: Machine[S, L],
    limits: L,
    hooks: Hooks[S],
    max_steps: int,
    start: Callable[[In], Snapshot[S]],
    finish: Callable[[S], Out] | None,
) -> Call[In, Out, Any]:
    """A fold as a handler's call: from ``start(value)`` to the end, no
    checkpoints of its own; the final state through *finish* (``None``:
    the final state itself).

    .. versionadded:: 0.1.0
    """

    async def run_fold(value: In) -> Result[Out, Any]:
        out = await _engine.run_machine(
            machine, start(value), limits, hooks=hooks, max_steps=max_steps
        )
        final = _engine.outcome(out, machine.name)
        if finish is None or type(final) is not Success:
            return final  # type: ignore[return-value]  # Out is S, or a Failure
        return Success(finish(final.unwrap()))

    return run_fold


def state_node(
    name: str,
    settle: Callable[[Outer], Awaitable[Result[Out, Any]]],
    update: Callable[[Outer, Out], Outer | Result[Outer, Any]],
) -> Handler[Outer, Outer, Any]:
    """A node over an outer state: ``settle(state)`` runs a nested fold to
    its final state, *update* folds that back into the outer state (a
    ``Result`` of it: its failure is the node's).

    .. versionadded:: 0.1.0
    """

    async def run_state_node(state: Outer) -> Result[Outer, Any]:
        out = await settle(state)
        if type(out) is not Success:
            return Failure(out.failure())
        new = update(state, out.unwrap())
        if isinstance(new, Result):
            return new  # pyright: ignore[reportUnknownVariableType]
        return Success(new)

    return Handler(run_state_node, name)


class Runnable(Threads[S], Generic[S, L, F_co, M]):
    """Running, resuming and reading back a fold over state *S* with limits
    *L* that fails with *F*, on a machine *M*.  Subclasses are attrs classes
    with the fields below, and say how many steps their limits allow
    (``max_steps``).

    .. versionadded:: 0.1.0
    """

    __slots__ = ()

    if TYPE_CHECKING:  # the subclass's attrs fields, and its step count
        name: str  # the handler's
        _machine: M
        limits: L
        gates: tuple[Gate[S], ...]
        observers: tuple[Observer[S], ...]

        @staticmethod
        def max_steps(limits: L, /) -> int:
            """How many steps a run under *limits* may take."""
            ...

        def __init__(  # the attrs fields every subclass has, in order
            self,
            call: Call[Any, Any, Any],
            name: str,
            own: Any,
            machine: M,
            limits: L,
            gates: tuple[Gate[S], ...],
            observers: tuple[Observer[S], ...],
        ) -> None: ...

    @classmethod
    def assemble(
        cls,
        own: object,
        machine: M,
        limits: L,
        gates: Sequence[Gate[S]],
        observers: Sequence[Observer[S]],
        start: Callable[[Any], Snapshot[S]],
        finish: Callable[[S], Any] | None,
    ) -> Self:
        """An instance over *machine*: *own* is the subclass's first field
        (a graph's state type, a swarm's initial state); as a handler it
        folds from ``start(value)`` and returns ``finish(final_state)``
        (``None``: the final state)."""
        gated, observed = tuple(gates), tuple(observers)
        call = handler_call(
            machine,
            limits,
            Hooks(gated, observed),
            cls.max_steps(limits),
            start,
            finish,
        )
        return cls(call, machine.name, own, machine, limits, gated, observed)

    @property
    def entry(self) -> str:
        """Where runs start."""
        return self._machine.entry

    @property
    def fingerprint(self) -> str:
        """Identifies the shape (and version); stored in every record."""
        return self._machine.fingerprint

    @property
    def codec(self) -> Codec[S]:
        """Encodes this fold's snapshots to records and back."""
        return self._machine.codec

    async def settle(self, snap: Snapshot[S]) -> Result[S, F_co]:
        """Fold from *snap* to the end as the handler does, giving the final
        state: no checkpoints of its own (inside a checkpointed run it
        records its progress there, and a resumed step continues it), a
        stop is :class:`~pipeline.failures.RunStopped`, a pause
        :class:`~pipeline.failures.RunPaused`.

        .. versionadded:: 0.1.0
        """
        out = await _engine.run_machine(
            self._machine,
            snap,
            self.limits,
            hooks=Hooks(self.gates, self.observers),
            max_steps=self.max_steps(self.limits),
        )
        return _engine.outcome(out, self._machine.name)

    def _repr(self, parts: str) -> str:
        """``Kind('name', parts, entry=..., fingerprint=...)``."""
        return (
            f"{type(self).__name__}({self.name!r}, {parts}, "
            f"entry={self.entry!r}, fingerprint={self.fingerprint[:12]})"
        )

    def _hooks(
        self,
        gates: Sequence[Gate[S]],
        observers: Sequence[Observer[S]],
        on_event: EventSink | None,
    ) -> Hooks[S]:
        if not (
            gates or observers or on_event or self.gates or self.observers
        ):
            return NO_HOOKS  # the same value, not built again (most runs)
        return Hooks(
            (*self.gates, *gates), (*self.observers, *observers), on_event
        )

    def _checked(self, store: object, limits: L | None) -> L:
        """*limits* (or the fold's own); a TypeError naming the argument
        when *store* or *limits* is of the wrong kind (a path for a store,
        a graph's limits for a swarm), before anything runs."""
        kind = type(self).__name__
        if store is not None and not callable(getattr(store, "commit", None)):
            msg = (
                f"{kind}: store= takes a checkpoint store (pipeline.stores), "
                f"not a {type(store).__name__}; open one first, e.g. "
                "pipeline.stores.SQLiteStore(path)"
            )
            raise TypeError(msg)
        if limits is None:
            return self.limits
        if type(limits) is not type(self.limits):
            msg = (
                f"{kind}: limits= takes {type(self.limits).__name__}, "
                f"not {type(limits).__name__}"
            )
            raise TypeError(msg)
        return limits

    async def fold(
        self,
        snap: Snapshot[S],
        *,
        store: CheckpointStore | None = None,
        gates: Sequence[Gate[S]] = (),
        observers: Sequence[Observer[S]] = (),
        on_event: EventSink | None = None,
        limits: L | None = None,
    ) -> Result[Snapshot[S], F_co]:
        """Fold from the admission snapshot *snap* (see ``start``) to the
        end, a limit, a stop or a question.

        With a *store*, the admission record (version 0) is committed
        first, then one record per step, before the next step starts.
        *gates* and *observers* run after the fold's own; *limits*
        replace its own for this run.
        """
        limits = self._checked(store, limits)
        if traced_by_default():  # a global provider, no scope: trace it
            with scope(name=self.name):
                return await self.fold(
                    snap,
                    store=store,
                    gates=gates,
                    observers=observers,
                    on_event=on_event,
                    limits=limits,
                )
        return await _engine.run_machine(
            self._machine,
            snap,
            limits,
            store=store,
            hooks=self._hooks(gates, observers, on_event),
            max_steps=self.max_steps(limits),
        )

    async def resume(
        self,
        store: CheckpointStore,
        thread_id: str,
        *,
        version: int | None = None,
        answer: object = None,
        author: str = "",
        question: str | None = None,
        migrate: Migration | None = None,
        gates: Sequence[Gate[S]] = (),
        observers: Sequence[Observer[S]] = (),
        on_event: EventSink | None = None,
        limits: L | None = None,
    ) -> Result[Snapshot[S], F_co]:
        """Continue a thread from its latest (or a chosen) checkpoint.

        Resuming from an older *version* grows a new branch inside the
        thread; older records never change.  A checkpoint written with
        another fingerprint is refused with
        :class:`~pipeline.failures.IncompatibleGraph` unless *migrate* maps
        it to this one.

        *answer* goes to the gate of an interrupted transition (or to the
        nested run that paused inside it): the question the snapshot
        resumed from waits at, and only that one; the record that stores it
        names *author* (who answered:
        :attr:`Snapshot.author <pipeline.fold.Snapshot.author>`).  *question*, that
        question's id (:attr:`~pipeline.fold.Snapshot.question_id`), makes
        sure of it: an answer for another question, or for a thread that
        waits at none, is :class:`~pipeline.failures.StaleAnswer` and
        nothing runs.  A stopped thread stays stopped: its stop is returned
        and nothing runs (fork it, or resume an earlier version, to go on).

        ``answer=None`` alone resumes without an answer (after a crash, or
        to ask again); with *question* it answers ``None`` (an ``int |
        None`` question's "none").
        """
        if question is not None and answer is None:
            answer = NULL_ANSWER  # None for that question, on purpose
        limits = self._checked(store, limits)
        author = checked_author(author)
        if traced_by_default():  # a global provider, no scope: trace it
            with scope(name=self.name):
                return await self.resume(
                    store,
                    thread_id,
                    version=version,
                    answer=answer,
                    author=author,
                    question=question,
                    migrate=migrate,
                    gates=gates,
                    observers=observers,
                    on_event=on_event,
                    limits=limits,
                )
        return await _engine.resume_thread(
            self._machine,
            limits,
            store=store,
            thread_id=thread_id,
            version=version,
            answer=answer,
            author=author,
            question=question,
            migrate=migrate,
            hooks=self._hooks(gates, observers, on_event),
            max_steps=self.max_steps(limits),
        )


@attrs.frozen
class Building(Generic[S, L]):
    """What every fold's builder keeps beside the shape it builds: where
    runs start, their limits, gates and observers.

    .. versionadded:: 0.1.0
    """

    _entry: str | None = attrs.field(default=None, kw_only=True)
    _limits: L | None = attrs.field(default=None, kw_only=True)
    _gates: tuple[Gate[S], ...] = attrs.field(default=(), kw_only=True)
    _observers: tuple[Observer[S], ...] = attrs.field(default=(), kw_only=True)

    def entry(self, name: str) -> Self:
        """Start runs at *name* (a graph's node, a swarm's agent)."""
        return attrs.evolve(self, entry=name)

    def limits(self, limits: L) -> Self:
        """Default limits for runs of what this builds."""
        return attrs.evolve(self, limits=limits)

    def observe(self, *observers: Observer[S]) -> Self:
        """Show *observers* the snapshot after every step of every run (a
        graph's node or fan-out, a swarm agent's turn), once committed."""
        return attrs.evolve(self, observers=(*self._observers, *observers))

    def _gated(self, gates: tuple[Gate[S], ...]) -> Self:
        return attrs.evolve(self, gates=(*self._gates, *gates))


__all__ = (
    "Building",
    "FoldFailure",
    "MachineBase",
    "Runnable",
    "Shaped",
    "handler_call",
    "new_thread",
    "state_node",
)
