"""Guardrails: input guards before (or alongside) the first model call,
output guards on the typed final answer; pass, ask again, or stop."""

from __future__ import annotations

import json

from collections.abc import Iterator, Sequence

import anyio
import attrs
import pytest

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)

from pipeline import Agent, Context, Message, Output, run, tool
from pipeline.agents import AskAgain, Halt, InputGuard, OutputGuard, Verdict
from pipeline.errors import ConstructionError
from pipeline.events import Event, GuardrailChecked, OutputRejected, stream
from pipeline.failures import GuardrailTripped, InvalidOutput
from pipeline.models import ModelRequest, ModelResponse
from pipeline.testing import Reply, ScriptedModel


@attrs.frozen
class Ticket:
    title: str
    priority: int


def answer(title: str = "printer", priority: int = 2) -> ModelResponse:
    return Reply.text(json.dumps({"title": title, "priority": priority}))


async def on_topic(messages: Sequence[Message]) -> Halt | None:
    if any("weather" in m.content for m in messages):
        return Halt("the request is off topic")
    return None


async def polite(t: Ticket) -> Verdict:
    if t.title.isupper():
        return AskAgain("the title must not shout")
    if t.title == "drop table":
        return Halt("the title looks like an injection")
    return None


def ask(text: str) -> list[Message]:
    return [Message.user(text)]


async def collect(agent: Agent, text: str) -> list[Event]:
    seen: list[Event] = []
    async with stream(agent, Context.of(*ask(text))) as events:
        async for event in events:
            seen.append(event)
    return seen


async def test_an_input_guard_stops_the_run_before_any_model_call() -> None:
    with ScriptedModel() as model:  # strict: no call may be made
        agent = Agent(
            "desk", model, input_guards=[InputGuard("on_topic", on_topic)]
        )
        failed = (await agent.run(ask("what is the weather?"))).failure()
    assert failed == GuardrailTripped(
        "on_topic", "input", "the request is off topic", path=("desk",)
    )
    assert str(failed) == (
        "the input guardrail 'on_topic' stopped the run: the request is off "
        "topic (at desk)"
    )


async def test_input_guards_that_pass_let_the_model_answer() -> None:
    with ScriptedModel(Reply.text("fixed")) as model:
        agent = Agent(
            "desk", model, input_guards=[InputGuard("on_topic", on_topic)]
        )
        seen = await collect(agent, "my printer is broken")
    checks = [e for e in seen if isinstance(e, GuardrailChecked)]
    assert checks == [GuardrailChecked("desk", "on_topic", "input", "pass")]


async def test_a_concurrent_guard_runs_alongside_the_model_call() -> None:
    """The guard waits for the model call to start: it could not finish if
    it ran before it.  It stops the run, and the tool the model asked for
    never runs."""
    started = anyio.Event()
    ran: list[str] = []

    @tool
    async def reboot(host: str) -> str:
        """Reboot a host."""
        ran.append(host)
        return "ok"

    def step(_: ModelRequest) -> ModelResponse:
        started.set()
        return Reply.tool_call("reboot", {"host": "db1"})

    async def slow_moderation(_: Sequence[Message]) -> Halt | None:
        await started.wait()
        return Halt("flagged by moderation")

    with ScriptedModel(step) as model, anyio.fail_after(5):
        agent = Agent(
            "desk",
            model,
            tools=[reboot],
            input_guards=[
                InputGuard("on_topic", on_topic),
                InputGuard("moderation", slow_moderation, concurrent=True),
            ],
        )
        failed = (await agent.run(ask("reboot db1"))).failure()
    assert isinstance(failed, GuardrailTripped)
    assert failed.guardrail == "moderation"
    assert ran == []


async def test_a_concurrent_guard_that_passes_lets_the_turn_go_on() -> None:
    started = anyio.Event()

    def step(_: ModelRequest) -> ModelResponse:
        started.set()
        return Reply.text("done")

    async def slow_ok(_: Sequence[Message]) -> Halt | None:
        await started.wait()
        return None

    with ScriptedModel(step) as model, anyio.fail_after(5):
        agent = Agent(
            "desk",
            model,
            input_guards=[InputGuard("moderation", slow_ok, concurrent=True)],
        )
        done = (await agent.run(ask("hello"))).unwrap()
    assert done.text == "done"


async def test_an_output_guard_asks_again_within_the_retries() -> None:
    with ScriptedModel(answer("PRINTER"), answer("printer")) as model:
        out = Output(Ticket, guards=[OutputGuard("polite", polite)])
        agent = Agent("desk", model, output=out)
        seen = await collect(agent, "triage")
    assert model.requests[1].messages[-1].content == (
        "Your answer was refused by the 'polite' check: the title must not "
        "shout. Answer again."
    )
    outcomes = [
        (e.guardrail, e.outcome)
        for e in seen
        if isinstance(e, GuardrailChecked)
    ]
    assert outcomes == [("polite", "retry"), ("polite", "pass")]
    (rejected,) = [e for e in seen if isinstance(e, OutputRejected)]
    assert rejected.reason == "the title must not shout"


async def test_an_output_guard_retry_counts_against_the_retries() -> None:
    with ScriptedModel(answer("PRINTER")) as model:
        out = Output(Ticket, retries=0, guards=[OutputGuard("polite", polite)])
        failed = (
            await Agent("desk", model, output=out).run(ask("t"))
        ).failure()
    assert isinstance(failed, InvalidOutput)
    assert failed.attempts == ("the title must not shout",)


async def test_an_output_guard_stops_the_run_naming_itself() -> None:
    with ScriptedModel(answer("drop table")) as model:
        out = Output(Ticket, guards=[OutputGuard("polite", polite)])
        failed = (
            await Agent("desk", model, output=out).run(ask("t"))
        ).failure()
    assert failed == GuardrailTripped(
        "polite", "output", "the title looks like an injection", path=("desk",)
    )


@pytest.fixture(name="spans")
def _spans() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider, exporter
    provider.shutdown()


async def test_each_guard_is_a_span(
    spans: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, exporter = spans
    with ScriptedModel(answer("PRINTER"), answer("printer")) as model:
        agent = Agent(
            "desk",
            model,
            input_guards=[InputGuard("on_topic", on_topic)],
            output=Output(Ticket, guards=[OutputGuard("polite", polite)]),
        )
        done = await run(
            agent, Context.of(*ask("triage")), tracer_provider=provider
        )
    assert done.result.unwrap().messages[-1].content == (
        answer("printer").message.content
    )
    found = [
        (
            s.name,
            (s.attributes or {}).get("pipeline.guardrail.stage"),
            (s.attributes or {}).get("pipeline.guardrail.outcome"),
        )
        for s in exporter.get_finished_spans()
        if s.name.startswith("guardrail ")
    ]
    assert found == [
        ("guardrail on_topic", "input", "pass"),
        ("guardrail polite", "output", "retry"),
        ("guardrail polite", "output", "pass"),
    ]


def test_guard_names_are_checked() -> None:
    with pytest.raises(ConstructionError, match="InputGuard"):
        InputGuard("", on_topic)
    with pytest.raises(ConstructionError, match="OutputGuard"):
        OutputGuard("has space", polite)
