"""Drawings: Graphviz SVG that names every node, case, route and gate."""

from __future__ import annotations

from xml.etree import ElementTree as ET

import pytest

from returns.result import Success

from pipeline import Agent, Graph, graph, switch, when
from pipeline import swarm as swarms
from pipeline.errors import ConstructionError
from pipeline.fold import Continue, Decision, Interrupt, Transition
from pipeline.graph import END
from pipeline.testing import ScriptedModel
from tests.graph.helpers import Counted, step


SVG = "{http://www.w3.org/2000/svg}"


def texts(svg: str) -> list[str]:
    """Every text of *svg*, once it parses as XML (our own renderer's)."""
    root = ET.fromstring(svg)  # noqa: S314  # dot's output
    assert root.tag == f"{SVG}svg"
    return [t.text or "" for t in root.iter(f"{SVG}text")]


async def approve(t: Transition[Counted]) -> Decision:
    """Ask before the gated node."""
    return Continue() if t.answer is not None else Interrupt("go?")


def _odd(s: Counted) -> bool:
    return s.count % 2 == 1


def desk() -> Graph[Counted, object]:
    """Every drawable shape: a switch node, a route, a fan-out, a gate."""
    answer = switch(
        (when(_odd, name="odd"), step("oddly")),
        default=step("evenly"),
        name="answer",
    )

    def pick(s: Counted) -> str:
        return "fan" if s.count < 5 else END

    return (
        graph.builder(Counted)
        .node("triage", step("triage"))
        .node("answer", answer)
        .node("fan", step("fan"))
        .node("left", step("left"))
        .node("right", step("right"))
        .node("send", step("send"))
        .entry("triage")
        .edge("triage", "answer")
        .route("answer", pick, to=["fan", END])
        .fan_out("fan", ["left", "right"], join="send")
        .edge("send", END)
        .gate(approve, before="send")
        .build(name="desk")
    )


def test_svg_names_every_node_case_route_and_gate() -> None:
    words = texts(desk().draw())
    for name in ("triage", "answer", "fan", "left", "right", "send"):
        assert name in words
    # The switch opens into its cases, each edge labelled by its condition.
    for label in ("oddly", "evenly", "odd", "default", "answer (switch)"):
        assert label in words
    # The route: its router and an edge per choice; the fan-out and join.
    assert "pick?" in words
    assert "end" in words
    assert words.count("fan-out") == 2
    assert words.count("join") == 2
    # The gate stands before send, with its two exits.
    assert "gate: approve" in words
    assert {"go on", "stop"} <= set(words)


def test_mermaid_shows_switch_cases_routes_and_gates() -> None:
    """The Mermaid text (``pipeline draw``'s default) draws what the SVG
    draws: the switch's labelled cases, each route's target, the gate in
    front of its node with its two exits."""
    text = desk().mermaid()
    assert 'n_answer{"answer (switch)"}' in text
    assert 'n_answer -- "odd" --> n_answer_c0' in text
    assert 'n_answer -- "default" --> n_answer_c1' in text
    assert 'n_answer_c0["oddly"]' in text
    assert 'n_answer_out -. "fan" .-> n_fan' in text
    assert 'n_answer_out -. "end" .-> END' in text
    assert 'g0_n_send{{"gate: approve"}}' in text
    assert 'g0_n_send -- "go on" --> n_send' in text
    assert 'g0_n_send -. "stop" .-> END' in text
    # Into send only through its gate: the join goes to the gate.
    assert "n_left --> g0_n_send" in text
    assert "--> n_send" not in text.replace('"go on" --> n_send', "")


def test_dot_puts_the_gate_between_the_join_and_its_node() -> None:
    source = desk().dot()
    assert "n3 -> g0_n5" in source  # left -> gate (join)
    assert "g0_n5 -> n5" in source  # gate -> send
    assert "-> n5 [" not in source.replace("g0_n5 -> n5 [", "")


def test_highlight_marks_one_node_and_refuses_others() -> None:
    g = desk()
    assert "penwidth=3" not in g.dot()
    marked = g.dot(highlight="send")
    assert marked.count("penwidth=3") == 1
    assert 'n5 [label="send", fillcolor' in marked
    assert "send" in texts(g.draw(highlight="send"))
    with pytest.raises(ValueError, match="no node named 'nowhere'"):
        g.draw(highlight="nowhere")


def test_jupyter_shows_the_svg() -> None:
    g = desk()
    shown = g._repr_svg_()
    assert shown is not None
    assert "triage" in texts(shown)


def test_a_gate_without_before_is_noted_at_the_start() -> None:
    g = (
        graph.builder(Counted)
        .node("a", step("a"))
        .entry("a")
        .edge("a", END)
        .gate(approve)
        .build()
    )
    assert "gates on every step: approve" in texts(g.draw())


def test_names_are_quoted() -> None:
    g = (
        graph.builder(Counted)
        .node('say "hi" \\ there', step("q"))
        .entry('say "hi" \\ there')
        .edge('say "hi" \\ there', END)
        .build()
    )
    assert 'say "hi" \\ there' in texts(g.draw())


def test_before_names_a_node() -> None:
    b = graph.builder(Counted).node("a", step("a")).entry("a").edge("a", END)
    with pytest.raises(ConstructionError, match="'b'"):
        b.gate(approve, before="b").build()
    with pytest.raises(ConstructionError, match="node name"):
        b.gate(approve, before=[])


async def test_a_gate_before_a_node_is_asked_only_there() -> None:
    asked: list[tuple[str, ...]] = []

    async def seen(t: Transition[Counted]) -> Decision:
        asked.append(t.targets)
        return Continue()

    g = (
        graph.builder(Counted)
        .node("a", step("a"))
        .node("b", step("b"))
        .entry("a")
        .edge("a", "b")
        .edge("b", END)
        .gate(seen, before="b")
        .build()
    )
    out = await g.run(Counted())
    assert type(out) is Success
    assert out.unwrap().state.trail == ["a", "b"]
    assert asked == [("b",)]


def test_swarm_draws_agents_handoffs_and_gates() -> None:
    async def check(t: Transition[object]) -> Decision:
        return Continue()

    team = (
        swarms.builder()
        .agent(
            "triage",
            Agent("triage", ScriptedModel()),
            handoffs=["billing", "tech"],
        )
        .agent("billing", Agent("billing", ScriptedModel()), handoffs=["tech"])
        .agent("tech", Agent("tech", ScriptedModel()))
        .entry("triage")
        .before_handoff(check)
        .build()
    )
    svg = team.draw(highlight="tech")
    words = texts(svg)
    for name in ("triage", "billing", "tech"):
        assert name in words
    for to in ("billing", "tech"):
        assert f"transfer_to_{to}" in words
    assert "(gate: check)" in words
    assert words.count("answers") == 3
    assert team._repr_svg_() is not None
    with pytest.raises(ValueError, match="no node named 'x'"):
        team.dot(highlight="x")
