"""A research swarm: a lead hands a question to a researcher, who searches
a small library and hands the notes to a writer, who answers.

Each agent sees the conversation through its own history policy: the lead
and the researcher see only the current question's turn (``window(1)``),
the writer as much of the end as 1,500 tokens hold; the swarm keeps the
whole conversation.  Run it with the command line (from this directory)::

    pipeline run research:team --input '"How do anyio and trio differ?"'

or as a script: ``python research.py "your question"``.  With
``OPENAI_API_KEY`` or ``ANTHROPIC_API_KEY`` set the agents ask that
provider; without one they replay a script, so the example runs offline.
"""

from __future__ import annotations

import sys

import anyio
import attrs

from returns.result import Failure, Result, Success

from pipeline import Agent, Context, Graph, Message, Swarm, graph, swarm, tool
from pipeline.history import token_budget, window
from pipeline.models import Model, from_env
from pipeline.swarm import SwarmFailure, SwarmState
from pipeline.testing import Reply, ScriptedModel


LIBRARY = {
    "anyio": "AnyIO runs structured-concurrency code on asyncio or trio: "
    "task groups, cancel scopes, memory object streams.",
    "trio": "Trio is an async library built on structured concurrency: "
    "nurseries, cancel scopes, checkpoints at every await.",
    "asyncio": "asyncio is the standard library's event loop; since 3.11 it "
    "has TaskGroup and timeout(), after trio's nurseries.",
}


@tool
async def search(query: str) -> str:
    """Search the library.

    Args:
        query: words to look for, such as a library's name
    """
    words = query.lower().split()
    found = [text for key, text in LIBRARY.items() if key in words]
    return "\n".join(found) or "nothing found"


LEAD = (
    "You lead a research team. Do not answer yourself: hand the question to "
    "the researcher with transfer_to_researcher."
)
RESEARCHER = (
    "Search the library for each library the question names, then hand the "
    "conversation to the writer with transfer_to_writer."
)
WRITER = "Answer the user's question in three sentences from the notes."


def scripted_models() -> tuple[Model, Model, Model]:
    """The offline script: lead -> researcher (one search) -> writer."""
    lead = ScriptedModel(
        Reply.tool_call("transfer_to_researcher"), name="lead", cycle=True
    )
    researcher = ScriptedModel(
        Reply.tool_call("search", {"query": "anyio trio"}),
        Reply.tool_call("transfer_to_writer"),
        name="researcher",
        cycle=True,
    )
    writer = ScriptedModel(
        Reply.text(
            "AnyIO is a layer that runs the same structured-concurrency code "
            "on asyncio or trio. Trio is an event loop of its own, built on "
            "nurseries and cancel scopes. Use anyio to support both."
        ),
        name="writer",
        cycle=True,
    )
    return lead, researcher, writer


def build(
    lead_model: Model, researcher_model: Model, writer_model: Model
) -> Swarm[None]:
    """The team over these three models."""
    return (
        swarm.builder()
        .agent(
            "lead",
            Agent("lead", lead_model, instructions=LEAD),
            description="Plans the research",
            handoffs=["researcher"],
            history=window(1),
        )
        .agent(
            "researcher",
            Agent(
                "researcher",
                researcher_model,
                instructions=RESEARCHER,
                tools=[search],
            ),
            description="Searches the library",
            handoffs=["writer"],
            history=window(1),
        )
        .agent(
            "writer",
            Agent("writer", writer_model, instructions=WRITER),
            description="Writes the answer from the notes",
            handoffs=["lead"],
            history=token_budget(1500),
        )
        .entry("lead")
        .limits(swarm.SwarmLimits(max_handoffs=4))
        .build(name="research")
    )


team = build(*(from_env(fallback=m) for m in scripted_models()))
"""The team, on a provider's model when an API key is set."""


@attrs.frozen
class Report:
    """A graph's state around the team: the question, then who answered
    it, after how many handoffs, and the answer."""

    question: str
    answer: str = ""
    answered_by: str = ""
    handoffs: int = 0


@attrs.frozen
class NotWritten:
    """The team stopped with someone other than the writer holding the
    conversation (the answer was not written from the notes)."""

    active: str


def filed(report: Report, end: SwarmState[None]) -> Result[Report, NotWritten]:
    """The team's typed final state into the report; only the writer's
    answer counts."""
    if end.active != "writer":
        return Failure(NotWritten(end.active))
    return Success(
        attrs.evolve(
            report,
            answer=end.messages[-1].content,
            answered_by=end.active,
            handoffs=end.handoffs,
        )
    )


def reporting(
    researchers: Swarm[None],
) -> Graph[Report, SwarmFailure | NotWritten]:
    """A graph over reports with the team as its node: the node hands
    ``filed`` the swarm's final state, and its failure is the graph's."""
    node = researchers.as_node(
        context=lambda r: Context.of(Message.user(r.question)), update=filed
    )
    return (
        graph.builder(Report)
        .node("research", node)
        .entry("research")
        .edge("research", graph.END)
        .build(name="report")
    )


report = reporting(team)
"""The team inside a graph over :class:`Report` states."""


async def main(question: str) -> None:
    """Ask *question*; print who held the conversation and the answer."""
    snap = (await team.run(Context.of(Message.user(question)))).unwrap()
    print(f"{snap.state.handoffs} handoffs, answered by {snap.state.active}")
    print(snap.state.messages[-1].content)


if __name__ == "__main__":
    anyio.run(main, " ".join(sys.argv[1:]) or "How do anyio and trio differ?")
