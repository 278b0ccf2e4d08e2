"""examples/typed_extraction: structured output into attrs classes."""

from __future__ import annotations

import json

from pathlib import Path
from typing import Any

import pytest

from pipeline.cli import ExitCode
from pipeline.testing import Reply, ScriptedModel
from tests.cli.runner import cli
from tests.examples.loader import EXAMPLES, load, offline_env


extraction: Any = load("typed_extraction", "extraction")

INVOICE = {
    "vendor": "ACME Ltd",
    "currency": "EUR",
    "items": [
        {"description": "widget", "quantity": 2, "unit_price": 9.5},
        {"description": "bolt", "quantity": 10, "unit_price": 0.25},
    ],
    "total": 21.5,
}


async def test_text_becomes_an_invoice() -> None:
    """The model's JSON is decoded into Invoice and LineItem values."""
    model = ScriptedModel(Reply.json(INVOICE))
    out = await extraction.build(model)("ACME: 2 widgets, 10 bolts")
    invoice = out.unwrap()
    assert invoice == extraction.Invoice(
        "ACME Ltd",
        "EUR",
        (
            extraction.LineItem("widget", 2, 9.5),
            extraction.LineItem("bolt", 10, 0.25),
        ),
        21.5,
    )
    request = model.requests[0]
    assert request.response_schema is not None
    assert request.response_schema.schema["properties"]["currency"][
        "enum"
    ] == [
        "EUR",
        "USD",
        "GBP",
    ]
    model.assert_consumed()


async def test_an_answer_that_does_not_fit_is_a_typed_failure() -> None:
    """A currency outside the Literal is InvalidOutput naming the field,
    never the value the model wrote."""
    bad = {**INVOICE, "currency": "sk-canary-doubloons"}
    out = await extraction.build(ScriptedModel(Reply.json(bad)))("x")
    message = str(out.failure())
    assert "$.currency" in message
    assert "sk-canary" not in message


async def test_totals_are_checked() -> None:
    """Items that do not add up to the total are a TotalMismatch."""
    wrong = {**INVOICE, "total": 99.0}
    out = await extraction.build(ScriptedModel(Reply.json(wrong)))("x")
    failure = out.failure()
    assert isinstance(failure, extraction.TotalMismatch)
    assert str(failure) == "the items add up to 21.50, not 99.00"


@pytest.mark.slow
def test_command_line(tmp_path: Path) -> None:
    """The README's command prints the invoice as JSON."""
    ran = cli(
        "run",
        "extraction:pipeline",
        "--input",
        '"ACME Ltd invoice: 2 x widget at 9.50 EUR, total 19.00 EUR"',
        cwd=EXAMPLES / "typed_extraction",
        env=offline_env(),
    )
    assert ran.returncode == ExitCode.OK, ran.stderr
    assert json.loads(ran.stdout)["items"] == [
        {"description": "widget", "quantity": 2, "unit_price": 9.5}
    ]
