"""Agents: the tool loop, turn limits, parallel and sequential agents."""

from __future__ import annotations

from collections.abc import Sequence

import anyio
import pytest

from returns.result import Failure, Result

from pipeline import Agent, Context, Message, Role, Usage, tool
from pipeline.agents import (
    AgentError,
    AgentOutput,
    AgentRun,
    ParallelAgent,
    SequentialAgent,
    as_tool,
)
from pipeline.errors import ConstructionError, Unconsumed, UnexpectedCall
from pipeline.failures import ModelError, TurnLimitExceeded
from pipeline.models import ModelRequest, ModelResponse
from pipeline.testing import Reply, ScriptedAgent, ScriptedModel


@tool
async def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


async def test_tool_loop_runs_tools_and_answers() -> None:
    """A tool call is run; its result goes back; the final text is returned."""
    with ScriptedModel(
        Reply.tool_call("add", {"a": 2, "b": 3}), Reply.text("The sum is 5.")
    ) as model:
        agent = Agent("calc", model, instructions="Use tools.", tools=[add])
        run = (await agent.run([Message.user("2+3?")])).unwrap()
    assert run.text == "The sum is 5."
    assert run.turns == 2
    assert [m.role for m in run.messages] == [
        Role.ASSISTANT,
        Role.TOOL,
        Role.ASSISTANT,
    ]
    assert run.messages[1].content == "5"
    assert run.usage == Usage(1, 1) + Usage(13, 4)  # summed over both calls
    first, second = model.requests
    assert first.messages[0] == Message.system("Use tools.")
    assert [t.name for t in first.tools] == ["add"]
    assert second.messages[-1].tool_call_id == run.messages[0].tool_calls[0].id


async def test_unknown_and_failing_tools_do_not_stop_the_loop() -> None:
    """Error results reach the model, which goes on."""
    model = ScriptedModel(
        Reply.tool_calls(("nope", {}, "c1"), ("add", {"a": "x"}, "c2")),
        Reply.text("sorry"),
    )
    run = (
        await Agent("a", model, tools=[add]).run([Message.user("?")])
    ).unwrap()
    results = [m.content for m in run.messages if m.role is Role.TOOL]
    assert results[0] == "error: unknown tool; available: ['add']"
    assert "argument 'a'" in results[1]
    assert run.text == "sorry"


async def test_turn_limit_fails_or_forces_an_answer() -> None:
    """max_turns bounds model calls; 'fail' is typed, 'answer' disables tools."""
    looping = ScriptedModel(
        Reply.tool_call("add", {"a": 1, "b": 1}), cycle=True
    )
    out = await Agent("a", looping, tools=[add], max_turns=3).run(
        [Message.user("go")]
    )
    err = out.failure()
    assert isinstance(err, TurnLimitExceeded)
    assert (err.agent, err.turns, err.path) == ("a", 3, ("a",))
    assert [m.role for m in err.messages] == [
        Role.ASSISTANT,
        Role.TOOL,
        Role.ASSISTANT,
        Role.TOOL,
        Role.ASSISTANT,  # asked for tools a third time: they never ran
    ]
    assert [m.agent for m in err.messages] == ["a"] * 5
    assert len(looping.requests) == 3
    forced = ScriptedModel(
        Reply.tool_call("add", {"a": 1, "b": 1}), Reply.text("done")
    )
    run = (
        await Agent(
            "b", forced, tools=[add], max_turns=2, on_turn_limit="answer"
        ).run([Message.user("go")])
    ).unwrap()
    assert run.text == "done"
    assert [r.use_tools for r in forced.requests] == [True, False]
    with pytest.raises(ConstructionError):
        Agent("c", forced, max_turns=0)


async def test_model_failure_is_the_agents_failure() -> None:
    """A provider error ends the run as a typed failure."""
    model = ScriptedModel(Reply.error("overloaded", status=529))
    out = await Agent("a", model).run([Message.user("hi")])
    err = out.failure()
    assert isinstance(err, ModelError)
    assert err.status == 529


async def test_agent_lifts_into_a_context_handler() -> None:
    """agent.handler() appends what the agent added to the context."""
    model = ScriptedModel(Reply.text("Hello!"))
    h = Agent("greeter", model).handler()
    ctx = (await h(Context.of(Message.user("hi")))).unwrap()
    assert [m.content for m in ctx.messages] == ["hi", "Hello!"]
    assert ctx.messages[-1].name == "greeter"


async def test_scripted_model_is_strict() -> None:
    """Unexpected calls and unused steps fail the test."""
    model = ScriptedModel(Reply.text("once"))
    await model.generate(ModelRequest((Message.user("a"),)))
    with pytest.raises(UnexpectedCall):
        await model.generate(ModelRequest((Message.user("b"),)))
    with pytest.raises(Unconsumed), ScriptedModel(Reply.text("never asked")):
        pass
    lazy = ScriptedModel(
        lambda r: ModelResponse(
            Message.assistant(r.messages[-1].content.upper())
        )
    )
    assert (
        await lazy.generate(ModelRequest((Message.user("echo"),)))
    ).unwrap().text == "ECHO"


# -- ParallelAgent (seed behaviour 2.5) -----------------------------------------


async def test_parallel_single_agent_attribution() -> None:
    """One agent: exactly one message, '[name]\\ntext'."""
    solo = ScriptedAgent("solo", ["Hello!"])
    run = (await ParallelAgent("p", [solo]).run([Message.user("hi")])).unwrap()
    assert [m.content for m in run.messages] == ["[solo]\nHello!"]
    assert run.messages[0].role is Role.ASSISTANT


async def test_parallel_merges_in_definition_order_whatever_finishes_first() -> (
    None
):
    """Two agents merge in definition order even if the second finishes first."""
    first_done = anyio.Event()

    class Slow:
        name = "agent-1"

        async def run(
            self, _messages: Sequence[Message], /
        ) -> Result[AgentRun, AgentError]:
            await first_done.wait()
            return await ScriptedAgent("agent-1", ["from-agent-1"]).run([])

    class Fast:
        name = "agent-2"

        async def run(
            self, _messages: Sequence[Message], /
        ) -> Result[AgentRun, AgentError]:
            out = await ScriptedAgent("agent-2", ["from-agent-2"]).run([])
            first_done.set()
            return out

    run = (
        await ParallelAgent("p", [Slow(), Fast()]).run([Message.user("x")])
    ).unwrap()
    assert (
        run.messages[0].content
        == "[agent-1]\nfrom-agent-1\n\n[agent-2]\nfrom-agent-2"
    )


async def test_parallel_agents_really_run_concurrently() -> None:
    """Both agents have started before either may finish."""
    started = [anyio.Event(), anyio.Event()]

    class Gate:
        def __init__(self, i: int) -> None:
            self.i = i
            self.name = f"g{i}"

        async def run(
            self, _messages: Sequence[Message], /
        ) -> Result[AgentRun, AgentError]:
            started[self.i].set()
            await started[1 - self.i].wait()
            return await ScriptedAgent(self.name, ["ok"]).run([])

    with anyio.fail_after(2):
        run = (await ParallelAgent("p", [Gate(0), Gate(1)]).run([])).unwrap()
    assert "[g0]\nok" in run.messages[0].content


async def test_parallel_error_cancels_siblings_and_reports_root_cause() -> (
    None
):
    """The failing agent's error is returned, not a sibling's cancellation."""
    cancelled: list[str] = []

    class Stuck:
        name = "stuck"

        async def run(
            self, _messages: Sequence[Message], /
        ) -> Result[AgentRun, AgentError]:
            try:
                await anyio.sleep_forever()
            finally:
                cancelled.append("stuck")
            raise AssertionError("unreachable")  # pragma: no cover

    failing = ScriptedAgent("bad", [ModelError("x", "root cause", 500)])
    out = await ParallelAgent("p", [Stuck(), failing]).run([])
    assert out == Failure(ModelError("x", "root cause", 500, path=("p[1]",)))
    assert cancelled == ["stuck"]


async def test_parallel_custom_merge_and_omitted_empty_agents() -> None:
    """A custom merge controls the output; agents without text are omitted."""
    a, b = ScriptedAgent("a1", ["answer-1"]), ScriptedAgent("a2", ["answer-2"])

    def bar(outputs: Sequence[AgentOutput]) -> Message:
        return Message.assistant(
            " | ".join(o.messages[-1].content for o in outputs)
        )

    run = (await ParallelAgent("p", [a, b], merge=bar).run([])).unwrap()
    assert run.messages[0].content == "answer-1 | answer-2"
    quiet, loud = (
        ScriptedAgent("agent-1", [""]),
        ScriptedAgent("agent-2", ["only me"]),
    )
    run = (await ParallelAgent("p", [quiet, loud]).run([])).unwrap()
    assert run.messages[0].content == "[agent-2]\nonly me"
    with pytest.raises(ConstructionError, match="at least one agent"):
        ParallelAgent("p", [])


# -- SequentialAgent (seed behaviour 2.5) ----------------------------------------


async def test_sequential_passes_history_and_one_handoff() -> None:
    """Agent 2 sees the original, agent 1's messages, and one handoff."""
    one, two = (
        ScriptedAgent("a1", ["first-result"]),
        ScriptedAgent("a2", ["done"]),
    )
    run = (
        await SequentialAgent("s", [one, two]).run([Message.user("start")])
    ).unwrap()
    assert [m.content for m in run.messages] == ["first-result", "done"]
    assert [(m.role, m.content) for m in two.inputs[0]] == [
        (Role.USER, "start"),
        (Role.ASSISTANT, "first-result"),
        (Role.USER, "Please proceed."),
    ]
    assert [m.content for m in one.inputs[0]] == ["start"]


async def test_sequential_stops_at_the_first_error() -> None:
    """An error in agent 1 is returned and agent 2 never runs."""
    one = ScriptedAgent("a1", [ModelError("x", "boom")])
    two = ScriptedAgent("a2", ["never"])
    out = await SequentialAgent("s", [one, two]).run([Message.user("x")])
    assert isinstance(out.failure(), ModelError)
    assert two.inputs == []
    with pytest.raises(ConstructionError):
        SequentialAgent("s", [])


async def test_agent_as_tool_has_its_own_history() -> None:
    """A sub-agent called as a tool sees only the prompt; its text returns."""
    expert = ScriptedAgent("expert", ["42"])
    ask = as_tool(expert, description="Ask the expert.")
    assert ask.parameters["required"] == ["prompt"]
    out, failed = await ask.call('{"prompt": "meaning of life?"}')
    assert (out, failed) == ("42", False)
    assert [m.content for m in expert.inputs[0]] == ["meaning of life?"]
    broken = as_tool(ScriptedAgent("broken", [ModelError("x", "down")]))
    out, failed = await broken.call('{"prompt": "?"}')
    assert failed
    assert (
        out == "error: 'broken' failed (ModelError); the details were logged"
    )
