"""Node caches kept in a checkpoint store's backend (``StoreCache``): the
SQLite file, PostgreSQL and Redis; entries outlive the store (and the process), and a
damaged or undecodable entry is a miss."""

from __future__ import annotations

import contextlib
import hashlib
import sqlite3
import subprocess
import sys

from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

from pipeline import Graph, events, stores
from pipeline.events import CacheLookup
from pipeline.graph import CachePolicy
from pipeline.stores import StoreCache
from tests import servers
from tests.graph.helpers import Counted, Runs
from tests.graph.store_urls import open_store
from tests.graph.test_cache import chain as cached_chain
from tests.stores import Crash, CrashOnCommit


class Clock:
    """A fake wall clock: time moves only when a test moves it."""

    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


Opener = Callable[
    [], contextlib.AbstractAsyncContextManager[stores.CheckpointStore]
]


@pytest.fixture
def backend(store_spec: str) -> Opener:
    """Opens a store on one shared file, schema or key prefix (each store
    that keeps cache entries), again each call."""
    return lambda: open_store(store_spec, lease_ttl=30)


def chain(runs: Runs, policy: CachePolicy[Counted]) -> Graph[Counted, str]:
    """Node a cached, then b (the chain of ``test_cache``), built."""
    return cached_chain(runs, policy).build()


async def test_a_second_store_on_the_same_backend_hits(
    backend: Opener,
) -> None:
    runs = Runs()
    async with backend() as store:
        g = chain(runs, CachePolicy(store=StoreCache(store)))
        first = (await g.run(Counted())).unwrap()
    async with backend() as again:  # a new store: nothing kept in memory
        g = chain(runs, CachePolicy(store=StoreCache(again)))
        async with events.stream(g, Counted()) as stream:
            seen = [e async for e in stream]
    lookups = [(e.node, e.hit) for e in seen if isinstance(e, CacheLookup)]
    assert lookups == [("a", True)]
    assert runs.calls == {("a", 0): 1, ("b", 1): 2}
    last = seen[-1]
    assert isinstance(last, events.Finished)
    assert last.result.unwrap() == first.state


async def test_ttl_on_the_callers_clock(backend: Opener) -> None:
    clock, runs = Clock(), Runs()
    async with backend() as store:
        policy: CachePolicy[Counted] = CachePolicy(
            ttl=60, store=StoreCache(store, clock=clock)
        )
        g = chain(runs, policy)
        await g.run(Counted())
        clock.now += 60  # the last instant it is valid
        await g.run(Counted())
        assert runs.calls["a", 0] == 1
        clock.now += 0.5
        await g.run(Counted())
        assert runs.calls["a", 0] == 2  # expired: ran again, cached again
        await g.run(Counted())
        assert runs.calls["a", 0] == 2


def _rows(path: Path) -> list[tuple[str, bytes, str]]:
    with contextlib.closing(sqlite3.connect(path)) as conn:
        return [
            (k, bytes(d), c)
            for k, d, c in conn.execute(
                "SELECT key, data, checksum FROM cache"
            )
        ]


def _rewrite(path: Path, key: str, data: bytes, sha: str) -> None:
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        conn.execute(
            "UPDATE cache SET data = ?, checksum = ? WHERE key = ?",
            (data, sha, key),
        )


async def test_a_damaged_entry_is_a_miss(tmp_path: Path) -> None:
    path, runs = tmp_path / "cache.db", Runs()
    async with stores.SQLiteStore(path) as store:
        await chain(runs, CachePolicy(store=StoreCache(store))).run(Counted())
    ((key, data, sha),) = _rows(path)
    altered = data.replace(b'"count":1', b'"count":7')
    assert altered != data
    _rewrite(path, key, altered, sha)  # valid JSON, the wrong bytes
    async with stores.SQLiteStore(path) as store:
        g = chain(runs, CachePolicy(store=StoreCache(store)))
        out = (await g.run(Counted())).unwrap()
    assert out.state.count == 2  # never the altered output
    assert runs.calls["a", 0] == 2
    assert _rows(path) == [(key, data, sha)]  # replaced by the new run's


async def test_an_entry_that_no_longer_decodes_is_a_miss(
    tmp_path: Path,
) -> None:
    path, runs = tmp_path / "cache.db", Runs()
    async with stores.SQLiteStore(path) as store:
        await chain(runs, CachePolicy(store=StoreCache(store))).run(Counted())
    ((key, data, _),) = _rows(path)
    # What an older state type would have stored: its checksum matches.
    old = orjson.dumps({"count": "one", "trail": ["a"], "note": ""})
    _rewrite(path, key, old, hashlib.sha256(old).hexdigest())
    async with stores.SQLiteStore(path) as store:
        g = chain(runs, CachePolicy(store=StoreCache(store)))
        out = (await g.run(Counted())).unwrap()
    assert out.state.count == 2
    assert runs.calls["a", 0] == 2
    assert _rows(path)[0][1] == data


async def test_a_crash_between_cache_write_and_commit_resumes_with_a_hit(
    tmp_path: Path,
) -> None:
    """The node's output reached the file, its record did not: a store
    opened afterwards (the restarted process) resumes with a hit."""
    path, runs = tmp_path / "runs.db", Runs()
    async with stores.SQLiteStore(path) as store:
        g = chain(runs, CachePolicy(store=StoreCache(store)))
        with pytest.raises(Crash):  # commit 1 is admission, 2 is a's record
            await g.run(
                Counted(), store=CrashOnCommit(store, 2), thread_id="t"
            )
    assert runs.calls["a", 0] == 1
    async with stores.SQLiteStore(path) as store:
        g = chain(runs, CachePolicy(store=StoreCache(store)))
        done = (await g.resume(store, "t")).unwrap()
        versions = [r.version for r in await store.records("t")]
    assert runs.calls["a", 0] == 1  # a hit, not a second run
    assert list(done.state.trail) == ["a", "b"]
    assert versions == [0, 1, 2]  # the hit committed a's record


def test_a_store_without_a_cache_is_refused() -> None:
    with pytest.raises(TypeError, match="MemoryStore cannot keep cache"):
        StoreCache(stores.MemoryStore())


_CHILD = """
import sys
import anyio
from pipeline import stores
from pipeline.graph import CachePolicy
from pipeline.stores import StoreCache
from tests.graph.helpers import Counted, Runs
from tests.graph.test_store_cache import chain


async def main() -> None:
    runs = Runs()
    async with stores.SQLiteStore(sys.argv[1]) as store:
        g = chain(runs, CachePolicy(store=StoreCache(store)))
        out = (await g.run(Counted())).unwrap()
    print(runs.calls["a", 0], out.state.count)


anyio.run(main)
"""


@pytest.mark.slow
def test_a_cache_outlives_its_process(tmp_path: Path) -> None:
    path = tmp_path / "cache.db"

    def child() -> str:
        done = subprocess.run(  # noqa: S603  # our own interpreter
            [sys.executable, "-c", _CHILD, str(path)],
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
            cwd=Path(__file__).parents[2],
        )
        return done.stdout.strip()

    assert child() == "1 2"  # ran node a
    assert child() == "0 2"  # read what the first process cached


@pytest.mark.redis
@pytest.mark.slow
async def test_a_redis_key_that_is_not_an_entry_is_a_miss(
    redis_url: str,
) -> None:
    """A key under the prefix holding something else (no header, a wrong
    header) is a miss, and the node's output replaces it."""
    import redis  # noqa: PLC0415  # only for the Redis tests

    async with contextlib.AsyncExitStack() as stack:
        prefix = servers.namespace()
        stack.callback(servers._drop_keys, redis_url, prefix)
        spec = f"redis:{prefix}:{redis_url}"
        store = await stack.enter_async_context(open_store(spec, lease_ttl=30))
        runs = Runs()
        g = chain(runs, CachePolicy(store=StoreCache(store)))
        await g.run(Counted())
        # The synchronous client: the test runs on trio too.
        client = stack.enter_context(redis.Redis.from_url(redis_url))
        (key,) = client.keys(f"{prefix}:cache:*")
        for junk in (b"no header", b'["x", 3]\n{}', b"[null, 3]\n{}"):
            client.set(key, junk)
            out = (await g.run(Counted())).unwrap()
            assert out.state.count == 2
        assert runs.calls["a", 0] == 4
        assert (await g.run(Counted())).unwrap().state.count == 2
        assert runs.calls["a", 0] == 4  # the last run's output was kept


async def test_a_signed_store_keeps_no_cache_entries(tmp_path: Path) -> None:
    """Entries are not signed: a signed store refuses to keep them."""
    async with stores.SQLiteStore(tmp_path / "signed.db") as inner:
        signed = stores.SignedStore(inner, key=b"k" * 32)
        with pytest.raises(TypeError, match="SignedStore cannot keep cache"):
            StoreCache(signed)
