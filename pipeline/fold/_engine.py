"""The fold engine: one run loop for every machine.

A machine (a graph, a swarm, an agent's loop) supplies its step, its
snapshot codec and which transitions its gates see; the engine does the
rest, the same way for all of them: limits, gates (continue, stop,
interrupt), observers, events, one committed record per boundary, resume
and nesting (a fold inside the step of another commits through it; see
:mod:`pipeline.fold._journal`).
"""

from __future__ import annotations

import collections

from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import (
    TYPE_CHECKING,
    Any,
    Final,
    Generic,
    NamedTuple,
    Protocol,
    TypeAlias,
    TypeVar,
    cast,
    final,
)

import attrs

from returns.result import Failure, Result, Success

from .._decode import readable
from .._depth import loads
from .._serde import canonical, checksum
from .._step import STEP, Later
from ..errors import InvalidAnswer, NestedTooDeeply, Suspended
from ..events import (
    FoldEvent,
    Interrupted,
    NodeFinished,
    NodeStarted,
    Stopped,
)
from ..failures import (
    IncompatibleGraph,
    InvalidState,
    RunPaused,
    RunStopped,
    StaleAnswer,
    StepLimitExceeded,
)
from ..runs import tracing_now
from ..stores import CheckpointStore, Held, check_thread_id, leased
from . import _checkpoints
from ._ambient import Ambient, ambient
from ._codec import Codec, alike
from ._fingerprint import same_shape
from ._interrupt import refusal, suspension
from ._journal import (
    Boundary,
    Journal,
    NestedJournal,
    ThreadJournal,
    lease_check,
)
from ._model import (
    NO_PROGRESS,
    NULL_ANSWER,
    Continue,
    Decision,
    Gate,
    Interrupt,
    Observer,
    Pending,
    Snapshot,
    Status,
    Stop,
    Transition,
    given,
    kept_answer,
)


if TYPE_CHECKING:
    from .._tracing import Tracing


S = TypeVar("S")
C_contra = TypeVar("C_contra", contravariant=True)

EventSink: TypeAlias = Callable[[FoldEvent], Awaitable[None]]
"""An ``on_event`` callback: awaited with each engine event, in order."""

Migration: TypeAlias = Callable[[Snapshot[Any]], Snapshot[Any]]
"""Maps a snapshot written by another version of a machine to this one
(``resume(..., migrate=...)``); its fingerprint is then replaced."""


class Machine(Protocol[S, C_contra]):
    """What a machine supplies to the engine.

    *C* is the machine's per-run context (its limits, say), passed to every
    step as it was given to the engine's ``run``.

    .. versionadded:: 0.1.0
    """

    @property
    def name(self) -> str:
        """The key this machine's runs nest under inside another fold."""
        ...

    @property
    def fingerprint(self) -> str:
        """Identifies the machine's shape; stored in every record."""
        ...

    @property
    def codec(self) -> Codec[S]:
        """Encodes and decodes this machine's snapshots."""
        ...

    def gated(self, snap: Snapshot[S], /) -> bool:
        """Whether gates see the transition out of *snap*."""
        ...

    async def step(
        self, snap: Snapshot[S], context: C_contra, /
    ) -> Snapshot[S] | Failure[Any]:
        """The transition: the next snapshot (version + 1) or a ``Failure``.

        (Not a ``Result``: wrapping every step in ``Success`` costs more
        than the rest of a trivial step.)
        """
        ...


@final
@attrs.frozen
class Hooks(Generic[S]):
    """Gates (before each gated transition), observers (after each step)
    and an event callback, as one value.

    .. versionadded:: 0.1.0
    """

    gates: Sequence[Gate[S]] = ()
    observers: Sequence[Observer[S]] = ()
    on_event: EventSink | None = None


NO_HOOKS: Hooks[Any] = Hooks()


_READ_NOW: Final[Any] = object()
"""Not given: read the ambient value now."""


def sink(
    on_event: EventSink | None, env: Ambient | None = None
) -> EventSink | None:
    """One place for events: *on_event* and any listening stream (checked
    once per run, in *env* or now: nothing is paid per step when nobody
    listens)."""
    stream = (ambient() if env is None else env).sink
    if stream is None:
        return on_event
    if on_event is None:
        return stream

    async def both(event: FoldEvent) -> None:
        await on_event(event)
        await stream(event)

    return both


async def decide(
    gates: Sequence[Gate[Any]], transition: Transition[Any]
) -> Decision:
    """The first decision that is not :class:`Continue` (else ``Continue``)."""
    for gate in gates:
        decision = await gate(transition)
        if not isinstance(decision, Continue):
            return decision
    return Continue()


async def run_machine(
    machine: Machine[S, C_contra],
    snap: Snapshot[S],
    context: C_contra,
    *,
    store: CheckpointStore | None = None,
    hooks: Hooks[S] = NO_HOOKS,
    max_steps: int,
    digest: str | None = None,
    announce: bool = True,
    env: Ambient | None = None,
) -> Result[Snapshot[S], Any]:
    """Fold *machine* from its admission snapshot *snap*.

    With a *store*, the admission record (version 0) is committed first,
    then one record per step, each before the next step starts.  Without
    one, inside the step of a journaled fold, the run nests in it (and
    continues from what it saved there before, when that step is resumed
    on the same input: *digest* identifies the input, by default the
    admission snapshot's own).  *announce*: whether a listening stream
    gets the engine's events (an agent's loop has events of its own).
    *env*: the ambient values, if the caller read them already.

    .. versionadded:: 0.1.0
    """
    if env is None:
        env = ambient()
    on_event = sink(hooks.on_event, env) if announce else hooks.on_event
    journal: Journal[S] | None = None
    answer: object = None
    if store is not None:

        async def admitted(held: Held) -> Result[Snapshot[S], Any]:
            journal = ThreadJournal(
                store,
                machine.codec,
                snap.thread_id,
                None,
                None,
                on_event,
                held,
            )
            admission = await journal.commit(snap)
            if type(admission) is Failure:
                return admission
            return await drive(
                machine,
                snap,
                journal,
                context,
                hooks,
                on_event,
                max_steps,
                None,
                tracing=env.tracing,
            )

        return await leased(store, check_thread_id(snap.thread_id), admitted)
    boundary = env.boundary
    if boundary is not None:
        if digest is None:
            digest = input_digest(machine.codec.document(snap, None))
        opened = NestedJournal.open(
            boundary, machine.name, machine.codec, digest, base=snap
        )
        if type(opened) is not Success:
            return Failure(opened.failure())
        nested = opened.unwrap()
        journal = nested
        restored = nested.last
        if restored is not None and restored is not snap:
            if not same_shape(restored.fingerprint, machine.fingerprint):
                return Failure(
                    IncompatibleGraph(
                        restored.fingerprint, machine.fingerprint
                    )
                )
            if restored.status is Status.STOPPED:  # a stop stays stopped
                boundary.stop(restored.reason)
                return Success(restored)
            if restored.status is Status.DONE:
                return Success(restored)
            pending = restored.pending
            if restored.status is Status.INTERRUPTED:
                answer = boundary.answer
            else:
                answer = kept_answer(pending)  # checked and committed before
            if answer is None:
                snap = _running(restored)
            else:
                # Kept with its question: the answer is checked against it.
                snap = attrs.evolve(restored, status=Status.RUNNING)
            nested.last = snap
            # (A fresh nested run's admission is not a record of its own:
            # its records are deltas against it, and a resume rebuilds it.)
    return await drive(
        machine,
        snap,
        journal,
        context,
        hooks,
        on_event,
        max_steps,
        answer,
        tracing=env.tracing,
        author="" if boundary is None else boundary.author,
    )


async def resume(
    machine: Machine[S, C_contra],
    snap: Snapshot[S],
    context: C_contra,
    *,
    store: CheckpointStore,
    head: int | None,
    held: Held | None = None,
    answer: object = None,
    author: str = "",
    question: str | None = None,
    migrate: Migration | None = None,
    hooks: Hooks[S] = NO_HOOKS,
    max_steps: int,
) -> Result[Snapshot[S], Any]:
    """Continue a thread from the loaded snapshot *snap* (head *head*).

    An *answer* applies to the question *snap* waits at, and only if it
    is that question (*question*, its id, when given): else
    :class:`~pipeline.failures.StaleAnswer`, and nothing runs.  When
    several fan-out branches or ``map_reduce`` items wait at once
    (:attr:`~pipeline.fold.Snapshot.questions`), *question* says which one
    the answer is for: that one runs on, the others keep waiting.  It is
    committed first, as a record of its own naming its *author* (a crash
    after answering never asks again); a run resumed after such a record finds its answer there.
    A stopped thread stays stopped: its stop is returned, nothing runs.
    """
    target: Pending | None = None
    if answer is not None or question is not None:
        questions = snap.questions
        if question is not None:
            target = questions.get(question)
        elif len(questions) == 1:
            (target,) = questions.values()
        if target is None:
            return Failure(
                StaleAnswer(
                    snap.thread_id,
                    question,
                    ", ".join(questions) or None,
                    str(snap.status),
                )
            )
    # The journal's last record is the one stored, not its migration: the
    # next record is a delta against what a reader decodes (so it stores
    # the migrated state and fingerprint).
    head_snap = snap
    if not same_shape(snap.fingerprint, machine.fingerprint):
        if migrate is None:
            return Failure(
                IncompatibleGraph(snap.fingerprint, machine.fingerprint)
            )
        snap = attrs.evolve(migrate(snap), fingerprint=machine.fingerprint)
    if snap.status in _ENDED:
        return Success(snap)
    on_event = sink(hooks.on_event)
    journal = ThreadJournal(
        store, machine.codec, snap.thread_id, head_snap, head, on_event, held
    )
    pending = snap.pending
    if snap.status is Status.INTERRUPTED and answer is not None:
        stored = stored_answer(machine.codec, answer)
        if isinstance(stored, InvalidState):
            return Failure(stored)
        assert target is not None  # noqa: S101  # paused runs have one
        # Each question keeps the version that asked it (and so its id)
        # while the others are answered.
        asked = [
            attrs.evolve(
                p,
                asked=snap.version if p.asked is None else p.asked,
                waiting=(),
            )
            for p in snap.questions.values()
        ]
        chosen = asked[list(snap.questions.values()).index(target)]
        others = tuple(p for p in asked if p is not chosen)
        alone = not others and target.asked is None and not target.scope
        if alone:
            chosen = target  # one question, as records always held it
        if alone and (snap.progress or (hooks.gates and machine.gated(snap))):
            # Checked first (by the gates, or by the interrupt() in the
            # step that asked), then committed: a refused answer is never
            # stored.
            return await drive(
                machine,
                attrs.evolve(snap, status=Status.RUNNING),
                journal,
                context,
                hooks,
                on_event,
                max_steps,
                stored,
                author=author,
            )
        answered = attrs.evolve(
            snap,
            version=snap.version + 1,
            parent=snap.version,
            status=Status.RUNNING,
            pending=attrs.evolve(
                chosen, answer=given(stored), answered=True, waiting=others
            ),
            author=author,
        )
        committed = await journal.commit(
            answered, NO_PROGRESS if snap.progress else None
        )
        if type(committed) is Failure:
            return committed
        snap = committed
        pending = snap.pending
    elif snap.status is not Status.RUNNING:
        snap = _still_waiting(snap)
    answer = kept_answer(pending)
    if snap.status is not Status.RUNNING:
        snap = _running(snap)
    return await drive(
        machine, snap, journal, context, hooks, on_event, max_steps, answer
    )


async def resume_thread(
    machine: Machine[S, C_contra],
    context: C_contra,
    *,
    store: CheckpointStore,
    thread_id: str,
    version: int | None,
    answer: object,
    question: str | None = None,
    migrate: Migration | None,
    hooks: Hooks[S],
    max_steps: int,
    author: str = "",
) -> Result[Snapshot[S], Any]:
    """Resume a thread (from its head, or from *version*) holding its lease.

    The lease is taken first, so the snapshot loaded is the head the run's
    first commit expects: no other runner can commit in between.
    """

    async def body(held: Held) -> Result[Snapshot[S], Any]:
        loaded = await _checkpoints.load_for_resume(
            machine.codec, store, thread_id, version, sink(hooks.on_event)
        )
        if type(loaded) is not Success:
            return Failure(loaded.failure())
        snap, head = loaded.unwrap()
        return await resume(
            machine,
            snap,
            context,
            store=store,
            head=head,
            held=held,
            answer=answer,
            author=author,
            question=question,
            migrate=migrate,
            hooks=hooks,
            max_steps=max_steps,
        )

    return await leased(store, check_thread_id(thread_id), body)


MAX_AUTHOR = 256
"""The longest author a record keeps (characters)."""


def checked_author(author: object) -> str:
    """*author* (who answered), if a record can keep it: a ``str`` of at
    most 256 characters, no NUL, no lone surrogate; else a
    ``TypeError``/``ValueError`` saying why (never showing it).

    .. versionadded:: 0.1.0
    """
    if not isinstance(author, str):
        msg = f"author must be a str, not a {type(author).__name__}"
        raise TypeError(msg)
    problem = None
    if len(author) > MAX_AUTHOR:
        problem = f"{len(author)} characters, not at most {MAX_AUTHOR}"
    elif "\x00" in author:
        problem = "it holds NUL"
    else:
        try:
            author.encode()
        except UnicodeEncodeError:
            problem = "it holds a lone surrogate"
    if problem is not None:
        msg = f"author cannot be stored: {problem}"
        raise ValueError(msg)
    return author


_JSON_ANSWER = "a JSON value (None, bool, int, float, str, list, dict with str keys) or an attrs instance"


def stored_answer(codec: Codec[Any], answer: object) -> object:
    """*answer* as the record will hold it (JSON-shaped), or why not: the
    gate sees the same value live as after a crash, so what does not come
    back from JSON as it was (``bytes``, tuples, integer keys) is refused.

    .. versionadded:: 0.1.0
    """
    if answer is NULL_ANSWER:
        return answer
    try:
        stored = codec.converter.unstructure(answer)
        back = loads(canonical(stored), "the answer")
    except NestedTooDeeply as exc:
        return InvalidState("<answer>", "answer", _JSON_ANSWER, str(exc))
    except (ValueError, TypeError, RecursionError) as exc:
        # (RecursionError: cattrs unstructuring a deep Python value.)
        return InvalidState(
            "<answer>", "answer", _JSON_ANSWER, type(exc).__name__
        )
    typed = attrs.has(type(answer))
    if not alike(codec.converter, back, stored) or not (
        typed or alike(codec.converter, back, answer)
    ):
        return InvalidState(
            "<answer>",
            "answer",
            _JSON_ANSWER,
            "does not come back from JSON as it was",
        )
    return back


_NOT_INPUT = frozenset({"fp", "at", "by"})


def input_digest(doc: dict[str, Any]) -> str:
    """Identifies a nested run's input: its admission document without the
    machine's fingerprint (a changed machine must be *refused* on resume,
    as :class:`~pipeline.failures.IncompatibleGraph`, not silently started
    afresh), without run ids (a context made anew on every attempt gets
    a new one), and without when and by whom it was written."""
    doc = {k: v for k, v in doc.items() if k not in _NOT_INPUT}
    return checksum(canonical(_without_run_ids(doc)))[:16]


def _without_run_ids(value: Any) -> Any:
    # Contexts unstructure to messages, metadata and run_id: drop the
    # id wherever one sits (iteratively: states may nest deeply).
    root: dict[str, Any] = {"v": value}
    stack: list[Any] = [root]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if "run_id" in node and "metadata" in node:
                node.pop("run_id")
            stack.extend(
                v for v in node.values() if isinstance(v, (dict, list))
            )
        else:
            stack.extend(v for v in node if isinstance(v, (dict, list)))
    return root["v"]


_ENDED = frozenset({Status.DONE, Status.STOPPED})


def _still_waiting(snap: Snapshot[S]) -> Snapshot[S]:
    """*snap* (paused) resumed without an answer: running again, where the
    fan-out branches or ``map_reduce`` items that wait keep waiting (not
    run; their questions keep their ids); a step's own question is asked
    again."""
    questions = snap.questions
    if not any(p.scope for p in questions.values()):
        return _running(snap)
    waiting = tuple(
        attrs.evolve(
            p,
            asked=snap.version if p.asked is None else p.asked,
            waiting=(),
        )
        for p in questions.values()
    )
    carrier = Pending(snap.node, snap.next, "", waiting=waiting)
    return attrs.evolve(snap, status=Status.RUNNING, pending=carrier)


def _running(snap: Snapshot[S]) -> Snapshot[S]:
    if snap.status is Status.RUNNING:
        return snap
    return attrs.evolve(snap, status=Status.RUNNING, pending=None)


async def drive(
    machine: Machine[S, C_contra],
    snap: Snapshot[S],
    journal: Journal[S] | None,
    context: C_contra,
    hooks: Hooks[S],
    on_event: EventSink | None,
    max_steps: int,
    answer: object,
    *,
    tracing: Tracing | None = _READ_NOW,
    author: str = "",
) -> Result[Snapshot[S], Any]:
    """The run loop: fold *machine*'s step from *snap* until it is done.

    Inside a traced :func:`pipeline.scope` (*tracing*, read now unless the
    caller read it already), the run is a span and each step a span in it
    (checked once here: untraced steps pay nothing).

    An *answer* to the question *snap* holds unanswered (a resume's) is
    checked before it is committed: by the gates (and against the type a
    typed :class:`Interrupt` declares; its *apply* makes the state the
    answer's record commits), or by the :func:`pipeline.interrupt` in the
    step that asked it; either way the record names *author*.  A refused
    answer (:class:`~pipeline.errors.InvalidAnswer`) is raised with nothing
    committed for it.

    .. versionadded:: 0.1.0
    """
    if tracing is _READ_NOW:
        tracing = tracing_now()
    bare = journal is None and on_event is None and not hooks.gates
    drive = _bare if bare and not hooks.observers else _drive
    run = _Run(
        machine,
        journal,
        context,
        hooks,
        on_event,
        max_steps,
        machine.step,
        author,
    )
    tail: collections.deque[str] = collections.deque(maxlen=8)
    if tracing is None:
        return await drive(run, snap, answer, tail)
    with tracing.fold(machine) as span:
        run = run._replace(step=tracing.steps(machine, machine.step))
        out = await drive(run, snap, answer, tail)
        tracing.outcome(span, out)
        return out


class _Run(NamedTuple, Generic[S, C_contra]):
    """What stays the same for a whole run of :func:`_drive` or
    :func:`_bare`: built once per run, unpacked into locals before the
    first step (so a step reads no attribute of it)."""

    machine: Machine[S, C_contra]
    journal: Journal[S] | None
    context: C_contra
    hooks: Hooks[S]
    on_event: EventSink | None
    max_steps: int
    step: Callable[
        [Snapshot[S], C_contra], Awaitable[Snapshot[S] | Failure[Any]]
    ]
    author: str


async def _drive(
    run: _Run[S, C_contra],
    snap: Snapshot[S],
    answer: object,
    tail: collections.deque[str],
) -> Result[Snapshot[S], Any]:
    machine, journal, context, hooks, on_event, max_steps, step, author = run
    # check: who says whether a step may start (the thread's lease, found
    # once for the run, not through the journal's coroutine every step).
    # held: the same lease, which answers at once while fresh (no
    # coroutine to await).
    gates, observers, (check, held) = (
        hooks.gates,
        hooks.observers,
        _checks(journal),
    )
    while snap.next:
        if snap.step >= max_steps:
            limit = StepLimitExceeded(max_steps, tuple(tail))
            stopped = await _stop(snap, journal, on_event, str(limit))
            return stopped if type(stopped) is Failure else Failure(limit)
        inner_answer: object = None
        pending = snap.pending
        fresh = answer is not None and pending is not None
        fresh = fresh and pending is not None and not pending.answered
        if snap.progress:
            # The step had started: its gates passed then.  An answer is for
            # the nested fold that paused inside it.
            inner_answer, answer = answer, None
        elif gates and machine.gated(snap):
            gated = await _gate(
                machine, gates, snap, journal, on_event, answer, author
            )
            if type(gated) is Failure:
                return gated
            decision, snap = gated
            answer = None
            if isinstance(decision, Stop):
                return await _stop(snap, journal, on_event, decision.reason)
            if isinstance(decision, Interrupt):
                return await _pause(
                    snap,
                    journal,
                    on_event,
                    Pending(snap.node, snap.next, decision.question),
                    NO_PROGRESS,
                )
        # Never start a step on a lease that may have lapsed while this
        # runner stalled (another may have taken the thread over).
        if (
            check is not None
            and (held is None or not held.fresh())
            and (lapsed := await check.ensure()) is not None
        ):
            return lapsed
        if on_event is not None:
            await on_event(NodeStarted(snap.next, snap.step))
        if journal is None:
            new = await step(snap, context)
            if type(new) is Failure:
                return new
        else:
            # Made only if the step looks at it (a nested fold, a question
            # asked) or it raised: most steps never do.
            later = Later(
                partial(_boundary, journal, snap, inner_answer, author),
                # What Boundary.fresh will say, known without making it.
                fresh=inner_answer is None and not snap.progress,
            )
            head = journal.head
            token = STEP.set(later)
            try:
                new = await step(snap, context)
            except InvalidAnswer:
                # Refused (by the interrupt() that asked, a nested gate):
                # never committed; ask again if the step committed anything.
                if _asks_again(inner_answer, fresh, journal, head):
                    await _ask_again(
                        snap, journal, on_event, _made(later).now()
                    )
                raise
            except (Suspended, BaseExceptionGroup) as raised:
                # pipeline.interrupt() in the step (in concurrent tasks of
                # it, maybe several: a group of nothing else).
                return await _asked(
                    snap,
                    journal,
                    on_event,
                    _made(later),
                    raised,
                    _asks_again(inner_answer, fresh, journal, head),
                )
            finally:
                STEP.reset(token)
            if type(new) is Failure:
                return await _step_failed(
                    snap, journal, on_event, _made(later), new
                )
            committed = await journal.commit(new)
            if type(committed) is Failure:
                return committed
            new = committed
        if on_event is not None:
            await on_event(NodeFinished(snap.next, new.step))
        for observe in observers:
            await observe(new)
        tail.append(new.node or "")  # for StepLimitExceeded's tail
        snap = new
    if snap.status is Status.DONE:
        return Success(snap)
    return Success(attrs.evolve(snap, status=Status.DONE))


def _checks(
    journal: Journal[Any] | None,
) -> tuple[Held | Journal[Any] | None, Held | None]:
    """Who says whether a step of a run on *journal* may start (see
    :func:`lease_check`), and the same if it is a lease (else ``None``):
    a lease is asked at once (:meth:`~pipeline.stores.Held.fresh`), and
    awaited only near its expiry."""
    check = lease_check(journal)
    return check, check if type(check) is Held else None


async def _bare(
    run: _Run[S, C_contra],
    snap: Snapshot[S],
    answer: object,
    tail: collections.deque[str],
) -> Result[Snapshot[S], Any]:
    """:func:`_drive` for a run with nothing to gate, report, observe or
    commit (an answer only reaches gates and commits): the steps alone,
    then :func:`_drive` for the end (done, or the step limit)."""
    step, context, max_steps = run.step, run.context, run.max_steps
    while snap.next and snap.step < max_steps:
        new = await step(snap, context)
        if type(new) is Failure:
            return new
        tail.append(new.node or "")  # for StepLimitExceeded's tail
        snap = new
    return await _drive(run, snap, answer, tail)


def _made(later: Later) -> Boundary:
    """The boundary of the step in flight, made now if the step did not
    look at it (then it is as the step found it: nothing touched it)."""
    made: Any = later.get()
    boundary: Boundary = made
    return boundary


def _boundary(
    journal: Journal[S], snap: Snapshot[S], answer: object, author: str
) -> Boundary:
    """The boundary of the step out of *snap* (with the *answer* for what
    paused in it): in a thread's own step, its branches and items ask
    apart (see :meth:`Boundary.open_scopes`)."""
    boundary = Boundary(journal, snap.progress, answer, author=author)
    if isinstance(journal, ThreadJournal):
        boundary.open_scopes(snap.pending)
    return boundary


async def _gate(
    machine: Machine[S, Any],
    gates: Sequence[Gate[S]],
    snap: Snapshot[S],
    journal: Journal[S] | None,
    on_event: EventSink | None,
    answer: object,
    author: str,
) -> tuple[Decision, Snapshot[S]] | Failure[Any]:
    """What *gates* decide for the transition out of *snap*, and the
    snapshot the transition starts from.

    With an *answer* to the question *snap* holds: unanswered (a resume's),
    it is checked first (the gates, the type a typed :class:`Interrupt` for
    that question declares), then committed with *author* and the state
    that interrupt's *apply* makes of it; a refused one is raised, nothing
    committed.  Answered already (a crash since), the typed interrupt
    counts as answered (checked and applied then): the transition goes
    ahead."""
    pending = snap.pending
    # Fresh: not checked yet.  Without a journal (a Temporal workflow,
    # replayed from its history) nothing was committed: checked every time.
    fresh = (
        answer is not None
        and pending is not None
        and (journal is None or not pending.answered)
    )
    state = snap.state
    try:
        converter = machine.codec.converter
        decision = await decide(
            gates,
            Transition(
                snap.node,
                snap.next,
                state,
                snap.step,
                given(answer),
                converter=converter,
            ),
        )
        if isinstance(decision, Interrupt) and decision.kind is not None:
            readable(converter, decision.kind, "Interrupt()")
        if (
            answer is not None
            and isinstance(decision, Interrupt)
            and decision.typed
            and pending is not None
            and decision.question == pending.question
        ):
            if fresh:
                typed = decision.structure(converter, given(answer))
                if decision.apply is not None:
                    state = decision.apply(state, typed)
            decision = Continue()
    except InvalidAnswer:
        if answer is not None and not fresh:
            await _ask_again(snap, journal, on_event, NO_PROGRESS)
        raise
    if fresh and journal is None:
        snap = attrs.evolve(snap, state=state)
    elif fresh and pending is not None and journal is not None:
        answered = attrs.evolve(
            snap,
            version=snap.version + 1,
            parent=snap.version,
            state=state,
            status=Status.RUNNING,
            pending=attrs.evolve(pending, answer=given(answer), answered=True),
            author=author,
        )
        committed = await journal.commit(answered)
        if type(committed) is Failure:
            return committed
        snap = committed
    return decision, snap


async def _asked(
    snap: Snapshot[S],
    journal: Journal[S],
    on_event: EventSink | None,
    boundary: Boundary,
    raised: Suspended | BaseExceptionGroup[Any],
    again: bool,
) -> Result[Snapshot[S], Any]:
    """The step out of *snap* asked a question (:func:`pipeline.interrupt`):
    pause at it (or fail, if it could not be recorded: the failure the
    :class:`Suspended` carries).  A concurrent task of the step (a fan-out
    branch, a tool call) that refused the *answer* while its siblings
    waited: ask again, and raise its
    :class:`~pipeline.errors.InvalidAnswer` alone (as a step that is one
    task does; *again*: see :func:`_asks_again`).  A group holding
    anything else is raised again, as it was."""
    refused = refusal(raised)
    if refused is not None:
        if again:
            await _ask_again(snap, journal, on_event, boundary.now())
        raise refused from None
    asked = suspension(raised)
    if asked is None:
        raise raised
    if asked.failure is not None:
        return cast("Failure[Any]", asked.failure)
    return await _pause(
        snap, journal, on_event, _waiting(snap, boundary), boundary.now()
    )


def _asks_again(
    answer: object, fresh: bool, journal: Journal[Any], head: int | None
) -> bool:
    """Whether a step that refused its *answer* must record that it asks
    again: the answer was stored before (not *fresh*), or the step
    committed something since it started at *head*; else nothing was
    written and the thread still waits where it did."""
    return answer is not None and (not fresh or journal.head != head)


def _waiting(snap: Snapshot[Any], boundary: Boundary) -> Pending:
    """What the step out of *snap* waits at: the question it asked, or
    those its branches or items ask (the first, the others with it)."""
    asked = boundary.pending()
    if not asked:
        return Pending(
            snap.node,
            snap.next,
            boundary.paused or "",
            payload=boundary.payload,
        )
    placed = [
        attrs.evolve(p, source=snap.node, targets=snap.next) for p in asked
    ]
    return attrs.evolve(placed[0], waiting=tuple(placed[1:]))


async def _step_failed(
    snap: Snapshot[S],
    journal: Journal[S],
    on_event: EventSink | None,
    boundary: Boundary,
    new: Failure[Any],
) -> Result[Snapshot[S], Any]:
    """The step out of *snap* failed with *new*: a fold nested in it that
    paused or stopped (and recorded it) makes this one pause or stop too,
    for the same question or reason; any other failure is the run's."""
    failure = new.failure()
    if boundary.paused is not None and isinstance(failure, RunPaused):
        return await _pause(
            snap, journal, on_event, _waiting(snap, boundary), boundary.now()
        )
    if boundary.stopped is not None and isinstance(
        failure, RunStopped | StepLimitExceeded
    ):
        stopped = await _stop(snap, journal, on_event, boundary.stopped)
        if type(stopped) is Failure or isinstance(failure, RunStopped):
            return stopped
    return new


async def _ask_again(
    snap: Snapshot[S],
    journal: Journal[S] | None,
    on_event: EventSink | None,
    progress: Any,
) -> None:
    """A gate refused the answer *snap* was resumed with
    (:class:`~pipeline.errors.InvalidAnswer`): pause again at the same
    question, so the human can answer anew, before the error propagates.

    Only the level that holds the question re-pauses (a resumed thread
    keeps its answered question until its next step); a nested fold
    restored from a pause has none, and leaves it to the level above.
    """
    if snap.pending is not None:
        # (Should the record fail to commit, the thread stays answered,
        # as before: the InvalidAnswer still propagates.)
        pending = snap.pending
        await _pause(
            snap,
            journal,
            on_event,
            attrs.evolve(pending, answer=None, answered=False),
            progress,
        )


async def _stop(
    snap: Snapshot[S],
    journal: Journal[S] | None,
    on_event: EventSink | None,
    reason: str,
) -> Result[Snapshot[S], Any]:
    """Stop the run before the transition out of *snap*, for *reason*:
    with a journal, the stop is a record of its own (status ``stopped``,
    the reason with it), so the thread stays stopped."""
    stopped = attrs.evolve(
        snap,
        version=snap.version + 1,
        parent=snap.version,
        status=Status.STOPPED,
        pending=None,
        progress=NO_PROGRESS,
        reason=reason,
        author="",  # the run's own record: it names nobody
    )
    if journal is not None:
        committed = await journal.commit(stopped)
        if type(committed) is Failure:
            return committed
        stopped = committed
    else:
        # Nothing recorded: the snapshot the run returns is *snap*, stopped.
        stopped = attrs.evolve(snap, status=Status.STOPPED, reason=reason)
    if on_event is not None:
        await on_event(Stopped(reason))
    return Success(stopped)


async def _pause(
    snap: Snapshot[S],
    journal: Journal[S] | None,
    on_event: EventSink | None,
    pending: Pending,
    progress: Any,
) -> Result[Snapshot[S], Any]:
    question = pending.question
    paused = attrs.evolve(
        snap,
        version=snap.version + 1,
        parent=snap.version,
        status=Status.INTERRUPTED,
        pending=pending,
        progress=progress,
        author="",  # the run's own record: it names nobody
    )
    if journal is not None:
        # Progress survives the pause: the record continues it ("in": {}).
        committed = await journal.commit(
            paused, NO_PROGRESS if progress else None
        )
        if type(committed) is Failure:
            return committed
        paused = committed
    if on_event is not None:
        await on_event(Interrupted(question))
    return Success(paused)


def outcome(result: Result[Snapshot[S], Any], where: str) -> Result[S, Any]:
    """A run's result as a handler's: the final state, or why there is none.

    A stop is :class:`~pipeline.failures.RunStopped` and a pause
    :class:`~pipeline.failures.RunPaused` (inside a journaled fold the pause
    was recorded: the enclosing run pauses too).
    """
    if type(result) is not Success:
        return result  # type: ignore[return-value]  # a Failure either way
    snap = result.unwrap()
    if snap.status is Status.DONE:
        return Success(snap.state)
    if snap.status is Status.STOPPED:
        return Failure(RunStopped(snap.reason, path=(where,)))
    question = snap.pending.question if snap.pending is not None else ""
    return Failure(RunPaused(question, path=(where,)))
