"""Type-level contract of structured output (``pipeline.Output``). Not
executed."""

# pyright: reportUnnecessaryTypeIgnoreComment=error

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, assert_type

import attrs

from returns.result import Failure, Result, Success

from pipeline import Agent, Message, Output
from pipeline.agents import (
    AgentRun,
    AskAgain,
    Halt,
    InputGuard,
    OutputGuard,
    Verdict,
)
from pipeline.events import OutputRejected
from pipeline.failures import GuardrailTripped, InvalidOutput
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


# -- guardrails -------------------------------------------------------------


async def shouting(t: Ticket) -> Verdict:
    return AskAgain("the title must not shout") if t.title.isupper() else None


async def injection(t: Ticket) -> Verdict:
    return Halt("looks like an injection") if ";" in t.title else None


async def on_topic(messages: Sequence[Message]) -> Halt | None:
    return None


async def about_ints(n: int) -> Verdict:
    return None


async def asks_again(messages: Sequence[Message]) -> AskAgain | None:
    return None


guarded = Output(Ticket, guards=[OutputGuard("shouting", shouting)])
assert_type(guarded, Output[Ticket])
assert_type(guarded.guards, tuple[OutputGuard[Ticket], ...])
assert_type(OutputGuard("injection", injection), OutputGuard[Ticket])
Agent("a", ScriptedModel(), input_guards=[InputGuard("topic", on_topic)])
assert_type(InputGuard("topic", on_topic, concurrent=True).concurrent, bool)
tripped = GuardrailTripped("topic", "input", "off topic")
assert_type(tripped.guardrail, str)

# An output guard checks the output type; an input guard cannot ask again.
Output(Ticket, guards=[OutputGuard("ints", about_ints)])  # type: ignore[misc]
InputGuard("again", asks_again)  # type: ignore[arg-type]
Agent("a", ScriptedModel(), input_guards=[on_topic])  # type: ignore[list-item]
