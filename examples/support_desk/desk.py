"""A support desk: an agent triages each ticket, a switch picks who
answers, a human approves billing replies, and SQLite keeps every step.

Run it with the command line (from this directory)::

    pipeline run desk:graph --input '{"text": "I was charged twice"}'
    pipeline answer THREAD yes

or as a script: ``python desk.py``.  With ``OPENAI_API_KEY`` or
``ANTHROPIC_API_KEY`` set, the agents ask that provider; without one they
replay the scripted answers below, so the example runs offline.
"""

from __future__ import annotations

import sys
import tempfile

from pathlib import Path
from typing import Never

import anyio
import attrs

from returns.result import Result, Success

from pipeline import Agent, Graph, Handler, Message, handler, switch, when
from pipeline import graph as g
from pipeline.agents import AgentError, AgentRun
from pipeline.failures import ConditionError
from pipeline.fold import Continue, Decision, Interrupt, Stop, Transition
from pipeline.graph import END
from pipeline.models import Model, from_env
from pipeline.stores import SQLiteStore
from pipeline.testing import Reply, ScriptedModel


@attrs.frozen
class Ticket:
    """One customer ticket, as it moves through the desk."""

    text: str
    category: str = ""
    reply: str = ""
    sent: bool = False


TRIAGE = (
    "Classify the customer's ticket. Answer with one word: billing, tech "
    "or other."
)
CATEGORIES = ("billing", "tech", "other")
TEAM = (
    "You are the {team} team. Answer the customer's ticket in two sentences."
)


def scripted_models() -> tuple[Model, Model, Model]:
    """The offline script: triage files the ticket under billing."""
    triage = ScriptedModel(Reply.text("billing"), name="triage", cycle=True)
    billing = ScriptedModel(
        Reply.text("We refunded the second charge. Sorry for the trouble!"),
        name="billing",
        cycle=True,
    )
    tech = ScriptedModel(
        Reply.text("Restart the router, then try again."),
        name="tech",
        cycle=True,
    )
    return triage, billing, tech


def _team(name: str, model: Model) -> Handler[Ticket, Ticket, AgentError]:
    """A team's agent as a node: it writes the reply."""
    return g.agent_node(
        Agent(name, model, instructions=TEAM.format(team=name)),
        messages=lambda t: [Message.user(t.text)],
        update=lambda t, run: attrs.evolve(t, reply=run.text),
        name=name,
    )


def filed(t: Ticket, run: AgentRun) -> Ticket:
    """The triage agent's one word as the ticket's category (anything
    else a model might say files it under other)."""
    words = run.text.strip().strip(".").lower().split()
    category = words[0] if words and words[0] in CATEGORIES else "other"
    return attrs.evolve(t, category=category)


@handler
async def general(t: Ticket) -> Result[Ticket, AgentError]:
    """No team matched: a polite holding reply, no model needed."""
    reply = "Thanks for writing; a colleague will get back to you."
    return Success(attrs.evolve(t, reply=reply))


@handler
async def send(t: Ticket) -> Result[Ticket, AgentError]:
    """Send the reply (here: mark it sent)."""
    return Success(attrs.evolve(t, sent=True))


async def approve(t: Transition[Ticket]) -> Decision:
    """Billing replies promise money: a human approves them."""
    if t.targets != ("send",) or t.state.category != "billing":
        return Continue()
    if t.answer is None:
        return Interrupt(f"send this billing reply? {t.state.reply!r}")
    return Continue() if t.answer_as(str) == "yes" else Stop("declined")


def build(
    triage_model: Model, billing_model: Model, tech_model: Model
) -> Graph[Ticket, AgentError | ConditionError[Never]]:
    """The desk's graph over these three models."""
    triage = g.agent_node(
        Agent("triage", triage_model, instructions=TRIAGE),
        messages=lambda t: [Message.user(t.text)],
        update=filed,
        name="triage",
    )
    answer = switch(
        (
            when(lambda t: t.category == "billing", name="billing"),
            _team("billing", billing_model),
        ),
        (
            when(lambda t: t.category == "tech", name="tech"),
            _team("tech", tech_model),
        ),
        default=general,
        name="answer",
    )
    return (
        g.builder(Ticket)
        .node("triage", triage)
        .node("answer", answer)
        .node("send", send)
        .entry("triage")
        .edge("triage", "answer")
        .edge("answer", "send")
        .edge("send", END)
        .gate(approve, before="send")
        .build(name="desk")
    )


graph = build(*(from_env(fallback=m) for m in scripted_models()))
"""The desk, on a provider's model when an API key is set."""


async def main(store_path: Path) -> None:
    """Run a ticket to the approval, answer it, and show the result."""
    async with SQLiteStore(store_path) as store:
        ticket = Ticket("I was charged twice for my subscription")
        paused = (
            await graph.run(ticket, store=store, thread_id="t1")
        ).unwrap()
        assert paused.pending is not None
        print(f"paused at version {paused.version}: {paused.pending.question}")
        done = (await graph.resume(store, "t1", answer="yes")).unwrap()
        print(
            f"{done.status}: sent={done.state.sent} reply={done.state.reply!r}"
        )


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        path = (
            Path(sys.argv[1])
            if len(sys.argv) > 1
            else Path(tmp) / "desk.sqlite3"
        )
        anyio.run(main, path)
