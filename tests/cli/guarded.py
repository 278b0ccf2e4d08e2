"""Targets for the CLI's guard tests (``tests.cli.guarded:NAME``): secrets
in tool arguments and graph state, gates and nodes that read typed
answers."""

from __future__ import annotations

import attrs

from returns.result import Result, Success

from pipeline import Agent, Message, Secret, handler, interrupt, tool
from pipeline import graph as g
from pipeline.fold import Continue, Decision, Interrupt, Stop, Transition
from pipeline.graph import END
from pipeline.testing import Reply, ScriptedModel


GUARDED = "tests.cli.guarded"
CANARY = "canary-cli-4e1d-do-not-leak"


@tool
async def unlock(pin: Secret[str]) -> str:
    """Unlock with a numeric PIN: ``int()`` quotes a bad one in its error."""
    return "open" if int(pin.reveal()) == 1234 else "shut"


@attrs.frozen
class Door:
    """What the locksmith said."""

    note: str = ""


locksmith = Agent(
    "locksmith",
    ScriptedModel(
        Reply.tool_call("unlock", {"pin": CANARY}),
        Reply.text("Could not unlock."),
        cycle=True,
    ),
    tools=[unlock],
)
door = (
    g.builder(Door)
    .agent(
        "talk",
        locksmith,
        messages=lambda _: [Message.user("unlock it")],
        update=lambda d, run: attrs.evolve(d, note=run.text or ""),
    )
    .entry("talk")
    .edge("talk", END)
    .build()
)
"""A graph whose agent's tool raises an error quoting its secret PIN."""


@attrs.frozen
class Order:
    """An order that needs a typed approval."""

    item: str
    quantity: int = 0


async def how_many(t: Transition[Order]) -> Decision:
    """Asks for a quantity, read with ``answer_as(int)``."""
    if t.targets != ("ship",):
        return Continue()
    quantity = t.answer_as(int)
    if quantity is None:
        return Interrupt("how many?")
    return Continue() if quantity > 0 else Stop("none wanted")


@handler
async def ship(o: Order) -> Result[Order, str]:
    return Success(attrs.evolve(o, item=o.item.strip()))


orders = (
    g.builder(Order)
    .node("ship", ship)
    .entry("ship")
    .edge("ship", END)
    .gate(how_many)
    .build()
)
"""(a quantity, typed) -> ship."""


@attrs.frozen
class Approval:
    """What ``refunds`` asks for (with ``pipeline.interrupt``)."""

    approved: bool
    note: str = ""


@attrs.frozen
class Refund:
    """A refund that needs a typed approval from inside its node."""

    amount: int
    verdict: str = ""


@handler
async def decide(r: Refund) -> Result[Refund, str]:
    answer = await interrupt(
        "refund this?", Approval, payload={"amount": r.amount}
    )
    word = "paid" if answer.approved else "declined"
    return Success(attrs.evolve(r, verdict=f"{word}: {answer.note}"))


refunds = (
    g.builder(Refund)
    .node("decide", decide)
    .entry("decide")
    .edge("decide", END)
    .build()
)
"""A node that asks (an Approval) -> END."""


@attrs.frozen
class Release:
    """A release a typed gate question approves (its answer applied)."""

    version: str
    approved_by: str = ""


def approved_by(r: Release, a: Approval) -> Release:
    return attrs.evolve(r, approved_by=a.note if a.approved else "")


async def sign_off(t: Transition[Release]) -> Decision:
    del t
    return Interrupt("release it?", Approval, apply=approved_by)


@handler
async def release(r: Release) -> Result[Release, str]:
    return Success(r)


releases = (
    g.builder(Release)
    .node("release", release)
    .entry("release")
    .edge("release", END)
    .gate(sign_off, before="release")
    .build()
)
"""(a typed Approval, applied to the state) -> release."""


@attrs.frozen
class Login:
    """A state holding a secret."""

    token: Secret[str]
    length: int = 0


@handler
async def measure(s: Login) -> Result[Login, str]:
    return Success(attrs.evolve(s, length=len(s.token.reveal())))


login = (
    g.builder(Login)
    .node("measure", measure)
    .entry("measure")
    .edge("measure", END)
    .build()
)
"""A graph whose state has a secret field."""

VAULT = {"crm": CANARY}
"""A resolver for ``--resolver``: references to values."""


def vault(ref: str) -> str:
    """A resolver function (raises KeyError for a reference it lacks)."""
    return VAULT[ref]


not_a_resolver = 3
