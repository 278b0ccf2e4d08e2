"""examples/support_desk: triage, switch, approval, SQLite resume."""

from __future__ import annotations

import json
import sys

from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

import pytest

from pipeline import Message
from pipeline.agents import AgentRun
from pipeline.cli import ExitCode
from pipeline.fold import Status
from pipeline.stores import SQLiteStore
from pipeline.testing import Reply, ScriptedModel
from tests.cli.runner import cli
from tests.examples.loader import EXAMPLES, load, offline_env


desk: Any = load("support_desk", "desk")


def models(
    category: str,
) -> tuple[ScriptedModel, ScriptedModel, ScriptedModel]:
    """Strict scripts: triage files the ticket under *category*, and only
    that team answers (once)."""
    triage = ScriptedModel(Reply.text(f"{category.title()}."))
    billing = ScriptedModel(
        *([Reply.text("Refunded.")] if category == "billing" else [])
    )
    tech = ScriptedModel(
        *([Reply.text("Restart it.")] if category == "tech" else [])
    )
    return triage, billing, tech


async def test_billing_pauses_for_approval_and_resumes(tmp_path: Path) -> None:
    """A billing reply waits for a human; after a restart (a new store on
    the same file) the answer sends it, and no agent runs twice."""
    triage, billing, tech = models("billing")
    graph = desk.build(triage, billing, tech)
    path = tmp_path / "desk.sqlite3"
    async with SQLiteStore(path) as store:
        paused = (
            await graph.run(
                desk.Ticket("charged twice"), store=store, thread_id="t"
            )
        ).unwrap()
    assert paused.status is Status.INTERRUPTED
    assert paused.state.category == "billing"
    assert paused.state.reply == "Refunded."
    assert paused.pending.question == "send this billing reply? 'Refunded.'"
    async with SQLiteStore(path) as store:  # another process, say
        done = (await graph.resume(store, "t", answer="yes")).unwrap()
    assert done.done
    assert done.state.sent
    for model in (triage, billing, tech):
        model.assert_consumed()  # each call made exactly once


async def test_declined_reply_is_not_sent(tmp_path: Path) -> None:
    """Answering anything but yes stops the run before send."""
    graph = desk.build(*models("billing"))
    async with SQLiteStore(tmp_path / "d.sqlite3") as store:
        await graph.run(desk.Ticket("refund?"), store=store, thread_id="t")
        stopped = (await graph.resume(store, "t", answer="no")).unwrap()
    assert stopped.status is Status.STOPPED
    assert not stopped.state.sent


@pytest.mark.parametrize(
    ("category", "reply"),
    [("tech", "Restart it."), ("other", desk.general.name)],
)
async def test_other_teams_need_no_approval(category: str, reply: str) -> None:
    """The switch picks the team; only billing needs a human."""
    triage, billing, tech = models(category)
    out = await desk.build(triage, billing, tech)(desk.Ticket("help"))
    state = out.unwrap()
    assert state.sent
    assert state.category == category
    if category == "tech":
        assert state.reply == reply
    else:
        assert state.reply.startswith("Thanks for writing")
    for model in (triage, billing, tech):
        model.assert_consumed()


@pytest.mark.slow
def test_command_line(tmp_path: Path) -> None:
    """The README's commands: run pauses, answer sends."""
    where = EXAMPLES / "support_desk"
    store = str(tmp_path / "s.sqlite3")
    env = offline_env()
    ran = cli(
        "run",
        "desk:graph",
        "--input",
        '{"text": "I was charged twice"}',
        "--store",
        store,
        "--thread",
        "t1",
        cwd=where,
        env=env,
    )
    assert ran.returncode == ExitCode.PAUSED, ran.stderr
    assert "send this billing reply?" in ran.stderr
    answered = cli("answer", "t1", "yes", "--store", store, cwd=where, env=env)
    assert answered.returncode == 0, answered.stderr
    assert json.loads(answered.stdout)["sent"] is True


@pytest.mark.slow
def test_script(tmp_path: Path) -> None:
    """python desk.py runs a ticket through approval."""
    import subprocess  # noqa: PLC0415

    done = subprocess.run(  # noqa: S603
        [sys.executable, "desk.py", str(tmp_path / "s.sqlite3")],
        cwd=EXAMPLES / "support_desk",
        env=offline_env(),
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    assert "paused at version" in done.stdout
    assert "done: sent=True" in done.stdout


@pytest.mark.parametrize(
    ("said", "category"),
    [
        ("billing", "billing"),
        ("Tech.", "tech"),
        ("  OTHER  ", "other"),
        ("I think billing", "other"),
        ("", "other"),
    ],
)
def test_filed(said: str, category: str) -> None:
    """Triage's answer files the ticket; anything unexpected is other."""
    run = AgentRun("triage", (Message.assistant(said),))
    assert desk.filed(desk.Ticket("x"), run).category == category


SVG = "{http://www.w3.org/2000/svg}"


def drawn(svg: str) -> tuple[dict[str, str], dict[tuple[str, str], str]]:
    """The drawing as Graphviz laid it out: ``{node id: label}`` and
    ``{(from label, to label): edge label}``, read from the SVG."""
    root = ET.fromstring(svg)  # noqa: S314  # dot's output, not user input
    assert root.tag == f"{SVG}svg"

    def part(kind: str) -> list[tuple[str, str]]:
        out = []
        for g in root.iter(f"{SVG}g"):
            if g.get("class") != kind:
                continue
            title = g.find(f"{SVG}title")
            assert title is not None
            assert title.text is not None
            words = [t.text or "" for t in g.iter(f"{SVG}text")]
            out.append((title.text, " ".join(words)))
        return out

    nodes = dict(part("node"))
    edges: dict[tuple[str, str], str] = {}
    for title, label in part("edge"):
        source, target = title.split("->")
        edges[nodes[source], nodes[target]] = label
    return nodes, edges


def test_drawing_shows_the_switch_the_gate_and_labelled_routes() -> None:
    nodes, edges = drawn(desk.graph.draw())
    # The switch opens into its cases; each edge says which case it is.
    assert "answer (switch)" in desk.graph.draw()
    assert edges["answer", "billing"] == "billing"
    assert edges["answer", "tech"] == "tech"
    assert edges["answer", "general"] == "default"
    # The approval gate stands before send: going on, or stopping there.
    assert "gate: approve" in nodes.values()
    assert edges["gate: approve", "send"] == "go on"
    assert edges["gate: approve", "end"] == "stop"
    # No edge runs straight from the answer to send: the gate is between.
    assert ("answer", "send") not in edges
    assert not any(b == "send" and a != "gate: approve" for a, b in edges)
    assert edges["start", "triage"] == ""
    assert edges["triage", "answer"] == ""
