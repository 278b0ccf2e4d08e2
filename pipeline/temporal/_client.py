"""The client helper: start runs, answer them, read them, await them.

:class:`Runs` starts a graph or a swarm as a workflow on a task queue and
gives a :class:`Run` handle, typed by the machine: its snapshot (a query),
its answer to an interrupt (an update), its result (the final snapshot or
the very failure value the run would give in process) and cancel.
"""

from __future__ import annotations

import uuid

from collections.abc import Iterable
from typing import Any, Generic, TypeVar, final, overload

import attrs

from returns.result import Failure, Result, Success
from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowUpdateFailedError,
)
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError

from .._context import Context
from ..failures import InvalidState, RemoteFailure
from ..fold import Codec, Snapshot, stored_answer
from ..graph import GraphFailure
from ..graph._graph import Graph
from ..swarm import SwarmFailure, SwarmState
from ..swarm._swarm import Swarm
from ._converter import DATA_CONVERTER
from ._failures import Kinds, from_error
from ._hosted import Hostable, host
from ._wire import (
    ANSWER,
    SNAPSHOT,
    WAIT,
    WORKFLOW,
    Answer,
    RunOptions,
    RunRequest,
    SnapshotDoc,
    Waited,
    decode,
    encode,
)
from ._worker import DEFAULT_TASK_QUEUE


S = TypeVar("S")
E = TypeVar("E")
T = TypeVar("T")
S_co = TypeVar("S_co", covariant=True)
E_co = TypeVar("E_co", covariant=True)


async def connect(
    target: str = "127.0.0.1:7233", *, namespace: str = "default"
) -> Client:
    """A Temporal client using ``DATA_CONVERTER``
    (what workers and :class:`Runs` need).

    .. versionadded:: 0.1.0
    """
    return await Client.connect(
        target, namespace=namespace, data_converter=DATA_CONVERTER
    )


@final
@attrs.frozen
class Run(Generic[S_co, E_co]):
    """One run of a graph (or swarm) on Temporal; its workflow id is the
    thread id of its snapshots.

    Failures of the run come back as values: the machine's own (*E*),
    and :class:`~pipeline.failures.RemoteFailure` for what only a
    distributed run can do (a step that kept raising past its retries, a
    cancelled or terminated workflow).

    .. versionadded:: 0.1.0
    """

    id: str
    _handle: WorkflowHandle[Any, SnapshotDoc] = attrs.field(alias="handle")
    _codec: Codec[Any] = attrs.field(alias="codec")
    _kinds: Kinds = attrs.field(alias="kinds")

    async def snapshot(self) -> Result[Snapshot[S_co], RemoteFailure]:
        """The run's latest snapshot (an interrupted run's shows its
        pending question)."""
        try:
            sent = await self._handle.query(SNAPSHOT, result_type=SnapshotDoc)
        except (RPCError, WorkflowFailureError) as exc:
            return Failure(RemoteFailure(type(exc).__name__, str(exc)))
        return self._decoded(sent)

    async def paused(self) -> Result[Snapshot[S_co], RemoteFailure]:
        """Wait until the run waits for an answer (or has ended); its
        snapshot then (status ``INTERRUPTED`` with the pending question,
        or the final one)."""
        while True:
            try:
                waited = await self._handle.execute_update(
                    WAIT, result_type=Waited
                )
            except (RPCError, WorkflowUpdateFailedError) as exc:
                final = await self._final()
                if final is not None:  # it had ended: its final snapshot
                    return final
                return Failure(RemoteFailure(type(exc).__name__, str(exc)))
            if waited.snapshot is not None:
                return self._decoded(waited.snapshot)
            # The run continued as new: ask the new one.

    async def _final(self) -> Result[Snapshot[S_co], RemoteFailure] | None:
        """The final snapshot of a run that completed, else ``None``."""
        try:
            described = await self._handle.describe()
            if described.status is not WorkflowExecutionStatus.COMPLETED:
                return None
            sent = await self._handle.result()
        except (RPCError, WorkflowFailureError):
            return None
        return self._decoded(sent)

    def _decoded(
        self, sent: SnapshotDoc
    ) -> Result[Snapshot[S_co], RemoteFailure]:
        snap = decode(self._codec, sent)
        if type(snap) is not Success:
            failure = snap.failure()
            return Failure(RemoteFailure(type(failure).__name__, str(failure)))
        return Success(snap.unwrap())

    async def answer(
        self, answer: object
    ) -> Result[None, InvalidState | RemoteFailure]:
        """Answer the interrupt the run waits at; the gate sees *answer*
        (as its :meth:`~pipeline.fold.Transition.answer_as`).

        Like a resumed thread's answer, *answer* is stored as JSON (an
        attrs value as its fields); it is part of the run's history, so no
        worker restart loses it.  A run that is not waiting refuses it
        (``RemoteFailure`` of kind ``NotWaiting``); so does a gate that
        finds it of the wrong type (kind ``InvalidAnswer``: the run waits
        for another answer).
        """
        stored = stored_answer(self._codec, answer)
        if isinstance(stored, InvalidState):
            return Failure(stored)
        try:
            await self._handle.execute_update(ANSWER, Answer(stored))
        except WorkflowUpdateFailedError as exc:
            cause = exc.cause
            if isinstance(cause, ApplicationError) and cause.type == (
                "InvalidAnswer"
            ):
                # The gate refused it; the run waits for another answer.
                return Failure(RemoteFailure("InvalidAnswer", cause.message))
            return Failure(
                RemoteFailure(
                    "NotWaiting", "the run is not waiting for an answer"
                )
            )
        except RPCError as exc:  # the run ended meanwhile, say
            return Failure(RemoteFailure(type(exc).__name__, str(exc)))
        return Success(None)

    async def result(self) -> Result[Snapshot[S_co], E_co | RemoteFailure]:
        """Wait for the run's end: its final snapshot, or its failure."""
        try:
            sent = await self._handle.result()
        except WorkflowFailureError as exc:
            return Failure(from_error(self._kinds, exc.cause))  # type: ignore[arg-type]
        return self._decoded(sent)

    async def cancel(self) -> None:
        """Ask the run to stop: the step in flight is cancelled, and the
        run's result is a ``RemoteFailure`` of kind ``CancelledError``."""
        await self._handle.cancel()


@final
class Runs:
    """Starts graphs and swarms on Temporal workers, as typed runs.

    *client* must use ``DATA_CONVERTER`` (see
    :func:`connect`); *task_queue* is the workers'.  *failures*: your
    failure types, as the workers register them.

    .. versionadded:: 0.1.0
    """

    __slots__ = ("_kinds", "client", "task_queue")

    def __init__(
        self,
        client: Client,
        *,
        task_queue: str = DEFAULT_TASK_QUEUE,
        failures: Iterable[type[Any]] = (),
    ) -> None:
        self.client = client
        self.task_queue = task_queue
        self._kinds = Kinds(failures)

    @overload
    async def start(
        self,
        machine: Graph[S, E],
        state: S,
        *,
        run_id: str | None = None,
        options: RunOptions = ...,
        name: str | None = None,
    ) -> Run[S, E | GraphFailure]: ...

    @overload
    async def start(
        self,
        machine: Swarm[T],
        state: Context,
        *,
        run_id: str | None = None,
        options: RunOptions = ...,
        name: str | None = None,
    ) -> Run[SwarmState[T], SwarmFailure]: ...

    async def start(
        self,
        machine: Hostable,
        state: Any,
        *,
        run_id: str | None = None,
        options: RunOptions = RunOptions(),  # noqa: B008  # frozen value
        name: str | None = None,
    ) -> Run[Any, Any]:
        """Start *machine* on *state* (a swarm: on a context) as a workflow.

        *run_id* becomes the workflow id and the snapshots' thread id (a
        fresh one by default); *name* is the name the workers host the
        machine under (by default its own); *options* set each node's
        timeouts and retries.

        Raises:
            ValueError: *state* cannot be sent (the message names the
                field and the type expected, never the value), or
                *run_id* cannot name a thread (``InvalidThreadId``).
            temporalio.exceptions.WorkflowAlreadyStartedError: a run with
                this id exists.
        """
        hosted = host(machine, name)
        run_id = run_id or uuid.uuid4().hex
        if isinstance(machine, Swarm):
            snap: Snapshot[Any] = machine.start(state, thread_id=run_id)
        else:
            snap = machine.start(state, thread_id=run_id)
        sent = encode(hosted.codec, snap)
        if isinstance(sent, InvalidState):
            raise ValueError(str(sent))  # noqa: TRY004  # a bad value
        handle = await self.client.start_workflow(
            WORKFLOW,
            RunRequest(hosted.name, hosted.fingerprint, sent, options),
            id=run_id,
            task_queue=self.task_queue,
            result_type=SnapshotDoc,
        )
        return Run(run_id, handle, hosted.codec, self._kinds)

    @overload
    def attach(
        self, machine: Graph[S, E], run_id: str
    ) -> Run[S, E | GraphFailure]: ...

    @overload
    def attach(
        self, machine: Swarm[T], run_id: str
    ) -> Run[SwarmState[T], SwarmFailure]: ...

    def attach(self, machine: Hostable, run_id: str) -> Run[Any, Any]:
        """The handle of run *run_id* of *machine*, started earlier
        (perhaps by another process)."""
        handle = self.client.get_workflow_handle(
            run_id, result_type=SnapshotDoc
        )
        return Run(run_id, handle, machine.codec, self._kinds)
