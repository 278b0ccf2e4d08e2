"""Targets the CLI tests run as ``tests.cli.flows:NAME`` in subprocesses.

Models are scripted (:mod:`pipeline.testing`); each subprocess imports this
module afresh, so every run starts its scripts from the beginning.
"""

from __future__ import annotations

import os

import anyio
import attrs

from returns.result import Result, Success

from pipeline import (
    Agent,
    Context,
    Message,
    Note,
    Usage,
    emit,
    handler,
    interrupt,
    swarm,
    tool,
)
from pipeline import graph as g
from pipeline.fold import Continue, Decision, Interrupt, Stop, Transition
from pipeline.graph import END
from pipeline.testing import Reply, ScriptedModel


@attrs.frozen
class Ticket:
    """A support ticket moving through the desk."""

    text: str
    category: str = ""
    reply: str = ""
    sent: bool = False


@handler
async def classify(t: Ticket) -> Result[Ticket, str]:
    kind = "billing" if "charge" in t.text else "tech"
    return Success(attrs.evolve(t, category=kind))


@handler
async def draft(t: Ticket) -> Result[Ticket, str]:
    return Success(attrs.evolve(t, reply=f"About your {t.category} issue"))


@handler
async def send(t: Ticket) -> Result[Ticket, str]:
    if os.environ.get("FLOWS_BLOCK") == "1":
        await anyio.sleep_forever()  # the pty test presses Ctrl-C here
    return Success(attrs.evolve(t, sent=True))


async def approve(t: Transition[Ticket]) -> Decision:
    """Sending needs a human's yes."""
    if t.targets != ("send",):
        return Continue()
    if t.answer is None:
        return Interrupt("send this reply?")
    return Continue() if t.answer == "yes" else Stop("declined")


line = (
    g.builder(Ticket)
    .node("classify", classify)
    .node("draft", draft)
    .node("send", send)
    .entry("classify")
    .edge("classify", "draft")
    .edge("draft", "send")
    .edge("send", END)
)

desk = line.gate(approve).build()
"""classify -> draft -> (approval) -> send."""

plain = line.build()
"""The desk without approval."""


@handler
async def fail(t: Ticket) -> Result[Ticket, str]:
    return Success(t) if t.text else _refuse()


def _refuse() -> Result[Ticket, str]:
    from returns.result import Failure  # noqa: PLC0415

    return Failure("empty ticket")


failing = (
    g.builder(Ticket)
    .node("fail", fail)
    .entry("fail")
    .edge("fail", END)
    .build()
)


@handler
async def shout(text: str) -> Result[str, str]:
    return Success(text.upper())


@handler
async def explode(text: str) -> Result[str, str]:
    raise ZeroDivisionError(text)


helper = Agent(
    "helper",
    ScriptedModel(
        Reply.text("Restart the router.", usage=Usage(12, 5)),
        chunk=3,
        cycle=True,  # in-process tests run it more than once
    ),
)

dispatcher = Agent(
    "dispatcher",
    ScriptedModel(Reply.tool_call("transfer_to_billing"), Reply.text("?")),
)
billing = Agent(
    "billing",
    ScriptedModel(
        Reply.text("Your refund is on its way.", usage=Usage(20, 7))
    ),
)
team = (
    swarm.builder()
    .agent("dispatcher", dispatcher, handoffs=["billing"])
    .agent("billing", billing, handoffs=["dispatcher"])
    .entry("dispatcher")
    .build()
)

not_a_flow = 42


def context_of(text: str) -> Context:
    """A context of one user message."""
    return Context.of(Message.user(text))


@handler
async def tag(ctx: Context) -> Result[Context, str]:
    """Mark a conversation as seen."""
    return Success(ctx.set("seen", True))


tagged = helper >> tag
"""A handler over contexts that is not an agent: needs --context."""


@handler
async def listing(n: int) -> Result[int, str]:
    """Announce a file name as the OS gives it (not valid UTF-8: a lone
    surrogate)."""
    name = b"report-\xff.txt".decode("utf-8", "surrogateescape")
    await emit(Note("files", f"found {name}"))
    return Success(n + 1)


@tool
async def lookup(customer: str) -> str:
    """Look a customer up."""
    raise KeyError(f"customer {customer}@example.com")


clerk = Agent(
    "clerk",
    ScriptedModel(
        Reply.tool_call("lookup", {"customer": "jane"}), Reply.text("sorry")
    ),
    tools=[lookup],
)


@attrs.frozen
class Pair:
    """Two answers, one per branch."""

    a: int = 0
    b: int = 0


@handler(name="fork_start")
async def fork_start(p: Pair) -> Result[Pair, str]:
    return Success(p)


@handler(name="ask_a")
async def ask_a(p: Pair) -> Result[Pair, str]:
    return Success(attrs.evolve(p, a=await interrupt("a?", int)))


@handler(name="ask_b")
async def ask_b(p: Pair) -> Result[Pair, str]:
    return Success(attrs.evolve(p, b=await interrupt("b?", int)))


two_asks = (
    g.builder(Pair)
    .node("start", fork_start)
    .node("ask_a", ask_a)
    .node("ask_b", ask_b)
    .entry("start")
    .fan_out("start", ["ask_a", "ask_b"], join=END)
    .build()
)
"""Two fan-out branches that each ask: both wait at once."""


@attrs.frozen
class Limit:
    """A limit a human may leave out."""

    limit: int | None = -1


@handler(name="ask_limit")
async def ask_limit(s: Limit) -> Result[Limit, str]:
    return Success(Limit(await interrupt("limit?", int | None)))


optional = (
    g.builder(Limit)
    .node("ask", ask_limit)
    .entry("ask")
    .edge("ask", END)
    .build()
)
"""One question whose answer may be null."""
