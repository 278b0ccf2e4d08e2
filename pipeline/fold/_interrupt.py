"""A typed question from inside a step: :func:`interrupt`.

A step of a checkpointed run (a graph's node, a tool an agent calls in
one, a handler nested in either) asks a human and waits for the answer.
The question is a record: the step is unwound (:class:`Suspended`), the
run pauses at it, and ``resume(answer=...)`` runs the step again, where
the same call now returns the answer, structured into the declared type.

Questions are progress of the step in flight (``q:<digest>#<k>``, the
*k*-th question of the step asking the text and payload *digest* stands
for; see :mod:`pipeline.fold._journal`): a question answered once is
answered for good (a later question of the same step, a crash, replay it
from the record), and the folds nested in the step before the question (an
agent's turns, its tool calls) are not run again.  One question is pending
at a time in each part of a step that asks apart: in a thread's own
step, each fan-out branch and each ``map_reduce`` item (several may wait
at once, each answered by id; see :meth:`Boundary.open_scopes`); elsewhere
(concurrent tool calls, the branches of a nested graph) one is asked, and
the others in the attempts after its answer.
"""

from __future__ import annotations

import contextvars

from collections.abc import Callable
from types import TracebackType
from typing import Any, TypeVar, cast, final

import anyio
import cattrs

from typing_extensions import TypeForm

from .._decode import DECODE_ERRORS, explain, readable
from .._depth import loads
from .._serde import canonical, checksum
from ..errors import InvalidAnswer, NestedTooDeeply, NotCheckpointed, Suspended
from ..secrets import given_by_value
from ._journal import current_boundary, suspension
from ._model import given


A = TypeVar("A")

__all__ = ("Answered", "checked_interrupt", "interrupt", "suspension")


@final
class Answered:
    """Whether the code run inside it (``with Answered() as got:``) got an
    answer from :func:`pipeline.interrupt` (``got.answered``): an agent's loop keeps
    such a tool call's result, so the call does not run again when another
    question pauses the turn.

    .. versionadded:: 0.1.0
    """

    __slots__ = ("_token", "answered")

    def __init__(self) -> None:
        self.answered = False
        self._token: contextvars.Token[Answered | None] | None = None

    def __enter__(self) -> Answered:
        self._token = _ANSWERED.set(self)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._token is not None:
            _ANSWERED.reset(self._token)


_ANSWERED: contextvars.ContextVar[Answered | None] = contextvars.ContextVar(
    "pipeline_answered", default=None
)


def _got_answer() -> None:
    mark = _ANSWERED.get()
    if mark is not None:
        mark.answered = True


async def interrupt(
    question: str, kind: TypeForm[A], /, *, payload: object = None
) -> A:
    """Ask a human *question* and wait for an answer of type *kind*.

    Called in the step of a checkpointed run (a graph or swarm run with a
    ``store=``: a node, a tool or handler running inside one).  The first
    time, the question (with *payload*, any value the converter turns into
    JSON: what the human should look at) is committed as the pending
    question of the thread, and the run returns paused
    (``snapshot.pending.question``, ``.payload``, ``.question_id``).
    ``resume(..., answer=...)`` commits the answer, then runs the step
    again from its start: this call now returns the answer as a *kind*.

    What runs twice: the part of the step before the question, unless it
    went through the run's journal (an agent's turns and tool calls, a
    nested graph: those are replayed from their records).  Put side
    effects after the question, or in a journaled fold.  A step may ask
    several questions, one at a time (also from concurrent tool calls):
    each is answered in turn, and the answers given before are replayed.
    The fan-out branches and ``map_reduce`` items of a thread's step each
    ask apart: several may wait at once (``snapshot.questions``), each
    answered by its id, and those that finished are kept meanwhile.  Questions are told apart by their text and payload (and, for
    equal ones, by their order): a question whose text or payload changed
    since it was answered is asked anew.

    >>> import attrs
    >>> @attrs.frozen
    ... class Approval:
    ...     approved: bool
    ...     note: str = ""
    >>> async def review(state: str) -> str:
    ...     answer = await interrupt("ship it?", Approval, payload=state)
    ...     return f"{state}: {answer.note}" if answer.approved else state

    Raises:
        InvalidAnswer: the answer the run was resumed with does not fit
            *kind* (naming the fields and types, never the values); the
            thread waits at the same question again.
        NotCheckpointed: called outside the step of a checkpointed run.
        TypeError: *payload* cannot be stored as JSON, or no answer can
            be read as *kind* (a type named by a string, ``object``, a
            union of two types taking the same kind of JSON value): said
            when asked, never after the thread waits.
        Suspended: the question is recorded and the run pauses (the
            engine catches it; never catch it yourself).

    .. versionadded:: 0.1.0
    """
    return await checked_interrupt(question, kind, payload=payload)


async def checked_interrupt(
    question: str,
    kind: TypeForm[A],
    /,
    *,
    payload: object = None,
    check: Callable[[A], None] | None = None,
) -> A:
    """:func:`pipeline.interrupt`, where *check* (given the typed answer, raising
    :class:`~pipeline.errors.InvalidAnswer`) refuses an answer beyond its
    type before it is committed: the thread waits at the same question
    again (the approval of a tool call checks edited arguments so).

    .. versionadded:: 0.1.0
    """
    boundary = current_boundary()
    if boundary is None:
        raise NotCheckpointed(question)
    converter = boundary.converter
    readable(converter, kind, "interrupt()")
    stored = _stored(converter, payload)
    key = boundary.question_key(checksum(canonical([question, stored]))[:16])
    docs = boundary.docs(key)
    last = docs[-1] if docs and isinstance(docs[-1], dict) else None
    if last is not None and "answer" in last:  # answered before: replayed
        typed = _typed(converter, last["answer"], kind)
        _got_answer()
        return typed
    if (
        last is not None
        and boundary.answer is not None
        and not boundary.asking()
    ):
        # This question paused the run, and the run was resumed with an
        # answer: checked first, then kept (later questions replay it).
        answer = given(boundary.answer)
        try:
            typed = _typed(converter, answer, kind, check, fresh=True)
        except InvalidAnswer:
            boundary.hold()  # the run asks this question again
            raise
        failed = None
        with anyio.CancelScope(shield=True):
            failed = await boundary.save(
                key, {"answer": answer}, boundary.author
            )
        if failed is not None:
            raise Suspended(failed)
        _got_answer()
        return typed
    if boundary.asking():
        # Another question of this step (a concurrent tool call or branch)
        # is pending: this one is asked in a later attempt.
        raise Suspended
    boundary.pause(question, stored)  # claimed before any await
    if last is None or last.get("asked") != question:
        doc: dict[str, Any] = {"asked": question}
        if stored is not None:
            doc["payload"] = stored
        # Kept even when a sibling's question is cancelling this task at
        # this very moment: the pause names this question.
        failed = None
        with anyio.CancelScope(shield=True):
            failed = await boundary.save(key, doc)
        if failed is not None:
            raise Suspended(failed)
    raise Suspended


def refusal(raised: BaseException) -> InvalidAnswer | None:
    """The :class:`~pipeline.errors.InvalidAnswer` in *raised*, a group of
    nothing else but :class:`~pipeline.errors.Suspended` (concurrent tasks
    of a step: the one the answer was for refused it, its siblings were
    waiting); else ``None``."""
    if not isinstance(raised, BaseExceptionGroup):
        return None
    found, rest = raised.split(InvalidAnswer)
    if found is None or (rest is not None and suspension(rest) is None):
        return None
    stack: list[BaseException] = [found]
    while stack:
        exc = stack.pop()
        if isinstance(exc, BaseExceptionGroup):
            stack.extend(exc.exceptions)
        elif isinstance(exc, InvalidAnswer):
            return exc
    return None  # pragma: no cover  # split found one


def _typed(
    converter: cattrs.Converter,
    answer: object,
    kind: TypeForm[A],
    check: Callable[[A], None] | None = None,
    *,
    fresh: bool = False,
) -> A:
    """*answer* as a *kind*; a *fresh* one (not stored yet) takes its
    ``Secret`` fields only as references (``{"$secret": REF}``): one given
    in the clear would be stored in the clear (answers are records)."""
    try:
        typed = converter.structure(answer, cast("type[A]", kind))
    except DECODE_ERRORS as exc:
        raise InvalidAnswer(
            kind, "; ".join(explain(exc, kind, keys=False))
        ) from None
    if fresh and (where := given_by_value(typed)):  # whatever *kind* says
        raise InvalidAnswer(kind, f"{_BY_VALUE} at {where}")
    if check is not None:
        check(typed)
    return typed


_BY_VALUE = 'a secret given by value (give a reference: {"$secret": REF})'


def _stored(converter: cattrs.Converter, payload: object) -> object:
    """*payload* as the record holds it (JSON-shaped)."""
    if payload is None:
        return None
    try:
        return loads(canonical(converter.unstructure(payload)), "the payload")
    except (ValueError, TypeError, RecursionError, NestedTooDeeply):
        msg = (
            "interrupt(): the payload must turn into JSON (an attrs "
            "instance, a dict with str keys, a list, a str, a number); "
            f"a {type(payload).__name__} does not"
        )
        raise TypeError(msg) from None
