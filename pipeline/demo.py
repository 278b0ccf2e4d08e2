"""An offline demo: a support-desk pipeline built from the algebra.

Run with ``python -m pipeline demo``.  No network, no model: the "agents"
are small deterministic handlers, so the output is the same every run.
"""

from __future__ import annotations

import anyio

from returns.result import Failure, Result, Success

from . import (
    Context,
    Handler,
    Message,
    first,
    handler,
    loop,
    metadata_equals,
    safe,
    switch,
)
from .errors import Raised
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
    return classify >> (sentiment & answer) >> polish


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


def run() -> None:
    """Entry point for ``python -m pipeline demo``."""
    anyio.run(main)
