"""Per-node caching: hits, misses, expiry, invalidation, crashes."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from returns.result import Failure, Result, Success

from pipeline import events, graph, handler, stores
from pipeline.events import CacheLookup, Event
from pipeline.failures import InvalidState
from pipeline.graph import END, CachePolicy
from pipeline.stores import MemoryCache
from tests.graph.helpers import Counted, Runs, step
from tests.stores import Crash, CrashOnCommit


class Clock:
    """A fake monotonic clock: time moves only when a test moves it."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def chain(
    runs: Runs, policy: CachePolicy[Counted], *, version: str = "1"
) -> graph.GraphBuilder[Counted, str]:
    return (
        graph.builder(Counted)
        .node("a", step("a", runs), cache=policy)
        .node("b", step("b", runs))
        .entry("a")
        .edge("a", "b")
        .edge("b", END)
    )


async def _lookups(
    g: Any, state: Counted, **kw: Any
) -> list[tuple[str, bool]]:
    async with events.stream(g, state, **kw) as stream:
        seen: list[Event] = [e async for e in stream]
    return [(e.node, e.hit) for e in seen if isinstance(e, CacheLookup)]


async def test_second_run_on_the_same_input_hits() -> None:
    runs = Runs()
    g = chain(runs, CachePolicy()).build()
    first = (await g.run(Counted())).unwrap()
    second = (await g.run(Counted())).unwrap()
    assert first.state == second.state
    assert list(second.state.trail) == ["a", "b"]
    assert runs.calls == {("a", 0): 1, ("b", 1): 2}  # a ran once, b twice
    assert second.step == first.step == 2  # the hit is still a step


async def test_another_input_misses() -> None:
    runs = Runs()
    g = chain(runs, CachePolicy()).build()
    await g.run(Counted())
    out = (await g.run(Counted(count=5))).unwrap()
    assert out.state.count == 7
    assert runs.calls["a", 0] == runs.calls["a", 5] == 1


async def test_key_selects_what_the_output_depends_on() -> None:
    runs = Runs()
    policy: CachePolicy[Counted] = CachePolicy(key=lambda s: s.count)
    g = chain(runs, policy).build()
    await g.run(Counted(note="x"))
    out = (await g.run(Counted(note="y"))).unwrap()
    assert runs.calls["a", 0] == 1
    assert out.state.note == "x"  # the cached output, as the node returned it


async def test_events_say_hit_and_miss() -> None:
    g = chain(Runs(), CachePolicy()).build()
    assert await _lookups(g, Counted()) == [("a", False)]
    assert await _lookups(g, Counted()) == [("a", True)]


async def test_ttl_expiry_with_a_fake_clock() -> None:
    clock, runs = Clock(), Runs()
    g = chain(runs, CachePolicy(ttl=60, store=MemoryCache(clock))).build()
    await g.run(Counted())
    clock.now += 60  # the last instant it is valid
    await g.run(Counted())
    assert runs.calls["a", 0] == 1
    clock.now += 0.5
    await g.run(Counted())
    assert runs.calls["a", 0] == 2  # expired: ran again, and cached again
    await g.run(Counted())
    assert runs.calls["a", 0] == 2


async def test_a_changed_graph_does_not_read_the_old_cache() -> None:
    shared, runs = MemoryCache(), Runs()
    policy: CachePolicy[Counted] = CachePolicy(store=shared)
    await chain(runs, policy).build().run(Counted())
    await chain(runs, policy).build().run(Counted())
    assert runs.calls["a", 0] == 1  # same fingerprint: shared
    changed = chain(runs, policy).build(version="2")
    await changed.run(Counted())
    assert runs.calls["a", 0] == 2
    assert len(shared) == 2


async def test_a_failed_node_is_not_cached() -> None:
    calls = 0

    @handler(name="f")
    async def flaky(s: Counted) -> Result[Counted, str]:
        nonlocal calls
        calls += 1
        if calls == 1:
            return Failure("boom")
        return Success(attrs.evolve(s, count=s.count + 1))

    g = (
        graph.builder(Counted)
        .node("f", flaky, cache=CachePolicy())
        .entry("f")
        .edge("f", END)
        .build()
    )
    first = await g.run(Counted())
    assert type(first) is not Success
    assert (await g.run(Counted())).unwrap().state.count == 1
    assert (await g.run(Counted())).unwrap().state.count == 1
    assert calls == 2


async def test_a_key_that_is_not_json_is_a_typed_failure() -> None:
    policy: CachePolicy[Counted] = CachePolicy(key=lambda s: object())
    out = await chain(Runs(), policy).build().run(Counted())
    failure = out.failure()
    assert isinstance(failure, InvalidState)
    assert failure.node == "a"
    assert "object at" not in str(failure)  # the value is never echoed


def test_ttl_must_be_positive() -> None:
    with pytest.raises(ValueError, match="ttl"):
        CachePolicy(ttl=0)


async def test_crash_between_cache_write_and_commit() -> None:
    runs, store = Runs(), stores.MemoryStore()
    g = chain(runs, CachePolicy()).build()
    with pytest.raises(Crash):  # commit 1 is admission, 2 is a's record
        await g.run(Counted(), store=CrashOnCommit(store, 2), thread_id="t")
    assert runs.calls["a", 0] == 1  # a ran and its output is cached
    done = (await g.resume(store, "t")).unwrap()
    assert runs.calls["a", 0] == 1  # resumed: a hit, not a second run
    assert list(done.state.trail) == ["a", "b"]
    assert [r.version for r in await store.records("t")] == [0, 1, 2]
    assert done.version == 2  # a's hit committed its record (version 1)


async def test_the_node_span_says_hit_or_miss() -> None:
    from opentelemetry.sdk.trace import TracerProvider  # noqa: PLC0415
    from opentelemetry.sdk.trace.export import (  # noqa: PLC0415
        SimpleSpanProcessor,
    )
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: PLC0415
        InMemorySpanExporter,
    )

    from pipeline.runs import scope  # noqa: PLC0415

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    g = chain(Runs(), CachePolicy()).build()
    try:
        with scope(tracer_provider=provider, name="s"):
            await g.run(Counted())
            await g.run(Counted())
    finally:
        provider.shutdown()
    marked = [
        (s.name, (s.attributes or {}).get("pipeline.cache.hit"))
        for s in exporter.get_finished_spans()
        if s.name.startswith("node ")
    ]
    assert marked == [
        ("node a", False),
        ("node b", None),
        ("node a", True),
        ("node b", None),
    ]


@pytest.mark.parametrize("ttl", [-7.25, float("nan"), "3600", True])
def test_a_ttl_that_cannot_last_is_refused_by_name_never_shown(
    ttl: object,
) -> None:
    """``CachePolicy(ttl=...)`` and ``models.cached(ttl=...)`` refuse a
    length that is not a number of seconds above 0 alike: a
    ``ConstructionError`` naming the argument, never showing its value."""
    from pipeline.errors import ConstructionError  # noqa: PLC0415
    from pipeline.models import cached  # noqa: PLC0415
    from pipeline.testing import ScriptedModel  # noqa: PLC0415

    for make, name in (
        (lambda: CachePolicy(ttl=ttl), "CachePolicy(ttl=...)"),  # type: ignore[arg-type]
        (lambda: cached(ScriptedModel(), ttl=ttl), "cached(ttl=...)"),  # type: ignore[arg-type]
    ):
        with pytest.raises(ConstructionError) as err:
            make()
        assert str(err.value).startswith(f"{name} must be ")
        assert repr(ttl) not in str(err.value)
