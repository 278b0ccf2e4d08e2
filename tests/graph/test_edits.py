"""Editing a paused or stopped thread's state (issue 16, item 2): a
version of its own with an author and a reason, on every store."""

from __future__ import annotations

import pytest

from pyrsistent import pvector

from pipeline import stores
from pipeline.failures import EditRefused, InvalidState
from pipeline.fold import (
    Continue,
    Decision,
    Edit,
    Status,
    Stop,
    Transition,
)
from tests.graph.helpers import Counted, Runs
from tests.graph.test_stops import asks, linear
from tests.servers import StoreFactory


async def test_edit_a_paused_thread_then_answer(
    make_store: StoreFactory,
) -> None:
    """A paused thread's state is replaced, then patched: each edit is a
    version with its author and reason; the question still waits (at the
    edit's version) and the run goes on from the edited state."""
    g = linear(Runs(), 4)
    gate = asks("n2", "ship?")
    async with make_store() as store:
        paused = (
            await g.run(Counted(), store=store, thread_id="t", gates=[gate])
        ).unwrap()
        assert paused.state.count == 2
        edited = (
            await g.update_state(
                store,
                "t",
                Counted(count=40, trail=paused.state.trail),
                author="ana",
                reason="count was wrong",
            )
        ).unwrap()
        assert (edited.version, edited.parent) == (
            paused.version + 1,
            paused.version,
        )
        assert edited.edit == Edit("ana", "count was wrong")
        assert edited.status is Status.INTERRUPTED
        patched = (
            await g.update_state(
                store,
                "t",
                patch={"note": "checked"},
                author="bo",
                reason="note it",
            )
        ).unwrap()
        assert (patched.state.count, patched.state.note) == (40, "checked")
        assert (await g.load(store, "t")).unwrap() == patched
        history = (await g.history(store, "t")).unwrap()
        assert [s.edit for s in history[-2:]] == [
            Edit("ana", "count was wrong"),
            Edit("bo", "note it"),
        ]
        # The question waits at the edit now: the old id is stale.
        assert patched.question_id not in (None, paused.question_id)
        assert patched.pending == paused.pending
        done = (
            await g.resume(
                store,
                "t",
                answer="yes",
                question=patched.question_id,
                gates=[gate],
            )
        ).unwrap()
        assert done.state.count == 42
        assert done.state.note == "checked"
        after = (await g.history(store, "t")).unwrap()
        assert [s.edit for s in after[len(history) :]] == [None] * (
            len(after) - len(history)
        )


async def test_a_bad_edit_commits_nothing(make_store: StoreFactory) -> None:
    """A patch that does not fit the state type is InvalidState (naming no
    value); a running or done thread cannot be edited (EditRefused)."""
    g = linear(Runs(), 3)
    gate = asks("n1", "go?")
    async with make_store() as store:
        await g.run(Counted(), store=store, thread_id="t", gates=[gate])
        head = await store.head("t")
        bad = await g.update_state(
            store,
            "t",
            patch={"count": "sk-secret-77"},
            author="ana",
            reason="typo",
        )
        failure = bad.failure()
        assert isinstance(failure, InvalidState)
        assert "sk-secret-77" not in str(failure)
        assert await store.head("t") == head
        await g.run(Counted(), store=store, thread_id="d")
        refused = await g.update_state(
            store, "d", Counted(), author="ana", reason="redo"
        )
        assert refused.failure() == EditRefused(
            "d", "done", "it is not paused or stopped"
        )
        with pytest.raises(TypeError, match="a state or a patch"):
            await g.update_state(store, "d", author="ana", reason="none")


async def test_edit_a_stopped_thread_then_fork(
    make_store: StoreFactory,
) -> None:
    """A stopped thread stays stopped after an edit; a fork of the edit
    goes on from the edited state."""
    g = linear(Runs(), 3)

    async def halt(t: Transition[Counted]) -> Decision:
        return Stop("wrong note") if t.state.note != "ok" else Continue()

    async with make_store() as store:
        stop = (
            await g.run(Counted(), store=store, thread_id="t", gates=[halt])
        ).unwrap()
        assert stop.status is Status.STOPPED
        edited = (
            await g.update_state(
                store,
                "t",
                patch={"note": "ok", "trail": ["fixed"]},
                author="ana",
                reason="approved note",
            )
        ).unwrap()
        assert (edited.status, edited.reason) == (Status.STOPPED, stop.reason)
        assert edited.state.trail == pvector(["fixed"])
        assert (await g.resume(store, "t", gates=[halt])).unwrap() == edited
        fork = (await g.fork(store, "t", new_thread_id="f")).unwrap()
        assert fork.edit is None
        done = (await g.resume(store, "f", gates=[halt])).unwrap()
        assert done.status is Status.DONE
        assert list(done.state.trail) == ["fixed", "n0", "n1", "n2"]


async def test_an_edit_of_a_fork_returns_what_is_stored(
    make_store: StoreFactory,
) -> None:
    """The snapshot an edit (or a run) of a fork returns names the fork's
    origin, as loading it does.  (Found by
    tests/graph/test_humans_machine.py: commits dropped it.)"""
    g = linear(Runs(), 3)
    gate = asks("n1", "go?")
    async with make_store() as store:
        paused = (
            await g.run(Counted(), store=store, thread_id="t", gates=[gate])
        ).unwrap()
        fork = (await g.fork(store, "t", new_thread_id="f")).unwrap()
        assert fork.origin == ("t", paused.version)
        edited = (
            await g.update_state(
                store, "f", patch={"note": "x"}, author="ana", reason="y"
            )
        ).unwrap()
        assert edited.origin == fork.origin
        assert (await g.load(store, "f")).unwrap() == edited
        done = (
            await g.resume(store, "f", answer="yes", gates=[gate])
        ).unwrap()
        assert done.origin == fork.origin
        assert (await g.load(store, "f")).unwrap() == done


async def test_edits_need_a_store_thread() -> None:
    """An unknown thread is SnapshotNotFound, nothing is created."""
    g = linear(Runs(), 2)
    store = stores.MemoryStore()
    out = await g.update_state(
        store, "nope", Counted(), author="ana", reason="x"
    )
    assert out.failure().__class__.__name__ == "SnapshotNotFound"
    assert await store.head("nope") is None


async def test_a_bad_patch_names_the_field_it_broke(
    make_store: StoreFactory,
) -> None:
    """A patch that breaks the state type says which field and what was
    expected (never the value), and commits nothing."""
    g = linear(Runs(), 3)
    gate = asks("n1", "go?")
    async with make_store() as store:
        await g.run(Counted(), store=store, thread_id="t", gates=[gate])
        head = await store.head("t")
        cases: list[tuple[dict[str, object], str]] = [
            ({"count": "sk-secret-77"}, "$.count"),
            ({"trail": ["a", 7], "note": None}, "$.trail"),
            ({"surplus": "sk-secret-77"}, "surplus"),
        ]
        for patch, where in cases:
            bad = await g.update_state(
                store, "t", patch=patch, author="ana", reason="typo"
            )
            failure = bad.failure()
            assert isinstance(failure, InvalidState)
            assert where in str(failure)
            assert "sk-secret-77" not in str(failure)
            assert await store.head("t") == head


async def test_a_bad_state_is_the_edits_fault_not_a_nodes(
    make_store: StoreFactory,
) -> None:
    """A state instance that cannot be stored, given to ``update_state``,
    is an InvalidState of ``<edit>`` naming the field (it blamed the node
    the thread last ran); nothing is committed."""
    g = linear(Runs(), 3)
    gate = asks("n1", "go?")
    async with make_store() as store:
        await g.run(Counted(), store=store, thread_id="t", gates=[gate])
        head = await store.head("t")
        bad = Counted(count="sk-secret-77")  # type: ignore[arg-type]
        out = await g.update_state(store, "t", bad, author="a", reason="r")
        failure = out.failure()
        assert isinstance(failure, InvalidState)
        assert failure.node == "<edit>"
        assert failure.field == "count"
        assert "sk-secret-77" not in str(failure)
        assert await store.head("t") == head
