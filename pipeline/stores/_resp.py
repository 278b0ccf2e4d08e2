"""Redis's wire protocol (RESP2) on the caller's own loop: the Redis store's
connections for callers on trio (:class:`Connection`) and on the asyncio
loop it was opened on (:class:`LoopConnection`).

redis-py's async client runs on asyncio only, so a trio caller of the Redis
store would otherwise hand every command to an asyncio loop in another
thread and wait to be woken: two wake-ups across threads per command, more
than the rest of a commit costs.  On asyncio, its client would run each
call in a task of its own (so that a caller's cancellation does not cut a
write in two): two of a commit's four turns of the loop.  The store's
commands are few and plain (``EVALSHA``, ``LRANGE``, ``GET``, ...), so it
speaks the protocol itself, in the caller's own task: a command is packed
into one write, its answer parsed from what the socket returned.  Only plain URLs are spoken
this way (``redis://`` or ``unix://`` with a database, a user and a
password); any other (TLS, options in the query string) keeps the thread
(see :func:`target`).

Commands are packed, and replies parsed, by hiredis (redis-py's own
optional parser): a reply is what redis-py's connection reads for it, in
RESP2 (simple and bulk strings as bytes, integers, lists, ``None``), and an
error reply raises the exception redis-py raises for it (its own table maps
the codes).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import ipaddress
import math
import os
import socket

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final, final

import anyio
import anyio.abc
import hiredis
import redis.asyncio.connection
import redis.exceptions

from redis._parsers import BaseParser

from ._poll import Readable
from ._server import asyncio_loop


_CHUNK: Final = 65536


@final
@dataclass(frozen=True, slots=True)
class Target:
    """Where a plain URL points, and how to log in."""

    host: str = "localhost"
    port: int = 6379
    path: str | None = None
    db: int = 0
    username: str | None = None
    password: str | None = None


_PLAIN: Final = frozenset(
    {"host", "port", "path", "db", "username", "password"}
)


@functools.lru_cache(maxsize=64)
def target(url: str) -> Target | None:
    """Where *url* points, if this module can speak to it (a plain
    ``redis://`` or ``unix://`` URL, parsed by redis-py's own rules), else
    None (TLS, options in the query string, or a user without a
    password).  Kept for the last few URLs (a store is made per run, and
    redis-py's parse costs some 30 µs; a :class:`Target` is immutable)."""
    kwargs: dict[str, Any] = dict(redis.asyncio.connection.parse_url(url))
    kind = kwargs.pop("connection_class", None)
    if kind not in {None, redis.asyncio.connection.UnixDomainSocketConnection}:
        return None  # TLS
    if not kwargs.keys() <= _PLAIN:
        return None
    if (kind is None) == ("path" in kwargs):
        return None  # a socket path on TCP, or a socket without one
    if kwargs.get("username") is not None and kwargs.get("password") is None:
        # A user without a password: redis-py logs in as that user (with
        # an empty password); kept on its client, so that both loops run
        # as the same user.
        return None
    return Target(**kwargs)


def pack(command: tuple[str | int | bytes, ...]) -> bytes:
    """*command* as the server reads it (strings in UTF-8, integers in
    decimal), packed by hiredis as redis-py packs it."""
    return hiredis.pack_command(command)  # type: ignore[no-any-return,arg-type]  # its stub says a 1-tuple


_NOT_YET: Final = object()
"""What the reader gives while a reply is not whole (RESP2 has no value
that could be it)."""


def replies() -> hiredis.Reader:
    """A reader of the server's replies, fed bytes as they come: hiredis's
    (incremental: a reply read in many pieces is parsed once), giving what
    redis-py's connection gives (bytes, integers, lists, ``None``; an error
    reply as the exception redis-py raises for it, by its own table), or
    :data:`_NOT_YET` while a reply is not whole.

    An unreadable reply raises ``redis.exceptions.InvalidResponse``.
    """
    return hiredis.Reader(
        protocolError=redis.exceptions.InvalidResponse,
        replyError=BaseParser.parse_error,  # pyright: ignore[reportUnknownMemberType]
        notEnoughData=_NOT_YET,
    )


def _unreachable(place: str, error: OSError) -> str:
    """Why *place* could not be reached, as redis-py words it (``Error 111
    connecting to host:port. Connection refused.``).  anyio's TCP connect
    raises an ``OSError`` of its own, without an errno, when every address
    failed: the cause named is then the first failure's, in the words of
    the system (or anyio's own words, if it gave none)."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, OSError) and seen.errno is not None:
            why = os.strerror(seen.errno)
            return f"Error {seen.errno} connecting to {place}. {why}."
        if isinstance(seen, BaseExceptionGroup) and seen.exceptions:
            seen = seen.exceptions[0]
        else:
            seen = seen.__cause__
    return f"Error connecting to {place}. {error}."


def _timed_out() -> redis.exceptions.TimeoutError:
    return redis.exceptions.TimeoutError("Timeout reading from the server")


def _broken() -> redis.exceptions.ConnectionError:
    return redis.exceptions.ConnectionError("Connection closed by server.")


@final
class _Watch:
    """A trio run's bounds on its connections' commands: one system task
    that sleeps until the earliest command's time is up and wakes that
    command's wait (trio's ``notify_closing``: the wait raises, the command
    raises the timeout and its connection is dropped).

    A command's bound is a cancel scope with a deadline otherwise, entered
    and left with every command (a heap entry in trio's deadlines, added
    and removed: with the write's shield, 12 µs of a commit's client CPU).
    Here a command only notes when its time is up; the task's deadline is
    moved earlier only if it is later than that (after an idle spell), and
    when it wakes it sleeps on until the earliest command still waiting:
    one wake-up every bound's length while commands keep coming, and no
    command waits past its bound."""

    __slots__ = ("busy", "wake")

    def __init__(self) -> None:
        self.busy: dict[Connection, float] = {}
        """The connections whose command waits, and when its time is up
        (trio's clock)."""
        self.wake: Any = None
        """The scope the task sleeps in (its deadline: no later than the
        earliest command's)."""

    def start(self, conn: Connection, due: float) -> None:
        """*conn*'s command has until trio time *due*."""
        self.busy[conn] = due
        wake = self.wake
        if wake is not None and due < wake.deadline:
            wake.deadline = due

    async def serve(self, trio: Any) -> None:
        """Sleep until the earliest command's time is up; wake the
        commands whose time is up."""
        busy = self.busy
        while True:
            with trio.CancelScope(
                deadline=min(busy.values(), default=math.inf)
            ) as self.wake:
                await trio.sleep_forever()
            now = trio.current_time()
            for conn, due in list(busy.items()):
                if due <= now:
                    del busy[conn]
                    conn.expire()


_WATCHES: list[Any] = [None]
"""The ``trio.lowlevel.RunVar`` of each trio run's :class:`_Watch`, once
made."""


def _watch(trio: Any) -> _Watch:
    """The running trio run's watch (its task started with the run's first
    connection)."""
    var = _WATCHES[0]
    if var is None:
        var = _WATCHES[0] = trio.lowlevel.RunVar("pipeline_redis_bounds")
    watch: _Watch | None = var.get(None)
    if watch is None:
        watch = _Watch()
        var.set(watch)
        trio.lowlevel.spawn_system_task(
            watch.serve, trio, name="pipeline redis bounds"
        )
    return watch


async def _connected(where: Target) -> socket.socket | None:
    """A socket connected to *where*, on trio, when there is no name to
    resolve (a socket's path, or an address in numbers): as trio's own
    sockets connect, without anyio's happy eyeballs (a task group and a
    task: 190 µs of a connection's 250, and a W5 run opens one).  None for
    a name (anyio resolves it and tries each address), or off trio."""
    if asyncio_loop() is not None:
        return None
    address: str | tuple[str, int]
    if where.path is not None:
        family, address = socket.AF_UNIX, where.path
    else:
        try:
            numbers = ipaddress.ip_address(where.host)
        except ValueError:
            return None
        family = socket.AF_INET6 if numbers.version == 6 else socket.AF_INET
        address = (where.host, where.port)
    from trio.lowlevel import wait_writable  # noqa: PLC0415  # on trio

    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setblocking(False)
        if family != socket.AF_UNIX:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            sock.connect(address)
        except BlockingIOError:
            await wait_writable(sock)
            failed = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if failed:
                raise OSError(failed, os.strerror(failed)) from None
    except BaseException:
        sock.close()
        raise
    return sock


@final
class Connection:
    """One connection to the server, on the trio run that opened it."""

    __slots__ = (
        "_cancelled",
        "_closed",
        "_now",
        "_pending",
        "_readable",
        "_replies",
        "_shield",
        "_socket",
        "_stream",
        "_watch",
        "_writable",
        "expired",
    )

    def __init__(
        self,
        sock: socket.socket,
        stream: anyio.abc.SocketStream | None = None,
    ) -> None:
        # trio's names, found once (an import a command cost 2.5 µs).
        import trio  # noqa: PLC0415  # on trio

        self._stream = stream
        """anyio's stream of *sock*, if anyio connected it (see open)."""
        self._socket = sock
        self._replies = replies()
        self._pending = Readable(self._socket.fileno())
        self._readable = trio.lowlevel.wait_readable
        self._writable = trio.lowlevel.wait_writable
        self._cancelled: type[BaseException] = trio.Cancelled
        self._closed: type[BaseException] = trio.ClosedResourceError
        self._shield = functools.partial(trio.CancelScope, shield=True)
        # The run's clock itself (trio.current_time reaches it through
        # three calls): a connection serves the run that opened it only.
        self._now = trio.lowlevel.current_clock().current_time
        self._watch = _watch(trio)
        self.expired = False
        """Whether its command's time ran out (see :class:`_Watch`)."""

    def expire(self) -> None:
        """Its command's time is up: its wait (if it waits) raises now, and
        any later one at once."""
        self.expired = True
        from trio.lowlevel import notify_closing  # noqa: PLC0415  # seldom

        notify_closing(self._socket)

    @classmethod
    async def open(cls, where: Target) -> Connection:
        """A connection to *where*, logged in and on its database.

        Raises:
            redis.exceptions.ConnectionError: The server cannot be reached.
            redis.exceptions.ResponseError: It refused the login or the
                database (``AuthenticationError``, ...).
        """
        stream = None
        try:
            sock = await _connected(where)
            if sock is None:  # a name to resolve: anyio's happy eyeballs
                stream = await (
                    anyio.connect_tcp(where.host, where.port)
                    if where.path is None
                    else anyio.connect_unix(where.path)
                )
                sock = stream.extra(anyio.abc.SocketAttribute.raw_socket)  # noqa: S610  # anyio's, not Django's
        except OSError as e:
            place = where.path or f"{where.host}:{where.port}"
            raise redis.exceptions.ConnectionError(
                _unreachable(place, e)
            ) from e
        conn = cls(sock, stream)
        try:
            if where.password is not None:
                await conn.login(where.username, where.password)
            if where.db:
                await conn.ask("SELECT", where.db)
        except BaseException:
            await conn.aclose()
            raise
        return conn

    async def login(self, username: str | None, password: str) -> None:
        """Log in as redis-py's client does (``HELLO ... AUTH``): as
        *username*, or the default user; on a server older than 6.0, with
        the password alone."""
        try:
            await self.ask("AUTH", username or "default", password)
        except redis.exceptions.AuthenticationWrongNumberOfArgsError:
            await self.ask("AUTH", password)

    def usable(self) -> bool:
        """Whether the server has not closed this idle connection (nor sent
        anything on it): a look at the socket, which does not wait."""
        return not (self._replies.has_data() or self._pending())

    async def ask(
        self,
        *command: str | int | bytes,
        bound: float | None = None,
        firm: bool = False,
    ) -> Any:
        """*command*'s reply, within *bound* seconds (if given: else the
        caller bounds it).

        Straight on the socket: the command is written at once (it fits
        the socket's buffer, or the rest waits for room), then the reply
        waited for, one wait per command, as redis-py's connection does on
        asyncio.  A *firm* command (a write's) is not cut by the caller's
        cancellation: the rest of its waits are under trio's shield (see
        ``_wait_again``), and its caller raises the cancellation once the write
        is whole; any other stops at once (then the caller must drop the
        connection: a reply may be on its way).

        Raises:
            redis.exceptions.ResponseError: The server answered an error.
            redis.exceptions.ConnectionError: The connection broke.
            redis.exceptions.TimeoutError: No reply within *bound*.
        """
        watch = None
        if bound is not None:
            watch = self._watch
            self.expired = False
            watch.start(self, self._now() + bound)
        try:
            return await self._exchange(pack(command), firm=firm)
        finally:
            if watch is not None:
                watch.busy.pop(self, None)

    async def _exchange(self, data: bytes, *, firm: bool) -> Any:
        """Send *data*, then read its reply (see ``ask``).  A wait that
        raises is handled by ``_wait_again`` (cancelled, or its time up):
        the common wait costs no coroutine of its own."""
        sock = self._socket
        reader = self._replies
        sent = self._sent(data)
        if sent < len(data):
            await self._send(memoryview(data)[sent:], firm=firm)
        wait_readable = self._readable
        while True:
            if self.expired:
                raise _timed_out()
            try:
                await wait_readable(sock)
            except BaseException as e:  # noqa: BLE001  # sorted out there
                await self._wait_again(e, wait_readable, firm=firm)
            try:
                chunk = sock.recv(_CHUNK)
            except BlockingIOError:
                continue
            except OSError as e:
                raise _broken() from e
            if not chunk:
                raise _broken()
            reader.feed(chunk)
            reply = reader.gets()
            if reply is _NOT_YET:
                continue
            if isinstance(reply, redis.exceptions.RedisError):
                raise reply
            return reply

    def _sent(self, data: bytes) -> int:
        """How much of *data* the socket took at once (without waiting)."""
        try:
            return self._socket.send(data)
        except BlockingIOError:
            return 0
        except OSError as e:
            raise _broken() from e

    async def _wait_again(
        self,
        error: BaseException,
        wait: Callable[[socket.socket], Awaitable[None]],
        *,
        firm: bool,
    ) -> None:
        """After a wait on the socket (*wait*: trio's ``wait_readable`` or
        ``wait_writable``) raised *error*: a *firm* command's wait,
        cancelled, waits again under trio's shield (entered only then: a
        write nobody cancels enters no scope); trio's cancellation stays
        until its scope ends, so the caller sees it again at its next
        checkpoint.  Its time up (see :class:`_Watch`), the wait raises the
        timeout; anything else is raised as it is."""
        if isinstance(error, self._cancelled) and firm:
            with self._shield():
                await self._wait(wait)
            return
        if isinstance(error, self._closed) and self.expired:
            raise _timed_out() from None
        raise error

    async def _wait(
        self, wait: Callable[[socket.socket], Awaitable[None]]
    ) -> None:
        """One wait on the socket, not cancelled (shielded), until the
        command's time is up."""
        if self.expired:
            raise _timed_out()
        try:
            await wait(self._socket)
        except self._closed:
            if self.expired:
                raise _timed_out() from None
            raise

    async def _send(self, view: memoryview, *, firm: bool) -> None:
        """Send the rest of a command, *view*, as the socket makes room."""
        sock = self._socket
        wait_writable = self._writable
        while view:
            if self.expired:
                raise _timed_out()
            try:
                await wait_writable(sock)
            except BaseException as e:  # noqa: BLE001  # sorted out there
                await self._wait_again(e, wait_writable, firm=firm)
            try:
                view = view[sock.send(view) :]
            except BlockingIOError:
                continue
            except OSError as e:
                raise _broken() from e

    async def aclose(self) -> None:
        """Close it (at once: it does not wait, and cancellation does not
        stop it)."""
        if self._stream is not None:
            await anyio.aclose_forcefully(self._stream)
            return
        sock = self._socket
        if sock.fileno() != -1:
            from trio.lowlevel import notify_closing  # noqa: PLC0415  # seldom

            notify_closing(sock)  # a wait on it (none: it is ours) raises
            sock.close()

    def abandon(self) -> None:
        """Close its socket from any thread (its loop may be gone)."""
        self._socket.close()


@final
class _Replies(asyncio.BufferedProtocol):
    """What an asyncio connection's socket gives: fed to its reader as it
    comes (in the loop's own callback), waking the command waiting.

    Read into a buffer of its own (``recv_into``), made once: a plain
    protocol's transport reads with ``recv(262144)``, a 256 KiB buffer
    made and cut down at every read, which the C library maps and unmaps
    each time while its ``mmap`` threshold has not grown past it (three
    system calls, some 12 µs a reply, where a read of the 64 KiB trio's
    connection and redis-py read costs 1)."""

    __slots__ = ("buffer", "expired", "lost", "replies", "transport", "waiter")

    def __init__(self) -> None:
        self.buffer = memoryview(bytearray(_CHUNK))
        self.replies = replies()
        self.transport: asyncio.Transport | None = None
        self.waiter: asyncio.Future[None] | None = None
        self.lost = False
        self.expired = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)  # noqa: S101  # a stream's
        self.transport = transport

    def get_buffer(self, sizehint: int) -> memoryview:
        del sizehint  # (-1: any size)
        return self.buffer

    def buffer_updated(self, nbytes: int) -> None:
        # The reader copies what it is fed (its stub says bytes; any
        # buffer is read).
        self.replies.feed(self.buffer, 0, nbytes)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
        self.wake()

    def eof_received(self) -> bool:
        self.lost = True
        self.wake()
        return False  # close

    def connection_lost(self, exc: Exception | None) -> None:
        del exc
        self.lost = True
        self.wake()

    def check(self) -> None:
        """Raise if the connection broke, or the command's time is up."""
        if self.lost:
            raise _broken()
        if self.expired:
            msg = "Timeout reading from the server"
            raise redis.exceptions.TimeoutError(msg)

    def expire(self) -> None:
        """The command's time is up (a timer of the loop's)."""
        self.expired = True
        self.wake()

    def wake(self) -> None:
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)


@final
class LoopConnection:
    """One connection to the server on an asyncio loop (the one that
    opened it): the loop reads the socket as bytes come (a protocol of its
    own, no stream in between), and a command waits for its whole reply,
    one wake-up per reply.  The same commands and replies as
    :class:`Connection` (trio's)."""

    __slots__ = (
        "__weakref__",
        "_armed",
        "_context",
        "_deadline",
        "_loop",
        "_pending",
        "_protocol",
        "_timer",
        "_transport",
    )

    def __init__(
        self, loop: asyncio.AbstractEventLoop, protocol: _Replies
    ) -> None:
        assert protocol.transport is not None  # noqa: S101  # connected
        self._loop = loop
        self._protocol = protocol
        self._transport = protocol.transport
        sock = protocol.transport.get_extra_info("socket")
        self._pending = None if sock is None else Readable(sock.fileno())
        self._deadline: float | None = None
        """When the command in flight is given up (the loop's clock)."""
        self._timer: asyncio.TimerHandle | None = None
        """The bounds' one timer (see ``_bound``)."""
        self._armed = math.inf
        """When that timer fires (infinity: no timer)."""
        self._context = contextvars.Context()
        """The empty context that timer runs in: the connection's own (a
        context is entered by one thread at a time, and the timers of
        loops in other threads fire when they do)."""

    @classmethod
    async def open(cls, where: Target, bound: float) -> LoopConnection:
        """A connection to *where*, logged in and on its database, each
        step within *bound* seconds.

        Raises:
            redis.exceptions.ConnectionError: The server cannot be reached.
            redis.exceptions.TimeoutError: Not within *bound* seconds.
            redis.exceptions.ResponseError: It refused the login or the
                database (``AuthenticationError``, ...).
        """
        loop = asyncio.get_running_loop()
        place = where.path or f"{where.host}:{where.port}"
        try:
            async with asyncio.timeout(bound):
                if where.path is not None:
                    _, protocol = await loop.create_unix_connection(
                        _Replies, where.path
                    )
                else:
                    _, protocol = await loop.create_connection(
                        _Replies, where.host, where.port
                    )
        except TimeoutError:
            msg = f"Timeout connecting to {place}."
            raise redis.exceptions.TimeoutError(msg) from None
        except OSError as e:
            raise redis.exceptions.ConnectionError(
                _unreachable(place, e)
            ) from e
        conn = cls(loop, protocol)
        try:
            if where.password is not None:
                try:
                    await conn.ask(
                        ("AUTH", where.username or "default", where.password),
                        bound=bound,
                    )
                except redis.exceptions.AuthenticationWrongNumberOfArgsError:
                    await conn.ask(("AUTH", where.password), bound=bound)
            if where.db:
                await conn.ask(("SELECT", where.db), bound=bound)
        except BaseException:
            conn.abandon()
            raise
        return conn

    def usable(self) -> bool:
        """Whether the server has not closed this idle connection (nor sent
        anything on it), as far as the loop has seen: does not wait."""
        protocol = self._protocol
        if protocol.lost or protocol.replies.has_data():
            return False
        # What the loop has not read yet (the server closed it a moment
        # ago, say): a look at the socket itself, as trio's does.
        pending = self._pending
        return pending is not None and not pending()

    async def ask(
        self,
        command: tuple[str | int | bytes, ...],
        *,
        bound: float,
        held: list[asyncio.CancelledError] | None = None,
    ) -> Any:
        """*command*'s reply, within *bound* seconds.

        Cancelled (asyncio's ``task.cancel()``, which anyio's shield does
        not hold back) while it waits: a command of a write (given a list
        to put the cancellation in, *held*) goes on until its reply is
        whole, and the write raises the cancellation once it is whole, so
        the connection stays in step; any other stops at once (then the
        caller must drop the connection: a reply may be on its way).

        Raises:
            redis.exceptions.ResponseError: The server answered an error.
            redis.exceptions.ConnectionError: The connection broke.
            redis.exceptions.TimeoutError: No reply within *bound*.
        """
        protocol = self._protocol
        protocol.expired = False  # the bound of an earlier command's, fired
        protocol.check()
        self._transport.write(pack(command))
        # The bound: one timer per connection, moved on lazily (see
        # _bound), not one made and cancelled per command.
        loop = self._loop
        self._deadline = deadline = loop.time() + bound
        if deadline < self._armed:  # no timer, or one due later
            self._arm(deadline)
        reader = protocol.replies
        try:
            # The common wait inline (see _reply for a cancelled one).
            while (reply := reader.gets()) is _NOT_YET:
                protocol.check()
                waiter = protocol.waiter = loop.create_future()
                try:
                    await waiter
                except asyncio.CancelledError as e:
                    if held is None:
                        raise
                    held.append(e)  # the write's reply is still waited for
                    with anyio.CancelScope(shield=True):
                        reply = await self._reply(held)
                    break
        finally:
            protocol.waiter = None
            self._deadline = None
        if isinstance(reply, redis.exceptions.RedisError):
            raise reply
        return reply

    def _arm(self, deadline: float) -> None:
        """The bounds' timer, set to fire at *deadline* (the loop's
        clock)."""
        timer = self._timer
        if timer is not None:
            timer.cancel()
        # In a context of its own: it outlives the command that set it (by
        # up to its bound), and needs nothing of the caller's.
        self._timer = self._loop.call_at(
            deadline, self._bound, context=self._context
        )
        self._armed = deadline

    def _bound(self) -> None:
        """The bounds' timer: the command in flight is given up if its time
        is up, else the timer moves on to its deadline (none in flight:
        the next command sets it again)."""
        self._timer = None
        self._armed = math.inf
        deadline = self._deadline
        if deadline is None:
            return
        if self._loop.time() < deadline:
            self._arm(deadline)
            return
        self._protocol.expire()

    async def _reply(self, held: list[asyncio.CancelledError]) -> Any:
        """The next reply, whole, for a write's command cancelled while it
        waited (see ``ask``): the rest of its wait under anyio's shield
        (entered by the caller): anyio asks a cancelled task again at
        every turn of the loop (a write that only caught each would keep
        the loop turning until its reply came), and no shield is entered
        for a write nobody cancels."""
        protocol = self._protocol
        reader = protocol.replies
        while (reply := reader.gets()) is _NOT_YET:
            protocol.check()
            waiter = protocol.waiter = self._loop.create_future()
            try:
                await waiter
            except asyncio.CancelledError as e:
                held.append(e)
        return reply

    def abandon(self) -> None:
        """Close it at once (on its loop's thread).  Its loop closed (a
        command in flight then, its task collected since): ended as
        :meth:`shut` ends it, the transport closing the socket when
        collected (a closed loop schedules nothing)."""
        timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()
        self._armed = math.inf
        if self._loop.is_closed():
            self.shut()
            return
        self._transport.abort()

    def shut(self) -> None:
        """End it from any thread, its loop stopped or gone: its socket is
        shut down, so the server drops the connection at once; the socket
        itself is closed by its transport (when the loop runs again, or
        when the transport is collected)."""
        sock = self._transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):  # ended already
                sock.shutdown(socket.SHUT_RDWR)
