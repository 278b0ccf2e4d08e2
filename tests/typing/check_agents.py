"""Type-level contract of models, tools, agents and streams. Not executed."""

# pyright: reportUnnecessaryTypeIgnoreComment=error

from __future__ import annotations

from typing import assert_type

from returns.result import Result

from pipeline import Context, Handler, Message, switch
from pipeline.agents import (
    Agent,
    AgentError,
    AgentRun,
    ParallelAgent,
)
from pipeline.errors import PipelineError
from pipeline.events import EventStream, stream
from pipeline.llm import BadVerdict, PolicyViolation, llm_condition, policy
from pipeline.models import Model, ModelError
from pipeline.testing import Reply, ScriptedModel
from pipeline.tools import Tool, tool


model: Model = ScriptedModel(Reply.text("hi"))


@tool
async def lookup(key: str) -> str:
    """Look up."""
    return key


assert_type(lookup, Tool)
agent = Agent("a", model, tools=[lookup])
assert_type(
    agent.handler(),
    Handler[
        Context,
        Context,
        AgentError,
    ],
)
Agent("a", model, tools=["not a tool"])  # type: ignore[list-item]
Agent("a", "not a model")  # type: ignore[arg-type]
ParallelAgent("p", [agent, 3])  # type: ignore[list-item]


async def use() -> None:
    run = await agent.run([Message.user("hi")])
    assert_type(
        run,
        Result[AgentRun, AgentError],
    )
    events = stream(agent.handler(), Context())
    assert_type(
        events,
        EventStream[Context, AgentError],
    )
    stream(agent.handler(), "not a context")  # type: ignore[misc]
    await agent.run("not a list of messages")  # type: ignore[arg-type]


p = policy(model, "be nice")
assert_type(
    p,
    Handler[
        Context,
        Context,
        PolicyViolation | BadVerdict | ModelError | PipelineError,
    ],
)
judged = switch((llm_condition(model, "billing?"), agent.handler()))
checked = agent.handler() >> p
p >> lookup  # type: ignore[operator]  # a tool is not a handler
