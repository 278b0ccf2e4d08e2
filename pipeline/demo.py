"""An offline demo: a support-desk pipeline built from the algebra.

Run with ``python -m pipeline demo``.  No network, no model: the "agents"
are small deterministic handlers, so the output is the same every run.
"""

from __future__ import annotations

import tempfile

from pathlib import Path

import anyio
import attrs

from pyrsistent import PVector, pvector
from returns.result import Failure, Result, Success

from . import (
    Context,
    Handler,
    Message,
    first,
    handler,
    loop,
    metadata_equals,
    must,
    safe,
    switch,
)
from .failures import Raised
from .middleware import retry, timeout


@handler
async def classify(ctx: Context) -> Result[Context, str]:
    """Tag the request with a topic from its wording."""
    text = ctx.last.content.lower() if ctx.last else ""
    topic = "billing" if "invoice" in text or "charge" in text else "tech"
    return Success(ctx.set("topic", topic))


def says(name: str, text: str) -> Handler[Context, Context, str]:
    """A handler that answers with fixed text, attributed to *name*."""

    @handler(name=name)
    async def run(ctx: Context) -> Result[Context, str]:
        return Success(ctx.append(Message.assistant(text, name=name)))

    return run


@handler
async def sentiment(ctx: Context) -> Result[Context, str]:
    """Record a crude sentiment score in the metadata."""
    text = ctx.messages[0].content.lower() if ctx.messages else ""
    return Success(ctx.set("upset", "twice" in text or "!" in text))


@handler
async def cache_lookup(_ctx: Context) -> Result[Context, str]:
    """A cache that always misses: the race falls through to the next."""
    return Failure("cache miss")


@safe(ValueError)
async def parse_amount(text: str) -> float:
    """Parse an amount of money; bad input becomes a Failure value."""
    return float(text.strip().lstrip("$"))


def build() -> Handler[Context, Context, object]:
    """Compose the demo pipeline with operators and combinators."""
    billing = says("billing", "I have refunded the duplicate charge.")
    tech = says("tech", "Please restart the router.")
    route = switch(
        (metadata_equals("topic", "billing"), billing), default=tech
    )
    answer = first(
        cache_lookup, route.use(retry(2), timeout(5)), name="answer"
    )
    polish = loop(
        says("editor", "(edited for tone)"),
        while_=lambda ctx, i: bool(ctx.metadata.get("upset")) and i < 1,
        limit=3,
        name="polish",
    )
    return classify >> must(sentiment, answer) >> polish


@attrs.frozen
class Ticket:
    """The graph demo's typed state."""

    messages: PVector[Message] = attrs.field(factory=pvector)
    topic: str = ""
    approved: bool = False


async def graph_demo() -> None:
    """A checkpointed graph: agent node, approval gate, crash-free resume."""
    from . import graph  # noqa: PLC0415  # graphs load on first use
    from .agents import Agent, AgentRun  # noqa: PLC0415
    from .fold import Continue, Decision, Interrupt, Transition  # noqa: PLC0415
    from .graph import END  # noqa: PLC0415
    from .stores import SQLiteStore  # noqa: PLC0415
    from .testing import Reply, ScriptedModel  # noqa: PLC0415

    model = ScriptedModel(
        Reply.tool_call("write_state", {"topic": "billing"}),
        Reply.text("This is a billing question; a refund needs approval."),
    )

    def see(t: Ticket) -> PVector[Message]:
        return t.messages

    def keep(t: Ticket, run: AgentRun) -> Ticket:
        return attrs.evolve(t, messages=t.messages.extend(run.messages))

    @handler
    async def refund(t: Ticket) -> Result[Ticket, str]:
        note = Message.assistant("Refund issued.", name="refund")
        return Success(
            attrs.evolve(t, messages=t.messages.append(note), approved=True)
        )

    g = (
        graph.builder(Ticket)
        .agent(
            "triage",
            Agent("triage", model),
            messages=see,
            update=keep,
            writable=["topic"],
        )
        .node("refund", refund)
        .entry("triage")
        .edge("triage", "refund")
        .edge("refund", END)
        .build()
    )

    async def approval(t: Transition[Ticket]) -> Decision:
        if t.targets == ("refund",) and t.answer is None:
            return Interrupt("Issue the refund?")
        return Continue()

    print("\ngraph (Mermaid):\n" + g.mermaid())
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "runs.db"
        start = Ticket(pvector([Message.user("I was charged twice")]))
        async with SQLiteStore(path) as store:
            paused = (
                await g.run(
                    start, store=store, thread_id="ticket-1", gates=[approval]
                )
            ).unwrap()
            print(
                f"paused at v{paused.version}: {paused.pending.question if paused.pending else ''}"
            )
        # A new store object on the same file: as if the process restarted.
        async with SQLiteStore(path) as store:
            done = (
                await g.resume(
                    store, "ticket-1", answer="yes", gates=[approval]
                )
            ).unwrap()
            history = (await g.history(store, "ticket-1")).unwrap()
            sizes = [len(r.data) for r in await store.records("ticket-1")]
        print(
            f"resumed to {done.status.value}: topic={done.state.topic!r}, approved={done.state.approved}"
        )
        for m in done.state.messages:
            print(
                f"  [{m.role.value}{':' + m.name if m.name else ''}] {m.content}"
            )
        print(
            "checkpoints:",
            [
                f"v{s.version}:{'+'.join(s.next)} (turn)"
                if s.progress
                else f"v{s.version}:{s.node}"
                for s in history
            ],
            "bytes:",
            sizes,
        )


async def main() -> None:
    """Run the pipeline on two requests and print what happened."""
    pipeline = build()
    print("pipeline:", repr(pipeline))
    for request in (
        "I was charged twice for invoice 42!",
        "My wifi keeps dropping",
    ):
        out = await pipeline(Context.of(Message.user(request)))
        ctx = out.unwrap()
        print(f"\n> {request}")
        for msg in ctx.messages[1:]:
            print(f"  [{msg.name}] {msg.content}")
        print("  metadata:", dict(ctx.metadata))
    bad = await parse_amount("12,50")
    err: Raised[ValueError] = bad.failure()
    print("\nparse_amount('12,50') ->", err)
    await graph_demo()


def run() -> None:
    """Entry point for ``python -m pipeline demo``."""
    anyio.run(main)
