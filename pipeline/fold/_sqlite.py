"""SQLite checkpoint store: the embedded default.

Stdlib :mod:`sqlite3` in WAL mode with ``synchronous=FULL`` (a commit is on
disk before the next node starts), reached through
:func:`anyio.to_thread.run_sync`, so it works on asyncio and trio alike.
One connection, used by one worker thread at a time.
"""

from __future__ import annotations

import sqlite3

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar, final

import anyio
import anyio.to_thread

from returns.result import Failure, Result, Success

from ..errors import ConcurrentModification
from ._store import Record


T = TypeVar("T")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS checkpoints (
    thread_id TEXT NOT NULL,
    version INTEGER NOT NULL,
    parent INTEGER,
    data BLOB NOT NULL,
    checksum TEXT NOT NULL,
    PRIMARY KEY (thread_id, version)
) WITHOUT ROWID
"""


@final
class SQLiteStore:
    """A durable :class:`~pipeline.fold.CheckpointStore` in one SQLite file.

    *synchronous* may be ``"FULL"`` (default: durable across power loss),
    ``"NORMAL"`` (durable across process crashes in WAL mode) or ``"OFF"``.
    Close it with :meth:`aclose` (or use ``async with``).
    """

    def __init__(self, path: str | Path, *, synchronous: str = "FULL") -> None:
        if synchronous not in {"FULL", "NORMAL", "OFF"}:
            msg = (
                f"synchronous must be FULL, NORMAL or OFF, not {synchronous!r}"
            )
            raise ValueError(msg)
        self.path = Path(path)
        self._conn = sqlite3.connect(
            self.path, check_same_thread=False, isolation_level=None
        )
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute(f"PRAGMA synchronous={synchronous}")
        self._conn.execute(_SCHEMA)
        self._limiter = anyio.CapacityLimiter(1)
        self._closed = False

    async def _run(self, fn: Callable[[], T]) -> T:
        # One worker at a time: sqlite3 connections are not for concurrent use.
        return await anyio.to_thread.run_sync(fn, limiter=self._limiter)

    async def commit(
        self, record: Record, *, expected_head: int | None
    ) -> Result[None, ConcurrentModification]:
        """See :meth:`CheckpointStore.commit` (one transaction, CAS on head)."""

        def work() -> int | None:
            conn = self._conn
            conn.execute("BEGIN IMMEDIATE")
            try:
                (head,) = conn.execute(
                    "SELECT MAX(version) FROM checkpoints WHERE thread_id = ?",
                    (record.thread_id,),
                ).fetchone()
                expected_version = 0 if head is None else head + 1
                if head != expected_head or record.version != expected_version:
                    conn.execute("ROLLBACK")
                    return head if head is not None else -1
                conn.execute(
                    "INSERT INTO checkpoints VALUES (?, ?, ?, ?, ?)",
                    (
                        record.thread_id,
                        record.version,
                        record.parent,
                        record.data,
                        record.checksum,
                    ),
                )
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            return None

        # Shielded: once the write started it completes (or rolls back)
        # before cancellation is delivered, never half-way.
        conflict: int | None = None
        with anyio.CancelScope(shield=True):
            conflict = await self._run(work)
        if conflict is None:
            return Success(None)
        actual = None if conflict == -1 else conflict
        return Failure(
            ConcurrentModification(record.thread_id, expected_head, actual)
        )

    async def records(
        self, thread_id: str, *, upto: int | None = None
    ) -> Sequence[Record]:
        """See :meth:`CheckpointStore.records`."""

        def work() -> list[Record]:
            rows = self._conn.execute(
                "SELECT version, parent, data, checksum FROM checkpoints "
                "WHERE thread_id = ? AND version <= ? ORDER BY version",
                (thread_id, upto if upto is not None else 2**62),
            ).fetchall()
            return [
                Record(thread_id, v, p, bytes(d), c) for v, p, d, c in rows
            ]

        return await self._run(work)

    async def head(self, thread_id: str) -> int | None:
        """See :meth:`CheckpointStore.head`."""

        def work() -> int | None:
            (head,) = self._conn.execute(
                "SELECT MAX(version) FROM checkpoints WHERE thread_id = ?",
                (thread_id,),
            ).fetchone()
            return head  # type: ignore[no-any-return]

        return await self._run(work)

    async def threads(self) -> Sequence[str]:
        """See :meth:`CheckpointStore.threads`."""

        def work() -> list[str]:
            rows = self._conn.execute(
                "SELECT DISTINCT thread_id FROM checkpoints ORDER BY thread_id"
            ).fetchall()
            return [r[0] for r in rows]

        return await self._run(work)

    async def delete(self, thread_id: str) -> None:
        """See :meth:`CheckpointStore.delete`; the space is reclaimed too."""

        def work() -> None:
            self._conn.execute(
                "DELETE FROM checkpoints WHERE thread_id = ?", (thread_id,)
            )
            # Leave no trace of the thread's bytes in the file or the WAL.
            self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            self._conn.execute("VACUUM")

        with anyio.CancelScope(shield=True):
            await self._run(work)

    async def aclose(self) -> None:
        """Close the connection."""
        if not self._closed:
            self._closed = True
            await self._run(self._conn.close)

    async def __aenter__(self) -> SQLiteStore:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()
