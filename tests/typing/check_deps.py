"""Type-level contract of tool dependencies. Not executed."""

# pyright: reportUnnecessaryTypeIgnoreComment=error

from __future__ import annotations

from typing import assert_type

from returns.result import Result

from pipeline import Agent, Context, Handler, Message, RunContext, Tool, tool
from pipeline.agents import AgentError, AgentRun
from pipeline.testing import ScriptedModel


class Db:
    def get(self, key: str) -> str:
        return key


class Other:
    pass


@tool
async def lookup(ctx: RunContext[Db], key: str) -> str:
    """Look a key up."""
    assert_type(ctx.deps, Db)
    return ctx.deps.get(key)


@tool(timeout=2.0)
def lookup_sync(ctx: RunContext[Db], key: str) -> str:
    """The same, sync."""
    return ctx.deps.get(key)


@tool
def add(a: int, b: int = 0) -> int:
    """Add."""
    return a + b


@tool
def other(ctx: RunContext[Other]) -> str:
    """Needs other dependencies."""
    return type(ctx.deps).__name__


# The functions stay callable, typed as written.
assert_type(lookup_sync.fn(RunContext(Db()), "k"), str)
assert_type(add.fn(1, 2), int)
assert_type(add.fn(1), int)
lookup_sync.fn(RunContext(Other()), "k")  # type: ignore[arg-type]
lookup_sync.fn("k")  # type: ignore[arg-type, call-arg]  # context first
add.fn("1")  # type: ignore[arg-type]


async def _direct() -> None:
    assert_type(await lookup.fn(RunContext(Db()), "k"), str)
    await lookup.fn(RunContext(Db()), 1)  # type: ignore[arg-type]


# A tool is a Tool[Deps, ...]; one without dependencies fits every agent.
db_tool: Tool[Db] = lookup
plain: Tool[Db] = add
any_tool: Tool = lookup
wrong: Tool[Other] = lookup  # type: ignore[assignment]

model = ScriptedModel()

# deps_type makes an Agent[Deps]; without it, an Agent[None].
agent = Agent("a", model, tools=[lookup, lookup_sync, add], deps_type=Db)
assert_type(agent, Agent[Db])
assert_type(Agent("b", model, tools=[add]), Agent[None])
assert_type(Agent("c", model), Agent[None])
assert_type(agent.with_deps(Db()), Agent[Db])

# A tool over a base class of the agent's dependencies fits.


class Replica(Db):
    pass


assert_type(
    Agent("r", model, tools=[lookup, add], deps_type=Replica), Agent[Replica]
)

# A tool whose dependencies do not match the agent's is refused.
Agent("d", model, tools=[lookup, other], deps_type=Db)  # type: ignore[list-item]
Agent("e", model, tools=[lookup])  # type: ignore[list-item]
agent.with_deps(Other())  # type: ignore[arg-type]

# Any agent is still a handler over contexts.
as_handler: Handler[Context, Context, AgentError] = agent
loose: Agent = agent


async def _runs() -> None:
    done = await agent.run([Message.user("hi")], deps=Db())
    assert_type(done, Result[AgentRun, AgentError])
    await agent.run([Message.user("hi")], deps=Other())  # type: ignore[arg-type]
    await Agent("f", model).run([Message.user("hi")])
