"""A checkpointed turn is sealed once (``NestedJournal.commit``): the turn's
document is checked but not encoded on its own, and the thread's progress
record holding it is the one encoding.  The store must hold the records
main's two seals wrote, byte for byte; a thread written that way must load
and resume; a turn orjson refuses to write takes the general way."""

from __future__ import annotations

import contextlib

from typing import Any

import pytest

from pyrsistent import pvector

from pipeline import Context, Message, fold, stores
from pipeline.fold import _journal
from pipeline.fold._codec import Codec
from pipeline.stores import Record
from tests.graph.helpers import Counted
from tests.graph.test_progress_record import _graph, fixed_clock


__all__ = ["fixed_clock"]  # the fixture the tests here use


class _MainsLayout(contextlib.AbstractContextManager[None]):
    """While entered, a nested journal commits as main did: its record
    sealed and encoded on its own (``Journal.commit``), then handed to the
    enclosing step as progress (``NestedJournal.write``), sealed again."""

    def __enter__(self) -> None:
        self.saved = _journal.NestedJournal.commit
        _journal.NestedJournal.commit = _journal.Journal.commit  # type: ignore[method-assign]

    def __exit__(self, *_: object) -> None:
        _journal.NestedJournal.commit = self.saved  # type: ignore[method-assign]


async def _run(store: stores.MemoryStore, *, main: bool) -> None:
    with _MainsLayout() if main else contextlib.nullcontext():
        out = await _graph(4).run(
            Context.of(Message.user("go"), run_id="r"),
            store=store,
            thread_id="t",
        )
    assert out.unwrap().done


async def _resume(store: stores.MemoryStore, version: int) -> None:
    again = await _graph(4).resume(store, "t", version=version)
    assert again.unwrap().done


async def _records(store: stores.MemoryStore) -> list[Record]:
    return list(await store.records("t"))


@pytest.mark.usefixtures("fixed_clock")
async def test_a_turn_sealed_once_stores_mains_records() -> None:
    """The agent's checkpointed turns store the records main's two seals
    stored, byte for byte, one per turn."""
    once, main = stores.MemoryStore(), stores.MemoryStore()
    await _run(once, main=False)
    await _run(main, main=True)
    records = await _records(once)
    assert records == await _records(main)
    # The admission, one progress record per turn, the node's own.
    assert len(records) == 2 + 4


@pytest.mark.usefixtures("fixed_clock")
@pytest.mark.parametrize("version", [1, 2, 3])
async def test_a_thread_written_as_main_did_loads_and_resumes(
    version: int,
) -> None:
    """A thread whose turns main wrote (each turn's record sealed on its
    own, then again inside the step's progress record) loads, and a run
    resumed from one of its turns goes on the new way: the same records
    as main resuming it, and the same history."""
    written, by_main = stores.MemoryStore(), stores.MemoryStore()
    await _run(written, main=True)
    await _run(by_main, main=True)
    await _resume(written, version)
    with _MainsLayout():
        await _resume(by_main, version)
    assert await _records(written) == await _records(by_main)
    ours = (await _graph(4).history(written, "t")).unwrap()
    theirs = (await _graph(4).history(by_main, "t")).unwrap()
    assert ours == theirs
    assert ours[-1].state.messages[-1].content == "done"


async def _nested_commit(
    count: int, *, main: bool
) -> tuple[list[Record], int]:
    """Commit one record of a fold nested in a thread's step (its state's
    count *count*): the thread's records, and how often it was sealed."""
    codec: Codec[Counted] = Codec(Counted)
    store = stores.MemoryStore()
    outer = _journal.ThreadJournal(store, codec, "t", None, None, None)
    start = fold.Snapshot.first("t", Counted(), ("n",), "f")
    assert type(await outer.commit(start)) is fold.Snapshot
    boundary = _journal.Boundary(outer, {}, None)
    nested = _journal.NestedJournal.open(boundary, "inner", codec).unwrap()
    state = Counted(count, pvector(["x"]), "n")
    snap = fold.Snapshot.first(nested.thread_id, state, ("m",), "g")
    seals = 0
    seal = codec.seal

    def counted(*args: Any, **kwargs: Any) -> Any:
        nonlocal seals
        seals += 1
        return seal(*args, **kwargs)

    codec.seal = counted  # type: ignore[method-assign]
    with _MainsLayout() if main else contextlib.nullcontext():
        committed = await nested.commit(snap)
    assert type(committed) is fold.Snapshot
    assert nested.last is committed
    assert boundary.touched == {nested.key}
    return list(await store.records("t")), seals


@pytest.mark.usefixtures("fixed_clock")
@pytest.mark.parametrize("count", [7, 2**70])
async def test_a_nested_record_orjson_refuses_is_sealed_again(
    count: int,
) -> None:
    """A nested record orjson writes is sealed once; one it refuses (an
    integer past 64 bits: the standard library writes it) is sealed again
    the general way, checked as read back.  The records are main's."""
    ours, seals = await _nested_commit(count, main=False)
    theirs, _ = await _nested_commit(count, main=True)
    assert ours == theirs
    assert seals == (1 if count < 2**63 else 2)
