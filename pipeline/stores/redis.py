"""Redis checkpoint store: for runners on several processes or machines.

redis-py's asyncio client (``redis.asyncio``), under a key *prefix*; every
command goes over connections of the store's own, a send and a read each
(see ``RedisStore._ask``)::

    {prefix}:threads          set: every thread id with a record
    {prefix}:records:{id}     list: the thread's records, version = index
    {prefix}:lease:{id}       hash: owner, token, expires (the lease row)
    {prefix}:cache:{key}      string: a cache entry (see :class:`~pipeline.stores.StoreCache`)

A record is ``[version, parent, checksum]`` as JSON, a newline, then its
bytes.  Versions are contiguous from 0 (each commit is ``head + 1``), so a
list holds them in order, its length is the head plus one, and
``records(upto=n)`` is one ``LRANGE``.

Every change (commit, acquire, renew, release, delete) is one **Lua
script**, which Redis runs atomically (``EVALSHA``, loading it on its first
use on a server, and again if the server lost it): a commit checks the lease (its token fences) and the head
and appends in one step, so concurrent writers get exactly one winner per
version.  Leases run on the **server's clock** (``TIME`` in the script);
the token grows by one with every acquisition of a thread, as the lease row
outlives releases.  ``delete`` removes the thread's keys and its set entry:
nothing of it is left under the prefix.

The scripts touch the thread's keys and the shared set: one Redis server
(with replicas, or not), not Redis Cluster.  A commit is applied when it
returns, and durable as far as the server's persistence makes it
(``appendonly yes`` with ``appendfsync always`` for every write).  The
client does not retry a command whose connection broke (a retried commit
could be refused as a conflict with itself): it raises, and the commit may
or may not have landed; read the thread's head to know.

**asyncio and trio.** redis-py's async client runs on asyncio only, and its
connections belong to one event loop.  For a plain URL, the store speaks
Redis's protocol itself (see :mod:`pipeline.stores._resp`), in the caller's
own task, on trio and on the asyncio loop it was opened on: no thread, no
hop between threads (which cost more than the rest of a commit), and no
task per call.  A URL it does not speak itself (TLS, options in the query
string, a user without a password) keeps redis-py's client: on the loop it
was opened on, each call a task of its own; and callers on other asyncio
loops or threads go as the PostgreSQL store's do (see
:mod:`pipeline.stores.postgres`) to an asyncio loop of its own, in a daemon
thread, with a client of its own.  Either way, a caller's cancellation
(anyio's, or asyncio's own ``task.cancel()``) never interrupts a write in
flight: a cancelled writer waits for its script's answer (each command
bounded), then raises; a cancelled reader stops at once, dropping the
connection it was reading from (never kept with a reply nobody read).  A
cancelled write whose command ran past its bound, or whose connection
broke, may or may not have landed: on asyncio the cancellation it raises
has that error as its ``__cause__``; on trio the error itself is raised
(trio's shield holds the cancellation until the next checkpoint).  trio in
guest mode (``trio.lowlevel.start_guest_run`` on an asyncio loop) is trio
here, on the loop the store was opened on too: asyncio's running loop is
the host's there, but the caller is trio's task (see ``asyncio_loop`` in
:mod:`pipeline.stores._server`).  That holds when the host runs trio's
ticks as loop callbacks (``loop.call_soon_threadsafe``, as trio's
documentation does); ticks run from inside an asyncio task (a queue
pump) look like asyncio's own there, and the store's calls fail.

**Closing.** ``aclose()`` closes the connections of every loop and trio
run (a command in flight on a loop that runs closes its own when it ends).
If the loop the store was opened on stopped, or was closed, with the store
open, a close from another loop or trio run ends that loop's connections
from there: the idle ones, and one lent to a command that was in flight as
the loop stopped.  Each is shut down (the server drops it at once); its
socket is closed by its transport, when the loop runs again (the command
then raises ``ConnectionError``) or when it is collected.
"""

from __future__ import annotations

from .._extras import require


require(__name__, "the redis client", "redis", ("redis",))


import asyncio
import hashlib
import math
import weakref

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final, TypeVar, final

import anyio
import orjson
import redis.asyncio
import redis.exceptions

from redis.asyncio.connection import AbstractConnection
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import NoScriptError, ResponseError
from returns.result import Failure, Result, Success

from ..failures import ConcurrentModification, LeaseLost, ThreadBusy
from . import _resp
from ._protocol import (
    DEFAULT_LEASE_TTL,
    Lease,
    Record,
    check_lease_ttl,
    check_thread_id,
)
from ._server import ServerStore, asyncio_loop, trio_module


__all__ = ("RedisStore",)

T = TypeVar("T")
W = TypeVar("W", _resp.Connection, _resp.LoopConnection)

# KEYS: records, lease, threads.  ARGV: thread id, expected head (-1: none),
# version, the record's bytes, "1" if fenced by a lease, its owner, token.
# Returns {0} committed, {1} lease lost, {2, head} the head moved (-1: none).
_COMMIT: Final = """
if ARGV[5] == '1' then
  local row = redis.call('HMGET', KEYS[2], 'owner', 'token')
  if row[1] ~= ARGV[6] or row[2] ~= ARGV[7] then
    return {1}
  end
end
local n = redis.call('LLEN', KEYS[1])
if n - 1 ~= tonumber(ARGV[2]) or n ~= tonumber(ARGV[3]) then
  return {2, n - 1}
end
redis.call('RPUSH', KEYS[1], ARGV[4])
if n == 0 then
  redis.call('SADD', KEYS[3], ARGV[1])
end
return {0}
"""

# The server's clock, in seconds since the epoch.
_NOW: Final = """
local clock = redis.call('TIME')
local now = tonumber(clock[1]) + tonumber(clock[2]) / 1000000
"""

# KEYS: lease.  ARGV: owner, ttl.  Returns {1, token, expires} taken, or
# {0, seconds until the holder's lease expires} busy (see _protocol.take).
_ACQUIRE: Final = (
    _NOW
    + """
local row = redis.call('HMGET', KEYS[1], 'owner', 'token', 'expires')
local token = 1
if row[1] then
  local expires = tonumber(row[3])
  if expires > now and row[1] ~= ARGV[1] then
    return {0, string.format('%.6f', expires - now)}
  elseif expires > now then
    token = tonumber(row[2])
  else
    token = tonumber(row[2]) + 1
  end
end
local expires = string.format('%.6f', now + tonumber(ARGV[2]))
token = string.format('%d', token)
redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'token', token,
           'expires', expires)
return {1, token, expires}
"""
)

# KEYS: lease.  ARGV: owner, token, ttl.  Returns {1, expires} renewed, or
# {0} lost (see _protocol.holds).
_RENEW: Final = (
    _NOW
    + """
local row = redis.call('HMGET', KEYS[1], 'owner', 'token')
if row[1] ~= ARGV[1] or row[2] ~= ARGV[2] then
  return {0}
end
local expires = string.format('%.6f', now + tonumber(ARGV[3]))
redis.call('HSET', KEYS[1], 'expires', expires)
return {1, expires}
"""
)

# KEYS: lease.  ARGV: owner, token.  The row stays: its token fences.
_RELEASE: Final = """
local row = redis.call('HMGET', KEYS[1], 'owner', 'token')
if row[1] == ARGV[1] and row[2] == ARGV[2] then
  redis.call('HSET', KEYS[1], 'expires', '0')
end
return 0
"""

# KEYS: records, lease, threads.  ARGV: thread id.
_DELETE: Final = """
redis.call('DEL', KEYS[1], KEYS[2])
redis.call('SREM', KEYS[3], ARGV[1])
return 0
"""


_SCRIPTS: Final = {
    "commit": _COMMIT,
    "acquire": _ACQUIRE,
    "renew": _RENEW,
    "release": _RELEASE,
    "delete": _DELETE,
}


_SHAS: Final = {
    name: hashlib.sha1(script.encode(), usedforsecurity=False).hexdigest()
    for name, script in _SCRIPTS.items()
}
"""Each script's name in Redis: the SHA-1 digest of its text."""


_LOADS: Final = 3
"""Times a call loads its script when the server lacks it (a server whose
scripts are flushed again and again ends it with ``NoScriptError``)."""


_TIMEOUT: Final = 5.0
"""Seconds a command waits for its answer (redis-py's default socket
timeout), and a connection for the server."""


async def _bounded(command: Awaitable[T]) -> T:
    """*command*'s answer, waited for up to :data:`_TIMEOUT` seconds.

    The same bound as redis-py's socket timeout, whose asyncio client wraps
    every command's write in ``asyncio.wait_for`` (on Python 3.11, a task
    and three turns of the loop per command); ``asyncio.timeout`` is one
    timer.  A command cut off disconnects its connection (redis-py does so
    on any interruption of a read or write), as its own timeout does.
    """
    try:
        async with asyncio.timeout(_TIMEOUT):
            return await command
    except TimeoutError:
        msg = "Timeout reading from the server"
        raise redis.exceptions.TimeoutError(msg) from None


def _abandon(
    wires: list[_resp.Connection] | list[_resp.LoopConnection],
) -> None:
    """Close *wires* (idle connections of a trio run that may be over, or of
    the loop closing the store)."""
    while wires:
        wires.pop().abandon()


async def _opened_anyway(
    where: _resp.Target, held: list[asyncio.CancelledError]
) -> _resp.LoopConnection:
    """A new connection to *where* for a write, opened even if the caller
    is cancelled (by asyncio's ``task.cancel()``) meanwhile: the
    cancellation goes in *held*, for the write to raise once it is whole.
    The opening is a task of its own, so a cancellation does not cut it (a
    connection is opened seldom: the task's turns of the loop do not
    count)."""
    opening = asyncio.get_running_loop().create_task(
        _resp.LoopConnection.open(where, _TIMEOUT)
    )
    try:
        await asyncio.wait((opening,))
    except asyncio.CancelledError as e:
        held.append(e)
        # The rest under anyio's shield (see LoopConnection._reply).
        with anyio.CancelScope(shield=True):
            while not opening.done():
                try:
                    await asyncio.wait((opening,))
                except asyncio.CancelledError as again:
                    held.append(again)
    return opening.result()


async def _written(
    write: Callable[[list[asyncio.CancelledError]], Awaitable[T]],
) -> T:
    """``write(held)``'s outcome, then the cancellation its commands held
    back (see ``RedisStore._ask_home``), if any: raised once the write is
    whole (stored or refused).  On the store's home loop this is what holds
    back anyio's cancellation too (see ``ServerStore._here``)."""
    held: list[asyncio.CancelledError] = []
    try:
        out = await write(held)
    except BaseException as failed:
        if held:
            # The write's own error (a command past its bound, a broken
            # connection: its outcome unknown) is the cancellation's cause.
            raise held[0] from failed
        raise
    if held:
        raise held[0]
    return out


async def _opened_here(
    where: _resp.Target, *, shield: bool
) -> _resp.Connection:
    """A new connection to *where* on trio, within :data:`_TIMEOUT` seconds
    (and, for a write, under trio's shield: the write goes on)."""
    trio = trio_module()
    bound = trio.CancelScope(
        deadline=trio.current_time() + _TIMEOUT, shield=shield
    )
    opened: list[_resp.Connection] = []  # (the scope may swallow its end)
    with bound:
        opened.append(await _resp.Connection.open(where))
    if not opened:  # its time ran out
        msg = "Timeout reading from the server"
        raise redis.exceptions.TimeoutError(msg)
    return opened[0]


async def _usable(conn: AbstractConnection) -> bool:
    """Whether idle *conn* is fit for a command: the server has not closed
    it, and nothing nobody asked for waits on it.  redis-py's own public
    check (``can_read``), which looks at what the loop has seen and does not
    wait, where its pool's check before every command reads."""
    try:
        return not await conn.can_read()
    except (redis.exceptions.ConnectionError, OSError):
        return False


async def _exchange(
    conn: AbstractConnection, command: tuple[str | int | bytes, ...]
) -> Any:
    """*command*'s answer on *conn* (an error reply raises
    ``ResponseError``).  The command is packed here, as the client packs
    it, without its encoder's checks of every argument's type (the store
    sends strings, integers and bytes only)."""
    await conn.send_packed_command(_resp.pack(command), check_health=False)
    return await conn.read_response()


def _encode(record: Record) -> bytes:
    header = orjson.dumps([record.version, record.parent, record.checksum])
    return header + b"\n" + record.data


def _decode(thread_id: str, blob: bytes) -> Record:
    header, _, data = blob.partition(b"\n")
    version, parent, checksum = orjson.loads(header)
    return Record(thread_id, version, parent, data, checksum)


def _bytes(value: bytes | str) -> bytes:
    # Replies are bytes (the client does not decode them).
    return value.encode() if isinstance(value, str) else bytes(value)


def _int(value: Any) -> int:
    return int(value)


def _committed(
    thread: str, expected_head: int | None, out: Any
) -> Result[None, ConcurrentModification | LeaseLost]:
    """The commit script's answer *out*, as ``commit`` returns it."""
    code = _int(out[0])
    if code == 1:
        return Failure(LeaseLost(thread))
    if code == 2:
        head = _int(out[1])
        return Failure(
            ConcurrentModification(
                thread, expected_head, None if head < 0 else head
            )
        )
    return _DONE


_DONE: Final[Result[None, Any]] = Success(None)
"""A commit's success (one: ``Success`` is immutable)."""


def _float(value: Any) -> float:
    return float(value)


@final
class RedisStore(ServerStore):
    """A :class:`~pipeline.stores.CheckpointStore` in Redis, for runners on
    several processes or machines.

    *url* is a redis-py URL (``"redis://host:6379/0"``,
    ``"rediss://..."``, ``"unix:///path?db=0"``).  Every key of the store
    starts with *prefix* and a colon (give each application or test its own
    to keep their threads apart).  Leases run on the server's clock.

    Open it before use, and close it after::

        async with RedisStore(url) as store:
            ...
        store = await RedisStore.connect(url)  # the same, opened
        await store.aclose()

    It works on asyncio and trio alike (see :mod:`pipeline.stores.redis`).

    Deleting a thread removes its keys (its bytes stay in the server's
    snapshot and append-only files until it rewrites them).

    .. versionadded:: 0.1.0
    """

    def __init__(
        self,
        url: str,
        *,
        prefix: str = "pipeline",
        lease_ttl: float = DEFAULT_LEASE_TTL,
    ) -> None:
        self._url = url
        self.prefix = prefix
        self._lease_ttl = check_lease_ttl(lease_ttl)
        self._threads_key = f"{prefix}:threads"
        self._loop = None
        self._clients: dict[
            asyncio.AbstractEventLoop, redis.asyncio.Redis
        ] = {}
        self._idle: dict[
            asyncio.AbstractEventLoop, list[AbstractConnection]
        ] = {}
        """Each asyncio loop's idle connections (see _ask)."""
        self._wires: weakref.WeakKeyDictionary[
            object, list[_resp.Connection]
        ] = weakref.WeakKeyDictionary()
        """Each trio run's idle connections (see _ask_here), closed when
        the run is over (its token collected)."""
        self._last_run: (
            tuple[weakref.ref[Any], list[_resp.Connection]] | None
        ) = None
        """The trio run last seen, weakly, and its idle connections (a
        look in ``_wires`` makes a weak reference each time)."""
        self._target = _resp.target(url)
        self._native = self._target is not None
        self._here_loop: asyncio.AbstractEventLoop | None = None
        """The asyncio loop the store speaks to its server on itself (the
        loop it was opened on, for a URL it speaks: see _ask_home)."""
        self._here_wires: list[_resp.LoopConnection] = []
        """That loop's idle connections."""
        self._here_all: weakref.WeakSet[_resp.LoopConnection] = (
            weakref.WeakSet()
        )
        """Every connection of that loop's, idle or lent to a command
        (noted as it is opened: none of a command's cost), for a close
        from elsewhere once the loop stopped (see _close)."""
        self._shas: dict[str, str] = dict(_SHAS)

    @classmethod
    async def connect(
        cls,
        url: str,
        *,
        prefix: str = "pipeline",
        lease_ttl: float = DEFAULT_LEASE_TTL,
    ) -> RedisStore:
        """A store on *url*, opened (close it with ``aclose()``).

        Raises:
            redis.exceptions.ConnectionError: The server cannot be reached.
        """
        store = cls(url, prefix=prefix, lease_ttl=lease_ttl)
        await store.open()
        return store

    def __repr__(self) -> str:
        return f"RedisStore(prefix={self.prefix!r})"

    # -- the loop's side -------------------------------------------------------

    def _records_key(self, thread_id: str) -> str:
        return f"{self.prefix}:records:{thread_id}"

    def _lease_key(self, thread_id: str) -> str:
        return f"{self.prefix}:lease:{thread_id}"

    async def _open(self) -> None:
        # One round trip: a wrong address fails here (and the connection
        # stays, for the first command).  The scripts are called by their
        # digest and loaded on first use (see _run), once per server rather
        # than once per store.
        loop = asyncio_loop()
        if loop is not None:
            if self._native:
                self._here_loop = loop
            else:
                await self._connect_client()
        await self._ask("PING")

    async def _connect(self) -> None:
        await self._connect_client()

    async def _connect_client(self) -> redis.asyncio.Redis:
        # No retries: a command whose connection broke may have run.
        client = redis.asyncio.Redis.from_url(
            self._url,
            retry=Retry(NoBackoff(), 0),
            # The bound on an answer is _bounded's (one timer per command,
            # where redis-py's own on Python 3.11 is a task per command).
            socket_timeout=None,
            socket_connect_timeout=_TIMEOUT,
        )
        loop = asyncio.get_running_loop()
        self._clients[loop] = client
        self._idle[loop] = []
        return client

    async def _close(self) -> None:
        # Every trio run's idle connections go with the first loop that
        # closes (their runs may be over); a call in flight closes its own
        # when it ends, as the store is closing.
        for wires in list(self._wires.values()):
            _abandon(wires)
        loop = asyncio_loop()
        here = self._here_loop
        if here is not None and loop is here:
            _abandon(self._here_wires)
        elif here is not None and self._home_gone:
            # The home loop stopped or ended with the store open (or
            # stopped before it ran the close: it may be running its
            # cleanup still): its connections are ended from here (the
            # server drops them), not left open for as long as the store
            # lives: the idle ones, and those lent to a command that was in
            # flight as the loop stopped (its task, if the loop runs again,
            # raises the broken connection's error).
            self._here_wires = []
            for wire in list(self._here_all):
                wire.shut()
        if loop is None:
            return
        client = self._clients.pop(loop, None)
        for conn in self._idle.pop(loop, ()):
            await conn.disconnect()
        if client is not None:
            await client.aclose()

    def _new_connection(
        self, loop: asyncio.AbstractEventLoop
    ) -> AbstractConnection:
        """A connection with the client's settings, not yet connected (it
        connects on its first command)."""
        pool = self._clients[loop].connection_pool
        conn: AbstractConnection = pool.make_connection()  # type: ignore[no-untyped-call]
        return conn

    async def _ask(
        self,
        *command: str | int | bytes,
        held: list[asyncio.CancelledError] | None = None,
    ) -> Any:
        # Every command goes over a connection of the store's own, taken
        # from the loop's idle list: a send and a read, without the
        # client's pool lock, health check, retry wrapper and events (half
        # the Python calls of a commit).  A connection that failed (broken,
        # timed out, interrupted) is dropped; one whose command the server
        # refused (an error reply) is fine.
        # A command given *held* is a write's: see _ask_home.
        loop = asyncio_loop()
        if loop is None:
            return await self._ask_here(command, shield=held is not None)
        if loop is self._here_loop:
            return await self._ask_home(command, held)
        idle = self._idle[loop]
        conn = None
        while idle:
            conn = idle.pop()
            if await _usable(conn):
                break
            await conn.disconnect(nowait=True)
            conn = None
        if conn is None:
            conn = self._new_connection(loop)
        try:
            out = await _bounded(_exchange(conn, command))
        except ResponseError:
            idle.append(conn)
            raise
        except BaseException:
            await conn.disconnect(nowait=True)
            raise
        idle.append(conn)
        return out

    async def _ask_here(
        self, command: tuple[str | int | bytes, ...], *, shield: bool
    ) -> Any:
        """*command*'s answer on trio, over a connection of the store's own
        on the caller's loop (see :mod:`pipeline.stores._resp`), with the
        same bound and the same rules for failed connections as ``_ask``.

        A write's command (*shield*) is not cut by the caller's
        cancellation: its waits go on under trio's shield once cancelled
        (``ServerStore._here`` enters no shield of its own for this store:
        see ``_firm``), and the bound is its run's watch's (see
        ``_resp._Watch``), so a command nobody cancels enters no cancel
        scope (a scope with a deadline and a shield cost 12 µs a command).
        A new connection is opened under a scope with both (seldom)."""
        where = self._target
        if where is None:  # _native is False: the thread runs the calls
            msg = "this store's URL is not spoken on trio"
            raise RuntimeError(msg)
        idle = self._run_wires()
        wire = None
        while idle:
            wire = idle.pop()
            if wire.usable():
                break
            await wire.aclose()
            wire = None
        try:
            if wire is None:
                wire = await _opened_here(where, shield=shield)
            out = await wire.ask(*command, bound=_TIMEOUT, firm=shield)
        except ResponseError:
            self._idle_again(idle, wire)
            raise
        except BaseException:
            if wire is not None:
                # Shielded for a write: its caller, cancelled meanwhile,
                # gets this error (a timeout: its outcome unknown, see the
                # module), not a cancellation from the closing.
                with trio_module().CancelScope(shield=shield):
                    await wire.aclose()
            raise
        self._idle_again(idle, wire)
        return out

    async def _ask_home(
        self,
        command: tuple[str | int | bytes, ...],
        held: list[asyncio.CancelledError] | None,
    ) -> Any:
        """*command*'s answer on the asyncio loop the store was opened on,
        over a connection of the store's own (see
        :mod:`pipeline.stores._resp`): inline, in the caller's task, with the
        same bound and the same rules for failed connections as ``_ask``.

        The caller's task runs the command, so a cancellation reaches it
        (asyncio's own ``task.cancel()``, and anyio's, which is that on
        asyncio): a command of a write (given *held*, see ``_written``) then
        waits for its answer (and for its connection, if it needs a new
        one), the rest of that wait under anyio's shield, and the write goes
        on, raising the cancellation once whole; a connection left with an
        answer on its way is dropped, never kept out of step.
        """
        where = self._target
        assert where is not None  # noqa: S101  # _here_loop is set only then
        idle = self._here_wires
        wire = None
        while idle:
            wire = idle.pop()
            if wire.usable():
                break
            wire.abandon()
            wire = None
        try:
            if wire is None:
                wire = await (
                    _resp.LoopConnection.open(where, _TIMEOUT)
                    if held is None
                    else _opened_anyway(where, held)
                )
                self._here_all.add(wire)
            out = await wire.ask(command, bound=_TIMEOUT, held=held)
        except ResponseError:
            self._idle_again(idle, wire)
            raise
        except BaseException:
            if wire is not None:
                wire.abandon()
            raise
        self._idle_again(idle, wire)
        return out

    def _run_wires(self) -> list[_resp.Connection]:
        """The running trio run's idle connections (closed when the run is
        over: a store may outlive many runs)."""
        run = trio_module().lowlevel.current_trio_token()
        last = self._last_run
        if last is not None and last[0]() is run:  # the common case
            return last[1]
        idle = self._wires.get(run)
        if idle is None:
            idle = self._wires[run] = []
            weakref.finalize(run, _abandon, idle)
        # Weakly: the run's end still closes its connections.
        self._last_run = (weakref.ref(run), idle)
        return idle

    def _idle_again(self, idle: list[W], wire: W | None) -> None:
        """Keep *wire* for the next command, unless the store is closing."""
        if wire is None:
            return
        if self._closing:
            wire.abandon()
        else:
            idle.append(wire)

    async def _run(
        self, name: str, keys: list[str], *args: str | int | bytes
    ) -> Any:
        """Script *name*'s answer, loading it if the server lacks it (one
        write: see ``_written``)."""

        async def run(held: list[asyncio.CancelledError]) -> Any:
            command = ("EVALSHA", self._shas[name], len(keys), *keys, *args)
            try:
                return await self._ask(*command, held=held)
            except NoScriptError:
                return await self._reloaded(name, command, held)

        return await _written(run)

    async def _reloaded(
        self,
        name: str,
        command: tuple[str | int | bytes, ...],
        held: list[asyncio.CancelledError],
    ) -> Any:
        """*command* (script *name*'s ``EVALSHA``, which the server did not
        have) again, once the script is loaded: the server restarted, or
        flushed its scripts (again, between a load and its call: then up to
        :data:`_LOADS` loads in all, the last call's ``NoScriptError``
        raised)."""
        for load in range(_LOADS):
            sha = await self._ask("SCRIPT", "LOAD", _SCRIPTS[name], held=held)
            self._shas[name] = _bytes(sha).decode()
            command = ("EVALSHA", self._shas[name], *command[2:])
            try:
                return await self._ask(*command, held=held)
            except NoScriptError:
                if load == _LOADS - 1:
                    raise
        raise AssertionError  # pragma: no cover  # the loop returns or raises

    async def commit(
        self,
        record: Record,
        *,
        expected_head: int | None,
        lease: Lease | None = None,
    ) -> Result[None, ConcurrentModification | LeaseLost]:
        """See :meth:`~pipeline.stores.CheckpointStore.commit` (one
        script).

        The hot call of every checkpointed step: where the store speaks to
        its server itself, in the caller's task (on trio, or on the loop
        it was opened on), ``_commit`` runs here, as ``ServerStore._here``
        would run it, without the layers between; anywhere else (and for
        the errors of a store not open) the common way."""
        check_thread_id(record.thread_id, "record.thread_id")
        here = asyncio_loop()
        if (
            not self._native
            or self._closing
            or not self._opened
            or (here is not None and here is not self._home)
        ):
            return await super().commit(
                record, expected_head=expected_head, lease=lease
            )
        out = await self._commit(record, expected_head, lease)
        if here is None:  # trio's cancellation, held back by the commands
            await trio_module().lowlevel.checkpoint_if_cancelled()
        return out

    async def _script_home(
        self, name: str, command: tuple[str | int | bytes, ...]
    ) -> Any:
        """``_run`` of script *name*'s *command* on the loop the store was
        opened on, inline: the cancellation its commands held back raised
        once the write is whole (as ``_written`` does)."""
        held: list[asyncio.CancelledError] = []
        try:
            try:
                out = await self._ask_home(command, held)
            except NoScriptError:
                out = await self._reloaded(name, command, held)
        except BaseException as failed:
            if held:
                raise held[0] from failed
            raise
        if held:
            raise held[0]
        return out

    def _commit_command(
        self, record: Record, expected_head: int | None, lease: Lease | None
    ) -> tuple[str | int | bytes, ...]:
        """The commit script's ``EVALSHA`` for *record*."""
        thread = record.thread_id
        prefix = self.prefix
        return (
            "EVALSHA",
            self._shas["commit"],
            3,
            f"{prefix}:records:{thread}",
            f"{prefix}:lease:{thread}",
            self._threads_key,
            thread,
            -1 if expected_head is None else expected_head,
            record.version,
            _encode(record),
            "0" if lease is None else "1",
            "" if lease is None else lease.owner,
            "" if lease is None else str(lease.token),
        )

    async def _commit(
        self, record: Record, expected_head: int | None, lease: Lease | None
    ) -> Result[None, ConcurrentModification | LeaseLost]:
        command = self._commit_command(record, expected_head, lease)
        loop = asyncio_loop()
        if loop is None:  # on trio: each command shields itself
            try:
                out = await self._ask_here(command, shield=True)
            except NoScriptError:
                out = await self._reloaded("commit", command, [])
        elif loop is self._here_loop:
            out = await self._script_home("commit", command)
        else:

            async def run(held: list[asyncio.CancelledError]) -> Any:
                try:
                    return await self._ask(*command, held=held)
                except NoScriptError:
                    return await self._reloaded("commit", command, held)

            out = await _written(run)
        return _committed(record.thread_id, expected_head, out)

    async def _records(
        self, thread_id: str, upto: int | None
    ) -> Sequence[Record]:
        blobs = await self._ask(
            "LRANGE",
            self._records_key(thread_id),
            0,
            -1 if upto is None else upto,
        )
        return tuple(_decode(thread_id, _bytes(b)) for b in blobs)

    async def _head(self, thread_id: str) -> int | None:
        n = _int(await self._ask("LLEN", self._records_key(thread_id)))
        return None if n == 0 else n - 1

    async def _threads(self) -> Sequence[str]:
        members = await self._ask("SMEMBERS", self._threads_key)
        return sorted(_bytes(m).decode() for m in members)

    async def _delete(self, thread_id: str) -> None:
        await self._run(
            "delete",
            [
                self._records_key(thread_id),
                self._lease_key(thread_id),
                self._threads_key,
            ],
            thread_id,
        )

    async def _acquire(
        self, thread_id: str, owner: str, ttl: float
    ) -> Result[Lease, ThreadBusy]:
        out = await self._run(
            "acquire", [self._lease_key(thread_id)], owner, repr(float(ttl))
        )
        if _int(out[0]) == 0:
            return Failure(ThreadBusy(thread_id, _float(out[1])))
        return Success(Lease(thread_id, owner, _int(out[1]), _float(out[2])))

    async def _renew(
        self, lease: Lease, ttl: float
    ) -> Result[Lease, LeaseLost]:
        out = await self._run(
            "renew",
            [self._lease_key(lease.thread_id)],
            lease.owner,
            str(lease.token),
            repr(float(ttl)),
        )
        if _int(out[0]) == 0:
            return Failure(LeaseLost(lease.thread_id))
        return Success(
            Lease(lease.thread_id, lease.owner, lease.token, _float(out[1]))
        )

    # -- cache entries (a StoreCache's) ----------------------------------------

    async def _cache_get(
        self, key: str, now: float
    ) -> tuple[bytes, str] | None:
        blob = await self._ask("GET", f"{self.prefix}:cache:{key}")
        if blob is None:
            return None
        header, _, value = _bytes(blob).partition(b"\n")
        try:
            expires, sha = orjson.loads(header)
        except (ValueError, TypeError):
            return None  # not an entry of ours: a miss
        if not isinstance(sha, str):
            return None
        if expires is not None and not (
            isinstance(expires, (int, float)) and expires >= now
        ):
            return None
        return value, sha

    async def _cache_put(
        self,
        key: str,
        value: bytes,
        sha: str,
        now: float,
        ttl: float | None,
    ) -> None:
        expires = None if ttl is None else now + ttl
        blob = orjson.dumps([expires, sha]) + b"\n" + value
        name = f"{self.prefix}:cache:{key}"
        command: tuple[str | int | bytes, ...] = ("SET", name, blob)
        if ttl is not None:
            command = (*command, "PX", max(1, math.ceil(ttl * 1000)))

        async def put(held: list[asyncio.CancelledError]) -> None:
            await self._ask(*command, held=held)

        await _written(put)

    async def _release(self, lease: Lease) -> None:
        await self._run(
            "release",
            [self._lease_key(lease.thread_id)],
            lease.owner,
            str(lease.token),
        )
