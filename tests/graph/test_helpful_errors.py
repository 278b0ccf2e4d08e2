"""Errors that help: what changed, what dangles, where a route could go."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import pytest

from returns.result import Failure

from pipeline import Graph, graph, stores, swarm
from pipeline.errors import ConstructionError, GraphDefects
from pipeline.failures import IncompatibleGraph
from pipeline.graph import END
from tests.graph.helpers import Counted, step


def _chain(*names: str, version: str = "1") -> Graph[Counted, str]:
    b: graph.GraphBuilder[Counted, str] = graph.builder(Counted).entry(
        names[0]
    )
    for name, nxt in zip(names, (*names[1:], END), strict=True):
        b = b.node(name, step(name)).edge(name, nxt)
    return b.build(version=version)


async def test_incompatible_graph_says_what_changed() -> None:
    """Resuming with another shape names the parts that changed."""
    old = _chain("a", "b")
    store = stores.MemoryStore()
    await old.run(
        Counted(),
        store=store,
        thread_id="t",
        limits=graph.GraphLimits(max_steps=1),
    )
    cases = {
        "version": (_chain("a", "b", version="2"), ("version",)),
        "nodes": (_chain("a", "c"), ("edges", "nodes")),
    }
    for new, changed in cases.values():
        out = await new.resume(store, "t")
        assert type(out) is Failure
        err = out.failure()
        assert isinstance(err, IncompatibleGraph)
        assert err.changed == changed
        assert f"({', '.join(changed)} changed)" in str(err)


def test_fingerprint_parts_are_stable_and_separate() -> None:
    """Equal shapes share a fingerprint; each part has its own digest."""
    a, b = _chain("a", "b"), _chain("a", "b", version="2")
    assert a.fingerprint == _chain("a", "b").fingerprint
    assert a.fingerprint.split("/")[0] != b.fingerprint.split("/")[0]
    assert IncompatibleGraph(a.fingerprint, b.fingerprint).changed == (
        "version",
    )
    # A checkpoint from before per-part digests: nothing to compare.
    assert IncompatibleGraph("0123456789abcdef", b.fingerprint).changed == ()


def test_dangling_edge_is_reported_as_such() -> None:
    """An edge to a missing node says so, and is not 'cycles forever'."""
    with pytest.raises(GraphDefects) as info:
        (
            graph.builder(Counted)
            .node("a", step("a"))
            .node("b", step("b"))
            .entry("a")
            .edge("a", "b")
            .edge("b", "ghost")
            .build()
        )
    text = str(info.value)
    assert "unknown node at 'ghost'" in text
    assert "does not exist" in text
    assert "cycles forever" not in text


def test_unreachable_node_hints_at_the_route() -> None:
    """A node only a route could reach: the defect points at to=[...]."""
    with pytest.raises(GraphDefects) as info:
        (
            graph.builder(Counted)
            .node("a", step("a"))
            .node("b", step("b"))
            .node("c", step("c"))
            .entry("a")
            .route("a", lambda s: "c" if s.count else "b", to=["b"])
            .edge("b", END)
            .edge("c", END)
            .build()
        )
    (unreachable,) = [d for d in info.value.defects if d.kind == "unreachable"]
    assert unreachable.node == "c"
    assert "to=[...]" in unreachable.detail


def _router(s: Counted) -> Literal["b", "__end__"]:
    return "b" if s.count < 3 else "__end__"


async def test_a_literal_router_needs_no_to() -> None:
    """A router typed with the Literal of its targets: that is the list."""
    g = (
        graph.builder(Counted)
        .node("a", step("a"))
        .node("b", step("b"))
        .entry("a")
        .edge("a", "b")
        .route("b", _router)
        .build()
    )
    out = await g.run(Counted())
    assert out.unwrap().state.count == 3


def test_to_must_match_the_routers_literal() -> None:
    """to= listing a name the Literal lacks is refused at once (a typo)."""
    b = graph.builder(Counted).node("b", step("b"))
    with pytest.raises(ConstructionError, match=r"only in to=: \['bb'\]"):
        b.route("b", _router, to=["bb", END])
    with pytest.raises(ConstructionError, match="annotate the router"):
        b.route("b", lambda s: "b")


@pytest.mark.parametrize("bad", [True, 2.0, "10", None])
@pytest.mark.parametrize("field", ["max_steps", "max_fanout", "concurrency"])
def test_graph_limits_refuse_what_is_not_an_int(
    field: str, bad: object
) -> None:
    """A bool, a float, a string: a TypeError naming the field and the type
    (never an arithmetic error later, inside a run)."""
    with pytest.raises(
        TypeError,
        match=rf"GraphLimits\.{field} must be an int, not {type(bad).__name__}",
    ):
        graph.GraphLimits(**{field: bad})  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [False, 1.5, "3"])
def test_swarm_limits_refuse_what_is_not_an_int(bad: object) -> None:
    with pytest.raises(
        TypeError,
        match=rf"SwarmLimits\.max_handoffs must be an int, not {type(bad).__name__}",
    ):
        swarm.SwarmLimits(max_handoffs=bad)  # type: ignore[arg-type]


async def test_a_path_for_a_store_or_the_wrong_limits_is_a_clear_type_error(
    tmp_path: Path,
) -> None:
    """``store="runs.db"`` or a swarm's limits given to a graph: one
    TypeError naming the argument, before anything runs (not an
    AttributeError from deep inside the engine)."""
    g = _chain("a", "b")
    path = str(tmp_path / "runs.db")
    with pytest.raises(
        TypeError, match=r"Graph: store= takes a checkpoint store"
    ):
        await g.run(Counted(), store=path)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"store= takes a checkpoint store"):
        await g.resume(path, "t")  # type: ignore[arg-type]
    with pytest.raises(
        TypeError, match=r"Graph: limits= takes GraphLimits, not SwarmLimits"
    ):
        await g.run(Counted(), limits=swarm.SwarmLimits())  # type: ignore[arg-type]
    assert not (tmp_path / "runs.db").exists()
