"""A checkpointed step's boundary is made only when the step looks at it
(a nested fold, a question) or fails: then it is the boundary the step
would have had from the start, one object for the whole step."""

from __future__ import annotations

import anyio
import attrs
import pytest

from returns.result import Failure, Result, Success

from pipeline import Graph, graph, handler, interrupt, stores
from pipeline._step import STEP, Later, current_step
from pipeline.fold import Boundary, current_boundary, known_fresh
from pipeline.graph import END
from tests.graph.helpers import Counted


def _graph(node: object) -> Graph[Counted, str]:
    return (
        graph.builder(Counted)
        .node("a", node)  # type: ignore[arg-type]
        .entry("a")
        .route("a", lambda s: "a" if s.count < 3 else END, to=["a", END])
        .build()
    )


async def test_a_step_that_does_not_look_makes_no_boundary() -> None:
    """The step in flight is a :class:`Later` nobody made: the run commits
    as before."""
    seen: list[Later] = []

    @handler(name="a")
    async def a(s: Counted) -> Result[Counted, str]:
        later = STEP.get()
        assert type(later) is Later
        seen.append(later)
        return Success(attrs.evolve(s, count=s.count + 1))

    store = stores.MemoryStore()
    done = (await _graph(a).run(Counted(), store=store)).unwrap()
    assert done.state.count == 3
    assert [later.made for later in seen] == [None, None, None]
    assert len(await store.records(done.thread_id)) == 4


async def test_a_step_that_looks_gets_one_boundary() -> None:
    """Looking (here, in the step and in a task of its own) makes the
    step's boundary once: the same object each time, for this thread,
    with nothing saved yet."""
    ids: list[set[int]] = []

    @handler(name="a")
    async def a(s: Counted) -> Result[Counted, str]:
        found: set[int] = set()

        def look() -> None:
            boundary = current_boundary()
            assert isinstance(boundary, Boundary)
            assert current_step() is boundary
            assert boundary.thread_id == "t"
            assert dict(boundary.saved) == {}
            assert boundary.scope == ""
            found.add(id(boundary))

        look()
        async with anyio.create_task_group() as tg:

            async def in_task() -> None:
                look()

            tg.start_soon(in_task)
        look()
        ids.append(found)
        return Success(attrs.evolve(s, count=s.count + 1))

    store = stores.MemoryStore()
    done = (
        await _graph(a).run(Counted(), store=store, thread_id="t")
    ).unwrap()
    assert done.state.count == 3
    assert [len(f) for f in ids] == [1, 1, 1]


async def test_a_failing_step_that_did_not_look_fails_as_before() -> None:
    """A step that fails without looking at its boundary: the failure is
    the run's, as it was with a boundary made up front."""

    @handler(name="a")
    async def a(s: Counted) -> Result[Counted, str]:
        del s
        return Failure("no")

    store = stores.MemoryStore()
    out = await _graph(a).run(Counted(), store=store, thread_id="t")
    assert type(out) is Failure
    assert out.failure() == "no"
    assert len(await store.records("t")) == 1  # the admission record only


async def test_a_step_known_fresh_is_fresh() -> None:
    """``known_fresh`` (asked before the boundary is made, as an agent's
    turn asks it) says what the boundary made then says: a first attempt
    is fresh; one with an answer to deliver, or answers saved, is not."""
    seen: list[tuple[bool, bool]] = []
    crash = [True]

    @handler(name="a")
    async def a(s: Counted) -> Result[Counted, str]:
        known = known_fresh()
        boundary = current_boundary()
        assert boundary is not None
        seen.append((known, boundary.fresh))
        n = await interrupt("how many?", int)
        if crash.pop() if crash else False:
            msg = "the process dies here"
            raise RuntimeError(msg)
        return Success(attrs.evolve(s, count=n))

    g = graph.builder(Counted).node("a", a).entry("a").edge("a", END).build()
    store = stores.MemoryStore()
    first = (await g.run(Counted(), store=store, thread_id="t")).unwrap()
    assert first.pending is not None
    with pytest.raises(RuntimeError, match="dies"):
        await g.resume(store, "t", answer=3)
    done = (await g.resume(store, "t")).unwrap()  # the answer replays
    assert done.state.count == 3
    assert seen == [(True, True), (False, False), (False, False)]
