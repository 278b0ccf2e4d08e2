"""One statement on a PostgreSQL connection, spoken through libpq in the
caller's own task: the PostgreSQL store's hot calls (a commit, a lease call,
a head) on asyncio and natively on trio.

psycopg's async client runs on asyncio only, so a trio caller would hand
each call to an asyncio loop in another thread (two wake-ups across threads
per call), and on asyncio the store would run it in a task of its own (so
that a caller's cancellation does not cut it in two), where psycopg's async
machinery costs several times the rest of the call.  A hot call is one
statement with one row back, so it is spoken here with psycopg's documented
libpq layer (:mod:`psycopg.pq`) on a connection psycopg made and configured:
a statement's first call on a connection sent whole and unnamed
(``send_query_params``: parsed, bound and run in one round trip; a run's
acquisition and release come once a connection), prepared at its second,
then each call one ``send_query_prepared``; flushed, and its reply read as
the socket has it,
waiting on the socket with the caller's own loop (``wait_readable`` on trio;
on asyncio a reader registered once per connection, which reads what comes
and wakes the call's waiter once the reply is whole, and stops watching an
idle socket that turns readable; it is removed before the connection is
closed or handed to psycopg, whose waits take the socket's reader).

Parameters go with their types left to the server (it takes them from the
statement: the function's arguments, the column compared), strings and bytes
as binary values, numbers as text; replies come as text and are read by
their column's type.  An error reply raises what psycopg raises for it
(``psycopg.errors.error_from_result``), and a broken connection psycopg's
``OperationalError``.

A write's call on asyncio (*firm*) waits on futures that asyncio's
cancellation does not cancel (:class:`~pipeline.stores._firm.Firm`: the
write runs held back, see :mod:`pipeline.stores._firm`); any other call
cancelled stops at once, and its caller drops the connection (a reply may be
on its way).  Every call is bounded: with no reply within :data:`BOUND` seconds the
connection is given up (``OperationalError``); on asyncio by one timer per
connection, moved on to the call in flight's deadline when it fires early.
"""

from __future__ import annotations

import asyncio
import re

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Final, final

import psycopg
import psycopg.errors

from psycopg import pq

from ._firm import Firm
from ._server import trio_module


if TYPE_CHECKING:
    from trio import CancelScope


BOUND: Final = 30.0
"""Seconds a call waits for its reply (as long as a cancelled writer's
caller waits for its write: ``_bridge.SHIELD_BOUND``)."""

_MARK = re.compile(rb"%([s%])")


def numbered(query: bytes) -> bytes:
    """*query*, written with psycopg's placeholders (``%s``; ``%%`` for a
    percent sign), with libpq's (``$1``, ``$2``, ...) in their place."""
    count = 0

    def mark(found: re.Match[bytes]) -> bytes:
        nonlocal count
        if found.group(1) == b"%":
            return b"%"
        count += 1
        return b"$%d" % count

    return _MARK.sub(mark, query)


_NUL = "PostgreSQL text fields cannot contain NUL (0x00) bytes"


def _int(raw: bytes, _: str) -> int:
    return int(raw)


def _float(raw: bytes, _: str) -> float:
    return float(raw)


def _text(raw: bytes, encoding: str) -> str:
    return raw.decode(encoding)


def _bool(raw: bytes, _: str) -> bool:
    return raw == b"t"


_READ: Final[dict[int, Callable[[bytes, str], object]]] = {
    16: _bool,  # boolean
    18: _text,  # "char"
    19: _text,  # name
    20: _int,  # bigint
    21: _int,  # smallint
    23: _int,  # integer
    25: _text,  # text
    700: _float,  # real
    701: _float,  # double precision
    1042: _text,  # char(n)
    1043: _text,  # varchar
}
"""How a value of each type (by its oid) is read from its text."""


def _reader(oid: int) -> Callable[[bytes, str], object]:
    read = _READ.get(oid)
    if read is None:
        msg = f"a column of a type this store does not read (oid {oid})"
        raise psycopg.ProgrammingError(msg)
    return read


def _lost() -> psycopg.OperationalError:
    msg = f"no reply from the server within {BOUND} s"
    return psycopg.OperationalError(msg)


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


@final
class Wire:
    """One psycopg connection's libpq connection, spoken to directly (see
    the module); the statements it has prepared."""

    __slots__ = (
        "_consumed",
        "_deadline",
        "_encoding",
        "_expired",
        "_fd",
        "_pgconn",
        "_prepared",
        "_seen",
        "_timer",
        "_waiter",
        "_watched",
    )

    def __init__(self, conn: psycopg.AsyncConnection[Any]) -> None:
        self._pgconn = conn.pgconn
        self._fd = self._pgconn.socket
        self._encoding = conn.info.encoding
        self._prepared: set[bytes] = set()
        self._seen: set[bytes] = set()
        """The statements called here once (prepared at their second)."""
        self._expired = False
        self._waiter: asyncio.Future[None] | None = None
        self._watched: asyncio.AbstractEventLoop | None = None
        """The loop whose reader watches the socket (see ``_wait``)."""
        self._deadline: float | None = None
        """When the call in flight is given up (the loop's clock)."""
        self._timer: asyncio.TimerHandle | None = None
        self._consumed = False
        """Whether the reader read the reply the wait ended with."""

    def unwatch(self) -> None:
        """Stop watching the socket, and the call's bound: before the
        connection is closed, or spoken to by psycopg (whose waits take
        the socket's reader and remove it).  On the loop's own thread."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self.unwatch_reader()

    def _values(
        self, args: Sequence[object]
    ) -> tuple[list[bytes | None], list[int]]:
        """*args* as libpq takes them, and their formats (binary for
        strings and bytes: no escaping, no NUL cutting a string short)."""
        values: list[bytes | None] = []
        formats: list[int] = []
        for arg in args:
            if arg is None:
                values.append(None)
                formats.append(0)
            elif isinstance(arg, str):
                if "\x00" in arg:
                    raise psycopg.DataError(_NUL)
                values.append(arg.encode(self._encoding))
                formats.append(1)
            elif isinstance(arg, bytes):
                values.append(arg)
                formats.append(1)
            elif isinstance(arg, int | float):
                values.append(repr(arg).encode())
                formats.append(0)
            else:
                msg = f"cannot send a {type(arg).__name__} to the server"
                raise TypeError(msg)
        return values, formats

    async def row(
        self,
        name: bytes,
        query: bytes,
        args: Sequence[object],
        *,
        loop: asyncio.AbstractEventLoop | None,
        firm: bool,
    ) -> tuple[Any, ...] | None:
        """The first row of *query* (sent unnamed on its first call here,
        prepared as *name* on its second) run with *args*, or None if it has none; waiting with *loop*
        (None: on trio), on *firm* futures for a write held back (see the
        module).

        Raises:
            psycopg.OperationalError: The connection broke, or no reply
                came in time.
            psycopg.Error: The server refused the statement.
        """
        values, formats = self._values(args)
        if loop is None:
            trio = trio_module()
            bound: CancelScope = trio.CancelScope(
                deadline=trio.current_time() + BOUND
            )
            with bound:
                return await self._run(
                    name, query, values, formats, None, False
                )
            self._pgconn.finish()  # given up half-way: never to be used again
            raise _lost()
        self._expired = False
        # The bound: one timer per connection, moved on lazily (see
        # _bound), not one made and cancelled per call.
        self._deadline = deadline = loop.time() + BOUND
        if self._timer is None:
            self._timer = loop.call_at(deadline, self._bound, loop)
        try:
            return await self._run(name, query, values, formats, loop, firm)
        except psycopg.OperationalError:
            if self._expired:  # given up half-way: never to be used again
                self.unwatch()
                self._pgconn.finish()
            raise
        finally:
            self._deadline = None

    async def _run(
        self,
        name: bytes,
        query: bytes,
        values: list[bytes | None],
        formats: list[int],
        loop: asyncio.AbstractEventLoop | None,
        firm: bool,
    ) -> tuple[Any, ...] | None:
        pgconn = self._pgconn
        for again in (True, False):
            if name not in self._prepared:
                if name not in self._seen:
                    # Its first call here: sent whole, unnamed (parsed,
                    # bound and run in one round trip, not two: a run's
                    # acquisition and release come once a connection).
                    self._seen.add(name)
                    pgconn.send_query_params(
                        query, values, param_formats=formats
                    )
                    result = await self._reply(loop, firm)
                    return self._first_row(result)
                # Its second: prepared for the calls to come.
                pgconn.send_prepare(name, query)
                await self._reply(loop, firm)  # raises if refused
                self._prepared.add(name)
            pgconn.send_query_prepared(name, values, param_formats=formats)
            try:
                result = await self._reply(loop, firm)
            except psycopg.errors.InvalidSqlStatementName:
                # Gone from the server (``DEALLOCATE``, ``DISCARD ALL``):
                # nothing ran.  Prepared once more, then run.
                self._prepared.discard(name)
                if not again:
                    raise
                continue
            return self._first_row(result)
        raise AssertionError  # pragma: no cover  # the loop returns or raises

    def _first_row(self, result: pq.abc.PGresult) -> tuple[Any, ...] | None:
        """*result*'s first row, each value read by its column's type."""
        if not result.ntuples:
            return None
        encoding = self._encoding
        return tuple(
            None
            if (raw := result.get_value(0, i)) is None
            else _reader(result.ftype(i))(raw, encoding)
            for i in range(result.nfields)
        )

    async def _reply(
        self,
        loop: asyncio.AbstractEventLoop | None,
        firm: bool,
    ) -> pq.abc.PGresult:
        """What was sent, flushed, and its reply read to its end (the
        connection ready for the next statement); an error reply raised."""
        pgconn = self._pgconn
        while pgconn.flush():
            await self._wait(loop, firm, writing=True)
        out: pq.abc.PGresult | None = None
        while True:
            while pgconn.is_busy():
                if not await self._wait(loop, firm, writing=False):
                    pgconn.consume_input()
            result = pgconn.get_result()
            if result is None:
                break
            if out is None or out.status != pq.ExecStatus.FATAL_ERROR:
                out = result
        if out is None:  # pragma: no cover  # libpq always gives one
            raise psycopg.OperationalError(
                pgconn.error_message.decode(self._encoding, "replace")
            )
        if out.status not in {
            pq.ExecStatus.COMMAND_OK,
            pq.ExecStatus.TUPLES_OK,
        }:
            raise psycopg.errors.error_from_result(
                out, encoding=self._encoding
            )
        return out

    async def _wait(
        self,
        loop: asyncio.AbstractEventLoop | None,
        firm: bool,
        *,
        writing: bool,
    ) -> bool:
        """Until the socket is ready (see the module for cancellation);
        whether the reply was read already (by the reader, on asyncio)."""
        if loop is None:
            lowlevel = trio_module().lowlevel
            await (
                lowlevel.wait_writable if writing else lowlevel.wait_readable
            )(self._fd)
            return False
        fd = self._fd
        waiter = self._waiter = (
            Firm(loop=loop) if firm else loop.create_future()
        )
        self._consumed = False
        try:
            if writing:
                loop.add_writer(fd, _wake, waiter)
                try:
                    await waiter
                finally:
                    loop.remove_writer(fd)
            else:
                # The reader stays from one wait (and call) to the next
                # (no epoll registration per wait): it wakes the waiter of
                # the moment, and with none (an idle connection's socket
                # readable: the server ended it, or a cancelled call's
                # reply came) it stops watching (see _ready).
                if self._watched is not loop:
                    self.unwatch_reader()
                    loop.add_reader(fd, self._ready)
                    self._watched = loop
                await waiter
            if self._expired:
                raise _lost()
        finally:
            self._waiter = None
        return self._consumed

    def unwatch_reader(self) -> None:
        """Stop watching the socket (the bound's timer stays)."""
        loop, self._watched = self._watched, None
        if loop is not None and not loop.is_closed():
            loop.remove_reader(self._fd)

    def _ready(self) -> None:
        """The socket is readable (the reader of the loop's): what came is
        read, and the waiter woken once the reply is whole.  The event may
        be stale (the loop saw the socket readable before the waiter's
        task read it, then the task sent its next statement and waits
        again): nothing to read then, and nobody woken for nothing."""
        waiter = self._waiter
        if waiter is None:  # nobody waits: stop (epoll would repeat it)
            self.unwatch_reader()
            return
        if waiter.done():
            return
        try:
            self._pgconn.consume_input()
            if self._pgconn.is_busy():
                return  # more to come
            self._consumed = True
        except Exception:  # noqa: BLE001, S110  # the task reads it again and raises
            pass
        waiter.set_result(None)

    def _bound(self, loop: asyncio.AbstractEventLoop) -> None:
        """The bound's timer: the call in flight is given up if its time
        is up, else the timer moves on to its deadline (none in flight:
        the next call sets it again)."""
        self._timer = None
        deadline = self._deadline
        if deadline is None:
            return
        if loop.time() < deadline:
            self._timer = loop.call_at(deadline, self._bound, loop)
            return
        self._expired = True
        if self._waiter is not None:
            _wake(self._waiter)
