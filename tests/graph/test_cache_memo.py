"""The cache's fast path (a frozen input keyed by identity, a frozen output
decoded once) gives what the general path gives; a mutable state is keyed
and decoded anew every time, so it never hits stale."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import attrs
import hypothesis.strategies as st
import orjson
import pytest

from hypothesis import HealthCheck, given, settings
from returns.result import Result, Success

from pipeline import Graph, graph, handler, stores
from pipeline._serde import canonical, checksum
from pipeline.fold import Codec
from pipeline.graph import END, CachePolicy
from pipeline.graph._cache import cached
from pipeline.stores import MemoryCache, StoreCache


@attrs.frozen
class Inner:
    tag: str
    flags: tuple[bool, ...] = ()


@attrs.frozen
class Doc:
    """Deeply frozen: the fast path applies."""

    n: int
    words: tuple[str, ...] = ()
    inner: Inner | None = None


@attrs.define
class Box:
    """Mutable: keyed and decoded anew every time."""

    n: int
    items: list[int] = attrs.field(factory=list)


@attrs.frozen
class Shell:
    """Frozen, but holding a list: as mutable as the list."""

    n: int
    items: list[int] = attrs.field(factory=list)


class Recording:
    """A :class:`MemoryCache` that records the keys it is asked for."""

    def __init__(self) -> None:
        self.inner = MemoryCache()
        self.asked: list[str] = []

    def get(self, key: str, /) -> bytes | None:
        self.asked.append(key)
        return self.inner.get(key)

    def put(self, key: str, value: bytes, ttl: float | None, /) -> None:
        self.inner.put(key, value, ttl)


class AsyncRecording:
    """The same, awaited (the path of a store on a file or server)."""

    def __init__(self) -> None:
        self.sync = Recording()
        self.asked = self.sync.asked

    async def get(self, key: str, /) -> bytes | None:
        return self.sync.get(key)

    async def put(self, key: str, value: bytes, ttl: float | None, /) -> None:
        self.sync.put(key, value, ttl)


def _plus_one() -> tuple[Any, list[Any]]:
    """A node adding one to ``n`` (kept as it is otherwise), and the list of
    the states it ran on."""
    ran: list[Any] = []

    async def call(state: Any) -> Any:
        ran.append(state)
        return Success(attrs.evolve(state, n=state.n + 1))

    return call, ran


def _counting(codec: Codec[Any]) -> list[object]:
    """Records each value *codec*'s converter is asked to unstructure from
    outside (keys and stored outputs are the only callers here), not the
    converter's own calls for the parts."""
    seen: list[object] = []
    unstructure = codec.converter.unstructure
    depth = 0

    def spy(value: object, *args: Any) -> Any:
        nonlocal depth
        if not depth:
            seen.append(value)
        depth += 1
        try:
            return unstructure(value, *args)
        finally:
            depth -= 1

    codec.converter.unstructure = spy  # type: ignore[method-assign,assignment]
    return seen


def _slow_key(codec: Codec[Any], value: object) -> str:
    """The key as the general path computes it."""
    return checksum(
        canonical(["fp", "node"])
        + canonical(codec.converter.unstructure(value))
    )


def _slow_output(codec: Codec[Any], data: bytes) -> Any:
    return codec.converter.structure(orjson.loads(data), codec.state_type)


texts = st.text(max_size=6)
docs = st.builds(
    Doc,
    n=st.integers(-(2**40), 2**40),
    words=st.tuples(texts, texts) | st.just(()),
    inner=st.none()
    | st.builds(Inner, tag=texts, flags=st.tuples(st.booleans())),
)
stores_ = st.sampled_from([Recording, AsyncRecording])


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(doc=docs, make=stores_, whole=st.booleans())
async def test_a_frozen_state_fast_path_equals_the_general_path(
    doc: Doc, make: Callable[[], Recording | AsyncRecording], whole: bool
) -> None:
    store = make()
    codec = Codec(Doc)
    node, ran = _plus_one()
    select: Callable[[Doc], object] = (
        (lambda d: d) if whole else (lambda d: d.words)
    )
    policy: CachePolicy[Doc] = CachePolicy(store=store, key=select)
    unstructured = _counting(codec)
    run = cached(node, "node", policy, "fp", codec)
    outs = [await run(doc) for _ in range(4)]
    assert len(unstructured) == 2  # the miss's key and output, then none
    copy = Doc(doc.n, tuple(doc.words), doc.inner)
    outs.append(await run(copy))  # an equal object: keyed by its content
    assert store.asked == [_slow_key(codec, select(doc))] * 5
    assert len(ran) == 1  # one miss, then hits
    sync = store.sync if isinstance(store, AsyncRecording) else store
    stored = sync.inner.get(store.asked[0])
    assert stored is not None
    expected = _slow_output(codec, stored)
    for out in outs[1:]:
        assert type(out) is Success
        assert out.unwrap() == expected
        assert type(out.unwrap()) is Doc
    assert outs[2] is outs[3]  # the fast path was taken
    # A hit's output fed back in (a re-run's next node) keys as the slow path.
    again = outs[3].unwrap()
    await run(again)
    await run(again)
    assert store.asked[5:] == [_slow_key(codec, select(again))] * 2


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    kind=st.sampled_from([Box, Shell]),
    n=st.integers(0, 100),
    appended=st.lists(st.integers(0, 3), min_size=1, max_size=4),
    make=stores_,
)
async def test_a_mutable_state_is_never_keyed_stale(
    kind: type[Box | Shell],
    n: int,
    appended: list[int],
    make: Callable[[], Recording | AsyncRecording],
) -> None:
    store = make()
    codec = Codec(kind)
    node, ran = _plus_one()
    run = cached(node, "node", CachePolicy(store=store), "fp", codec)
    state = kind(n)
    await run(state)
    await run(state)
    for x in appended:
        state.items.append(x)  # the same object, another content
        out = await run(state)
        assert store.asked[-1] == _slow_key(codec, state)
        assert out.unwrap() == kind(n + 1, list(state.items))
    assert len(ran) == 1 + len(appended)


@pytest.mark.parametrize("kind", [Box, Shell])
async def test_a_mutable_output_is_decoded_anew_for_each_hit(
    kind: type[Box | Shell],
) -> None:
    codec = Codec(kind)
    node, _ = _plus_one()
    run = cached(node, "node", CachePolicy(), "fp", codec)
    await run(kind(1, [7]))
    first = (await run(kind(1, [7]))).unwrap()
    first.items.append(99)  # the caller changes what it was given
    second = (await run(kind(1, [7]))).unwrap()
    assert second == kind(2, [7])
    assert second is not first


def _graph(kind: type[Any], policy: CachePolicy[Any]) -> Graph[Any, str]:
    @handler(name="grow")
    async def grow(s: Any) -> Result[Any, str]:
        return Success(attrs.evolve(s, n=s.n + 1))

    return (
        graph.builder(kind)
        .node("a", grow, cache=policy)
        .node("b", grow, cache=policy)
        .entry("a")
        .edge("a", "b")
        .edge("b", END)
        .build()
    )


@pytest.fixture(params=["memory", "sqlite"])
async def policy(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[CachePolicy[Any]]:
    """A policy keeping entries in memory, or in a SQLite file."""
    if request.param == "memory":
        yield CachePolicy()
        return
    store = stores.SQLiteStore(tmp_path / "c.db")
    try:
        yield CachePolicy(store=StoreCache(store))
    finally:
        await store.aclose()


async def test_a_re_run_of_a_frozen_graph_gives_the_first_runs_states(
    policy: CachePolicy[Any],
) -> None:
    g = _graph(Doc, policy)
    first = (await g.run(Doc(0, ("x",)))).unwrap().state
    outs = [(await g.run(Doc(0, ("x",)))).unwrap().state for _ in range(3)]
    assert outs == [first] * 3 == [Doc(2, ("x",))] * 3


async def test_a_mutable_graph_state_changed_between_runs_misses(
    policy: CachePolicy[Any],
) -> None:
    g = _graph(Box, policy)
    state = Box(0, [1])
    assert (await g.run(state)).unwrap().state == Box(2, [1])
    state.items.append(2)
    assert (await g.run(state)).unwrap().state == Box(2, [1, 2])
    state.items.clear()
    assert (await g.run(state)).unwrap().state == Box(2, [])
