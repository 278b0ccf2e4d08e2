"""What a checkpointed agent turn does at every step, done cheaper, gives
what the general way gives (see docs/performance.md, round ten)."""

from __future__ import annotations

import functools
import time

from typing import Any

import anyio
import anyio.lowlevel
import attrs
import pytest

from hypothesis import given
from hypothesis import strategies as st
from returns.result import Result, Success

from pipeline import (
    Agent,
    Context,
    Message,
    _concurrency,
    graph,
    handler,
    stores,
    tool,
)
from pipeline.events import CheckpointSaved
from pipeline.fold import Codec, Snapshot, Status, _journal
from pipeline.fold._model import Edit, Pending
from pipeline.stores import Record, record_checksum
from pipeline.testing import Reply, ScriptedModel
from tests.stores import DelegatingStore


thread_ids = st.text(
    st.characters(exclude_categories=["Cs"], exclude_characters="\x00"),
    min_size=1,
    max_size=40,
)
versions = st.integers(min_value=0, max_value=2**62)


@given(
    thread_ids,
    versions,
    st.none() | versions,
    st.binary(max_size=300),
)
def test_a_record_is_built_as_the_protocol_builds_it(
    thread_id: str, version: int, parent: int | None, data: bytes
) -> None:
    built = _journal.record_of(thread_id, version, parent, data)
    expected = Record(
        thread_id,
        version,
        parent,
        data,
        record_checksum(thread_id, version, parent, data),
    )
    assert type(built) is Record
    assert built == expected
    assert hash(built) == hash(expected)
    assert attrs.astuple(built) == attrs.astuple(expected)


def test_a_built_record_is_frozen() -> None:
    built = _journal.record_of("t", 1, 0, b"{}")
    try:
        built.version = 2  # type: ignore[misc]  # the point
    except attrs.exceptions.FrozenInstanceError:
        pass
    else:  # pragma: no cover
        raise AssertionError("a record took a new version")


snapshots = st.builds(
    Snapshot,
    thread_id=thread_ids,
    version=versions,
    parent=st.none() | versions,
    state=st.integers() | st.text(),
    node=st.none() | st.text(max_size=5),
    next=st.tuples(st.text(max_size=5)) | st.just(()),
    join=st.none() | st.text(max_size=5),
    step=st.integers(min_value=0, max_value=100),
    fingerprint=st.text(max_size=5),
    status=st.sampled_from(Status),
    pending=st.none() | st.builds(Pending, st.none(), st.just(()), st.text()),
    progress=st.just({}) | st.just({"k": ({"v": 2},)}),
    reason=st.text(max_size=5),
    committed_at=st.none() | st.datetimes(),
    author=st.text(max_size=5),
    origin=st.none() | st.tuples(st.text(max_size=5), versions),
    edit=st.none() | st.builds(Edit, st.text(max_size=5), st.text(max_size=5)),
)


@given(snapshots, versions, st.none() | versions)
def test_a_renumbered_snapshot_is_the_one_evolved(
    snap: Snapshot[Any], version: int, parent: int | None
) -> None:
    renumbered = snap.renumbered(version, parent)
    expected = attrs.evolve(
        snap, version=version, parent=parent, committed_at=None
    )
    assert type(renumbered) is Snapshot
    assert attrs.astuple(renumbered, recurse=False) == attrs.astuple(
        expected, recurse=False
    )
    assert renumbered.committed_at is None  # not compared by ==
    assert snap.version != version or renumbered is not snap
    try:
        renumbered.version = 0  # type: ignore[misc]  # the point
    except attrs.exceptions.FrozenInstanceError:
        pass
    else:  # pragma: no cover
        raise AssertionError("a snapshot took a new version")


def _thread_journal(
    held: stores.Held | None,
) -> _journal.ThreadJournal[Any]:
    store = stores.MemoryStore()
    return _journal.ThreadJournal(
        store, Codec(int), "t", None, None, None, held
    )


async def _held() -> stores.Held:
    store = stores.MemoryStore()
    lease = (await store.acquire("t", "me", ttl=30)).unwrap()
    return stores.Held(store, lease, 30, time.monotonic())


async def test_a_runs_lease_is_its_threads_however_deep_it_nests() -> None:
    held = await _held()
    outer = _thread_journal(held)
    assert _journal.lease_check(None) is None
    assert _journal.lease_check(outer) is held
    assert _journal.lease_check(_thread_journal(None)) is None
    inner: _journal.Journal[Any] = outer
    for depth in range(3):
        boundary = _journal.Boundary(inner, {}, None)
        opened = _journal.NestedJournal.open(boundary, f"f{depth}", Codec(int))
        inner = opened.unwrap()
        assert _journal.lease_check(inner) is held
        assert await boundary.ensure() is None
        assert await inner.ensure() is None
    held.lost = True  # a renewal found the lease taken
    assert await inner.ensure() is not None
    assert await _journal.Boundary(inner, {}, None).ensure() is not None


async def test_a_journal_of_another_kind_is_asked_itself() -> None:
    asked: list[str] = []

    class Elsewhere(_journal.Journal[int]):
        async def ensure(self) -> Any:
            asked.append("asked")
            return None

    other = Elsewhere(Codec(int), "t", None, None)
    assert _journal.lease_check(other) is other
    boundary = _journal.Boundary(other, {}, None)
    nested = _journal.NestedJournal.open(boundary, "f", Codec(int)).unwrap()
    assert _journal.lease_check(nested) is other
    assert await boundary.ensure() is None
    assert await nested.ensure() is None
    assert asked == ["asked", "asked"]
    # Without a lease nor a journal to ask, nothing is checked.
    free = _journal.Boundary(_thread_journal(None), {}, None)
    assert await free.ensure() is None


def _w7_graph(turns: int) -> Any:
    model = ScriptedModel(
        *[Reply.tool_call("echo", {"text": "hi"}) for _ in range(turns - 1)],
        Reply.text("done"),
        cycle=True,
    )
    agent = Agent("bench", model, tools=[_echo], max_turns=turns)
    return (
        graph.builder(Context)
        .node("bench", agent)
        .entry("bench")
        .edge("bench", graph.END)
        .build()
    )


@tool
async def _echo(text: str) -> str:
    """Return the text."""
    return text


def _count_locks(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    made: list[object] = []
    real = _concurrency.new_lock

    def counted() -> Any:
        lock = real()
        made.append(lock)
        return lock

    monkeypatch.setattr(_journal, "new_lock", counted)
    return made


async def test_turns_on_a_memory_store_take_no_lock(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Nothing a turn's record does on the memory store waits, so nothing
    takes turns with it: no lock is made, and every turn is a record."""
    made = _count_locks(monkeypatch)
    store = stores.MemoryStore()
    g = _w7_graph(4)
    out = await g.run(
        Context.of(Message.user("go")), store=store, thread_id="t"
    )
    assert out.unwrap().done
    assert made == []
    assert len(await store.records("t")) == 4 + 2
    loaded = (await g.load(store, "t")).unwrap()
    assert loaded.state == out.unwrap().state


async def test_turns_that_may_wait_take_the_lock(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A store that may wait, or events sent while the lock is held: the
    turns take the journal's lock, as before."""
    made = _count_locks(monkeypatch)
    g = _w7_graph(3)
    wrapped = DelegatingStore(stores.MemoryStore())
    out = await g.run(
        Context.of(Message.user("go")), store=wrapped, thread_id="t"
    )
    assert out.unwrap().done
    assert len(made) == 1  # one journal, its lock made once
    seen: list[object] = []

    async def on_event(event: object) -> None:
        seen.append(event)

    store = stores.MemoryStore()
    out = await g.run(
        Context.of(Message.user("go")),
        store=store,
        thread_id="t",
        on_event=on_event,
    )
    assert out.unwrap().done
    assert len(made) == 2
    saved = [e.version for e in seen if isinstance(e, CheckpointSaved)]
    assert saved == list(range(3 + 2))


def test_a_memory_store_commit_never_waits() -> None:
    """What lets a turn's record go without the lock: the memory store's
    commit ends at its first step (it awaits nothing), accepted or not."""
    store = stores.MemoryStore()
    for version, head in ((0, None), (1, 0), (1, 0), (5, 1)):
        record = _journal.record_of("t", version, head, b"{}")
        call = store.commit(record, expected_head=head)
        try:
            call.send(None)
        except StopIteration:
            pass
        else:  # pragma: no cover
            call.close()
            raise AssertionError("the memory store's commit waited")


@tool
async def _yielding(text: str) -> str:
    """Return the text, letting other tasks run first."""
    await anyio.lowlevel.checkpoint()
    return text


@pytest.mark.parametrize("wrapped", ["no", "instance", "class"])
async def test_turns_of_concurrent_branches_on_a_memory_store(
    wrapped: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two fan-out branches' agents, their turns interleaved: every turn
    is a record, one chain of versions, read back as the run ended.  Also
    with the store's commit wrapped by one that waits (a spy, a latency
    injected: on the instance, or on the class as ``monkeypatch`` does),
    which must take the lock (a memory store so wrapped took none, and
    every such fan-out failed with ``ConcurrentModification``: found
    attacking)."""

    def agent(name: str) -> Agent[None]:
        model = ScriptedModel(
            *[Reply.tool_call("_yielding", {"text": name})] * 3,
            Reply.text("done"),
            cycle=True,
        )
        return Agent(name, model, tools=[_yielding], max_turns=4)

    @handler(name="start")
    async def start(ctx: Context) -> Result[Context, object]:
        return Success(ctx)

    g = (
        graph.builder(Context)
        .node("start", start)
        .node("a", agent("a"))
        .node("b", agent("b"))
        .entry("start")
        .fan_out("start", ["a", "b"], join=graph.END)
        .build()
    )
    store = stores.MemoryStore()
    original = stores.MemoryStore.commit

    async def waiting(
        self: stores.MemoryStore,
        record: stores.Record,
        *,
        expected_head: int | None,
        lease: stores.Lease | None = None,
    ) -> Any:
        await anyio.lowlevel.checkpoint()  # lets the other branch in
        return await original(
            self, record, expected_head=expected_head, lease=lease
        )

    if wrapped == "instance":
        monkeypatch.setattr(store, "commit", functools.partial(waiting, store))
    elif wrapped == "class":
        monkeypatch.setattr(stores.MemoryStore, "commit", waiting)
    out = (
        await g.run(Context.of(Message.user("go")), store=store, thread_id="t")
    ).unwrap()
    assert out.done
    records = await store.records("t")
    assert [r.version for r in records] == list(range(len(records)))
    assert [r.parent for r in records[1:]] == [r.version for r in records[:-1]]
    turns = [
        "a" if b"/f:a#0" in r.data else "b"
        for r in records
        if b"/f:a#0" in r.data or b"/f:b#0" in r.data
    ]
    assert sorted(turns) == ["a"] * 4 + ["b"] * 4
    assert turns != sorted(turns)  # interleaved
    loaded = (await g.load(store, "t")).unwrap()
    assert loaded.state == out.state
    assert loaded.version == records[-1].version
