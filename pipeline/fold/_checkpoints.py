"""Reading a thread back: load a snapshot, list its history, fork it.

Records form a tree inside a thread (each names its parent version; time
travel grows a new branch), so a snapshot is rebuilt from the chain of
records that leads to it, root first.
"""

from __future__ import annotations

import logging
import uuid

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

import anyio
import anyio.lowlevel
import attrs

from returns.result import Failure, Result, Success

from .._decode import explain
from .._serde import STRUCTURE_ERRORS
from ..events import CheckpointSkipped
from ..failures import (
    CheckpointDecodeError,
    ConcurrentModification,
    EditRefused,
    InvalidState,
    LeaseLost,
    SnapshotNotFound,
    ThreadBusy,
)
from ..stores import CheckpointStore, Held, Record, check_thread_id, leased
from ._codec import Acc, Codec
from ._model import Edit, Snapshot, Status
from ._plan import type_name


Sink = Callable[[Any], Awaitable[None]]


S = TypeVar("S")


log = logging.getLogger("pipeline.fold")

YIELD_EVERY = 256
"""Records decoded between two checkpoints of the event loop."""


async def _rows(
    store: CheckpointStore, thread_id: str, version: int | None
) -> Result[Sequence[Record], SnapshotNotFound | CheckpointDecodeError]:
    """Every record of the thread, checked complete: versions 0, 1, ...
    without a gap, up to at least the head the store reported first (a
    store that lost records, a corrupt index say, never passes for a
    shorter thread)."""
    check_thread_id(thread_id)
    head = await store.head(thread_id)
    rows = await store.records(thread_id)
    if not rows and head is None:
        return Failure(SnapshotNotFound(thread_id, version))
    gap = next((i for i, r in enumerate(rows) if r.version != i), None)
    if gap is not None or head is None or not rows or rows[-1].version < head:
        where = gap if gap is not None else len(rows)
        return Failure(
            CheckpointDecodeError(
                "$.version",
                f"records are missing: the store's head is version {head}, "
                f"its records stop or skip at version {where}",
            )
        )
    return Success(rows)


async def load(
    codec: Codec[S],
    store: CheckpointStore,
    thread_id: str,
    *,
    version: int | None = None,
) -> Result[Snapshot[S], SnapshotNotFound | CheckpointDecodeError]:
    """The snapshot at *version*, or at the head.

    Nothing committed is ever skipped silently: the head must decode, with
    one exception, a *last* record that is torn or fails its checksum (a
    write cut short): it is skipped for its parent (never for a record of
    another branch), and reported (a warning on the ``pipeline.fold``
    logger).  Any other record that does
    not decode is a :class:`~pipeline.failures.CheckpointDecodeError`.
    """
    out = await load_for_resume(codec, store, thread_id, version, None)
    if type(out) is not Success:
        return Failure(out.failure())
    return Success(out.unwrap()[0])


async def load_for_resume(
    codec: Codec[S],
    store: CheckpointStore,
    thread_id: str,
    version: int | None,
    sink: Sink | None,
) -> Result[tuple[Snapshot[S], int], SnapshotNotFound | CheckpointDecodeError]:
    """The snapshot at *version* (or the head, see :func:`load`) and the
    thread's head version, from one read of the thread."""
    read = await _rows(store, thread_id, version)
    if type(read) is not Success:
        return Failure(read.failure())
    rows = read.unwrap()
    by_version = {r.version: r for r in rows}
    head = rows[-1].version
    if version is not None:
        if version not in by_version:
            return Failure(SnapshotNotFound(thread_id, version))
        target = version
    else:
        target = head
        if not codec.intact(by_version[head]):
            reason = "checksum mismatch (a write cut short, or tampering)"
            log.warning(
                "thread %r: skipping its last record (version %d): %s",
                thread_id,
                head,
                reason,
            )
            if sink is not None:
                await sink(CheckpointSkipped(thread_id, head, reason))
            # Its parent, never the newest record before it: that may be
            # on another branch (a question there is not this one's).
            parent = by_version[head].parent
            if parent is None or not 0 <= parent < head:
                what = "the only record" if head == 0 else "the last record"
                return Failure(
                    CheckpointDecodeError(
                        "$",
                        f"{what} (version {head}): {reason}; it names no "
                        "earlier record to continue from (resume an "
                        "earlier version, or fork one)",
                    )
                )
            target = parent
    snap = await _decode_at(codec, by_version, target)
    if type(snap) is not Success:
        return Failure(snap.failure())
    return Success((snap.unwrap(), head))


async def _decode_at(
    codec: Codec[S], by_version: dict[int, Record], version: int
) -> Result[Snapshot[S], CheckpointDecodeError]:
    """The snapshot of record *version*, from its chain of ancestors."""
    chain: list[Record] = []
    cursor: int | None = version
    while cursor is not None:
        row = by_version.get(cursor)
        if row is None:
            return Failure(
                CheckpointDecodeError(
                    "$.parent",
                    f"version {version} descends from a missing record",
                )
            )
        if row.parent is not None and not 0 <= row.parent < row.version:
            return Failure(
                CheckpointDecodeError(
                    "$.parent",
                    f"record {row.version} names a parent that is not older",
                )
            )
        chain.append(row)
        cursor = row.parent
    chain.reverse()
    acc: Acc | None = None
    for i, row in enumerate(chain):
        if i and i % YIELD_EVERY == 0:
            await anyio.lowlevel.checkpoint()
        doc = codec.parse(row)
        if type(doc) is not Success:
            error = doc.failure()
            return Failure(
                attrs.evolve(
                    error, location=f"version {row.version}: {error.location}"
                )
            )
        step = codec.advance(acc, doc.unwrap())
        if isinstance(step, CheckpointDecodeError):
            return Failure(
                attrs.evolve(
                    step, location=f"version {row.version}: {step.location}"
                )
            )
        acc = step
    assert acc is not None  # noqa: S101  # the chain holds version itself
    record = chain[-1]
    return codec.snapshot(acc, record.thread_id, record.version, record.parent)


async def history(
    codec: Codec[S], store: CheckpointStore, thread_id: str
) -> Result[tuple[Snapshot[S], ...], SnapshotNotFound | CheckpointDecodeError]:
    """Every snapshot of the thread, oldest first (each record decoded
    once: linear in what the records hold).

    As :func:`load`: a torn last record is skipped and reported; any other
    record that does not decode is a failure.
    """
    read = await _rows(store, thread_id, None)
    if type(read) is not Success:
        return Failure(read.failure())
    rows = read.unwrap()
    accs: dict[int, Acc] = {}
    out: list[Snapshot[S]] = []
    for i, row in enumerate(rows):
        if i and i % YIELD_EVERY == 0:
            await anyio.lowlevel.checkpoint()
        if i == len(rows) - 1 and not codec.intact(row):
            log.warning(
                "thread %r: skipping its last record (version %d): %s",
                thread_id,
                row.version,
                "checksum mismatch (a write cut short, or tampering)",
            )
            break
        doc = codec.parse(row)
        if type(doc) is not Success:
            error = doc.failure()
            return Failure(
                attrs.evolve(
                    error, location=f"version {row.version}: {error.location}"
                )
            )
        parent = None
        if row.parent is not None:
            parent = accs.get(row.parent)
            if parent is None or not row.parent < row.version:
                return Failure(
                    CheckpointDecodeError(
                        "$.parent",
                        f"record {row.version} descends from no earlier record",
                    )
                )
        step = codec.advance(parent, doc.unwrap())
        if isinstance(step, CheckpointDecodeError):
            return Failure(
                attrs.evolve(
                    step, location=f"version {row.version}: {step.location}"
                )
            )
        accs[row.version] = step
        snap = codec.snapshot(step, row.thread_id, row.version, row.parent)
        if type(snap) is not Success:
            return Failure(snap.failure())
        out.append(snap.unwrap())
    return Success(tuple(out))


async def fork(
    codec: Codec[S],
    store: CheckpointStore,
    thread_id: str,
    *,
    version: int | None = None,
    new_thread_id: str | None = None,
) -> Result[
    Snapshot[S],
    SnapshotNotFound
    | CheckpointDecodeError
    | ConcurrentModification
    | LeaseLost,
]:
    """Copy a snapshot into a new thread (version 0); the original is untouched.

    The new thread's snapshots name their origin (``origin``: this thread
    and version).  A stopped snapshot is copied running (a fork is how a
    stopped thread goes on); a paused one still waits, at a question of its
    own (another id).  What nested folds had saved in the step in flight is copied too: the
    fork continues them.
    """
    new = (
        uuid.uuid4().hex
        if new_thread_id is None
        else check_thread_id(new_thread_id, "new_thread_id")
    )
    loaded = await load(codec, store, thread_id, version=version)
    if type(loaded) is not Success:
        return Failure(loaded.failure())
    source = loaded.unwrap()
    forked: Snapshot[Any] = attrs.evolve(
        source,
        thread_id=new,
        version=0,
        parent=None,
        committed_at=None,
        author="",
        origin=(source.thread_id, source.version),
        edit=None,
    )
    if source.status is Status.STOPPED:
        # A fork is how a stopped thread goes on: the copy runs again
        # from where the stop was (its gates decide anew).
        forked = attrs.evolve(forked, status=Status.RUNNING, reason="")
    committed = await store.commit(
        codec.encode(forked, None), expected_head=None
    )
    if type(committed) is not Success:
        return Failure(committed.failure())
    return Success(forked)


def merge_patch(target: object, patch: object) -> object:
    """*target* (JSON-shaped) with the JSON merge patch *patch* applied
    (RFC 7386: an object patches member by member, ``null`` deletes a
    member, anything else replaces).

    .. versionadded:: 0.1.0
    """
    if not isinstance(patch, dict):
        return patch
    out: dict[str, object] = (
        dict(cast("dict[str, object]", target))
        if isinstance(target, dict)
        else {}
    )
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


async def update_state(
    codec: Codec[S],
    store: CheckpointStore,
    thread_id: str,
    state: S | None,
    patch: Mapping[str, object] | None,
    *,
    author: str,
    reason: str,
) -> Result[Snapshot[S], Any]:
    """Commit a paused or stopped thread's head again with another state
    (*state*, or the head's with the JSON merge patch *patch*), as a record
    of its own carrying *author* and *reason*; the thread's lease is held
    meanwhile."""
    from ._journal import ThreadJournal  # noqa: PLC0415

    async def body(held: Held) -> Result[Snapshot[S], Any]:
        loaded = await load_for_resume(codec, store, thread_id, None, None)
        if type(loaded) is not Success:
            return Failure(loaded.failure())
        snap, head = loaded.unwrap()
        status = str(snap.status)
        if snap.status not in {Status.INTERRUPTED, Status.STOPPED}:
            return Failure(
                EditRefused(thread_id, status, "it is not paused or stopped")
            )
        if snap.progress:
            return Failure(
                EditRefused(
                    thread_id,
                    status,
                    "it paused inside a step (a question a node, a tool or "
                    "a nested run asked): answer it first",
                )
            )
        new_state: Any = state
        if patch is not None:
            whole = codec.converter.unstructure(snap.state)
            try:
                new_state = codec.converter.structure(
                    merge_patch(whole, dict(patch)), codec.state_type
                )
            except STRUCTURE_ERRORS as exc:
                return Failure(
                    InvalidState(
                        "<edit>",
                        "$",
                        type_name(codec.state_type),
                        "the patched state does not fit: "
                        + "; ".join(explain(exc, codec.state_type)),
                    )
                )
        journal = ThreadJournal(
            store, codec, thread_id, snap, head, None, held
        )
        edited = attrs.evolve(snap, state=new_state, edit=Edit(author, reason))
        committed = await journal.commit(edited)
        if type(committed) is Failure:
            failure = committed.failure()
            if isinstance(failure, InvalidState):  # the edit's, not a node's
                return Failure(attrs.evolve(failure, node="<edit>"))
            return committed
        return Success(committed)

    return await leased(store, check_thread_id(thread_id), body)


class Threads(Generic[S]):
    """Reading threads back, for a value whose records this codec encodes.

    Graphs and swarms get their ``load``, ``history`` and ``fork`` from
    here: one implementation for every machine.
    """

    __slots__ = ()

    if TYPE_CHECKING:  # a property of the class this is mixed into

        @property
        def codec(self) -> Codec[S]:
            """Encodes this machine's snapshots to records and back."""
            ...

    async def load(
        self,
        store: CheckpointStore,
        thread_id: str,
        *,
        version: int | None = None,
    ) -> Result[Snapshot[S], SnapshotNotFound | CheckpointDecodeError]:
        """The snapshot at *version*, or at the head.

        A *last* record that is torn or fails its checksum (a write cut
        short) is skipped for its parent, with a warning on the
        ``pipeline.fold`` logger; any other record that does not decode, and
        records missing below the head, are a
        :class:`~pipeline.failures.CheckpointDecodeError`.
        """
        return await load(self.codec, store, thread_id, version=version)

    async def history(
        self, store: CheckpointStore, thread_id: str
    ) -> Result[
        tuple[Snapshot[S], ...], SnapshotNotFound | CheckpointDecodeError
    ]:
        """Every snapshot of the thread, oldest first (a torn last record
        skipped, as :meth:`load` does; any other failure to decode is a
        :class:`~pipeline.failures.CheckpointDecodeError`)."""
        return await history(self.codec, store, thread_id)

    async def fork(
        self,
        store: CheckpointStore,
        thread_id: str,
        *,
        version: int | None = None,
        new_thread_id: str | None = None,
    ) -> Result[
        Snapshot[S],
        SnapshotNotFound
        | CheckpointDecodeError
        | ConcurrentModification
        | LeaseLost,
    ]:
        """Copy a snapshot into a new thread (version 0); the original is
        untouched; its snapshots name it as their ``origin``.  A stopped
        snapshot is copied running: a fork is how a stopped thread goes on.  Progress of nested folds in the step in flight is copied
        too: the fork continues them."""
        return await fork(
            self.codec,
            store,
            thread_id,
            version=version,
            new_thread_id=new_thread_id,
        )

    async def update_state(
        self,
        store: CheckpointStore,
        thread_id: str,
        state: S | None = None,
        *,
        patch: Mapping[str, object] | None = None,
        author: str,
        reason: str,
    ) -> Result[
        Snapshot[S],
        SnapshotNotFound
        | CheckpointDecodeError
        | InvalidState
        | EditRefused
        | ConcurrentModification
        | ThreadBusy
        | LeaseLost,
    ]:
        """Edit a paused or stopped thread: its head again, with *state*
        (or the head's state with *patch*, a JSON merge patch over its
        JSON form), committed as a version of its own that records
        *author* and *reason* (:attr:`Snapshot.edit`; ``history`` shows
        it).  Checked as any commit (:class:`~pipeline.failures.InvalidState`,
        naming the field, never the value).  A paused thread still waits
        at its question (a new id: the edit's version); a stopped one stays
        stopped (fork the edit to go on).

        .. versionadded:: 0.1.0
        """
        if (state is None) == (patch is None):
            msg = "update_state takes a state or a patch (one of them)"
            raise TypeError(msg)
        return await update_state(
            self.codec,
            store,
            thread_id,
            state,
            patch,
            author=author,
            reason=reason,
        )
