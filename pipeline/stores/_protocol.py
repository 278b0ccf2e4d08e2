"""Checkpoint stores: the protocol, leases, and the in-memory store.

Stores deal in opaque records (bytes plus a checksum), one per boundary
of a fold (a node, a handoff, an agent's turn, a fan-out branch that
finished).  Committing is a compare-and-set on the thread's head version:
exactly one of several concurrent writers wins each version.

A compare-and-set protects records, not side effects: two runners of one
thread would both run its next node (and issue the refund twice) before one
of them lost the race to commit.  So a thread runs in one place at a time:
its runner holds a **lease** in the store (an owner, a fencing token that
grows with every acquisition, an expiry), renews it while running, and
every commit carries it; a store refuses the commit of a runner whose lease
another runner has since taken.  A runner that died stops renewing, and its
lease expires.
"""

from __future__ import annotations

import hashlib
import hmac

from collections.abc import Sequence
from typing import Final, Protocol, final

import attrs

from returns.result import Failure, Result, Success

from .._seconds import positive_seconds
from ..errors import InvalidThreadId
from ..failures import ConcurrentModification, LeaseLost, ThreadBusy


MAX_THREAD_ID: Final = 256
"""The longest thread id, in characters."""


def check_thread_id(thread_id: object, name: str = "thread_id") -> str:
    """*thread_id*, if every store can keep it; else
    :class:`~pipeline.errors.InvalidThreadId` (never showing it).

    .. versionadded:: 0.1.0
    """
    if type(thread_id) is str and thread_id in _CHECKED_IDS:
        return thread_id  # a plain str that passed before: it passes
    problem = None
    if not isinstance(thread_id, str):
        problem = f"a {type(thread_id).__name__}, not a str"
    elif not 0 < len(thread_id) <= MAX_THREAD_ID:
        problem = f"{len(thread_id)} characters, not 1 to {MAX_THREAD_ID}"
    elif "\x00" in thread_id:
        problem = "it holds NUL"
    else:
        try:
            thread_id.encode()
        except UnicodeEncodeError:
            problem = "it holds a lone surrogate"
    if problem is not None:
        msg = f"{name} cannot name a thread: {problem}"
        raise InvalidThreadId(msg)
    if type(thread_id) is str:  # a subclass's __eq__ could match another
        if len(_CHECKED_IDS) >= _CHECKED_MAX:
            _CHECKED_IDS.clear()
        _CHECKED_IDS.add(thread_id)
    return thread_id  # type: ignore[return-value]  # checked above


_CHECKED_IDS: set[str] = set()
"""Plain ``str`` ids :func:`check_thread_id` passed (at most
:data:`_CHECKED_MAX`, then forgotten at once): the check depends on
nothing but the id, and a run checks its thread's id some four times."""

_CHECKED_MAX = 1024


def record_checksum(
    thread_id: str,
    version: int,
    parent: int | None,
    data: bytes,
    key: bytes | None = None,
) -> str:
    """SHA-256 over the record's identity and bytes, hex; an HMAC with
    *key* when one is given (see :class:`~pipeline.stores.SignedStore`).

    .. versionadded:: 0.1.0
    """
    head = f"{thread_id}\n{version}\n{parent}\n".encode()
    if key is not None:
        return hmac.new(key, head + data, hashlib.sha256).hexdigest()
    h = hashlib.sha256(head)
    h.update(data)
    return h.hexdigest()


DEFAULT_LEASE_TTL: Final = 30.0
"""Seconds a lease lasts unless renewed (runners renew every third of it)."""


def check_lease_ttl(ttl: object, name: str = "lease_ttl") -> float:
    """*ttl*, if it is a number of seconds a lease can last (more than
    0; ``math.inf`` for a lease that never lapses); else
    :class:`~pipeline.errors.ConstructionError` naming *name* (never
    showing the value)."""
    return positive_seconds(ttl, name)


@final
@attrs.frozen
class Record:
    """One committed checkpoint: *data* is canonical JSON, *checksum* its hash.

    .. versionadded:: 0.1.0
    """

    thread_id: str
    version: int
    parent: int | None
    data: bytes
    checksum: str


@final
@attrs.frozen
class Lease:
    """The right to run a thread, until *expires* (seconds since the epoch,
    on the store's clock).

    *token* fences: it grows with every acquisition of the thread, and a
    store accepts commits only from the holder of the current token.

    .. versionadded:: 0.1.0
    """

    thread_id: str
    owner: str
    token: int
    expires: float


class CheckpointStore(Protocol):
    """Where snapshots are kept.  Every method is safe to call concurrently,
    and keeps its invariants when its caller is cancelled (natively too):
    a commit either lands whole or not at all.

    .. versionadded:: 0.1.0
    """

    @property
    def lease_ttl(self) -> float:
        """Seconds a lease lasts unless renewed."""
        ...

    async def commit(
        self,
        record: Record,
        *,
        expected_head: int | None,
        lease: Lease | None = None,
    ) -> Result[None, ConcurrentModification | LeaseLost]:
        """Add *record* iff the thread's head version is *expected_head*.

        ``None`` means the thread must not exist yet.  ``record.version``
        is ``expected_head + 1`` (0 for a new thread).  With a *lease*, the
        commit also needs the thread's current lease to be that one (same
        token): else :class:`~pipeline.failures.LeaseLost`.
        """
        ...

    async def records(
        self, thread_id: str, *, upto: int | None = None
    ) -> Sequence[Record]:
        """The thread's records with version <= *upto* (all if ``None``), in
        version order.  Empty if the thread does not exist."""
        ...

    async def head(self, thread_id: str) -> int | None:
        """The highest committed version, or ``None`` for no such thread."""
        ...

    async def threads(self) -> Sequence[str]:
        """Every thread id with at least one record, sorted."""
        ...

    async def delete(self, thread_id: str) -> None:
        """Remove every record of the thread, and its lease (no error if
        there are none)."""
        ...

    async def acquire(
        self, thread_id: str, owner: str, *, ttl: float
    ) -> Result[Lease, ThreadBusy]:
        """Take the thread's lease for *ttl* seconds.

        Free (never taken, released, or expired): a new lease with the next
        token.  Held by *owner* already: extended.  Held by another owner:
        :class:`~pipeline.failures.ThreadBusy`.
        """
        ...

    async def renew(
        self, lease: Lease, *, ttl: float
    ) -> Result[Lease, LeaseLost]:
        """Extend *lease* by *ttl* seconds from now, if it is still the
        thread's (even expired, as long as nobody took the thread since)."""
        ...

    async def release(self, lease: Lease) -> None:
        """Give the thread up (a no-op if *lease* is no longer its lease)."""
        ...


@final
@attrs.frozen
class LeaseRow:
    """A thread's lease as a store keeps it (the token outlives releases).

    .. versionadded:: 0.1.0
    """

    owner: str
    token: int
    expires: float


def take(
    row: LeaseRow | None, thread_id: str, owner: str, ttl: float, now: float
) -> Result[Lease, ThreadBusy]:
    """The decision :meth:`CheckpointStore.acquire` makes, on a lease row.

    .. versionadded:: 0.1.0
    """
    if row is not None and row.expires > now and row.owner != owner:
        return Failure(ThreadBusy(thread_id, row.expires - now))
    if row is not None and row.owner == owner and row.expires > now:
        return Success(Lease(thread_id, owner, row.token, now + ttl))
    token = 1 if row is None else row.token + 1
    return Success(Lease(thread_id, owner, token, now + ttl))


def holds(row: LeaseRow | None, lease: Lease) -> bool:
    """Whether *lease* is still the thread's lease (same owner and token).

    .. versionadded:: 0.1.0
    """
    return (
        row is not None
        and row.token == lease.token
        and row.owner == lease.owner
    )


def next_version(head: int | None) -> int:
    """The version a commit on *head* must carry (0 for a new thread).

    .. versionadded:: 0.1.0
    """
    return 0 if head is None else head + 1
