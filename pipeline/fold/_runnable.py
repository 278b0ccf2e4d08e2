"""The folds users run: one base for graphs and swarms.

A :class:`Runnable` is a machine made into a value a user holds: it runs
(:meth:`Runnable.fold`, behind each kind's own ``run``), resumes, reads
its threads back (:class:`~pipeline.fold._checkpoints.Threads`: ``load``,
``history``, ``fork``), carries its own gates, observers and limits, and is
a handler too (:func:`handler_call`).  A new kind of fold adds only its
builder, its machine (the step), its ``start`` and its drawing.
"""

from __future__ import annotations

import uuid

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from returns.result import Result, Success

from .._handler import Call
from ..stores import CheckpointStore, check_thread_id
from . import _engine
from ._checkpoints import Threads
from ._codec import Codec
from ._engine import EventSink, Hooks, Machine, Migration
from ._model import Gate, Observer, Snapshot


S = TypeVar("S")
L = TypeVar("L")
L_contra = TypeVar("L_contra", contravariant=True)
F_co = TypeVar("F_co", covariant=True)
M = TypeVar("M", bound="Shaped[Any, Any]")
In = TypeVar("In")
Out = TypeVar("Out")


class Shaped(Machine[S, L_contra], Protocol[S, L_contra]):
    """A machine a user runs: it also says where runs start."""

    @property
    def entry(self) -> str:
        """The node (or agent) a run starts at."""
        ...


def new_thread(thread_id: str | None) -> str:
    """*thread_id*, checked, or a fresh one.

    .. versionadded:: 0.1.0
    """
    return (
        uuid.uuid4().hex if thread_id is None else check_thread_id(thread_id)
    )


def handler_call(
    machine: Machine[S, L],
    limits: L,
    hooks: Hooks[S],
    max_steps: int,
    start: Callable[[In], Snapshot[S]],
    finish: Callable[[S], Out],
) -> Call[In, Out, Any]:
    """A fold as a handler's call: from ``start(value)`` to the end, no
    checkpoints of its own; the final state through *finish*.

    .. versionadded:: 0.1.0
    """

    async def run_fold(value: In) -> Result[Out, Any]:
        out = await _engine.run_machine(
            machine, start(value), limits, hooks=hooks, max_steps=max_steps
        )
        final = _engine.outcome(out, machine.name)
        if type(final) is not Success:
            return final  # type: ignore[return-value]  # a Failure
        return Success(finish(final.unwrap()))

    return run_fold


class Runnable(Threads[S], Generic[S, L, F_co, M]):
    """Running, resuming and reading back a fold over state *S* with limits
    *L* that fails with *F*, on a machine *M*.  Subclasses are attrs classes
    with the fields below, and say how many steps their limits allow
    (:meth:`max_steps`).

    .. versionadded:: 0.1.0
    """

    __slots__ = ()

    if TYPE_CHECKING:  # the subclass's attrs fields, and its step count
        _machine: M
        limits: L
        gates: tuple[Gate[S], ...]
        observers: tuple[Observer[S], ...]

        @staticmethod
        def max_steps(limits: L, /) -> int:
            """How many steps a run under *limits* may take."""
            ...

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

    def _hooks(
        self,
        gates: Sequence[Gate[S]],
        observers: Sequence[Observer[S]],
        on_event: EventSink | None,
    ) -> Hooks[S]:
        return Hooks(
            (*self.gates, *gates), (*self.observers, *observers), on_event
        )

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
        limits = self.limits if limits is None else limits
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
        it to this one.  *answer* goes to the gate of an interrupted
        transition (or to the nested run that paused inside it).
        """
        limits = self.limits if limits is None else limits
        return await _engine.resume_thread(
            self._machine,
            limits,
            store=store,
            thread_id=thread_id,
            version=version,
            answer=answer,
            migrate=migrate,
            hooks=self._hooks(gates, observers, on_event),
            max_steps=self.max_steps(limits),
        )


__all__ = ("Runnable", "Shaped", "handler_call", "new_thread")
