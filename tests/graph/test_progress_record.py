"""A progress record that repeats the step's snapshot is written without
building that snapshot (``ThreadJournal.repeat``): it must be the record
the general path writes, and the records after it must follow it."""

from __future__ import annotations

import itertools

from collections.abc import Iterator
from typing import Any

import attrs
import pytest

from hypothesis import given
from hypothesis import strategies as st
from pyrsistent import pvector

from pipeline import Agent, Context, Graph, Message, fold, graph, stores, tool
from pipeline.fold import _journal
from pipeline.fold._codec import CLOCK, Codec
from pipeline.fold._model import Pending
from pipeline.stores import Record
from pipeline.testing import Reply, ScriptedModel
from tests.graph.helpers import Counted
from tests.graph.test_record_times import T0


_CODEC: Codec[Counted] = Codec(Counted)

_DOCS = st.lists(
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=3), max_size=3
).map(tuple)
_NAMES = st.text(max_size=3)
_QUESTIONS = st.builds(
    Pending,
    st.none() | _NAMES,
    st.lists(_NAMES, max_size=2).map(tuple),
    _NAMES,
    scope=_NAMES,
    asked=st.none() | st.integers(0, 9),
)
_PENDING = st.none() | st.builds(
    Pending,
    st.none() | _NAMES,
    st.lists(_NAMES, max_size=2).map(tuple),
    _NAMES,
    waiting=st.lists(_QUESTIONS, min_size=1, max_size=2).map(tuple),
)


@given(
    st.integers(0, 5),
    st.none() | _NAMES,
    st.lists(_NAMES, max_size=3).map(tuple),
    st.none() | _NAMES,
    st.integers(0, 9),
    st.sampled_from(("f", "g")),
    st.dictionaries(st.sampled_from(("a", "b/c")), _DOCS, max_size=2),
    _NAMES,
    _PENDING,
    st.booleans(),
)
def test_a_repeated_snapshot_seals_as_the_general_path_does(
    count: int,
    node: str | None,
    next_: tuple[str, ...],
    join: str | None,
    step: int,
    fingerprint: str,
    progress: dict[str, tuple[Any, ...]],
    author: str,
    pending: Pending | None,
    inherit: bool,
) -> None:
    """Property: ``Codec.seal_progress`` writes the document and bytes
    ``Codec.seal`` writes for the snapshot ``Journal._progress`` builds
    (the same state, node, next, join, step and fingerprint as *last*)."""
    state = Counted(count, pvector(["x"]), "n")
    snap = fold.Snapshot(
        thread_id="t",
        version=4,
        parent=3,
        state=state,
        node=node,
        next=next_,
        join=join,
        step=step,
        fingerprint=fingerprint,
        pending=pending,
        author=author,
    )
    last = attrs.evolve(
        snap,
        version=3,
        parent=2,
        author="",
        status=fold.Status.INTERRUPTED if pending else fold.Status.RUNNING,
    )
    token = CLOCK.set(lambda: T0)
    try:
        fast = _CODEC.seal_progress(
            last, progress, author, pending, inherit=inherit
        )
        slow = _CODEC.seal(snap, last, progress, inherit=inherit)
    finally:
        CLOCK.reset(token)
    assert fast is not None
    assert fast == slow


def test_a_state_stored_whole_takes_the_general_way() -> None:
    """A state stored whole (no fields) is written by the general path."""
    codec: Codec[dict[str, int]] = Codec(dict[str, int])
    last = fold.Snapshot.first("t", {"a": 1}, ("n",), "f")
    assert codec.seal_progress(last, {"k": ({},)}, "", None) is None


@tool
async def echo(text: str) -> str:
    """Return the text."""
    return text


def _graph(turns: int) -> Graph[Context, Any]:
    """An agent node whose model calls a tool *turns* - 1 times, then
    answers (a resumed run gets a model that starts over)."""
    steps = [Reply.tool_call("echo", {"text": "hi"}) for _ in range(turns - 1)]
    model = ScriptedModel(*steps, Reply.text("done"))
    agent = Agent("bench", model, tools=[echo], max_turns=3 * turns)
    return (
        graph.builder(Context)
        .node("bench", agent)
        .entry("bench")
        .edge("bench", graph.END)
        .build()
    )


@pytest.fixture
def fixed_clock() -> Iterator[None]:
    token = CLOCK.set(lambda: T0)
    try:
        yield
    finally:
        CLOCK.reset(token)


async def _records(
    general: bool, resume_at: int | None
) -> tuple[list[Record], stores.MemoryStore]:
    g = _graph(4)
    store = stores.MemoryStore()
    saved = _journal.ThreadJournal.repeat
    if general:  # the path every progress record took before
        _journal.ThreadJournal.repeat = _journal.Journal.repeat  # type: ignore[method-assign]
    try:
        out = await g.run(
            Context.of(Message.user("go"), run_id="r"),
            store=store,
            thread_id="t",
        )
        assert out.unwrap().done
        if resume_at is not None:
            again = await _graph(4).resume(store, "t", version=resume_at)
            assert again.unwrap().done
    finally:
        _journal.ThreadJournal.repeat = saved  # type: ignore[method-assign]
    return list(await store.records("t")), store


@pytest.mark.usefixtures("fixed_clock")
@pytest.mark.parametrize("resume_at", [None, 1, 2])
async def test_agent_turns_store_the_records_of_the_general_path(
    resume_at: int | None,
) -> None:
    """An agent's checkpointed turns (and a resume from one of them, time
    travel within the thread) store the same records, byte for byte,
    whether progress records repeat the step's snapshot or build it; each
    record follows the one before it, or the version resumed from."""
    fast, store = await _records(False, resume_at)
    slow, _ = await _records(True, resume_at)
    assert fast == slow
    for before, record in itertools.pairwise(fast):
        if resume_at is not None and record.version == 6:  # 0..5: first run
            assert record.parent == resume_at
        else:
            assert record.parent == before.version
    history = (await _graph(4).history(store, "t")).unwrap()
    assert [s.version for s in history] == [r.version for r in fast]
