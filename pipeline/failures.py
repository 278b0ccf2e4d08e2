"""Failure values: what a handler returns in ``Failure(...)``.

Failures are *values*, not exceptions: the library's handlers return
``Failure(error)`` with one of the types below, and the operators carry
them outward unchanged.  Each carries the *path* of the handler that
produced it, outermost first, so a failure deep inside a pipeline says
where it came from::

    >>> err = TimedOut(seconds=1.0, path=("review[1]", "lint"))
    >>> str(err)
    'lint timed out after 1.0 s (at review[1] > lint)'

Your own error values travel through the operators unchanged; wrap code in
:func:`pipeline.safe` to turn listed exceptions into :class:`Raised` values
that carry a path.  Exceptions (bugs in how the library is called, or
signals to it) are in :mod:`pipeline.errors`.

The hierarchy::

    PipelineError                   every failure value has a path
    ├── Raised                      an exception listed by safe(), as a value
    ├── AllFailed                   every branch of a race failed
    ├── TimedOut                    middleware timeout
    ├── LimitExceeded               a loop's iteration limit
    ├── ConditionError              a switch condition failed
    ├── graphs and swarms
    │   ├── UnknownRoute            a router named no node
    │   ├── StepLimitExceeded
    │   ├── FanOutLimitExceeded
    │   ├── MergeConflict           fan-out branches wrote one field apart
    │   ├── RunStopped              a gate stopped the run
    │   ├── RunPaused               a run waits for an answer
    │   ├── StaleAnswer             an answer for a question not pending
    │   ├── EditRefused             a thread that cannot be edited now
    │   └── HistoryBudgetExceeded
    ├── checkpoints and stores
    │   ├── ConcurrentModification  another writer took the version
    │   ├── SnapshotNotFound
    │   ├── IncompatibleGraph       the graph changed since the checkpoint
    │   ├── CheckpointDecodeError
    │   ├── ThreadBusy              another runner holds the thread
    │   ├── LeaseLost               this runner's lease was taken
    │   └── InvalidState            a state that cannot be stored
    ├── agents and models
    │   ├── InvalidOutput           structured output that does not decode
    │   ├── GuardrailTripped        an agent's guardrail stopped its run
    │   ├── ModelError              a provider call failed
    │   ├── TurnLimitExceeded
    │   ├── PolicyViolation         llm.policy judged the input invalid
    │   └── BadVerdict              a model's verdict does not fit
    ├── BudgetExceeded              a run's budget is spent
    └── RemoteFailure               a failure of a type this side does not know
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Generic, TypeVar, final

import attrs

from ._messages import Message
from ._usage import RunUsage


E_co = TypeVar("E_co", covariant=True)

__all__ = (
    "AllFailed",
    "BadVerdict",
    "BudgetExceeded",
    "CheckpointDecodeError",
    "ConcurrentModification",
    "ConditionError",
    "EditRefused",
    "FanOutLimitExceeded",
    "GuardrailTripped",
    "HistoryBudgetExceeded",
    "IncompatibleGraph",
    "InvalidOutput",
    "InvalidState",
    "LeaseLost",
    "LimitExceeded",
    "MergeConflict",
    "ModelError",
    "PipelineError",
    "PolicyViolation",
    "Raised",
    "RemoteFailure",
    "RunPaused",
    "RunStopped",
    "SnapshotNotFound",
    "StaleAnswer",
    "StepLimitExceeded",
    "ThreadBusy",
    "TimedOut",
    "TurnLimitExceeded",
    "UnknownRoute",
    "format_path",
)


def format_path(path: Sequence[str]) -> str:
    """Render a failure path for people: ``outer[1] > inner``.

    .. versionadded:: 0.1.0
    """
    return " > ".join(path) if path else "<root>"


@attrs.frozen
class PipelineError:
    """Base of every failure value the library produces.

    *path* lists handler names from the outermost composite to the handler
    that failed; composites prepend ``name[index]`` as a failure leaves them.

    .. versionadded:: 0.1.0
    """

    path: tuple[str, ...] = attrs.field(default=(), kw_only=True)

    def at(self, segment: str) -> PipelineError:
        """Return a copy located one level further out, under *segment*."""
        return attrs.evolve(self, path=(segment, *self.path))

    def where(self) -> str:
        """Human-readable location of the failure."""
        return format_path(self.path)


@final
@attrs.frozen
class Raised(PipelineError, Generic[E_co]):
    """An exception listed by :func:`pipeline.safe`, turned into a value.

    The original exception object is kept, traceback and all.

    .. versionadded:: 0.1.0
    """

    exception: E_co

    def __str__(self) -> str:
        exc = self.exception
        return f"{type(exc).__name__}: {exc} (at {self.where()})"


@final
@attrs.frozen
class AllFailed(PipelineError, Generic[E_co]):
    """Every branch of a first-success race failed (:func:`~pipeline.first`,
    ``|``), or every attempt of :func:`~pipeline.or_else`.

    *failures* holds each branch's failure in definition order (for
    ``or_else``, the attempts made: the last may be a failure of a type not
    listed, after which no handler ran).

    .. versionadded:: 0.1.0
    """

    failures: tuple[E_co, ...]

    def __str__(self) -> str:
        inner = "; ".join(str(f) for f in self.failures)
        n = len(self.failures)
        return f"all {n} branches failed (at {self.where()}): {inner}"


@final
@attrs.frozen
class TimedOut(PipelineError):
    """A handler did not finish within its timeout.

    .. versionadded:: 0.1.0
    """

    seconds: float

    def __str__(self) -> str:
        name = self.path[-1] if self.path else "handler"
        return f"{name} timed out after {self.seconds} s (at {self.where()})"


@final
@attrs.frozen
class LimitExceeded(PipelineError):
    """A loop reached its iteration limit before its condition said stop.

    *limit* is the limit in force; *completed* counts the iterations that
    ran (equal to *limit*).

    .. versionadded:: 0.1.0
    """

    limit: int
    completed: int

    def __str__(self) -> str:
        return (
            f"iteration limit {self.limit} reached after {self.completed} "
            f"iterations (at {self.where()})"
        )


@final
@attrs.frozen
class ConditionError(PipelineError, Generic[E_co]):
    """A switch or if condition failed while being evaluated.

    .. versionadded:: 0.1.0
    """

    case: int
    error: E_co

    def __str__(self) -> str:
        return (
            f"condition of case {self.case} failed: {self.error} "
            f"(at {self.where()})"
        )


@final
@attrs.frozen
class UnknownRoute(PipelineError):
    """A router returned a name its edge did not declare.

    .. versionadded:: 0.1.0
    """

    node: str
    label: str
    allowed: tuple[str, ...]

    def __str__(self) -> str:
        return (
            f"router of {self.node!r} returned {self.label!r}, not one of "
            f"{list(self.allowed)}"
        )


@final
@attrs.frozen
class StepLimitExceeded(PipelineError):
    """A run reached its step limit.

    *tail* holds the names of the last nodes that ran, newest last.  With
    a store, the thread stops there: a record with status ``stopped`` and
    this failure as its reason is committed, and resuming the thread
    returns that stop.  To go on with larger limits, resume from the
    version before the stop (``resume(version=...)``) or fork it.

    .. versionadded:: 0.1.0
    """

    limit: int
    tail: tuple[str, ...]

    def __str__(self) -> str:
        return (
            f"step limit {self.limit} reached; last nodes: "
            f"{' -> '.join(self.tail)}"
        )


@final
@attrs.frozen
class FanOutLimitExceeded(PipelineError):
    """A fan-out asked for more branches than allowed; nothing was started.

    .. versionadded:: 0.1.0
    """

    width: int
    limit: int

    def __str__(self) -> str:
        return f"fan-out of {self.width} exceeds the limit of {self.limit}"


@final
@attrs.frozen
class MergeConflict(PipelineError):
    """Several parallel branches changed a field that has no merge rule.

    .. versionadded:: 0.1.0
    """

    field: str
    branches: tuple[str, ...]

    def __str__(self) -> str:
        return (
            f"branches {list(self.branches)} all changed {self.field!r}; "
            "give the fan-out a merge rule for it"
        )


@final
@attrs.frozen
class ConcurrentModification(PipelineError):
    """Another writer committed first (compare-and-set on the head failed).

    .. versionadded:: 0.1.0
    """

    thread_id: str
    expected_head: int | None
    actual_head: int | None

    def __str__(self) -> str:
        return (
            f"thread {self.thread_id!r} moved on: expected head "
            f"{self.expected_head}, found {self.actual_head}"
        )


@final
@attrs.frozen
class SnapshotNotFound(PipelineError):
    """No usable checkpoint for that thread (and version).

    .. versionadded:: 0.1.0
    """

    thread_id: str
    version: int | None

    def __str__(self) -> str:
        at = "" if self.version is None else f" at version {self.version}"
        return f"no checkpoint for thread {self.thread_id!r}{at}"


def _parts(fingerprint: str) -> dict[str, str]:
    """The per-part digests of a fingerprint (``whole/part=digest/...``)."""
    _, _, rest = fingerprint.partition("/")
    parts: dict[str, str] = {}
    for part in rest.split("/"):
        name, sep, digest = part.partition("=")
        if sep:
            parts[name] = digest
    return parts


def _changed_parts(stored: str, current: str) -> tuple[str, ...]:
    old, new = _parts(stored), _parts(current)
    if not old or not new:
        return ()  # a fingerprint from before the parts were recorded
    return tuple(
        sorted(p for p in old.keys() | new.keys() if old.get(p) != new.get(p))
    )


def _changes(error: IncompatibleGraph) -> tuple[str, ...]:
    return _changed_parts(error.stored, error.current)


@final
@attrs.frozen
class IncompatibleGraph(PipelineError):
    """A checkpoint was written by a graph (or swarm) of another shape.

    *changed* names the parts of the shape that differ: ``nodes``,
    ``edges``, ``entry``, ``version`` for a graph, ``agents``, ``entry``,
    ``version`` for a swarm (empty when the checkpoint predates per-part
    fingerprints).

    .. versionadded:: 0.1.0
    """

    stored: str
    current: str
    changed: tuple[str, ...] = attrs.field(
        init=False, default=attrs.Factory(_changes, takes_self=True)
    )

    def __str__(self) -> str:
        what = f" ({', '.join(self.changed)} changed)" if self.changed else ""
        return (
            f"checkpoint written by graph {self.stored[:12]}, this graph is "
            f"{self.current[:12]}{what}; declare a migration to resume it"
        )


@final
@attrs.frozen
class CheckpointDecodeError(PipelineError):
    """Checkpoint bytes could not be decoded into the declared types.

    *location* is a JSON path into the record (``$.state.count``),
    *reason* says what was wrong: torn, tampered or mistyped records.

    .. versionadded:: 0.1.0
    """

    location: str
    reason: str

    def __str__(self) -> str:
        return f"cannot decode checkpoint at {self.location}: {self.reason}"


@final
@attrs.frozen
class RunStopped(PipelineError):
    """A gate stopped a graph, swarm or agent run used as a handler.

    (Run with ``run()``, a stop is a snapshot whose status says so; as a
    step of a larger pipeline it is this failure, so nothing after it runs
    on a half-finished state.)

    .. versionadded:: 0.1.0
    """

    reason: str

    def __str__(self) -> str:
        why = f": {self.reason}" if self.reason else ""
        return f"stopped by a gate{why} (at {self.where()})"


@final
@attrs.frozen
class RunPaused(PipelineError):
    """A gate paused a run used as a handler, waiting for a human answer.

    Inside a checkpointed run the pause is not a failure: the enclosing run
    pauses too, and resuming it with the answer resumes the inner one.
    Anywhere else there is nowhere to wait, and this failure says so.

    .. versionadded:: 0.1.0
    """

    question: str

    def __str__(self) -> str:
        return f"paused for an answer: {self.question!r} (at {self.where()})"


@final
@attrs.frozen
class StaleAnswer(PipelineError):
    """An answer for a question that is not the one pending: nothing was
    committed, nothing ran.

    *question* is the id the answer was given for (``None``: none was
    given), *pending* the id of the question thread *thread_id* waits at
    (the ids, comma-separated, when several fan-out branches or items wait
    at once; ``None``: it waits at none; *status* says where it stands).  A
    question's id is ``Snapshot.question_id``: the version that asked it
    and a digest of what it asked.  The answer itself is never part of
    the message.

    .. versionadded:: 0.1.0
    """

    thread_id: str
    question: str | None
    pending: str | None
    status: str

    def __str__(self) -> str:
        given = (
            "the answer"
            if self.question is None
            else f"the answer to question {self.question}"
        )
        if self.pending is None:
            return (
                f"{given} applies to nothing: thread {self.thread_id!r} "
                f"waits for no answer (it is {self.status})"
            )
        if ", " in self.pending:
            return (
                f"{given} is for none of the questions thread "
                f"{self.thread_id!r} waits at ({self.pending}): say which "
                "one with its id (question=ID); nothing was applied"
            )
        return (
            f"{given} is not for the question thread {self.thread_id!r} "
            f"waits at ({self.pending}); nothing was applied"
        )


@final
@attrs.frozen
class EditRefused(PipelineError):
    """A thread's state cannot be edited now (``update_state``): only a
    paused or stopped thread between steps can be; nothing was committed.

    *status* is where thread *thread_id* stands, *why* what is missing.

    .. versionadded:: 0.1.0
    """

    thread_id: str
    status: str
    why: str

    def __str__(self) -> str:
        return (
            f"thread {self.thread_id!r} cannot be edited ({self.status}): "
            f"{self.why}"
        )


@final
@attrs.frozen
class HistoryBudgetExceeded(PipelineError):
    """A token budget cannot hold even the preamble and the newest turn.

    *needed* counts the tokens of that minimal view; *budget* is the limit
    in force.

    .. versionadded:: 0.1.0
    """

    needed: int
    budget: int

    def __str__(self) -> str:
        return (
            f"the preamble and the newest turn need {self.needed} tokens, "
            f"over the budget of {self.budget}"
        )


@final
@attrs.frozen
class ThreadBusy(PipelineError):
    """Another runner holds the thread: nothing ran.

    A thread runs in one place at a time (its lease, in the store).  The
    lease of a runner that died expires after *expires_in* seconds at most;
    resume then.

    .. versionadded:: 0.1.0
    """

    thread_id: str
    expires_in: float

    def __str__(self) -> str:
        return (
            f"thread {self.thread_id!r} is being run elsewhere (its lease "
            f"expires in {self.expires_in:.1f} s at most)"
        )


@final
@attrs.frozen
class LeaseLost(PipelineError):
    """This runner no longer holds the thread's lease: it lapsed and
    another runner took it, or the thread was deleted.

    Nothing more was committed; another runner carries on from the last
    record (if the thread still exists).

    .. versionadded:: 0.1.0
    """

    thread_id: str

    def __str__(self) -> str:
        return (
            f"lost the lease on thread {self.thread_id!r}: it expired and "
            "another runner took the thread, or the thread was deleted"
        )


@final
@attrs.frozen
class InvalidState(PipelineError):
    """A state cannot be committed: it would not decode back as it is.

    *node* produced it, *field* is where in the state (``$`` for all of it),
    *expected* the declared type, *reason* what was wrong (never the value:
    it may be a secret).  Nothing was committed; the thread resumes from its
    last good record.

    .. versionadded:: 0.1.0
    """

    node: str
    field: str
    expected: str
    reason: str

    def __str__(self) -> str:
        return (
            f"{self.node!r} produced a state that cannot be stored: "
            f"{self.field} should be {self.expected} ({self.reason})"
        )


@final
@attrs.frozen
class InvalidOutput(PipelineError):
    """A model's structured answer does not fit the type asked for.

    *expected* names the type, *reason* says where and what was expected
    (``expected an integer at $.score``), never the value: the answer may
    hold anything.  *attempts* holds the reason of every answer that did
    not fit, in order, when an agent asked its model again
    (:class:`pipeline.Output`); *reason* is the last one.

    .. versionadded:: 0.1.0
    """

    expected: str
    reason: str
    attempts: tuple[str, ...] = attrs.field(default=(), kw_only=True)

    def __str__(self) -> str:
        return (
            f"the answer is not a valid {self.expected}: {self.reason} "
            f"(at {self.where()})"
        )


@final
@attrs.frozen
class GuardrailTripped(PipelineError):
    """A guardrail stopped an agent's run (see
    :class:`pipeline.agents.InputGuard` and
    :class:`pipeline.agents.OutputGuard`).

    *guardrail* names it, *stage* says which (``input`` or ``output``),
    *reason* is what its check said.

    .. versionadded:: 0.1.0
    """

    guardrail: str
    stage: str
    reason: str

    def __str__(self) -> str:
        return (
            f"the {self.stage} guardrail {self.guardrail!r} stopped the run: "
            f"{self.reason} (at {self.where()})"
        )


@final
@attrs.frozen
class BudgetExceeded(PipelineError):
    """A run's budget is spent: the model or tool call was not started.

    *limit* names the limit (``tokens``, ``cost``, ``model_calls``,
    ``tool_calls`` or ``wall_time``), *maximum* its value and *spent* what
    the run had spent of it; *usage* is the whole run's usage at that
    moment.  *model* is set when a cost limit met a model missing from the
    price table (its cost could not be bounded).  Every branch of the run
    fails with it at its next call.

    .. versionadded:: 0.1.0
    """

    limit: str
    maximum: float
    spent: float
    usage: RunUsage
    model: str | None = None

    def __str__(self) -> str:
        if self.model is not None:
            return (
                f"budget: no price for model {self.model!r} in the price "
                f"table; a cost limit needs one (at {self.where()})"
            )
        return (
            f"budget exceeded: {self.limit} spent {_amount(self.spent)} "
            f"of {_amount(self.maximum)} (at {self.where()})"
        )


def _amount(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:.6g}"


@final
@attrs.frozen
class ModelError(PipelineError):
    """A provider call failed: HTTP status, bad body, dropped stream, ...

    *status* is the HTTP status when there was one.  *tried* holds the
    failures of the models a :func:`~pipeline.models.fallback` called
    before this one, in order (empty otherwise).

    .. versionadded:: 0.1.0
    """

    provider: str
    message: str
    status: int | None = None
    tried: tuple[ModelError, ...] = attrs.field(default=(), kw_only=True)

    def __str__(self) -> str:
        status = f" (HTTP {self.status})" if self.status is not None else ""
        text = f"{self.provider}{status}: {self.message}"
        if self.tried:
            before = "; ".join(str(e) for e in self.tried)
            text += f" (after {len(self.tried)} failed before it: {before})"
        return text


@final
@attrs.frozen
class TurnLimitExceeded(PipelineError):
    """The model still wanted tools when the agent's turn limit was reached.

    *messages* are what the run added until then, the last reply (whose
    tool calls never ran) included: what the agent did is not lost.

    .. versionadded:: 0.1.0
    """

    agent: str
    turns: int
    messages: tuple[Message, ...] = attrs.field(default=(), repr=False)

    def __str__(self) -> str:
        return f"agent {self.agent!r} still calling tools after {self.turns} turns"


@final
@attrs.frozen
class PolicyViolation(PipelineError):
    """The policy model judged the conversation invalid.

    .. versionadded:: 0.1.0
    """

    reason: str
    violation: str

    def __str__(self) -> str:
        return f"policy validation failed: {self.reason}"


@final
@attrs.frozen
class BadVerdict(PipelineError):
    """The model's structured answer did not match the schema asked for.

    .. versionadded:: 0.1.0
    """

    text: str
    problem: str

    def __str__(self) -> str:
        return f"model answer does not fit the schema ({self.problem}): {self.text[:200]!r}"


@final
@attrs.frozen
class RemoteFailure(PipelineError):
    """A failure whose type this side does not know (not registered), or a
    run that ended otherwise than on a failure value (an activity that
    kept raising past its retries, a terminated or timed-out workflow).

    *kind* is the failure's type name (or Temporal's failure kind),
    *message* its text.  Raised by :mod:`pipeline.temporal`.

    .. versionadded:: 0.1.0
    """

    kind: str
    message: str

    def __str__(self) -> str:
        return f"{self.kind}: {self.message} (at {self.where()})"
