"""The values of a fold: snapshots, transitions, gate decisions, hooks.

Every machine (graph, swarm, agent loop) folds its step over these same
values, so a gate, an observer or a stored record means the same thing
whichever machine produced it.
"""

from __future__ import annotations

import enum

from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime
from types import MappingProxyType
from typing import (
    TYPE_CHECKING,
    Any,
    Final,
    Generic,
    TypeAlias,
    TypeVar,
    cast,
    final,
    overload,
)

import attrs

from typing_extensions import TypeForm
from typing_extensions import TypeVar as TypeVar_

from .._serde import canonical, checksum
from .._writable import writable_twin
from ..errors import InvalidAnswer


if TYPE_CHECKING:
    import cattrs


S = TypeVar("S")
S_co = TypeVar("S_co", covariant=True)
S2 = TypeVar("S2")

_new = object.__new__
_setter = object.__setattr__.__get__
A = TypeVar("A")
SI = TypeVar_("SI", default=Any)
AI = TypeVar_("AI", default=Any)

Progress: TypeAlias = Mapping[str, tuple[Any, ...]]
"""Saved progress of the folds nested inside the step in flight.

Keyed by the nested fold's name and occurrence (``"triage#0"``); each value
is that fold's chain of records as JSON documents, oldest first.  Opaque to
users: the nested fold decodes its own part when it resumes.
"""

NO_PROGRESS: Progress = MappingProxyType({})


@final
class Status(enum.StrEnum):
    """Where a run stands.

    .. versionadded:: 0.1.0
    """

    RUNNING = "running"
    DONE = "done"
    INTERRUPTED = "interrupted"
    STOPPED = "stopped"


_RUNNING = Status.RUNNING
_DONE = Status.DONE


@final
class _NullAnswer:
    """``None`` given as an answer on purpose: ``resume(answer=None,
    question=ID)`` (``answer=None`` alone means no answer).  The run
    carries this marker where it carries an answer; records, gates and
    :func:`pipeline.interrupt` see ``None`` (:func:`given`)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "NULL_ANSWER"


NULL_ANSWER: Final = _NullAnswer()
"""The answer ``None``, given on purpose (see :class:`_NullAnswer`)."""


def given(answer: object) -> object:
    """*answer* as it was given (:data:`NULL_ANSWER` is ``None``)."""
    return None if answer is NULL_ANSWER else answer


def kept_answer(pending: Pending | None) -> object:
    """The answer *pending* was answered with, as a run carries it
    (``None``: not answered; an answered ``None`` is
    ``NULL_ANSWER``: ``None`` given on purpose).

    .. versionadded:: 0.1.0
    """
    if pending is None or not pending.answered:
        return None
    return NULL_ANSWER if pending.answer is None else pending.answer


@final
@attrs.frozen
class Pending:
    """A transition waiting for a human answer (see :class:`Interrupt` and
    :func:`pipeline.interrupt`).

    Once answered (*answered*), *answer* holds the answer as it was stored
    (JSON-shaped): the answer is a record of its own, so a crash after
    answering never asks again.  *payload* is what a question asked by
    :func:`pipeline.interrupt` carries besides its text (JSON-shaped, as
    stored), else ``None``.

    A question asked inside a fan-out branch or a ``map_reduce`` item
    waits there (*scope*: ``"b:<branch>"``, or ``"m:<label>#<k>/<n>"``
    and a digest of the item for item *n* of the *k*-th ``map_reduce``
    named *label*; nested ones joined by ``/``; empty for the step itself), and keeps the version that first asked it
    (*asked*; ``None``: the record that holds it), so its id survives the
    records that answer its siblings.  When several branches or items of
    one step wait at once, *waiting* holds the others (each answered on
    its own, by id: see
    :attr:`~pipeline.fold.Snapshot.questions`).

    .. versionadded:: 0.1.0
    """

    source: str | None
    targets: tuple[str, ...]
    question: str
    answer: Any = None
    answered: bool = False
    payload: Any = None
    scope: str = ""
    asked: int | None = None
    waiting: tuple[Pending, ...] = ()


@final
@attrs.frozen(kw_only=True)
class Snapshot(Generic[S_co]):
    """One immutable point of a run; also its checkpoint.

    *node* just finished (``None`` before the first step), *next* is what
    runs next (a graph's node or the branches of a fan-out that meet at
    *join*; a swarm's agent; nothing when the run is done).  *version*
    increases by one per committed record of the thread; *parent* is the
    version this one grew from.  *progress* holds what the folds nested in
    the step in flight (an agent's turns inside a graph node, say) saved
    so far: a resumed step continues them instead of starting over.  (A
    snapshot a run returns when it paused inside a nested fold names the
    folds that saved progress in that attempt; their records are in the
    store, and ``load`` reads them back.)

    .. versionadded:: 0.1.0
    """

    thread_id: str
    version: int
    parent: int | None
    state: S_co
    node: str | None
    next: tuple[str, ...]
    join: str | None
    step: int
    fingerprint: str
    status: Status = Status.RUNNING
    pending: Pending | None = None
    progress: Progress = NO_PROGRESS
    reason: str = ""
    """Why the run stopped (status ``STOPPED``): a gate's reason, or the
    limit it reached; stored in the stop record."""
    committed_at: datetime | None = attrs.field(default=None, eq=False)
    """When the record was committed (UTC, to the millisecond), as read
    back from a store; ``None`` for a snapshot not read back, or a record
    stored before records carried their time.

    .. versionadded:: 0.1.0"""
    author: str = ""
    """Who answered, on the record that stores an answer (a hand edit's
    author is in :attr:`edit`); empty for the records a run commits.

    .. versionadded:: 0.1.0"""
    origin: tuple[str, int] | None = None
    """The thread and version this thread was forked from (kept by every
    snapshot of a forked thread); ``None`` for a thread that was not.

    .. versionadded:: 0.1.0"""
    edit: Edit | None = None
    """The author and reason of a hand edit of the state (``update_state``,
    ``pipeline edit``), on the record that edit committed only; else
    ``None``."""

    @property
    def done(self) -> bool:
        """Whether the run reached its end."""
        return self.status is Status.DONE

    @property
    def question_id(self) -> str | None:
        """The id of the question this snapshot waits at (status
        ``INTERRUPTED``), else ``None``: ``"<version>-<digest>"``, the
        version that asked it and a digest of the thread, that version
        and what it asks.  ``resume(answer=..., question=id)`` applies the
        answer to this question only.

        .. versionadded:: 0.1.0
        """
        pending = self.pending
        if (
            self.status is not Status.INTERRUPTED
            or pending is None
            or pending.answered
        ):
            return None
        return self.id_of(pending)

    @property
    def questions(self) -> Mapping[str, Pending]:
        """Every question this snapshot waits at (status ``INTERRUPTED``),
        by id, in the order of the branches or items that asked: one,
        ``pending``, unless several fan-out branches or ``map_reduce``
        items wait at once.  ``resume(answer=..., question=id)`` answers
        one of them: that branch or item runs on, the others keep
        waiting, and the run goes on once all are answered.

        .. versionadded:: 0.1.0
        """
        pending = self.pending
        if self.status is not Status.INTERRUPTED or pending is None:
            return MappingProxyType({})
        waiting = pending.waiting
        if not pending.answered:
            waiting = (pending, *waiting)
        return MappingProxyType({self.id_of(p): p for p in waiting})

    def id_of(self, pending: Pending) -> str:
        """The id of *pending*, a question this snapshot holds (see
        :attr:`question_id`)."""
        version = self.version if pending.asked is None else pending.asked
        asked = [
            self.thread_id,
            version,
            pending.source,
            list(pending.targets),
            pending.question,
        ]
        if pending.payload is not None:
            asked.append(pending.payload)
        if pending.scope:
            asked.append(pending.scope)
        return f"{version}-{checksum(canonical(asked))[:12]}"

    @staticmethod
    def first(
        thread_id: str,
        state: S2,
        next: tuple[str, ...],  # noqa: A002  # the field's name
        fingerprint: str,
    ) -> Snapshot[S2]:
        """The admission snapshot of a run on *thread_id*: version 0,
        *state* before *next* runs, under *fingerprint*."""
        out: Snapshot[S2] = _new(Snapshot)
        put = _setter(out)
        put("thread_id", thread_id)
        put("version", 0)
        put("parent", None)
        put("state", state)
        put("node", None)
        put("next", next)
        put("join", None)
        put("step", 0)
        put("fingerprint", fingerprint)
        put("status", _RUNNING)
        put("pending", None)
        put("progress", NO_PROGRESS)
        put("reason", "")
        put("committed_at", None)
        put("author", "")
        put("origin", None)
        put("edit", None)
        return out

    def successor(
        self,
        state: S2,
        node: str | None,
        next: tuple[str, ...],  # noqa: A002  # the field's name
        join: str | None = None,
        fingerprint: str | None = None,
    ) -> Snapshot[S2]:
        """The snapshot one step after this one: the thread's next version,
        grown from this one, running on if *next* names anything, else
        done.  *fingerprint* (by default this one's) is the machine's."""
        # Built as a _Building (the same slots, set by plain stores that
        # the interpreter specializes), then made a Snapshot: keyword
        # arguments, or each slot's setter called in turn, cost more than
        # the rest of a trivial step (every field passes no converter).
        out: Any = _new(_Building)
        out.thread_id = self.thread_id
        out.version = self.version + 1
        out.parent = self.version
        out.state = state
        out.node = node
        out.next = next
        out.join = join
        out.step = self.step + 1
        out.fingerprint = (
            self.fingerprint if fingerprint is None else fingerprint
        )
        out.status = _RUNNING if next else _DONE
        out.pending = None
        out.progress = NO_PROGRESS
        out.reason = ""
        out.committed_at = None
        out.author = ""
        out.origin = self.origin
        out.edit = None
        out.__class__ = Snapshot
        built: Snapshot[S2] = out  # not cast(): a call per step
        return built

    def renumbered(self, version: int, parent: int | None) -> Snapshot[S_co]:
        """This snapshot as record *version*, grown from *parent*, not
        committed yet (no commit time; built as :meth:`successor` builds
        one: a journal places its records so)."""
        out: Any = _new(_Building)
        out.thread_id = self.thread_id
        out.version = version
        out.parent = parent
        out.state = self.state
        out.node = self.node
        out.next = self.next
        out.join = self.join
        out.step = self.step
        out.fingerprint = self.fingerprint
        out.status = self.status
        out.pending = self.pending
        out.progress = self.progress
        out.reason = self.reason
        out.committed_at = None
        out.author = self.author
        out.origin = self.origin
        out.edit = self.edit
        out.__class__ = Snapshot
        built: Snapshot[S_co] = out
        return built


_Building = writable_twin(Snapshot)
"""A :class:`Snapshot` being built by :meth:`Snapshot.successor` (see
:mod:`pipeline._writable`)."""


# -- hooks ------------------------------------------------------------------


@final
@attrs.frozen
class Edit:
    """A state changed by hand (``update_state``, ``pipeline edit``):
    *author* made the change for *reason*; stored in its record and shown
    in the thread's history.

    .. versionadded:: 0.1.0
    """

    author: str
    reason: str


@final
@attrs.frozen
class Continue:
    """Gate decision: go ahead with the transition.

    .. versionadded:: 0.1.0
    """


@final
@attrs.frozen
class Stop:
    """Gate decision: end the run gracefully.

    With a store, the stop is a record (status ``stopped``, *reason*): the
    thread stays stopped, and resuming it returns that stop without
    running a node; fork it (or resume an earlier version) to go on.

    .. versionadded:: 0.1.0
    """

    reason: str = ""


@final
@attrs.frozen(init=False)
class Interrupt(Generic[SI, AI]):
    """Gate decision: pause for a human; resume with an answer.

    *kind*, when given, is the type the answer must have (an attrs class,
    ``int``, a ``Literal``, ...: what :func:`pipeline.interrupt` takes):
    ``resume(..., answer=...)`` checks the answer against it before
    anything is committed (:class:`~pipeline.errors.InvalidAnswer` naming
    the fields, never the values; the thread still waits at the question,
    and its store is unchanged).  *apply*, when given, makes the answer
    reach the state: ``apply(state, answer)`` is the state the answer's
    record commits (one record, with the answer and its author), before
    the gated node runs.  A gate may return the same typed ``Interrupt``
    whether or not it was answered: once its question is answered, it
    counts as answered (the transition goes ahead).

    >>> import attrs
    >>> @attrs.frozen
    ... class Approval:
    ...     approved: bool
    ...     by: str = ""
    >>> def approved_by(state: dict[str, str], a: Approval) -> dict[str, str]:
    ...     return {**state, "approved_by": a.by} if a.approved else state
    >>> decision = Interrupt("ship?", Approval, apply=approved_by)

    .. versionadded:: 0.1.0
    """

    question: str
    kind: TypeForm[AI] | None = None
    """The type the answer must have (``None``: any JSON value)."""
    apply: Callable[[SI, AI], SI] | None = attrs.field(
        default=None, kw_only=True
    )
    """Folds the typed answer into the state (``None``: the state stays)."""

    # Spelled out so that checkers infer AI from a type form (``int | None``,
    # a ``Literal``): they do so only for a parameter that is a TypeForm
    # itself, not one inside a union with None.
    @overload
    def __init__(
        self,
        question: str,
        kind: None = None,
        *,
        apply: Callable[[SI, Any], SI] | None = None,
    ) -> None: ...
    @overload
    def __init__(
        self,
        question: str,
        kind: TypeForm[AI],
        *,
        apply: Callable[[SI, AI], SI] | None = None,
    ) -> None: ...
    def __init__(
        self,
        question: str,
        kind: TypeForm[AI] | None = None,
        *,
        apply: Callable[[SI, AI], SI] | None = None,
    ) -> None:
        # attrs' own __init__ does exactly this for a frozen class.
        object.__setattr__(self, "question", question)
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "apply", apply)

    @property
    def typed(self) -> bool:
        """Whether the question declares an answer type or an *apply*
        (such an interrupt, once answered, counts as answered)."""
        return self.kind is not None or self.apply is not None

    def structure(self, converter: cattrs.Converter, answer: object) -> AI:
        """*answer* (as stored) as this question's *kind*.

        Raises:
            InvalidAnswer: it does not fit (naming the fields, never the
                values).
        """
        if self.kind is None:
            return cast("AI", answer)
        from .._decode import DECODE_ERRORS, explain  # noqa: PLC0415

        try:
            return converter.structure(answer, cast("type[AI]", self.kind))
        except DECODE_ERRORS as exc:
            raise InvalidAnswer(
                self.kind, "; ".join(explain(exc, self.kind, keys=False))
            ) from None


Decision: TypeAlias = Continue | Stop | Interrupt[Any, Any]
"""What a gate returns: :class:`Continue`, :class:`Stop` or
:class:`Interrupt`."""


@final
@attrs.frozen
class Transition(Generic[S_co]):
    """What a gate sees before a transition runs.

    *source* just finished (``None`` at the start), *targets* run next.
    *answer* is the human's answer when a run interrupted at this very
    transition is resumed with one, as stored (JSON-shaped: see
    :meth:`answer_as` for a typed view); otherwise ``None``.

    .. versionadded:: 0.1.0
    """

    source: str | None
    targets: tuple[str, ...]
    state: S_co
    step: int
    answer: object = None
    converter: cattrs.Converter | None = attrs.field(
        default=None, kw_only=True, eq=False, repr=False
    )
    """The run's converter, which :meth:`answer_as` reads the answer with
    (``None``: a fresh :func:`~pipeline.fold.make_converter`'s)."""

    def answer_as(self, kind: TypeForm[A]) -> A | None:
        """The answer as a *kind* (an attrs class, a ``Literal``, ``int``,
        ...), structured strictly by the run's converter (the one a
        typed :class:`Interrupt` checks answers with, which ``build()``
        checked reads strictly); ``None`` if there is none.

        Answers are stored as JSON (``resume(..., answer=Approval(...))``
        stores the approval's fields), so a gate declares the type it
        expects here.

        Raises:
            InvalidAnswer: the answer does not fit *kind* (the message names
                the type and the fields that do not fit, never the answer).
            TypeError: no answer can be read as *kind* (a type named by a
                string, ``object``, a union of two types taking the same
                kind of JSON value).
        """
        from .._decode import DECODE_ERRORS, explain, readable  # noqa: PLC0415
        from .._serde import make_converter  # noqa: PLC0415

        converter = (
            make_converter() if self.converter is None else self.converter
        )
        # Before any answer: a gate asks only once it found none.
        readable(converter, kind, "Transition.answer_as()")
        if self.answer is None:
            return None
        try:
            return converter.structure(self.answer, cast("type[A]", kind))
        except DECODE_ERRORS as exc:
            raise InvalidAnswer(
                kind, "; ".join(explain(exc, kind, keys=False))
            ) from None


Gate: TypeAlias = Callable[[Transition[S]], Awaitable[Decision]]
"""Decides before a transition: :class:`Continue`, :class:`Stop` or
:class:`Interrupt`."""

Observer: TypeAlias = Callable[[Snapshot[S]], Awaitable[None]]
"""Sees the snapshot each step produced (after it was committed)."""
