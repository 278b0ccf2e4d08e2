"""The Redis store's own wire protocol (pipeline/stores/_resp.py): commands
packed as redis-py packs them, replies read as redis-py reads them (both by
hiredis, configured as redis-py configures it), and which URLs it speaks.  No server: the servers' tests are in
tests/test_server_stores.py."""

from __future__ import annotations

from typing import Any

import pytest

from hypothesis import given
from hypothesis import strategies as st


redis = pytest.importorskip("redis")

from redis._parsers import BaseParser  # noqa: E402
from redis.connection import Connection  # noqa: E402

from pipeline.stores import _resp  # noqa: E402


_args = st.lists(
    st.one_of(
        st.text(),
        st.integers(-(2**63), 2**63 - 1),
        st.binary(max_size=200),
    ),
    min_size=1,
    max_size=12,
)


@given(_args)
def test_commands_are_packed_as_the_client_packs_them(
    command: list[str | int | bytes],
) -> None:
    """The store's packing (no per-argument type checks) gives the bytes
    redis-py's own encoder gives, for every argument the store sends."""
    # A command name redis-py would split ("SCRIPT LOAD") is never sent.
    command = [b"X", *command]
    theirs = b"".join(Connection().pack_command(*command))  # type: ignore[no-untyped-call]
    assert _resp.pack(tuple(command)) == theirs


# A reply, and what it reads as: (wire bytes, value).  Errors read as their
# exception's class and message.
_Reply = tuple[bytes, Any]


def _errors(text: str) -> _Reply:
    error = BaseParser.parse_error(text)  # type: ignore[no-untyped-call]
    return b"-%b\r\n" % text.encode(), (type(error), str(error))


_line = st.text(
    st.characters(blacklist_characters="\r\n", codec="utf-8"), max_size=30
)
_leaves: st.SearchStrategy[_Reply] = st.one_of(
    st.binary(max_size=40).map(lambda b: (b"$%d\r\n%b\r\n" % (len(b), b), b)),
    st.just((b"$-1\r\n", None)),
    st.integers(-(2**63), 2**63 - 1).map(lambda n: (b":%d\r\n" % n, n)),
    _line.map(lambda s: (b"+%b\r\n" % s.encode(), s.encode())),
    st.sampled_from(
        ["NOSCRIPT No matching script.", "ERR unknown command", "BUSY x"]
    ).map(_errors),
    st.just((b"*-1\r\n", None)),
)


def _lists(children: st.SearchStrategy[_Reply]) -> st.SearchStrategy[_Reply]:
    return st.lists(children, max_size=5).map(
        lambda items: (
            b"*%d\r\n" % len(items) + b"".join(w for w, _ in items),
            [v for _, v in items],
        )
    )


_replies = st.recursive(_leaves, _lists, max_leaves=12)


def _seen(value: Any) -> Any:
    """*value* with each error as its class and message."""
    if isinstance(value, list):
        return [_seen(v) for v in value]
    if isinstance(value, Exception):
        return (type(value), str(value))
    return value


@given(_replies, st.binary(max_size=10))
def test_replies_are_read_whole_or_not_at_all(
    reply: _Reply, after: bytes
) -> None:
    """A reply reads as redis-py reads it, wherever the bytes end after it
    and however they are cut into pieces; any part of it short of the whole
    asks for more."""
    wire, value = reply
    reader = _resp.replies()
    reader.feed(wire + after)
    assert _seen(reader.gets()) == value
    for cut in range(len(wire)):
        pieces = _resp.replies()
        pieces.feed(wire[:cut])
        assert pieces.gets() is _resp._NOT_YET
        pieces.feed(wire[cut:])
        assert _seen(pieces.gets()) == value


def test_a_reply_of_an_unknown_kind_is_refused() -> None:
    reader = _resp.replies()
    reader.feed(b"?what\r\n")
    with pytest.raises(redis.exceptions.InvalidResponse):
        reader.gets()


@pytest.mark.parametrize(
    ("url", "target"),
    [
        ("redis://127.0.0.1:7000/0", _resp.Target("127.0.0.1", 7000)),
        ("redis://localhost", _resp.Target()),
        (
            "redis://me:secret@db.example:6380/2",
            _resp.Target("db.example", 6380, None, 2, "me", "secret"),
        ),
        (
            "redis://:secret@db.example/3",
            _resp.Target("db.example", 6379, None, 3, None, "secret"),
        ),
        ("unix:///run/redis.sock", _resp.Target(path="/run/redis.sock")),
        (
            "unix:///run/redis.sock?db=4",
            _resp.Target(path="/run/redis.sock", db=4),
        ),
        ("redis://limited@db.example/0", None),
        ("rediss://db.example:6380/0", None),
        ("redis://db.example/0?socket_timeout=1", None),
        ("redis://db.example/0?protocol=3", None),
        ("unix://", None),
    ],
)
def test_only_plain_urls_are_spoken(
    url: str, target: _resp.Target | None
) -> None:
    """TLS and options in the query string keep redis-py's client (on the
    store's thread, for trio callers)."""
    assert _resp.target(url) == target


def test_a_url_is_parsed_once_for_the_stores_made_on_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A store is made per run (W5): its URL's target is kept, not parsed
    again by redis-py (some 30 µs a store)."""
    import redis.asyncio.connection  # noqa: PLC0415

    parsed: list[str] = []
    real = redis.asyncio.connection.parse_url

    def parse_url(url: str) -> Any:
        parsed.append(url)
        return real(url)

    monkeypatch.setattr(redis.asyncio.connection, "parse_url", parse_url)
    url = "redis://parsed-once.example:6390/2"
    first = _resp.target(url)
    assert first == _resp.Target("parsed-once.example", 6390, None, 2)
    assert _resp.target(url) is first
    assert parsed == [url]


async def test_an_unreachable_server_is_named_with_its_cause(
    anyio_backend: str, tmp_path: Any
) -> None:
    """A refused connection names the place, the errno and the system's
    reason, as redis-py's client does (anyio's own error for a failed TCP
    connect carries no errno: never ``Error None ... None.``)."""
    import errno  # noqa: PLC0415
    import os  # noqa: PLC0415

    del anyio_backend
    missing = str(tmp_path / "missing.sock")
    for where, place, code in (
        (
            _resp.Target(host="127.0.0.1", port=1),
            "127.0.0.1:1",
            errno.ECONNREFUSED,
        ),
        (_resp.Target(path=missing), missing, errno.ENOENT),
    ):
        with pytest.raises(redis.exceptions.ConnectionError) as caught:
            await _resp.Connection.open(where)
        assert str(caught.value) == (
            f"Error {code} connecting to {place}. {os.strerror(code)}."
        )


def test_trio_connects_to_a_socket_path_itself(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On trio a connection to a socket's path is made as trio's own
    sockets connect (not by anyio's ``connect_unix``), and a refused one
    names its errno (see the test above)."""
    import socket  # noqa: PLC0415

    import anyio  # noqa: PLC0415

    trio = pytest.importorskip("trio")
    path = str(tmp_path / "redis.sock")

    def unused(*_: object, **__: object) -> Any:
        raise AssertionError

    monkeypatch.setattr(anyio, "connect_unix", unused)

    async def main() -> None:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
            listener.bind(path)
            listener.listen(1)
            conn = await _resp.Connection.open(_resp.Target(path=path))
            accepted, _ = listener.accept()
            with accepted:
                accepted.sendall(b"+PONG\r\n")
                assert await conn.ask("PING", bound=5) == b"PONG"
                assert accepted.recv(100) == b"*1\r\n$4\r\nPING\r\n"
            await conn.aclose()
        with pytest.raises(redis.exceptions.ConnectionError, match="Error"):
            await _resp.Connection.open(_resp.Target(path=path))

    trio.run(main)


@pytest.mark.parametrize("cancelled", [False, True])
def test_a_command_on_trio_half_answered_ends_at_its_bound(
    cancelled: bool,
) -> None:
    """A command whose reply stops half-way raises redis-py's timeout at
    its bound (the run's watch, on trio's mock clock: no real wait), a
    write (*firm*) cancelled meanwhile too: not a cancellation."""
    import socket  # noqa: PLC0415

    trio = pytest.importorskip("trio")
    from trio.testing import MockClock  # noqa: PLC0415

    async def main() -> None:
        ours, server = socket.socketpair()
        ours.setblocking(False)
        conn = _resp.Connection(ours)
        server.sendall(b"$5\r\nhel")  # half a reply, before the command
        with trio.CancelScope() as scope:
            if cancelled:
                scope.deadline = 1.0
            with pytest.raises(redis.exceptions.TimeoutError):
                await conn.ask("GET", "k", bound=5.0, firm=True)
            assert trio.current_time() == 5.0
        assert server.recv(100).startswith(b"*2\r\n$3\r\nGET")  # sent whole
        ours.close()
        server.close()

    trio.run(main, clock=MockClock(autojump_threshold=0))


def test_a_cancelled_write_on_trio_reads_its_whole_reply() -> None:
    """A write's command (*firm*) cancelled while its reply is on the way
    reads the whole reply (the connection stays in step), and its caller
    sees the cancellation at its next checkpoint; a reader's stops at
    once."""
    import socket  # noqa: PLC0415

    trio = pytest.importorskip("trio")
    from trio.testing import MockClock  # noqa: PLC0415

    async def main() -> None:
        ours, server = socket.socketpair()
        ours.setblocking(False)
        conn = _resp.Connection(ours)
        outcome: list[object] = []

        async def answer() -> None:
            await trio.sleep(2)
            server.sendall(b"$5\r\nhello\r\n")

        async with trio.open_nursery() as nursery:
            nursery.start_soon(answer)
            with trio.CancelScope(deadline=1.0):
                outcome.append(
                    await conn.ask("GET", "k", bound=5.0, firm=True)
                )
                outcome.append(trio.current_time())
                await trio.lowlevel.checkpoint()
                outcome.append("not cancelled")
        assert outcome == [b"hello", 2.0]
        with trio.CancelScope(deadline=3.0):
            await conn.ask("GET", "k", bound=5.0)
            outcome.append("returned")
        assert outcome == [b"hello", 2.0]  # the reader stopped at 3
        assert trio.current_time() == 3.0
        ours.close()
        server.close()

    trio.run(main, clock=MockClock(autojump_threshold=0))
