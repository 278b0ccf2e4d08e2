"""Graph construction: validation reports every defect at once; Mermaid."""

from __future__ import annotations

import pytest

from pipeline import Graph, graph
from pipeline.errors import GraphDefects
from pipeline.graph import END
from tests.graph.helpers import Counted, step


def kinds(exc: GraphDefects) -> set[tuple[str, str]]:
    return {(d.kind, d.node) for d in exc.defects}


def test_all_defects_reported_together() -> None:
    """Unknown, duplicate, unreachable, dead-end and missing-exit at once."""
    b = (
        graph.builder(Counted)
        .node("a", step("a"))
        .node("a", step("a"))
        .node("b", step("b"))
        .node("island", step("island"))
        .node("loop", step("loop"))
        .node("stuck", step("stuck"))
        .entry("a")
        .edge("a", "b")
        .edge("b", "ghost")
        .edge("island", END)
        .route("loop", lambda s: "loop", to=["loop", "b"])
        .edge("ghost2", "a")
    )
    with pytest.raises(GraphDefects) as info:
        b.build()
    found = kinds(info.value)
    assert ("duplicate node", "a") in found
    assert ("unknown node", "ghost") in found
    assert ("unknown node", "ghost2") in found
    assert ("unreachable", "island") in found
    assert ("unreachable", "loop") in found
    assert ("dead end", "stuck") in found
    assert "graph defect" in str(info.value)


def test_missing_entry_and_cycle_without_exit() -> None:
    """No entry is a defect; so is a reachable cycle with no way to END."""
    with pytest.raises(GraphDefects) as info:
        graph.builder(Counted).node("a", step("a")).edge("a", END).build()
    assert ("missing entry", "") in kinds(info.value)
    with pytest.raises(GraphDefects) as info:
        (
            graph.builder(Counted)
            .node("a", step("a"))
            .node("b", step("b"))
            .entry("a")
            .edge("a", "b")
            .edge("b", "a")
            .build()
        )
    assert {("no way out", "a"), ("no way out", "b")} <= kinds(info.value)


def test_fan_out_defects() -> None:
    """Branches may not have their own edges, or exceed the width limit."""
    with pytest.raises(GraphDefects) as info:
        (
            graph.builder(Counted)
            .node("s", step("s"))
            .node("x", step("x"))
            .node("y", step("y"))
            .entry("s")
            .fan_out("s", ["x", "y", "x"], join=END)
            .edge("x", END)
            .limits(graph.GraphLimits(max_fanout=2))
            .build()
        )
    found = kinds(info.value)
    assert ("branch with edges", "x") in found
    assert ("fan-out too wide", "s") in found
    assert ("duplicate branch", "s") in found


def test_several_edges_from_one_node() -> None:
    """A node has one outgoing edge; two is ambiguous."""
    with pytest.raises(GraphDefects) as info:
        (
            graph.builder(Counted)
            .node("a", step("a"))
            .entry("a")
            .edge("a", END)
            .edge("a", END)
            .build()
        )
    assert ("several edges", "a") in kinds(info.value)


def test_fingerprint_tracks_shape_and_version() -> None:
    """Same shape, same fingerprint; a new edge or version changes it."""

    def make(version: str = "1", target: str = END) -> Graph[Counted, str]:
        return (
            graph.builder(Counted)
            .node("a", step("a"))
            .node("b", step("b"))
            .entry("a")
            .edge("a", "b")
            .edge("b", target)
            .build(version=version)
        )

    assert make().fingerprint == make().fingerprint
    assert make().fingerprint != make(version="2").fingerprint


def test_mermaid_draws_every_edge() -> None:
    """The Mermaid export names nodes and edge kinds."""
    g = (
        graph.builder(Counted)
        .node("plan", step("plan"))
        .node("x", step("x"))
        .node("y", step("y"))
        .node("done", step("done"))
        .entry("plan")
        .route("plan", lambda s: "x", to=["x", "done"])
        .fan_out("x", ["y"], join="done")
        .edge("done", END)
        .build()
    )
    text = g.mermaid()
    assert text.startswith("flowchart TD\n")
    assert "START --> n_plan" in text
    assert 'n_plan -. "x" .-> n_x' in text
    assert 'n_plan -. "done" .-> n_done' in text
    assert "n_x ==> n_y" in text
    assert "n_y --> n_done" in text
    assert "n_done --> END" in text
