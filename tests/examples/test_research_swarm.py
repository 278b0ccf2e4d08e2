"""examples/research_swarm: handoffs, the allow-list, history policies."""

from __future__ import annotations

import json

from pathlib import Path
from typing import Any

import pytest

from pipeline import Context, Message, Role
from pipeline.cli import ExitCode
from pipeline.testing import Reply, ScriptedModel
from tests.cli.runner import cli
from tests.examples.loader import EXAMPLES, load, offline_env


research: Any = load("research_swarm", "research")


def scripted() -> tuple[ScriptedModel, ScriptedModel, ScriptedModel]:
    """Strict scripts for one question (the researcher first tries a
    transfer the allow-list refuses)."""
    lead = ScriptedModel(Reply.tool_call("transfer_to_researcher"))
    researcher = ScriptedModel(
        Reply.tool_call("transfer_to_lead"),  # not allowed: refused
        Reply.tool_call("search", {"query": "trio"}),
        Reply.tool_call("transfer_to_writer"),
    )
    writer = ScriptedModel(Reply.text("Trio has nurseries."))
    return lead, researcher, writer


EARLIER = (
    Message.user("What is asyncio?"),
    Message.assistant("The standard library's event loop.", name="writer"),
)


async def test_handoffs_and_history_policies() -> None:
    """lead -> researcher -> writer; the window hides the earlier turn from
    the lead and the researcher, the writer's budget shows it, the swarm
    keeps everything."""
    lead, researcher, writer = scripted()
    team = research.build(lead, researcher, writer)
    ctx = Context.of(*EARLIER, Message.user("And trio?"))
    snap = (await team.run(ctx)).unwrap()
    assert snap.state.handoffs == 2
    assert snap.state.active == "writer"
    assert snap.state.messages[-1].content == "Trio has nurseries."
    # The swarm keeps the whole conversation, the earlier turn included.
    assert tuple(snap.state.messages[:2]) == EARLIER

    def seen(model: ScriptedModel, call: int) -> list[str]:
        return [
            m.content
            for m in model.requests[call].messages
            if m.role is Role.USER
        ]

    assert seen(lead, 0) == ["And trio?"]
    assert seen(researcher, 0) == ["And trio?"]
    assert seen(writer, 0) == ["What is asyncio?", "And trio?"]
    refused = researcher.requests[1].messages[-1]
    assert refused.role is Role.TOOL
    assert refused.content.startswith("error:")
    found = researcher.requests[2].messages[-1]
    assert found.content == research.LIBRARY["trio"]
    for model in (lead, researcher, writer):
        model.assert_consumed()


async def test_search_tool() -> None:
    """The researcher's tool finds the libraries a query names."""
    text, failed = await research.search.call('{"query": "anyio asyncio"}')
    assert not failed
    assert (
        text == research.LIBRARY["anyio"] + "\n" + research.LIBRARY["asyncio"]
    )
    assert await research.search.call('{"query": "curio"}') == (
        "nothing found",
        False,
    )


@pytest.mark.slow
def test_command_line_events(tmp_path: Path) -> None:
    """The README's command: --json shows both handoffs, then the answer."""
    ran = cli(
        "run",
        "research:team",
        "--input",
        '"How do anyio and trio differ?"',
        "--store",
        str(tmp_path / "r.sqlite3"),
        "--json",
        cwd=EXAMPLES / "research_swarm",
        env=offline_env(),
    )
    assert ran.returncode == ExitCode.OK, ran.stderr
    events = [json.loads(line) for line in ran.stdout.splitlines()]
    handoffs = [
        (e["source"], e["target"], e["count"])
        for e in events
        if e["type"] == "handoff"
    ]
    assert handoffs == [("lead", "researcher", 1), ("researcher", "writer", 2)]
    assert events[-1]["status"] == "done"
    assert events[-1]["value"]["active"] == "writer"


async def test_the_team_as_a_node_fills_a_typed_report() -> None:
    """report: the swarm as a graph node; update gets its final state (who
    answered, after how many handoffs); a team that ends elsewhere than the
    writer is the graph's typed failure."""
    lead, researcher, writer = scripted()
    graph = research.reporting(research.build(lead, researcher, writer))
    done = (await graph.run(research.Report("And trio?"))).unwrap().state
    assert (done.answer, done.answered_by, done.handoffs) == (
        "Trio has nurseries.",
        "writer",
        2,
    )
    lead = ScriptedModel(Reply.text("I will not hand this over."))
    stubborn = research.reporting(research.build(lead, *scripted()[1:]))
    failed = await stubborn.run(research.Report("And trio?"))
    assert failed.failure() == research.NotWritten("lead")
