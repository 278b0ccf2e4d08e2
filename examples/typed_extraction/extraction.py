"""Typed extraction: invoices in plain text become ``Invoice`` values.

An agent answers in the JSON schema derived from the attrs classes below
(``ResponseSchema.of(Invoice)``: every field typed and required, the
currency one of three); its answer is decoded strictly into an ``Invoice``
(``AgentRun.output``), then checked: the line items must add up to the
total.  Every failure is a typed value naming the field, never the text.

Run it with the command line (from this directory)::

    pipeline run extraction:pipeline --input '"ACME Ltd invoice: 2 x widget at 9.50 EUR, total 19.00 EUR"'

or as a script: ``python extraction.py "invoice text"``.  With
``OPENAI_API_KEY`` or ``ANTHROPIC_API_KEY`` set the agent asks that
provider; without one it replays a script, so the example runs offline.
"""

from __future__ import annotations

import sys

from typing import Literal, final

import anyio
import attrs

from returns.pipeline import is_successful
from returns.result import Failure, Result, Success

from pipeline import Agent, Handler, Message, handler
from pipeline.agents import AgentError
from pipeline.failures import InvalidOutput
from pipeline.models import Model, ResponseSchema, from_env
from pipeline.testing import Reply, ScriptedModel


@attrs.frozen
class LineItem:
    """One line of an invoice."""

    description: str
    quantity: int
    unit_price: float


@attrs.frozen
class Invoice:
    """An invoice, as the model must give it."""

    vendor: str
    currency: Literal["EUR", "USD", "GBP"]
    items: tuple[LineItem, ...]
    total: float


@final
@attrs.frozen
class TotalMismatch:
    """The line items do not add up to the invoice's total."""

    total: float
    items_sum: float

    def __str__(self) -> str:
        return (
            f"the items add up to {self.items_sum:.2f}, not {self.total:.2f}"
        )


INSTRUCTIONS = (
    "Extract the invoice from the user's text. Quantities are whole "
    "numbers; prices and the total are numbers in the invoice's currency."
)


def scripted_model() -> Model:
    """The offline script: one invoice from ACME."""
    return ScriptedModel(
        Reply.json(
            {
                "vendor": "ACME Ltd",
                "currency": "EUR",
                "items": [
                    {"description": "widget", "quantity": 2, "unit_price": 9.5}
                ],
                "total": 19.0,
            }
        ),
        name="extractor",
        cycle=True,
    )


def build(
    model: Model,
) -> Handler[str, Invoice, AgentError | InvalidOutput | TotalMismatch]:
    """Text to a checked ``Invoice`` over *model*."""
    agent = Agent(
        "extractor",
        model,
        instructions=INSTRUCTIONS,
        response_schema=ResponseSchema.of(Invoice),
    )

    @handler
    async def extract(
        text: str,
    ) -> Result[Invoice, AgentError | InvalidOutput]:
        run = await agent.run([Message.user(text)])
        if not is_successful(run):
            return Failure(run.failure())
        return run.unwrap().output(Invoice)

    return extract >> check_total


@handler
async def check_total(invoice: Invoice) -> Result[Invoice, TotalMismatch]:
    """The items must add up to the total (to the cent)."""
    items_sum = sum(i.quantity * i.unit_price for i in invoice.items)
    if round(items_sum, 2) != round(invoice.total, 2):
        return Failure(TotalMismatch(invoice.total, items_sum))
    return Success(invoice)


pipeline = build(from_env(fallback=scripted_model()))
"""Text to a checked invoice, on a provider's model when a key is set."""


async def main(text: str) -> None:
    """Extract *text*; print the invoice or why not."""
    out = await pipeline(text)
    print(out.unwrap() if is_successful(out) else f"failed: {out.failure()}")


if __name__ == "__main__":
    anyio.run(
        main,
        " ".join(sys.argv[1:])
        or "ACME Ltd invoice: 2 x widget at 9.50 EUR, total 19.00 EUR",
    )
