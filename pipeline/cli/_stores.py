"""``--store``: a SQLite path or a server URL, opened as a checkpoint store.

The CLI also notes, for each thread it starts, which ``MODULE:OBJECT``
runs it, so that ``resume``, ``answer``, ``history`` and ``show`` need only
the thread's id.  The note is a record of its own in the same store, in a
companion thread named ``pipeline-cli:<thread>`` that the CLI hides from
``pipeline threads`` and deletes with its thread.
"""

from __future__ import annotations

import hashlib
import os
import re

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Final
from urllib.parse import unquote_plus

import orjson

from .._depth import check_depth
from .._extras import install_command
from ..errors import NestedTooDeeply
from ._exits import ExitCode, UserError


if TYPE_CHECKING:
    from ..stores import CheckpointStore


DEFAULT_STORE: Final = "pipeline-threads.sqlite3"
"""The SQLite file used when neither ``--store`` nor ``PIPELINE_STORE``
names one (in the current directory)."""

COMPANION: Final = "pipeline-cli:"
"""Prefix of the companion threads holding the CLI's notes."""

_POSTGRES = ("postgresql://", "postgres://")
_REDIS = ("redis://", "rediss://", "unix://")


def resolve(spec: str | None) -> str:
    """The store to use: *spec*, else ``$PIPELINE_STORE``, else the default."""
    return spec or os.environ.get("PIPELINE_STORE") or DEFAULT_STORE


def describe(spec: str) -> str:
    """*spec* for messages and hints, its passwords shown as ``***``: the
    one in ``user:password@`` (the user is kept) and query parameters
    that may hold one (``password=``, ``sslpassword=``, ``token=``, any
    name with ``pass``, ``secret``, ``token``, ``auth`` or ``cred`` in it).

    >>> describe("postgresql://ann:pw@db:5432/app?user=ann&password=pw&x=1")
    'postgresql://ann:***@db:5432/app?user=ann&password=***&x=1'
    """
    scheme, sep, rest = spec.partition("://")
    if not sep:
        return spec
    before, question, query = rest.partition("?")
    userinfo, at, where = before.rpartition("@")
    if at:
        user, colon, _ = userinfo.partition(":")
        if "/" in user:  # not a user name: hide it all
            user, colon = "***", ""
        before = f"{user}{':***' if colon else ''}@{where}"
    if question:
        query, hash_, fragment = query.partition("#")
        query = "&".join(_masked(item) for item in query.split("&"))
        query += hash_ + fragment
    return f"{scheme}://{before}{question}{query}"


_SECRET_PARAMETER = re.compile(r"pass|secret|token|auth|cred", re.IGNORECASE)


def _masked(item: str) -> str:
    name, eq, _ = item.partition("=")
    if eq and _SECRET_PARAMETER.search(unquote_plus(name)):
        return f"{name}=***"
    return item


@asynccontextmanager
async def open_store(
    spec: str, *, create: bool = False
) -> AsyncIterator[CheckpointStore]:
    """Open the store *spec* names, and close it at the end.

    A SQLite file must exist unless *create* (commands that only read do
    not make a new empty file by mistake).
    """
    server = _server_store(spec)
    if server is not None:
        async with _reached(spec, server) as store:
            yield store
        return
    if "://" in spec:
        scheme = spec.partition("://")[0]
        raise UserError(
            f"no store for URLs starting {scheme}://",
            hint="--store takes a SQLite file path, a postgresql:// URL "
            "or a redis:// URL",
        )
    path = Path(spec)
    if not create and not path.exists():  # noqa: ASYNC240  # one stat
        raise UserError(
            f"no store at {spec}",
            hint="pass --store PATH (or set PIPELINE_STORE) to the file "
            "`pipeline run` wrote",
            code=ExitCode.NOT_FOUND,
        )
    from ..stores import SQLiteStore  # noqa: PLC0415

    try:
        sqlite = SQLiteStore(path)
    except Exception as exc:  # noqa: BLE001  # sqlite3 raises several kinds
        raise UserError(
            f"cannot open the SQLite store {spec} ({type(exc).__name__})",
            hint="check the path and its permissions",
            code=ExitCode.UNAVAILABLE,
        ) from None
    async with sqlite:
        yield sqlite


def _server_store(spec: str) -> object | None:
    """The PostgreSQL or Redis store a URL names (not open yet)."""
    extra = "postgres" if spec.startswith(_POSTGRES) else "redis"
    try:
        if spec.startswith(_POSTGRES):
            from ..stores.postgres import PostgresStore  # noqa: PLC0415

            return PostgresStore(spec)
        if spec.startswith(_REDIS):
            from ..stores.redis import RedisStore  # noqa: PLC0415

            return RedisStore(spec)
    except ImportError:
        raise _missing_extra(extra) from None
    return None


@asynccontextmanager
async def _reached(spec: str, store: object) -> AsyncIterator[CheckpointStore]:
    """Open a server store, turning a refused connection into one line."""
    try:
        await store.open()  # type: ignore[attr-defined]
    except Exception as exc:  # noqa: BLE001  # each client library has its own
        raise UserError(
            f"cannot reach the store at {describe(spec)} ({type(exc).__name__})",
            hint="is the server running, and the URL right?",
            code=ExitCode.UNAVAILABLE,
        ) from None
    try:
        yield store  # type: ignore[misc]
    finally:
        await store.aclose()  # type: ignore[attr-defined]


def _missing_extra(extra: str) -> UserError:
    return UserError(
        f"this store needs the {extra} extra: {install_command(extra)}",
        code=ExitCode.UNAVAILABLE,
    )


# -- the CLI's notes --------------------------------------------------------


async def note_target(
    store: CheckpointStore, thread_id: str, ref: str
) -> None:
    """Remember that *ref* runs *thread_id* (replacing an older note)."""
    from ..stores import Record  # noqa: PLC0415

    await store.delete(COMPANION + thread_id)
    data = orjson.dumps({"target": ref})
    record = Record(
        COMPANION + thread_id,
        0,
        None,
        data,
        hashlib.sha256(data).hexdigest(),
    )
    await store.commit(record, expected_head=None)


async def noted_target(store: CheckpointStore, thread_id: str) -> str | None:
    """The ``MODULE:OBJECT`` noted for *thread_id*, if any."""
    rows = await store.records(COMPANION + thread_id)
    if not rows:
        return None
    try:
        check_depth(rows[0].data, "the CLI's note")
        doc = orjson.loads(rows[0].data)
    except (NestedTooDeeply, orjson.JSONDecodeError):
        return None
    ref = doc.get("target") if isinstance(doc, dict) else None
    return ref if isinstance(ref, str) else None


async def forget(store: CheckpointStore, thread_id: str) -> None:
    """Delete the thread and the CLI's note about it."""
    await store.delete(thread_id)
    await store.delete(COMPANION + thread_id)


def is_companion(thread_id: str) -> bool:
    """Whether *thread_id* holds the CLI's notes rather than a run."""
    return thread_id.startswith(COMPANION)
