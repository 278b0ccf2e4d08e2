"""Type-level contract of structured output (``pipeline.Output``). Not
executed."""

# pyright: reportUnnecessaryTypeIgnoreComment=error

from __future__ import annotations

from typing import Any, assert_type

import attrs

from returns.result import Failure, Result, Success

from pipeline import Agent, Output
from pipeline.agents import AgentRun
from pipeline.events import OutputRejected
from pipeline.failures import InvalidOutput
from pipeline.testing import ScriptedModel


@attrs.frozen
class Ticket:
    title: str
    priority: int


def in_range(t: Ticket) -> Result[Ticket, str]:
    return Success(t) if 1 <= t.priority <= 5 else Failure("out of range")


def wrong_input(n: int) -> Result[int, str]:
    return Success(n)


def wrong_error(t: Ticket) -> Result[Ticket, int]:
    return Success(t)


out = Output(Ticket, validate=in_range, retries=2)
assert_type(out, Output[Ticket])
assert_type(Output(Ticket), Output[Ticket])
assert_type(out.retries, int)
assert_type(out.check("{}"), Result[Ticket, str])


def read(run: AgentRun) -> None:
    assert_type(out.read(run), Result[Ticket, InvalidOutput])
    assert_type(out.read(run.text), Result[Ticket, InvalidOutput])


failed = InvalidOutput("Ticket", "reason", attempts=("a", "b"))
assert_type(failed.attempts, tuple[str, ...])
rejected = OutputRejected("a", 1, "reason", True)
assert_type(rejected.retrying, bool)

agent = Agent("a", ScriptedModel(), output=out)
assert_type(agent.output, Output[Any] | None)

# A validator must take and give the output type, and fail with a reason.
Output(Ticket, validate=wrong_input)  # type: ignore[arg-type]
Output(Ticket, validate=wrong_error)  # type: ignore[arg-type]
Output(Ticket, retries="2")  # type: ignore[arg-type]
out.read(3)  # type: ignore[arg-type]
Agent("a", ScriptedModel(), output=Ticket)  # type: ignore[arg-type]
