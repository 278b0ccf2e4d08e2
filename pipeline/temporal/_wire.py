"""What crosses Temporal: run requests, step tasks, snapshots, options.

Snapshots travel as the checkpoint codec's root documents (the very JSON a
store's first record of a thread holds, validated the same way before it
is sent), so a state that could not be checkpointed cannot be sent either,
and one that arrives is rebuilt exactly as a resumed checkpoint is.
"""

from __future__ import annotations

import math

from collections.abc import Mapping
from datetime import timedelta
from types import MappingProxyType
from typing import Any, Final, TypeVar, final

import attrs

from returns.result import Result
from temporalio.common import RetryPolicy

from .._messages import Message
from ..failures import CheckpointDecodeError, InvalidState
from ..fold import Codec, Snapshot
from ..models import ModelResponse, ToolSpec


S = TypeVar("S")

DEFAULT_HISTORY_BOUND: Final = 10_000
"""Events a run's history may reach before it continues as new.

Temporal warns at 10,240 events and terminates a run at 51,200; a node
costs about six events (its activity and a workflow task), so a run
continues as new after roughly 1,600 nodes, carrying only its snapshot.
"""

MAX_PAYLOAD: Final = 1_800_000
"""Bytes a snapshot, a step's result, a saved turn or a tool's result may
take on the wire.  Temporal refuses payloads over 2 MB (its default blob
limit) and retries what carried one forever: a step whose result is
bigger ends the run with ``InvalidState`` instead (room is left for the
envelope)."""

STEP_ACTIVITY: Final = "pipeline.step"
"""The activity that runs one step (a node, a fan-out branch, an agent's
turn at a swarm's conversation)."""

CALLS_SUFFIX: Final = ".calls"
"""A run's calls go to its task queue's name and this (see
:class:`~pipeline.temporal.PipelineWorker`)."""

CALL_ACTIVITY: Final = "pipeline.call"
"""The activity that makes one call a step's agent asked for: a model
call (one turn's), or one call of one of the agent's own tools."""

WORKFLOW: Final = "pipeline.run"
"""The workflow type every graph and swarm runs as."""

ANSWER: Final = "pipeline.answer"
SNAPSHOT: Final = "pipeline.snapshot"
WAIT: Final = "pipeline.wait"
PROGRESS: Final = "pipeline.progress"
SAVED: Final = "pipeline.saved"
CALL: Final = "pipeline.call"


@final
@attrs.frozen
class SnapshotDoc:
    """A snapshot as the checkpoint codec writes a thread's first record."""

    thread_id: str
    version: int
    parent: int | None
    doc: dict[str, Any]


def encode(codec: Codec[S], snap: Snapshot[S]) -> SnapshotDoc | InvalidState:
    """*snap* as a document, checked as a commit is (else why not); a
    step that paused keeps its progress (a store's paused thread does)."""
    sealed = codec.seal(snap, None, snap.progress or None)
    if isinstance(sealed, InvalidState):
        return sealed
    return _bounded(snap, sealed) or SnapshotDoc(
        snap.thread_id, snap.version, snap.parent, sealed[0]
    )


def _bounded(
    snap: Snapshot[Any], sealed: tuple[dict[str, Any], bytes]
) -> InvalidState | None:
    """Why *sealed* cannot cross Temporal (too big), if it cannot."""
    size = len(sealed[1])
    if size <= MAX_PAYLOAD:
        return None
    return too_big(snap.node or "<start>", size)


def too_big(where: str, size: int) -> InvalidState:
    """The failure of a payload of *size* bytes made at *where*."""
    return InvalidState(
        where,
        "$",
        f"at most {MAX_PAYLOAD} bytes on the wire",
        f"{size} bytes: past Temporal's payload limit",
    )


def encode_delta(
    codec: Codec[S], snap: Snapshot[S], parent: Snapshot[S]
) -> SnapshotDoc | InvalidState:
    """*snap* as a delta document against *parent* (what the step that
    grew it from *parent* changed), checked as a commit is."""
    sealed = codec.seal(snap, parent)
    if isinstance(sealed, InvalidState):
        return sealed
    return _bounded(snap, sealed) or SnapshotDoc(
        snap.thread_id, snap.version, snap.parent, sealed[0]
    )


def decode(
    codec: Codec[S], sent: SnapshotDoc
) -> Result[Snapshot[S], CheckpointDecodeError]:
    """The snapshot *sent* stands for, rebuilt as a checkpoint is."""
    return codec.rebuild([sent.doc], sent.thread_id, sent.version, sent.parent)


@final
@attrs.frozen
class ActivityRetry:
    """How an activity is retried after it raised (or its worker died).

    Seconds between attempts start at *initial*, grow by *backoff* up to
    *maximum*; *attempts* bounds the attempts (0: unbounded, Temporal's
    default).  Exceptions whose class name is in *non_retryable* are not
    retried.  A node's ``Failure`` is a value, never retried.

    .. versionadded:: 0.1.0
    """

    initial: float = 1.0
    backoff: float = 2.0
    maximum: float = 60.0
    attempts: int = 0
    non_retryable: tuple[str, ...] = ()

    def __attrs_post_init__(self) -> None:
        problems = []
        if not (math.isfinite(self.initial) and self.initial > 0):
            problems.append("initial must be a positive number of seconds")
        if not (math.isfinite(self.backoff) and self.backoff >= 1):
            problems.append("backoff must be at least 1")
        if not (math.isfinite(self.maximum) and self.maximum >= self.initial):
            problems.append("maximum must be at least initial")
        given: object = self.attempts  # the annotation is not a check
        if isinstance(given, bool) or not (
            isinstance(given, int) and given >= 0
        ):
            problems.append("attempts must be a count (0: unbounded)")
        if problems:
            msg = "ActivityRetry: " + "; ".join(problems)
            raise ValueError(msg)

    def policy(self) -> RetryPolicy:
        """The Temporal retry policy."""
        return RetryPolicy(
            initial_interval=timedelta(seconds=self.initial),
            backoff_coefficient=self.backoff,
            maximum_interval=timedelta(seconds=self.maximum),
            maximum_attempts=self.attempts,
            non_retryable_error_types=list(self.non_retryable),
        )


@final
@attrs.frozen
class NodeOptions:
    """Timeouts (seconds) and retries of one node's activity.

    *start_to_close* bounds one attempt; *heartbeat* is how soon a dead
    worker's attempt is retried elsewhere (the activity heartbeats in the
    background while the node runs); *schedule_to_close* bounds all
    attempts together (``None``: unbounded).

    .. versionadded:: 0.1.0
    """

    start_to_close: float = 600.0
    heartbeat: float | None = 30.0
    schedule_to_close: float | None = None
    retry: ActivityRetry = ActivityRetry()

    def __attrs_post_init__(self) -> None:
        for name in ("start_to_close", "heartbeat", "schedule_to_close"):
            value = getattr(self, name)
            if value is not None and not (math.isfinite(value) and value > 0):
                msg = (
                    f"NodeOptions.{name} must be a positive number of seconds"
                )
                raise ValueError(msg)


_NO_NODES: Mapping[str, NodeOptions] = MappingProxyType({})


def _frozen_nodes(
    nodes: Mapping[str, NodeOptions],
) -> Mapping[str, NodeOptions]:
    return MappingProxyType(dict(nodes))


@final
@attrs.frozen
class RunOptions:
    """How a run's steps run as activities; recorded in the run's input.

    *default* applies to every node (graph) or agent (swarm) that *nodes*
    does not name.  *calls* applies to the activities of agents' model
    calls and tool calls, unless *agents* names the agent (its model
    calls) or *tools* the tool.  *history_bound*: events after which the
    run continues as new (see ``DEFAULT_HISTORY_BOUND``).

    .. versionadded:: 0.1.0
    """

    default: NodeOptions = NodeOptions()
    nodes: Mapping[str, NodeOptions] = attrs.field(
        default=_NO_NODES, converter=_frozen_nodes
    )
    history_bound: int = DEFAULT_HISTORY_BOUND
    calls: NodeOptions = NodeOptions()
    agents: Mapping[str, NodeOptions] = attrs.field(
        default=_NO_NODES, converter=_frozen_nodes
    )
    tools: Mapping[str, NodeOptions] = attrs.field(
        default=_NO_NODES, converter=_frozen_nodes
    )

    def __attrs_post_init__(self) -> None:
        if self.history_bound < 100:
            msg = "RunOptions.history_bound must be at least 100 events"
            raise ValueError(msg)

    def for_node(self, name: str) -> NodeOptions:
        """The options of node (or agent) *name*."""
        return self.nodes.get(name, self.default)

    def for_call(self, call: CallTask) -> NodeOptions:
        """The options of *call*'s activity."""
        if call.tool:
            return self.tools.get(call.tool, self.calls)
        return self.agents.get(call.agent, self.calls)


@final
@attrs.frozen
class RunRequest:
    """A run's input: which machine, from which snapshot, how."""

    machine: str
    fingerprint: str
    snapshot: SnapshotDoc
    options: RunOptions = RunOptions()


@final
@attrs.frozen
class Progress:
    """One record of a fold nested in the step in flight *task* (an agent's
    turn inside a node, say): *doc* appended under *key*, as a checkpointed
    step's progress record holds it; *state*, the step's state as the
    machine tracks it (a swarm's typed state), as a delta against the
    task's snapshot."""

    task: str
    key: str
    doc: dict[str, Any]
    state: SnapshotDoc | None = None


@final
@attrs.frozen
class Saved:
    """What the folds nested in step *task* saved so far, for an attempt
    that takes the step over."""

    progress: dict[str, list[dict[str, Any]]] = attrs.field(factory=dict)
    state: SnapshotDoc | None = None


@final
@attrs.frozen
class FailureDoc:
    """A failure value on the wire: its kind and its fields.

    *kind* names one of a closed set of types the receiving side knows
    (the library's failures, the ones a worker or client registers); it
    is looked up, never imported.  *message* is the failure's ``str``.
    """

    kind: str
    data: Any = None
    message: str = ""


@final
@attrs.frozen
class ItemDone:
    """One map_reduce item's outcome: the worker's output as JSON, or its
    failure value."""

    value: Any = None
    failure: FailureDoc | None = None


@final
@attrs.frozen
class StepTask:
    """One step for the step activity: the machine's step on *snapshot*,
    or only fan-out *branch* of it, or one *part* of a map_reduce node
    (``split``, ``item`` number *index*, ``reduce`` of *items*)."""

    machine: str
    fingerprint: str
    snapshot: SnapshotDoc
    branch: str | None = None
    part: str = ""
    index: int = 0
    items: tuple[ItemDone | None, ...] = ()

    @property
    def key(self) -> str:
        """Names this step in flight (among the run's concurrent ones)."""
        return (
            f"{self.snapshot.version}/{self.branch or ''}/"
            f"{self.part}{self.index if self.part == 'item' else ''}"
        )


@final
@attrs.frozen
class StepDone:
    """The step activity's answer: the next snapshot (a delta document
    against the task's), or a failure value, or the question a fold nested
    in the step *paused* at (the step's progress is in the workflow), with
    the *payload* a question :func:`pipeline.interrupt` asked carries."""

    snapshot: SnapshotDoc | None = None
    failure: FailureDoc | None = None
    paused: str | None = None
    count: int = 0
    item: ItemDone | None = None
    payload: Any = None


@final
@attrs.frozen
class CallTask:
    """One call an agent in step *task* asked for, for the call activity.

    *agent* names the agent (``name@digest``: see
    :mod:`pipeline.temporal._calls`).  A model call carries the turn's
    *messages*, the *tool_specs* it offers and *use_tools*; a tool call
    names its *tool* and carries the model's *arguments* and *call_id*.
    *key* names the call within its step, the same in every attempt of
    the step (so an attempt that takes the step over gets the answer of a
    call made before instead of making it again).
    """

    task: str
    key: str
    agent: str
    machine: str
    fingerprint: str
    messages: tuple[Message, ...] = ()
    tool_specs: tuple[ToolSpec, ...] = ()
    use_tools: bool = True
    tool: str = ""
    arguments: str = ""
    call_id: str = ""


@final
@attrs.frozen
class CallDone:
    """The call activity's answer: the model's *response* or its
    *failure*; or a tool's ``(content, is_error)``."""

    response: ModelResponse | None = None
    failure: FailureDoc | None = None
    content: str = ""
    is_error: bool = False


@final
@attrs.frozen
class Waited:
    """The wait update's answer: the paused (or final) snapshot, or
    ``None`` when the run continued as new (ask the new run)."""

    snapshot: SnapshotDoc | None = None


@final
@attrs.frozen
class Answer:
    """A human's answer to an interrupted run, as stored (JSON-shaped)."""

    value: Any
