"""One conformance suite every CheckpointStore must pass."""

from __future__ import annotations

import contextlib

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import anyio
import pytest

from returns.result import Success

from pipeline import graph
from pipeline.errors import ConcurrentModification
from pipeline.graph import Record


StoreFactory = Callable[
    [], contextlib.AbstractAsyncContextManager[graph.CheckpointStore]
]


@pytest.fixture(params=["memory", "sqlite"])
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> StoreFactory:
    """Each store under test, freshly made (SQLite in a real file)."""

    @contextlib.asynccontextmanager
    async def memory() -> AsyncIterator[graph.CheckpointStore]:
        yield graph.MemoryStore()

    @contextlib.asynccontextmanager
    async def sqlite() -> AsyncIterator[graph.CheckpointStore]:
        async with graph.SQLiteStore(tmp_path / "store.db") as store:
            yield store

    return memory if request.param == "memory" else sqlite


def rec(thread: str, version: int, payload: bytes = b"{}") -> Record:
    parent = None if version == 0 else version - 1
    return Record(thread, version, parent, payload, f"sum-{version}")


async def test_commit_is_compare_and_set(make_store: StoreFactory) -> None:
    """A record commits only on the expected head, as head + 1."""
    async with make_store() as store:
        assert await store.head("t") is None
        assert await store.commit(rec("t", 0), expected_head=None) == Success(
            None
        )
        assert await store.commit(rec("t", 1), expected_head=0) == Success(
            None
        )
        stale = await store.commit(rec("t", 1, b"other"), expected_head=0)
        assert stale.failure() == ConcurrentModification("t", 0, 1)
        skip = await store.commit(rec("t", 5), expected_head=1)
        assert isinstance(skip.failure(), ConcurrentModification)
        again = await store.commit(rec("t", 0), expected_head=None)
        assert isinstance(again.failure(), ConcurrentModification)
        assert await store.head("t") == 1


async def test_records_in_order_and_upto(make_store: StoreFactory) -> None:
    """records() returns what was committed, in version order."""
    async with make_store() as store:
        for v in range(5):
            await store.commit(
                rec("t", v, f"p{v}".encode()),
                expected_head=v - 1 if v else None,
            )
        rows = await store.records("t")
        assert [r.version for r in rows] == [0, 1, 2, 3, 4]
        assert rows[3] == rec("t", 3, b"p3")
        assert [r.version for r in await store.records("t", upto=2)] == [
            0,
            1,
            2,
        ]
        assert list(await store.records("missing")) == []


async def test_threads_and_delete(make_store: StoreFactory) -> None:
    """Threads are listed; delete removes one and reads create nothing."""
    async with make_store() as store:
        await store.commit(rec("b", 0), expected_head=None)
        await store.commit(rec("a", 0), expected_head=None)
        assert list(await store.threads()) == ["a", "b"]
        await store.delete("a")
        await store.delete("never")
        for _ in range(100):
            assert list(await store.records("ghost")) == []
            assert await store.head("ghost") is None
        assert list(await store.threads()) == ["b"]


async def test_concurrent_writers_one_winner_per_version(
    make_store: StoreFactory,
) -> None:
    """100 writers racing on one head: exactly one commits each version."""
    async with make_store() as store:
        await store.commit(rec("t", 0), expected_head=None)
        wins: list[int] = []

        async def writer(i: int) -> None:
            r = await store.commit(
                rec("t", 1, f"w{i}".encode()), expected_head=0
            )
            if isinstance(r, Success):
                wins.append(i)

        async with anyio.create_task_group() as tg:
            for i in range(100):
                tg.start_soon(writer, i)
        assert len(wins) == 1
        rows = await store.records("t")
        assert [r.version for r in rows] == [0, 1]
        assert rows[1].data == f"w{wins[0]}".encode()


def _all_bytes(folder: Path) -> bytes:
    return b"".join(p.read_bytes() for p in folder.iterdir())


async def test_sqlite_delete_leaves_no_bytes(tmp_path: Path) -> None:
    """After delete, the thread's bytes are gone from the file and WAL."""
    path = tmp_path / "c.db"
    canary = b"CANARY-7f3a9c01d2e4b5a6"
    async with graph.SQLiteStore(path) as store:
        await store.commit(rec("secret", 0, canary), expected_head=None)
        await store.commit(rec("secret", 1, canary + b"-1"), expected_head=0)
        await store.commit(rec("other", 0, b"keep"), expected_head=None)
        await store.delete("secret")
    blobs = _all_bytes(tmp_path)
    assert canary not in blobs
    assert b"keep" in blobs


async def test_sqlite_survives_reopen(tmp_path: Path) -> None:
    """Committed records are there after closing and reopening the file."""
    path = tmp_path / "c.db"
    async with graph.SQLiteStore(path) as store:
        await store.commit(rec("t", 0, b"x"), expected_head=None)
    async with graph.SQLiteStore(path, synchronous="NORMAL") as store:
        assert [r.data for r in await store.records("t")] == [b"x"]
    with pytest.raises(ValueError, match="synchronous"):
        graph.SQLiteStore(path, synchronous="sometimes")
