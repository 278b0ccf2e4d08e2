"""Fast paths equal the general ones.

``Context.append`` (and every other context change),
``Snapshot.successor`` and the message helpers set their fields' slots directly, without the
constructors' converters: the results must be the same values, with the
same fields, as the constructors give.  A fold with no hooks and no store
runs its steps without the engine's general loop: the same outcome.
"""

from __future__ import annotations

import weakref

from types import MappingProxyType

import attrs
import hypothesis.strategies as st
import pytest

from hypothesis import given, settings
from returns.result import Failure, Result, Success

from pipeline import Context, Graph, Message, graph, handler
from pipeline._messages import Role, ToolCall, Usage
from pipeline.fold import Edit, Pending, Snapshot, Status
from pipeline.fold._model import NO_PROGRESS
from pipeline.graph import END
from tests.strategies import contexts, messages


@given(ctx=contexts(), new=st.lists(messages(), min_size=1, max_size=3))
def test_append_equals_the_constructor(
    ctx: Context, new: list[Message]
) -> None:
    """Appending gives the context its constructor gives for the same
    messages, metadata and run id."""
    out = ctx
    for m in new:
        out = out.append(m)
    built = Context(
        [*ctx.messages, *new], dict(ctx.metadata), run_id=ctx.run_id
    )
    assert out == built
    assert type(out.messages) is type(built.messages)
    assert type(out.metadata) is type(built.metadata)


@given(
    version=st.integers(0, 10**6),
    state=st.integers(),
    node=st.none() | st.text(max_size=5),
    nxt=st.lists(st.text(min_size=1, max_size=5), max_size=3).map(tuple),
    join=st.none() | st.text(min_size=1, max_size=5),
    fingerprint=st.none() | st.text(min_size=1, max_size=8),
    origin=st.none() | st.tuples(st.text(max_size=5), st.integers(0, 99)),
    rare=st.booleans(),
)
def test_successor_equals_the_constructor(
    version: int,
    state: int,
    node: str | None,
    nxt: tuple[str, ...],
    join: str | None,
    fingerprint: str | None,
    origin: tuple[str, int] | None,
    rare: bool,
) -> None:
    """``successor`` gives the snapshot the constructor gives: every
    field set, the next version and step, running on while *next* names
    anything, the origin kept and nothing else of the rarely set fields
    (a question, progress, a reason, an author, an edit) carried over.
    It is a plain, frozen :class:`Snapshot` (built as another class and
    made one: nothing of that shows)."""
    base = attrs.evolve(
        Snapshot.first("t", 0, ("a",), "fp"),
        version=version,
        step=version,
        origin=origin,
    )
    if rare:
        base = attrs.evolve(
            base,
            status=Status.INTERRUPTED,
            pending=Pending("a", ("b",), "ok?"),
            progress=MappingProxyType({"f:x#0": ({"v": 2},)}),
            reason="why",
            author="ann",
            edit=Edit("ann", "fix"),
        )
    out = base.successor(state, node, nxt, join, fingerprint)
    built = Snapshot(
        thread_id="t",
        version=version + 1,
        parent=version,
        state=state,
        node=node,
        next=nxt,
        join=join,
        step=version + 1,
        fingerprint="fp" if fingerprint is None else fingerprint,
        status=Status.RUNNING if nxt else Status.DONE,
        pending=None,
        progress=NO_PROGRESS,
        origin=origin,
    )
    assert out == built
    assert type(out) is Snapshot
    for field in attrs.fields(Snapshot):
        assert getattr(out, field.name) == getattr(built, field.name)
        assert type(getattr(out, field.name)) is type(
            getattr(built, field.name)
        )
        with pytest.raises(attrs.exceptions.FrozenInstanceError):
            setattr(out, field.name, getattr(built, field.name))
    assert repr(out) == repr(built)
    assert weakref.ref(out)() is out
    assert attrs.evolve(out, reason="r") == attrs.evolve(built, reason="r")


async def _observe_nothing(snap: Snapshot[Counted]) -> None:
    """An observer: makes a fold take the engine's general loop."""


@attrs.frozen
class Counted:
    """A counter state."""

    n: int = 0


@handler(name="a")
async def _bump(s: Counted) -> Result[Counted, str]:
    return Success(Counted(s.n + 1)) if s.n != 13 else Failure("thirteen")


def _two_nodes(stop: int) -> Graph[Counted, str]:
    return (
        graph.builder(Counted)
        .node("a", _bump)
        .node("b", _bump.named("b"))
        .entry("a")
        .route("a", lambda s: "b" if s.n < stop else END, to=["b", END])
        .route("b", lambda s: "a" if s.n < stop else END, to=["a", END])
        .build()
    )


@settings(max_examples=40, deadline=None)
@given(stop=st.integers(0, 20), max_steps=st.integers(1, 25))
async def test_bare_fold_equals_the_general_loop(
    stop: int, max_steps: int
) -> None:
    """A fold with nothing to gate, report, observe or commit runs the
    steps alone: the same final snapshot, failure and step-limit tail as
    the engine's general loop (taken here by an observer that does
    nothing)."""
    g = _two_nodes(stop)
    snap = g.start(Counted(), thread_id="t")
    limits = graph.GraphLimits(max_steps=max_steps)
    bare = await g.fold(snap, limits=limits)
    general = await g.fold(snap, limits=limits, observers=[_observe_nothing])
    assert type(bare) is type(general)
    if isinstance(bare, Success):
        assert bare.unwrap() == general.unwrap()
    else:
        assert bare.failure() == general.failure()


@given(
    content=st.text(max_size=20),
    name=st.none() | st.text(max_size=5),
    calls=st.lists(
        st.builds(
            ToolCall,
            id=st.text(min_size=1, max_size=4),
            name=st.text(min_size=1, max_size=4),
            arguments=st.just("{}"),
        ),
        max_size=2,
    ),
    usage=st.none() | st.builds(Usage, st.integers(0, 99), st.integers(0, 99)),
)
def test_message_helpers_equal_the_constructor(
    content: str,
    name: str | None,
    calls: list[ToolCall],
    usage: Usage | None,
) -> None:
    """``Message.system``, ``user`` (text) and ``assistant`` build what
    the constructor builds from the same fields (its converters skipped:
    the fields are already in their form)."""
    assert Message.system(content) == Message(Role.SYSTEM, content)
    assert Message.user(content, name=name) == Message(
        Role.USER, content, name
    )
    out = Message.assistant(content, name=name, tool_calls=calls, usage=usage)
    assert out == Message(
        "assistant", content, name, calls, None, usage, None, ()
    )
    assert type(out.role) is Role
    assert type(out.tool_calls) is tuple
