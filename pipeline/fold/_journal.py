"""Journals: where a fold commits its records, and what nested folds see.

A fold given a store commits to a thread of that store
(:class:`ThreadJournal`): one record per boundary, each a compare-and-set
on the thread's head.  A fold running *inside the step* of a journaled fold
(an agent's loop inside a graph node, a swarm inside a graph, a graph
inside a graph) has no thread of its own: it finds the step's
:class:`Boundary` and commits through it (:class:`NestedJournal`).  Each
of its records becomes a *progress* record of the enclosing thread, so a
crash inside the nested fold loses at most its step in flight, however
deep the nesting; the enclosing step's own record, once committed, starts
afresh.

Progress is keyed: ``f:<name>#<k>`` for the *k*-th fold named *name* that
started in the step (a node may run the same agent twice), ``b:<branch>``
for a fan-out branch's output, ``m:<label>#<k>/<n>`` for item *n*'s output
of the *k*-th ``map_reduce`` named *label*; a branch's or item's own
nested folds and questions live under that key and a ``/``.  Names are
quoted, so keys never collide.

In a thread's own step, each fan-out branch and ``map_reduce`` item is a
*scope* of its own: it asks its questions one at a time, but apart from
the others, so several may wait at once (each answered by id), and a
branch or item that waits is not run again until its answer comes.
"""

from __future__ import annotations

import contextvars
import hashlib

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Generic, TypeVar, final
from urllib.parse import quote

import anyio
import attrs
import cattrs

from returns.result import Failure, Result, Success

from .._concurrency import new_lock
from .._step import STEP, Later
from .._writable import writable_twin
from ..errors import Suspended
from ..events import CheckpointSaved
from ..failures import ConcurrentModification, LeaseLost
from ..stores import CheckpointStore, Held, MemoryStore, Record
from ._codec import Codec, Doc, Memo, check_document
from ._model import Pending, Progress, Snapshot, Status


S = TypeVar("S")

_new = object.__new__
_sha256 = hashlib.sha256
_MEMORY_COMMIT = MemoryStore.commit
"""The memory store's own commit, which awaits nothing (see
:meth:`ThreadJournal.hold`)."""
_BuildingRecord = writable_twin(Record)
"""A :class:`~pipeline.stores.Record` being built (see
:mod:`pipeline._writable`)."""


@final
class _General:
    """What :meth:`Journal.repeat` returns to have the general way taken."""

    __slots__ = ()


_GENERAL = _General()

Sink = Callable[[Any], Awaitable[None]]

# Lives on a lower floor (see pipeline._step), so map_reduce sees it.
_BOUNDARY: contextvars.ContextVar[Boundary | None] = STEP


def current_boundary() -> Boundary | None:
    """The step in flight of the innermost journaled fold, if any.

    .. versionadded:: 0.1.0
    """
    out: Any = _BOUNDARY.get()
    if type(out) is Later:  # a map_reduce item's, made on first use
        out = out.get()
    boundary: Boundary | None = out
    return boundary


def known_fresh() -> bool:
    """Whether the step in flight is known to be fresh (see
    :attr:`Boundary.fresh`) without making its boundary: a journaled
    fold's step not yet looked at, that started with no answer to deliver
    and nothing saved (nothing it does later can change that).

    .. versionadded:: 0.1.0
    """
    out: Any = _BOUNDARY.get()
    return type(out) is Later and out.made is None and out.fresh


def enter(boundary: Boundary | None) -> contextvars.Token[Boundary | None]:
    """Make *boundary* current (undo with :func:`leave`).

    .. versionadded:: 0.1.0
    """
    return _BOUNDARY.set(boundary)


def leave(token: contextvars.Token[Boundary | None]) -> None:
    """Undo :func:`enter`.

    .. versionadded:: 0.1.0
    """
    _BOUNDARY.reset(token)


def fold_key(name: str, occurrence: int) -> str:
    """The progress key of the *occurrence*-th fold named *name* in a step."""
    return f"f:{_quoted(name)}#{occurrence}"


def _quoted(name: str) -> str:
    """``quote(name, safe="")``, kept for the names seen (a few agents'
    and nodes' names, each quoted at every checkpointed run of it: urllib
    encodes and checks the string at every call)."""
    out = _QUOTED.get(name)
    if out is None:
        out = quote(name, safe="")
        if len(_QUOTED) < _QUOTED_MAX:
            _QUOTED[name] = out
    return out


_QUOTED: dict[str, str] = {}
_QUOTED_MAX = 1024
"""Names kept quoted at most (names made at run time stay bounded)."""


def branch_key(name: str) -> str:
    """The progress key of fan-out branch *name*'s output.

    .. versionadded:: 0.1.0
    """
    return f"b:{_quoted(name)}"


@final
class Boundary:
    """The step in flight of a journaled fold, as the folds nested in it see it.

    *saved* is the progress committed for this step so far (empty for a
    step that had not started), *answer* the human's answer to deliver to
    a nested fold that paused; *paused* and *stopped* say that one paused
    (its question) or stopped (its reason) in this attempt.  *track*, when a machine sets it, gives the
    machine's current state while the step runs (a swarm's typed state as
    its state tools change it): progress records carry it.

    .. versionadded:: 0.1.0
    """

    __slots__ = (
        "_asked",
        "_asker_",
        "_author",
        "_held",
        "_index",
        "_journal",
        "_order",
        "_prefix",
        "_root_",
        "_routed",
        "_scoped",
        "_starts",
        "_up",
        "answer",
        "asked",
        "paused",
        "payload",
        "saved",
        "stopped",
        "touched",
        "track",
        "waiting",
    )

    def __init__(
        self,
        journal: Journal[Any],
        saved: Progress,
        answer: object,
        prefix: str = "",
        root: Boundary | None = None,
        up: Boundary | None = None,
        author: str = "",
    ) -> None:
        self._journal = journal
        self._author = author
        self._prefix = prefix
        # None for this boundary itself: a reference to itself would make
        # every step's boundary (with its journal, store and records) a
        # cycle only the garbage collector frees.
        self._root_: Boundary | None = root
        self._up = up
        self._starts: dict[tuple[str, str], int] = {}
        self._asked: dict[str, int] = {}
        self._held = False
        self._asker_: Boundary | None = None
        self._order: tuple[int, ...] = ()
        self._scoped = False
        self._routed: tuple[str, object] | None = None
        self._index: dict[str, dict[str, tuple[Any, ...]]] | None = None
        self.saved = saved
        self.answer = answer
        self.paused: str | None = None
        self.payload: Any = None
        self.stopped: str | None = None
        self.touched: set[str] = set()
        self.track: Callable[[], Any] | None = None
        self.asked: dict[str, tuple[tuple[int, ...], Pending]] = {}
        self.waiting: dict[str, Pending] = {}

    @property
    def _root(self) -> Boundary:
        """The boundary of the step itself (this one, for the step)."""
        return self._root_ or self

    @property
    def _asker(self) -> Boundary:
        """The boundary whose question this one's nested folds ask (this
        one, unless it shares its parent's: one question at a time)."""
        return self._asker_ or self

    def open_scopes(self, pending: Pending | None) -> None:
        """Make the branches and items of this step (a thread's own) ask
        apart from each other; *pending*, the question the step was paused
        at, routes its answer (if answered) to the branch or item that
        asked it, and keeps the others that wait from running again.

        .. versionadded:: 0.1.0
        """
        self._scoped = True
        if pending is None:
            return
        if pending.answered and pending.scope:
            # For a branch or item, not the step itself.
            self._routed = (pending.scope, self.answer)
            self.answer = None
        self.waiting = {p.scope: p for p in pending.waiting}

    @property
    def scope(self) -> str:
        """Where in the step this boundary is (``""``: the step itself; a
        branch's or item's progress key)."""
        return self._prefix[:-1]

    @property
    def apart(self) -> bool:
        """Whether this boundary is a branch or item that asks apart from
        its siblings (see :meth:`open_scopes`)."""
        return self._asker_ is None and self._root_ is not None

    def child(self, key: str, order: int) -> Boundary:
        """The boundary of the fan-out branch or ``map_reduce`` item whose
        output is kept under *key* (the *order*-th of its siblings)."""
        prefix = f"{self._prefix}{key}/"
        index = self._index
        if index is None:
            # Once per step, not per child: a map_reduce of n items would
            # read its n kept outputs n times.
            index = self._index = _by_prefix(self.saved)
        saved = index.get(key, {})
        root = self._root
        answer = root.answer_to(prefix[:-1]) if root._scoped else self.answer
        out = Boundary(self._journal, saved, answer, prefix, root=root)
        out._order = (*self._order, order)
        if not root._scoped:
            out._asker_ = self._asker  # one question at a time in the step
        return out

    def may_wait(self) -> bool:
        """Whether a branch or item of this step may wait at a question
        asked in an earlier attempt (see :meth:`waits`)."""
        return bool(self._root.waiting)

    def holds(self, key: str) -> bool:
        """Whether progress of this step is kept under *key* ``/``."""
        index = self._index
        if index is None:
            index = self._index = _by_prefix(self.saved)
        return key in index

    def answer_to(self, scope: str) -> object:
        """The answer for the branch or item at *scope* (if it is the one
        answered)."""
        routed = self._routed
        return routed[1] if routed is not None and routed[0] == scope else None

    def waits(self) -> bool:
        """Whether this branch or item waits at a question asked in an
        earlier attempt and not answered yet: it is not run, its question
        stays pending (``True``), else ``False``."""
        root = self._root
        kept = root.waiting.get(self.scope) if self.apart else None
        if kept is None:
            return False
        self._asker.paused = kept.question
        root.asked[self.scope] = (self._order, kept)
        if root.paused is None:
            root.paused, root.payload = kept.question, kept.payload
        return True

    def took(self, raised: BaseException) -> bool:
        """Whether *raised* is a question asked in this branch or item,
        apart from its siblings: it waits, and they go on (else the
        exception is the step's)."""
        if not self.apart:
            return False
        asked = suspension(raised)
        return asked is not None and asked.failure is None

    def asked_here(self) -> bool:
        """Whether this branch or item paused at a question in this
        attempt (it asked, or waits: see :meth:`waits`)."""
        return self.apart and self.paused is not None

    def pending(self) -> tuple[Pending, ...]:
        """The questions the branches and items of this step (a thread's
        own) wait at, in their order (empty unless scoped)."""
        return tuple(p for _, p in sorted(self.asked.values()))

    @property
    def author(self) -> str:
        """Who gave the *answer* (``resume(..., author=)``): the record
        that keeps the answer names them."""
        root = self._root
        if root._author or root._up is None:
            return root._author
        return root._up.author

    @property
    def thread_id(self) -> str:
        """The enclosing thread (for naming nested snapshots)."""
        return self._journal.thread_id

    def claim(self, name: str, digest: str = "") -> str:
        """The key of the next fold named *name* to start in this step.

        *digest* identifies the fold's input: a step that runs again after
        a crash may start a fold on another input (an agent turn's model
        may ask for another tool call), and that fold must start afresh
        rather than continue what the first input began.
        """
        # Counted per name *and* input: folds on different inputs never
        # compete for a key, whatever order they start in.
        k = self._starts.get((name, digest), 0)
        self._starts[name, digest] = k + 1
        key = fold_key(name, k)
        return f"{key}@{digest}" if digest else key

    def question_key(self, digest: str, kind: str = "q") -> str:
        """The progress key of the next question :func:`pipeline.interrupt`
        asks in this step, *digest* identifying what it asks (its text and
        payload): ``q:<digest>#<k>``, the *k*-th question asking that in
        this step.  (Counted per question, not in the order asked:
        concurrent tool calls or branches may ask in any order.)  *kind*
        ``"c"``: the key of a tool call's result kept after it got an
        answer (*digest*: the call's tool and arguments).

        .. versionadded:: 0.1.0
        """
        counted = f"{kind}:{digest}"
        k = self._asked.get(counted, 0)
        self._asked[counted] = k + 1
        return f"{counted}#{k}"

    def kept(self, kind: str) -> bool:
        """Whether progress of this step holds keys of *kind* (``"c"``:
        tool results kept after an answer)."""
        start = f"{self._prefix}{kind}:"
        return any(k.startswith(start) for k in self._root.saved)

    @property
    def fresh(self) -> bool:
        """Whether nothing asked in this attempt of the step can be
        answered: no answer to deliver, and no progress saved (so no answer
        or kept result to replay, here or in a fold nested in the step).

        .. versionadded:: 0.1.0
        """
        return self.answer is None and not (self._root_ or self).saved

    def asking(self) -> bool:
        """Whether a question is pending in this attempt of the step (one
        was asked, or its answer was refused): another one waits for the
        next attempt.  (In a branch or item that asks apart: one of its
        own.)"""
        asker = self._asker
        return asker.paused is not None or asker._held

    def hold(self) -> None:
        """Note that an answer was refused in this attempt (see
        :meth:`asking`)."""
        self._asker._held = True

    @property
    def converter(self) -> cattrs.Converter:
        """The converter of the enclosing thread's codec (answers to
        questions asked in this step are structured with it)."""
        return self._root._journal.codec.converter

    def docs(self, key: str) -> tuple[Any, ...]:
        """The documents saved under *key* (oldest first)."""
        return tuple(self.saved.get(key, ()))

    async def save(
        self, key: str, doc: Doc, author: str = ""
    ) -> Failure[Any] | None:
        """Commit *doc* as the next record of the fold keyed *key* (a record
        keeping an answer names its *author*).

        ``None`` once committed, else the ``Failure`` (not a ``Result``:
        this is on every nested record's path).
        """
        full = self._prefix + key
        root = self._root_ or self
        journal = root._journal
        if type(journal).save_progress is Journal.save_progress:
            # One coroutine less on every nested record's path.
            failed = await journal._progress(root, {full: (doc,)}, author)
        else:
            failed = await journal.save_progress(root, full, doc, author)
        if failed is None:
            # The documents themselves are in the store; keeping them here
            # too only fed the garbage collector.
            root.touched.add(full)
        return failed

    async def save_all(self, docs: Mapping[str, Doc]) -> Failure[Any] | None:
        """Commit *docs* (key to document) at once: one record where the
        journal can (:meth:`Journal.save_many`); ``None`` once committed."""
        full = {self._prefix + k: d for k, d in docs.items()}
        root = self._root
        failed = await root._journal.save_many(root, full)
        if failed is None:
            root.touched.update(full)
        return failed

    def lease_fresh(self) -> bool:
        """Whether work inside this step may start now without asking (no
        lease to check, or one :meth:`~pipeline.stores.Held.fresh`): if
        not, :meth:`ensure` says."""
        asked = lease_check(self._journal)
        return asked is None or (type(asked) is Held and asked.fresh())

    def ensure(self) -> Awaitable[Failure[Any] | None]:
        """``None`` if work inside this step may start now (see
        :meth:`Journal.ensure`): folds nested in the step and the tool calls
        of its agents ask before each of theirs.  (What the lease's own
        check returns, awaited by the caller: no coroutine of its own.)"""
        asked = lease_check(self._journal)
        return _nothing_to_check() if asked is None else asked.ensure()

    def pause(self, question: str, payload: Any = None) -> None:
        """Note that a nested fold (or :func:`pipeline.interrupt`) paused
        for *question*, with *payload* (and tell the boundary this one's
        journal nests in, if any)."""
        root = self._root
        asker = self._asker
        if root._scoped:
            asked = Pending(None, (), question, payload=payload)
            if asker is not root:
                asked = attrs.evolve(asked, scope=asker.scope)
            root.asked.setdefault(asker.scope, (asker._order, asked))
        if asker is not root:
            asker.paused, asker.payload = question, payload
            if root.paused is not None:
                return
        root.paused = question
        root.payload = payload
        if root._up is not None:
            root._up.pause(question, payload)

    def stop(self, reason: str) -> None:
        """Note that a nested fold stopped for *reason* (and recorded it),
        as :meth:`pause` does."""
        root = self._root
        root.stopped = reason
        if root._up is not None:
            root._up.stop(reason)

    def branch(self, name: str, order: int = 0) -> Boundary:
        """The boundary a fan-out branch's nested folds see (the
        *order*-th branch)."""
        return self.child(branch_key(name), order)

    def items_key(self, label: str) -> str:
        """The key the items of the next ``map_reduce`` named *label* to
        run in this step keep their outputs under (plus ``/<n>``)."""
        counted = ("m:", label)
        k = self._starts.get(counted, 0)
        self._starts[counted] = k + 1
        return f"m:{_quoted(label)}#{k}"

    def now(self) -> Progress:
        """The progress of this step: what was saved before it started, and
        (as empty chains: the documents are in the store) the keys saved
        in this attempt."""
        if not self.touched:
            return self.saved
        return {**dict.fromkeys(self.touched, ()), **self.saved}


def suspension(raised: BaseException) -> Suspended | None:
    """The :class:`~pipeline.errors.Suspended` *raised* is, or the one a
    group of nothing else holds (concurrent tasks of a step that asked),
    preferring one whose question could not be recorded; else ``None``.

    .. versionadded:: 0.1.0
    """
    if isinstance(raised, Suspended):
        return raised
    if not isinstance(raised, BaseExceptionGroup):
        return None
    found, rest = raised.split(Suspended)
    if found is None or rest is not None:
        return None
    leaves: list[Suspended] = []
    stack: list[BaseException] = [found]
    while stack:
        exc = stack.pop()
        if isinstance(exc, BaseExceptionGroup):
            stack.extend(exc.exceptions)
        elif isinstance(exc, Suspended):
            leaves.append(exc)
    failed = [s for s in leaves if s.failure is not None]
    return failed[0] if failed else leaves[0]


async def _nothing_to_check() -> None:
    """What :meth:`Boundary.ensure` awaits without a lease to check."""


def _by_prefix(saved: Progress) -> dict[str, dict[str, tuple[Any, ...]]]:
    """*saved* by every prefix its keys have before a ``/``: what lives
    under ``<prefix>/``, keyed by the rest."""
    index: dict[str, dict[str, tuple[Any, ...]]] = {}
    for k, v in saved.items():
        cut = k.find("/")
        while cut != -1:
            index.setdefault(k[:cut], {})[k[cut + 1 :]] = v
            cut = k.find("/", cut + 1)
    return index


def _waiting(last: Snapshot[Any]) -> Pending | None:
    """The questions a progress record after *last* keeps: those other
    branches or items wait at stay so until answered, whatever the step
    commits meanwhile."""
    pending = last.pending
    if pending is not None and not pending.waiting:
        return None
    return pending


class Journal(Generic[S]):
    """Commits a fold's snapshots as records, each a delta on the last.

    .. versionadded:: 0.1.0
    """

    __slots__ = (
        "_lock",
        "_memo",
        "_repeated",
        "codec",
        "head",
        "last",
        "thread_id",
    )

    inherit = False
    """Whether ``last`` (the snapshot last committed) is always stored, as
    the record before the next one: then a record leaves out what its
    parent implies (see :mod:`pipeline.fold._codec`)."""

    def __init__(
        self,
        codec: Codec[S],
        thread_id: str,
        last: Snapshot[S] | None,
        head: int | None,
    ) -> None:
        self.codec = codec
        self.thread_id = thread_id
        self.last = last
        self.head = head
        self._lock: anyio.Lock | None = None
        # What the records of the step in flight proved (its nested
        # folds' records: see Codec.seal), for its own record; dropped by
        # that record (the next commit), so it never outlives the step.
        self._memo: Memo | None = None
        # The snapshot a progress record repeated, and that record's
        # version (see after()).
        self._repeated: tuple[Snapshot[S], int] | None = None

    async def write(
        self, snap: Snapshot[S], doc: Doc, data: bytes
    ) -> Failure[Any] | None:
        """Store one record (*snap* as *doc*, written as *data*); ``None``
        once stored."""
        raise NotImplementedError  # pragma: no cover  # abstract

    async def commit(
        self, snap: Snapshot[S], progress: Progress | None = None
    ) -> Snapshot[S] | Failure[Any]:
        """Commit *snap* after the last record; return it as committed.

        Its version and parent are set to follow the last record (progress
        records may have moved the head since the step started).  A
        ``Failure`` if the store refused it.
        """
        snap, last, version = self._placed(snap)
        memo = self._memo
        if memo is not None:  # the step's records end with this one
            self._memo = None
        sealed = self.codec.seal(
            snap, last, progress, inherit=self.inherit, memo=memo
        )
        if type(sealed) is not tuple:
            return Failure(sealed)
        doc, data = sealed
        failed = await self.write(snap, doc, data)
        if failed is not None:
            return failed
        # No await between the write and this: a cancellation cannot leave
        # the journal behind its store.
        self.last = snap
        self.head = version
        if type(self).written is not Journal.written:  # not a no-op
            await self.written(snap)
        return snap

    def _placed(
        self, snap: Snapshot[S]
    ) -> tuple[Snapshot[S], Snapshot[S] | None, int]:
        """*snap* as the next record (its version and parent set to follow
        the last record, an edit it inherited dropped), the snapshot it is
        a delta against, and its version."""
        last = self.last if self.head is not None else None
        version = 0 if self.head is None else self.head + 1
        parent = None
        if last is not None:  # self.after(last), written out: every record
            repeated = self._repeated
            parent = (
                repeated[1]
                if repeated is not None and repeated[0] is last
                else last.version
            )
        if (
            snap.edit is not None
            and last is not None
            and snap.edit is last.edit
        ):
            # Inherited from the edit record: this record is no edit.
            snap = attrs.evolve(snap, edit=None)
        if snap.version != version or snap.parent != parent:
            # (A fork's origin kept, on every record of it.)
            snap = snap.renumbered(version, parent)
        return snap, last, version

    async def written(self, snap: Snapshot[S]) -> None:
        """Called once *snap* was committed (events, say)."""

    async def ensure(self) -> Failure[Any] | None:
        """``None`` if a step may start now, else why not (the thread's
        lease may have lapsed and could not be renewed: see
        :class:`~pipeline.stores.Held`)."""
        return None

    async def save_progress(
        self, boundary: Boundary, key: str, doc: Doc, author: str = ""
    ) -> Failure[Any] | None:
        """Commit a progress record: the step's snapshot plus *doc* under
        *key* (by *author*, when it keeps an answer)."""
        return await self._progress(boundary, {key: (doc,)}, author)

    async def save_many(
        self, boundary: Boundary, docs: Mapping[str, Doc]
    ) -> Failure[Any] | None:
        """Commit *docs* (key to document) as progress: one record, unless
        this journal sends its progress elsewhere (its own
        :meth:`save_progress`: then one by one)."""
        if type(self).save_progress is Journal.save_progress:
            return await self._progress(
                boundary, {k: (d,) for k, d in docs.items()}
            )
        for key, doc in docs.items():
            failed = await self.save_progress(boundary, key, doc)
            if failed is not None:
                return failed
        return None

    def after(self, last: Snapshot[S]) -> int:
        """The version the next record follows: *last*'s (the snapshot
        last committed), or that of the progress record that repeated it
        (see :meth:`repeat`)."""
        repeated = self._repeated
        if repeated is not None and repeated[0] is last:
            return repeated[1]
        return last.version

    async def repeat(
        self,
        last: Snapshot[S],
        progress: Progress,
        author: str,
        pending: Pending | None,
        exact: bool = False,
    ) -> Failure[Any] | _General | None:
        """Commit a progress record whose snapshot would repeat *last*
        (its state, step and node: see :meth:`Codec.seal_progress`) without
        building that snapshot: ``None`` once committed, a ``Failure``, or
        :data:`_GENERAL` to take the general way (this journal has none).
        *exact*: as for :meth:`Codec.seal_progress`."""
        del last, progress, author, pending, exact
        return _GENERAL

    async def _acquire(self) -> anyio.Lock:
        """The journal's lock, taken: the records of nested folds saving
        at once (a fan-out's) are written one at a time.  Uncontended (the
        common case: one nested fold saving, every turn of an agent's) it
        is taken at once, without a trip through the event loop or a look
        for a cancellation (the record is written, and a cancellation
        seen at the next checkpoint)."""
        lock = self._lock
        if lock is None:
            lock = self._lock = new_lock()
        try:
            lock.acquire_nowait()
        except anyio.WouldBlock:
            await lock.acquire()
        return lock

    async def _progress(
        self, boundary: Boundary, progress: Progress, author: str = ""
    ) -> Failure[Any] | None:
        lock = await self._acquire()
        try:
            last = self.last
            assert last is not None  # noqa: S101  # a step has a start
            state = boundary.track() if boundary.track else last.state
            pending = _waiting(last)
            if state is last.state and last.edit is None:
                repeated = await self.repeat(last, progress, author, pending)
                if not isinstance(repeated, _General):
                    return repeated
            snap = Snapshot(
                thread_id=last.thread_id,
                version=0 if self.head is None else self.head + 1,
                parent=self.after(last),
                state=state,
                node=last.node,
                next=last.next,
                join=last.join,
                step=last.step,
                fingerprint=last.fingerprint,
                # The questions other branches or items wait at stay so
                # until answered, whatever this step commits meanwhile.
                pending=pending,
                author=author,
            )
            out = await self.commit(snap, progress)
            return out if type(out) is Failure else None
        finally:
            lock.release()


@final
class ThreadJournal(Journal[S]):
    """Commits to a thread of a store (compare-and-set on its head)."""

    __slots__ = ("held", "sink", "store")

    inherit = True  # last is the loaded head or the record just committed

    def __init__(
        self,
        store: CheckpointStore,
        codec: Codec[S],
        thread_id: str,
        last: Snapshot[S] | None,
        head: int | None,
        sink: Sink | None,
        held: Held | None = None,
    ) -> None:
        super().__init__(codec, thread_id, last, head)
        self.store = store
        self.sink = sink
        self.held = held

    async def ensure(self) -> Failure[LeaseLost] | None:
        """See :meth:`Journal.ensure`."""
        held = self.held
        return None if held is None else await held.ensure()

    async def write(
        self, snap: Snapshot[S], doc: Doc, data: bytes
    ) -> Failure[ConcurrentModification | LeaseLost] | None:
        """See :meth:`Journal.write`."""
        del doc  # the store keeps the bytes
        return await self._store(
            snap.thread_id, snap.version, snap.parent, data
        )

    async def repeat(
        self,
        last: Snapshot[S],
        progress: Progress,
        author: str,
        pending: Pending | None,
        exact: bool = False,
    ) -> Failure[Any] | _General | None:
        """See :meth:`Journal.repeat`: the record is written as
        :meth:`commit` would write that snapshot's, and ``last`` stays the
        snapshot later records are deltas against (the same state, step,
        node and fingerprint); only the head, and the version the next
        record follows (:meth:`after`), move."""
        head = self.head
        if head is None:
            return _GENERAL
        sealed = self.codec.seal_progress(
            last, progress, author, pending, inherit=self.inherit, exact=exact
        )
        if sealed is None:
            return _GENERAL
        version = head + 1
        parent = self.after(last)
        failed = await self._store(last.thread_id, version, parent, sealed[1])
        if failed is not None:
            return failed
        # No await between the write and this (see Journal.commit).
        self.head = version
        self._repeated = (last, version)
        if self.sink is not None:
            await self.sink(CheckpointSaved(last.thread_id, version))
        return None

    async def hold(
        self, boundary: Boundary, key: str, doc: Doc, author: str
    ) -> Failure[Any] | _General | None:
        """Commit a progress record of *boundary*'s step holding *doc* (a
        nested fold's record, sealed without its own bytes: see
        :meth:`Codec.seal`) under *key*, as :meth:`repeat` writes one:
        ``None`` once committed, a ``Failure``, or :data:`_GENERAL` when
        that record cannot be written so (a tracked state, an edit, bytes
        orjson did not write), and nothing was."""
        if boundary.track is not None:
            return _GENERAL
        store = self.store
        if (
            self.sink is None
            and type(store) is MemoryStore
            and getattr(store.commit, "__func__", None) is _MEMORY_COMMIT
            and (self._lock is None or not self._lock.locked())
        ):
            # Nothing in here waits (the memory store's own commit awaits
            # nothing: not one wrapped, on the instance or on the class, by
            # a spy or a latency of a test's; no event is sent), and nobody
            # holds the lock: no other task can come in before this record
            # is written, so there is nothing to take turns with (a lock
            # taken and given back costs as much as the store's commit).
            last = self.last
            if last is None or last.edit is not None:
                return _GENERAL
            return await self.repeat(
                last, {key: (doc,)}, author, _waiting(last), exact=True
            )
        lock = await self._acquire()
        try:
            return await self._hold(key, doc, author)
        finally:
            lock.release()

    async def _hold(
        self, key: str, doc: Doc, author: str
    ) -> Failure[Any] | _General | None:
        """:meth:`hold`'s record, its turn taken."""
        last = self.last
        if last is None or last.edit is not None:
            return _GENERAL
        return await self.repeat(
            last, {key: (doc,)}, author, _waiting(last), exact=True
        )

    async def _store(
        self, thread_id: str, version: int, parent: int | None, data: bytes
    ) -> Failure[ConcurrentModification | LeaseLost] | None:
        """Store *data* as record *version* (after *parent*) of the thread;
        ``None`` once stored."""
        held = self.held
        out = await self.store.commit(
            record_of(thread_id, version, parent, data),
            expected_head=self.head,
            lease=None if held is None else held.lease,
        )
        return None if type(out) is Success else Failure(out.failure())

    async def written(self, snap: Snapshot[S]) -> None:
        """See :meth:`Journal.written`: a ``CheckpointSaved`` event."""
        if self.sink is not None:
            await self.sink(CheckpointSaved(snap.thread_id, snap.version))


@final
class NestedJournal(Journal[S]):
    """Commits as progress of the step in flight of an enclosing fold."""

    __slots__ = ("boundary", "key")

    def __init__(
        self,
        boundary: Boundary,
        key: str,
        codec: Codec[S],
        last: Snapshot[S] | None,
    ) -> None:
        super().__init__(
            codec,
            f"{boundary.thread_id}/{key}",
            last,
            None if last is None else last.version,
        )
        self.boundary = boundary
        self.key = key

    async def write(
        self, snap: Snapshot[S], doc: Doc, data: bytes
    ) -> Failure[Any] | None:
        """See :meth:`Journal.write`."""
        del data  # the enclosing record holds the document itself
        if snap.status is Status.INTERRUPTED:
            pending = snap.pending
            if pending is None:
                self.boundary.pause("")
            else:
                self.boundary.pause(pending.question, pending.payload)
        elif snap.status is Status.STOPPED:
            self.boundary.stop(snap.reason)
        return await self.boundary.save(self.key, doc, snap.author)

    async def commit(
        self, snap: Snapshot[S], progress: Progress | None = None
    ) -> Snapshot[S] | Failure[Any]:
        """See :meth:`Journal.commit`.  A record the enclosing thread's
        next progress record holds as it is (a running or finished fold's,
        in a step of a store's thread: an agent's turn) is sealed once:
        its document checked, not encoded on its own (those bytes were
        thrown away), and written inside that record
        (:meth:`ThreadJournal.hold`).  Where it cannot be, the general
        way seals it again, encoded."""
        root = self.boundary._root
        outer = root._journal
        if (
            type(outer) is not ThreadJournal
            or progress is not None
            or snap.status is Status.INTERRUPTED
            or snap.status is Status.STOPPED
        ):
            return await super().commit(snap, progress)
        placed, last, version = self._placed(snap)
        memo = outer._memo
        if memo is None:
            memo = outer._memo = {}
        codec = self.codec
        # Proved in one pass (an agent's turn: see Codec.document_proved),
        # else sealed the general way; either way not encoded.
        doc = (
            None
            if last is None
            else codec.document_proved(placed, last, None, self.inherit, memo)
        )
        if doc is None:
            sealed = codec.seal(
                placed,
                last,
                None,
                inherit=self.inherit,
                encode=False,
                memo=memo,
            )
            if type(sealed) is not tuple:
                return Failure(sealed)
            doc = sealed[0]
        full = self.boundary._prefix + self.key
        held = await outer.hold(root, full, doc, placed.author)
        if type(held) is _General:
            return await super().commit(snap)
        if held is not None:
            return held
        root.touched.add(full)  # as Boundary.save does
        # No await between the write and this (see Journal.commit).
        self.last = placed
        self.head = version
        return placed

    async def ensure(self) -> Failure[Any] | None:
        """See :meth:`Journal.ensure`: the enclosing thread's lease's
        (see :func:`lease_check`)."""
        asked = lease_check(self)
        return None if asked is None else await asked.ensure()

    @classmethod
    def open(
        cls,
        boundary: Boundary,
        name: str,
        codec: Codec[S],
        digest: str = "",
        base: Snapshot[S] | None = None,
    ) -> Result[NestedJournal[S], Any]:
        """Claim the next key for *name*; restore what it saved before.

        With a *base* (the snapshot every attempt starts from: a nested
        run's admission, a handler's input), records are deltas against it:
        it counts as committed at its own version but is never written, and
        a resumed journal rebuilds from it.
        """
        key = boundary.claim(name, digest)
        docs = boundary.docs(key)
        for doc in docs:
            checked = check_document(doc)
            if type(checked) is not Success:
                return Failure(checked.failure())
        if not docs:
            return Success(cls(boundary, key, codec, base))
        thread = f"{boundary.thread_id}/{key}"
        if base is None:
            chain, version = docs, len(docs) - 1
        else:
            chain = (codec.document(base, None), *docs)
            version = base.version + len(docs)
        restored = codec.rebuild(
            chain, thread, version, version - 1 if len(chain) > 1 else None
        )
        if type(restored) is not Success:
            return Failure(restored.failure())
        return Success(cls(boundary, key, codec, restored.unwrap()))


def record_of(
    thread_id: str, version: int, parent: int | None, data: bytes
) -> Record:
    """``Record(thread_id, version, parent, data, record_checksum(...))``,
    written out (without attrs' frozen ``__init__`` nor a second call to
    the hash: every record a store's thread commits is built here; a test
    holds the two the same).

    .. versionadded:: 0.1.0
    """
    record: Any = _new(_BuildingRecord)
    record.thread_id = thread_id
    record.version = version
    record.parent = parent
    record.data = data
    record.checksum = _sha256(
        f"{thread_id}\n{version}\n{parent}\n".encode() + data
    ).hexdigest()
    record.__class__ = Record
    built: Record = record
    return built


def lease_check(journal: Journal[Any] | None) -> Held | Journal[Any] | None:
    """Whom to ask, for a whole run on *journal*, what its
    :meth:`Journal.ensure` answers: the lease of the store thread it
    commits to, however deep it nests (``None``: nothing to check), else
    the journal itself.  A journal's lease and the boundary it nests in
    never change, so a run finds it once, not through two coroutines and
    a call at every step.

    .. versionadded:: 0.1.0
    """
    while type(journal) is NestedJournal:
        journal = journal.boundary._journal
    if journal is None or type(journal) is ThreadJournal:
        return None if journal is None else journal.held
    return journal


@final
class Cell(Generic[S]):
    """A value that the folds nested in a handler save along with theirs.

    An agent node's state tools change its state while the agent's turns
    are committed; the state must be committed with them, or a resumed
    node would see the turns but not their writes.  ``Cell.open`` claims a
    key in the current boundary (if any) and restores the value saved
    there; :meth:`enter` makes the folds started next save through the
    cell, each of their records carrying the cell's current value.
    Without a boundary the cell is a plain holder.

    .. versionadded:: 0.1.0
    """

    __slots__ = ("_boundary", "_journal", "value")

    def __init__(
        self,
        value: S,
        journal: NestedJournal[S] | None,
        boundary: Boundary | None,
    ) -> None:
        self.value = value
        self._journal = journal
        self._boundary = boundary

    @classmethod
    def open(
        cls, name: str, codec: Codec[S], initial: S
    ) -> Result[Cell[S], Any]:
        """A cell for the handler *name*, restored if it saved before."""
        parent = current_boundary()
        if parent is None:
            return Success(cls(initial, None, None))
        base: Snapshot[S] = Snapshot(
            thread_id=parent.thread_id,
            version=-1,
            parent=None,
            state=initial,
            node=None,
            next=(name,),
            join=None,
            step=0,
            fingerprint="cell",
        )
        opened = NestedJournal.open(parent, name, codec, base=base)
        if type(opened) is not Success:
            return Failure(opened.failure())
        journal = opened.unwrap()
        restored = journal.last
        assert restored is not None  # noqa: S101  # the base at least
        if restored is not base:
            restored = attrs.evolve(
                base,
                version=restored.version,
                state=restored.state,
                progress=restored.progress,
            )
            journal.last = restored
        cell = cls(restored.state, journal, None)
        cell._boundary = Boundary(
            journal, restored.progress, parent.answer, up=parent
        )
        cell._boundary.track = cell.current
        return Success(cell)

    def current(self) -> S:
        """The value now."""
        return self.value

    def enter(self) -> contextvars.Token[Boundary | None] | None:
        """Make nested folds save through this cell (undo with :meth:`leave`)."""
        if self._boundary is None:
            return None
        return enter(self._boundary)

    def leave(self, token: contextvars.Token[Boundary | None] | None) -> None:
        """Undo :meth:`enter`."""
        if token is not None:
            leave(token)
