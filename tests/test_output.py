"""Structured output that repairs itself: ``Agent(output=Output(T, ...))``.

A final answer that does not decode, or that the validator refuses, goes
back to the model with the reason (field names and rules, never the value)
and the model is asked again, up to ``retries`` times; then the run fails
with ``InvalidOutput`` carrying every attempt's reason.
"""

from __future__ import annotations

import json

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import attrs
import pytest

from hypothesis import given, settings
from hypothesis import strategies as st
from returns.result import Failure, Result, Success

from pipeline import Agent, Budget, Context, Graph, Message, Output, Role, run
from pipeline._output import repair_request, repairs_in
from pipeline.agents import AgentError, AgentRun
from pipeline.errors import ConstructionError
from pipeline.events import Event, MessageComplete, OutputRejected, stream
from pipeline.failures import BudgetExceeded, InvalidOutput
from pipeline.graph import END, builder
from pipeline.models import ModelRequest, ModelResponse, ResponseSchema
from pipeline.stores import SQLiteStore
from pipeline.testing import Reply, ScriptedModel


@attrs.frozen
class Ticket:
    """What the triage agent must answer."""

    title: str
    priority: int


def in_range(t: Ticket) -> Result[Ticket, str]:
    if 1 <= t.priority <= 5:
        return Success(t)
    return Failure("priority must be between 1 and 5")


def good(title: str = "printer on fire", priority: int = 2) -> ModelResponse:
    return Reply.text(json.dumps({"title": title, "priority": priority}))


def ask(text: str = "triage this") -> list[Message]:
    return [Message.user(text)]


def repair_messages(model: ScriptedModel) -> list[str]:
    """The repair requests the model was sent (the last message of every
    request after the first)."""
    return [r.messages[-1].content for r in model.requests[1:]]


async def test_a_bad_answer_is_sent_back_and_the_second_accepted() -> None:
    with ScriptedModel(
        Reply.text('{"title": "printer", "priority": "high"}'), good()
    ) as model:
        out = Output(Ticket)
        agent = Agent("triage", model, output=out)
        done = (await agent.run(ask())).unwrap()
    assert out.read(done).unwrap() == Ticket("printer on fire", 2)
    assert done.turns == 2
    assert [m.role for m in done.messages] == [
        Role.ASSISTANT,
        Role.USER,
        Role.ASSISTANT,
    ]
    (repair,) = repair_messages(model)
    assert "not a valid Ticket" in repair
    assert "$.priority" in repair
    assert "high" not in repair
    # The schema is asked for on every call, the repair call included.
    assert all(
        r.response_schema == ResponseSchema.of(Ticket) for r in model.requests
    )


async def test_the_validator_refuses_and_its_reason_goes_back() -> None:
    with ScriptedModel(good(priority=9), good(priority=3)) as model:
        out = Output(Ticket, validate=in_range, retries=1)
        agent = Agent("triage", model, output=out)
        done = (await agent.run(ask())).unwrap()
    assert out.read(done) == Success(Ticket("printer on fire", 3))
    assert repair_messages(model) == [
        (
            "Your answer is not a valid Ticket: priority must be between 1 "
            "and 5. Answer again with JSON that fits the schema."
        )
    ]


async def test_after_retries_the_run_fails_with_every_attempt() -> None:
    with ScriptedModel(
        Reply.text("not json"),
        Reply.text('{"title": "x"}'),
        good(priority=7),
    ) as model:
        agent = Agent(
            "triage",
            model,
            output=Output(Ticket, validate=in_range, retries=2),
        )
        failed = (await agent.run(ask())).failure()
    assert isinstance(failed, InvalidOutput)
    assert failed.expected == "Ticket"
    assert failed.path == ("triage",)
    assert len(failed.attempts) == 3
    assert failed.attempts[0] == "not valid JSON"
    assert "priority" in failed.attempts[1]
    assert failed.attempts[2] == "priority must be between 1 and 5"
    assert failed.reason == failed.attempts[-1]
    assert len(model.requests) == 3  # the strict script: no fourth call


async def test_no_retries_fails_on_the_first_bad_answer() -> None:
    with ScriptedModel(Reply.text("[]")) as model:
        agent = Agent("triage", model, output=Output(Ticket, retries=0))
        failed = (await agent.run(ask())).failure()
    assert isinstance(failed, InvalidOutput)
    assert len(failed.attempts) == 1


async def test_default_is_one_retry() -> None:
    assert Output(Ticket).retries == 1
    with ScriptedModel(Reply.text("{}"), Reply.text("{}")) as model:
        agent = Agent("triage", model, output=Output(Ticket))
        failed = (await agent.run(ask())).failure()
    assert isinstance(failed, InvalidOutput)
    assert len(failed.attempts) == 2


async def test_repairs_do_not_use_up_turns() -> None:
    """``max_turns=1``: the one turn is the model's answer; its repair is a
    model call on top."""
    with ScriptedModel(Reply.text("{}"), good()) as model:
        agent = Agent("triage", model, max_turns=1, output=Output(Ticket))
        done = (await agent.run(ask())).unwrap()
    assert done.turns == 2


async def test_budgets_count_repair_calls() -> None:
    with ScriptedModel(Reply.text("{}"), good()) as model:
        agent = Agent("triage", model, output=Output(Ticket))
        done = await run(
            agent, Context.of(*ask()), budget=Budget(model_calls=5)
        )
    assert done.result.unwrap().messages[-1].content == good().message.content
    assert done.usage.model_calls == 2
    with ScriptedModel(Reply.text("{}")) as model:
        agent = Agent("triage", model, output=Output(Ticket))
        spent = await run(
            agent, Context.of(*ask()), budget=Budget(model_calls=1)
        )
    refused = spent.result.failure()
    assert isinstance(refused, BudgetExceeded)
    assert refused.limit == "model_calls"


async def test_a_stream_sees_each_rejection_and_the_repair_request() -> None:
    with ScriptedModel(Reply.text("{}"), good()) as model:
        agent = Agent("triage", model, output=Output(Ticket))
        seen: list[Event] = []
        async with stream(agent, Context.of(*ask())) as events:
            async for event in events:
                seen.append(event)
    (rejected,) = [e for e in seen if isinstance(e, OutputRejected)]
    assert rejected.agent == "triage"
    assert rejected.attempt == 1
    assert rejected.retrying
    assert "title" in rejected.reason
    users = [
        e.message
        for e in seen
        if isinstance(e, MessageComplete) and e.message.role is Role.USER
    ]
    assert [m.content for m in users] == repair_messages(model)


def test_construction_checks_retries_and_sets_the_schema() -> None:
    with pytest.raises(ConstructionError, match="retries"):
        Output(Ticket, retries=-1)
    model = ScriptedModel()
    assert Agent("a", model, output=Output(Ticket)).response_schema == (
        ResponseSchema.of(Ticket)
    )
    mine = ResponseSchema.of(Ticket, name="mine")
    agent = Agent("a", model, output=Output(Ticket), response_schema=mine)
    assert agent.response_schema is mine


def test_read_takes_text_or_a_run() -> None:
    out = Output(Ticket, validate=in_range)
    text = good().message.content
    assert out.read(text) == Success(Ticket("printer on fire", 2))
    run_ = AgentRun("a", (Message.assistant(text),))
    assert out.read(run_) == Success(Ticket("printer on fire", 2))
    bad = out.read('{"title": "sk-secret", "priority": 0}').failure()
    assert bad.reason == "priority must be between 1 and 5"
    assert "sk-secret" not in str(bad)


# -- checkpointed: a crash mid-repair resumes with the attempts counted -----


class SimulatedCrash(BaseException):
    """The process dies here."""


def turns_taken(request: ModelRequest) -> int:
    return sum(1 for m in request.messages if m.role is Role.ASSISTANT)


async def test_a_crash_mid_repair_resumes_with_attempts_counted(
    tmp_path: Path,
) -> None:
    """Answers: bad, bad (then the process dies as the third call starts),
    bad after resuming.  With ``retries=2`` the resumed run makes the one
    call left and fails with all three attempts: the first two came from
    the checkpoint."""
    path = tmp_path / "runs.sqlite"
    calls: list[int] = []
    crash_at = 2

    def step(request: ModelRequest) -> ModelResponse:
        n = turns_taken(request)
        calls.append(n)
        if n == crash_at and len(calls) == crash_at + 1:
            raise SimulatedCrash
        return Reply.text(json.dumps({"title": f"t{n}", "priority": "hot"}))

    def make() -> Graph[Context, AgentError]:
        agent = Agent(
            "triage",
            ScriptedModel(step, cycle=True),
            output=Output(Ticket, retries=2),
        )
        return (
            builder(Context)
            .node("triage", agent)
            .entry("triage")
            .edge("triage", END)
            .build(name="desk")
        )

    @asynccontextmanager
    async def opened() -> AsyncIterator[SQLiteStore]:
        async with SQLiteStore(path) as store:
            yield store

    g = make()
    with pytest.raises(SimulatedCrash):
        async with opened() as store:
            await g.run(Context.of(*ask()), store=store, thread_id="t1")
    assert calls == [0, 1, 2]
    g = make()
    async with opened() as store:
        out = await g.resume(store, "t1")
    assert calls == [0, 1, 2, 2]  # only the call in flight again
    failed = out.failure()
    assert isinstance(failed, InvalidOutput)
    assert len(failed.attempts) == 3


# -- the property: retried at most N times, never echoed -------------------

# The marker is always a value: names of unknown keys that look like
# identifiers are shown (pipeline._decode.names), so the model can fix a
# misspelt field.

MARK = "sk-live-7f3c9a1b2d4e"

invalid = st.sampled_from(
    [
        MARK,
        json.dumps([MARK]),
        json.dumps({"title": MARK}),
        json.dumps({"title": "x", "priority": MARK}),
        json.dumps({"title": MARK, "priority": 1, "note": MARK}),
        json.dumps({"title": MARK, "priority": 99}),
        json.dumps({"title": MARK, "priority": [MARK]}),
        json.dumps({"ticket": {"priority": MARK}}),
    ]
)


@settings(max_examples=40, deadline=None)
@given(
    answers=st.lists(invalid, min_size=0, max_size=5),
    retries=st.integers(0, 3),
)
async def test_invalid_outputs_are_retried_at_most_n_times_never_echoed(
    answers: list[str], retries: int
) -> None:
    script = [Reply.text(a) for a in answers]
    script.append(good(title="fine"))
    model = ScriptedModel(*script, strict=False)
    agent = Agent(
        "triage",
        model,
        output=Output(Ticket, validate=in_range, retries=retries),
    )
    seen: list[Event] = []
    async with stream(agent, Context.of(*ask())) as events:
        async for event in events:
            seen.append(event)
    result = seen[-1].result  # type: ignore[union-attr]
    bad = len(answers)
    assert len(model.requests) == min(bad, retries) + 1
    if bad <= retries:
        assert (
            result.unwrap().messages[-1].content
            == good("fine").message.content
        )
    else:
        failed = result.failure()
        assert isinstance(failed, InvalidOutput)
        assert len(failed.attempts) == retries + 1
        assert MARK not in str(failed)
        assert MARK not in repr(failed)
    # What went back to the model and every event but the model's own
    # answers never holds the value.
    for text in repair_messages(model):
        assert MARK not in text
    for event in seen:
        if (
            isinstance(event, MessageComplete)
            and event.message.role is Role.ASSISTANT
        ):
            continue
        if isinstance(event, MessageComplete | OutputRejected):
            assert MARK not in repr(event)
    rejected = [e for e in seen if isinstance(e, OutputRejected)]
    assert len(rejected) == min(bad, retries + 1)


def test_the_reasons_so_far_are_read_back_from_the_repair_requests() -> None:
    """A run's attempts live in its repair requests (what a checkpoint
    holds): each reason comes back whole, colons and full stops included."""
    out = Output(Ticket)
    reasons = ["a: b. Answer again.", "expected an integer at $.priority"]
    messages = [
        Message.assistant("{}"),
        repair_request(out, reasons[0]),
        Message.assistant("{}"),
        repair_request(out, reasons[1], guard="calm.v2"),
        Message.tool("ok", tool_call_id="c1", name="t"),
    ]
    assert repairs_in(messages) == tuple(reasons)
