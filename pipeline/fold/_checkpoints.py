"""Reading a thread back: load a snapshot, list its history, fork it.

Records form a tree inside a thread (each names its parent version; time
travel grows a new branch), so a snapshot is rebuilt from the chain of
records that leads to it, root first.
"""

from __future__ import annotations

import uuid

from typing import Any, Generic, TypeVar

import attrs

from returns.result import Failure, Result, Success

from ..errors import (
    CheckpointDecodeError,
    ConcurrentModification,
    LeaseLost,
    SnapshotNotFound,
)
from ._codec import Codec, Doc
from ._model import Snapshot
from ._store import CheckpointStore, Record


S = TypeVar("S")


async def load(
    codec: Codec[S],
    store: CheckpointStore,
    thread_id: str,
    *,
    version: int | None = None,
) -> Result[Snapshot[S], SnapshotNotFound | CheckpointDecodeError]:
    """The snapshot at *version*, or the latest usable one.

    Records that fail their checksum or do not decode are skipped when
    looking for the latest: a torn last write falls back to the version
    before it.  An explicit *version* must decode.
    """
    rows = await store.records(thread_id, upto=version)
    if not rows:
        return Failure(SnapshotNotFound(thread_id, version))
    by_version = {r.version: r for r in rows}
    parsed: dict[int, Result[Doc, CheckpointDecodeError]] = {}
    candidates = (
        [version] if version is not None else sorted(by_version, reverse=True)
    )
    error: CheckpointDecodeError | None = None
    for v in candidates:
        if v not in by_version:
            return Failure(SnapshotNotFound(thread_id, version))
        chain: list[tuple[Record, Doc]] = []
        cursor: int | None = v
        while cursor is not None:
            row = by_version.get(cursor)
            if row is None:
                error = CheckpointDecodeError(
                    "$.parent",
                    f"version {v} descends from missing version {cursor}",
                )
                break
            doc = parsed.get(cursor)
            if doc is None:
                doc = parsed[cursor] = codec.parse(row)
            if type(doc) is not Success:
                error = doc.failure()
                break
            chain.append((row, doc.unwrap()))
            cursor = row.parent
        else:
            chain.reverse()
            decoded = codec.decode(chain)
            if type(decoded) is Success:
                return decoded
            error = decoded.failure()
    assert error is not None  # noqa: S101  # some candidate failed
    return Failure(error)


async def history(
    codec: Codec[S], store: CheckpointStore, thread_id: str
) -> Result[tuple[Snapshot[S], ...], SnapshotNotFound | CheckpointDecodeError]:
    """Every decodable snapshot of the thread, oldest first."""
    rows = await store.records(thread_id)
    if not rows:
        return Failure(SnapshotNotFound(thread_id, None))
    out: list[Snapshot[S]] = []
    for row in rows:
        snap = await load(codec, store, thread_id, version=row.version)
        if type(snap) is Success:
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

    What nested folds had saved in the step in flight is copied too: the
    fork continues them.
    """
    loaded = await load(codec, store, thread_id, version=version)
    if type(loaded) is not Success:
        return Failure(loaded.failure())
    forked: Snapshot[Any] = attrs.evolve(
        loaded.unwrap(),
        thread_id=new_thread_id or uuid.uuid4().hex,
        version=0,
        parent=None,
    )
    committed = await store.commit(
        codec.encode(forked, None), expected_head=None
    )
    if type(committed) is not Success:
        return Failure(committed.failure())
    return Success(forked)


class Threads(Generic[S]):
    """Reading threads back, for a value whose records this codec encodes.

    Graphs and swarms get their ``load``, ``history`` and ``fork`` from
    here: one implementation for every machine.
    """

    __slots__ = ()

    @property
    def codec(self) -> Codec[S]:
        """Encodes this machine's snapshots to records and back."""
        raise NotImplementedError  # pragma: no cover  # every machine has one

    async def load(
        self,
        store: CheckpointStore,
        thread_id: str,
        *,
        version: int | None = None,
    ) -> Result[Snapshot[S], SnapshotNotFound | CheckpointDecodeError]:
        """The snapshot at *version*, or the latest usable one.

        Records that fail their checksum or do not decode are skipped when
        looking for the latest: a torn last write falls back to the version
        before it.  An explicit *version* must decode.
        """
        return await load(self.codec, store, thread_id, version=version)

    async def history(
        self, store: CheckpointStore, thread_id: str
    ) -> Result[
        tuple[Snapshot[S], ...], SnapshotNotFound | CheckpointDecodeError
    ]:
        """Every decodable snapshot of the thread, oldest first."""
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
        untouched.  Progress of nested folds in the step in flight is copied
        too: the fork continues them."""
        return await fork(
            self.codec,
            store,
            thread_id,
            version=version,
            new_thread_id=new_thread_id,
        )
