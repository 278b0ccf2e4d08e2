"""Type-level contract of models, tools, agents and streams. Not executed."""

# pyright: reportUnnecessaryTypeIgnoreComment=error

from __future__ import annotations

from typing import assert_type

import anthropic
import attrs
import openai

from returns.result import Result

from pipeline import (
    Agent,
    Context,
    Handler,
    Message,
    Secret,
    Tool,
    stores,
    stream,
    switch,
    tool,
)
from pipeline.agents import (
    AgentError,
    AgentRun,
    ParallelAgent,
    SequentialAgent,
)
from pipeline.errors import ToolError
from pipeline.events import Event, EventStream, ToolRaised, reader_caught_up
from pipeline.failures import (
    BadVerdict,
    InvalidOutput,
    ModelError,
    PipelineError,
    PolicyViolation,
    TurnLimitExceeded,
)
from pipeline.graph import Writable, state_tools
from pipeline.llm import llm_condition, policy
from pipeline.models import (
    CachedModel,
    Fallback,
    Model,
    ResponseSchema,
    cached,
    fallback,
)
from pipeline.models.anthropic import AnthropicModel
from pipeline.models.openai import OpenAIModel
from pipeline.secrets import holds_secret, redact
from pipeline.testing import Reply, ScriptedModel


model: Model = ScriptedModel(Reply.text("hi"))


@tool
async def lookup(key: str) -> str:
    """Look up."""
    return key


async def _direct() -> None:  # the function itself, typed as written
    assert_type(await lookup.fn("k"), str)
    await lookup.fn(1)  # type: ignore[arg-type]


_any_tool: Tool = lookup  # takes no dependencies: fits every agent
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
Agent("a", "not a model")  # type: ignore[call-overload]
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


# -- issue 10: tool errors, state tools, descriptions, the audit trail --------


@tool(errors=(LookupError, ToolError), timeout=1.0)
def strict(key: str) -> str:
    """Sync, with a timeout, listing the errors the model may see."""
    return key


assert_type(strict.fn("k"), str)
assert_type(strict.errors, tuple[type[Exception], ...])
tool(errors=(KeyboardInterrupt,))  # type: ignore[arg-type]  # not an Exception
tool(errors=ValueError)  # type: ignore[call-overload]  # a sequence of types


def on_event(event: Event) -> None:
    if isinstance(event, ToolRaised):
        assert_type(event.exception_type, type[Exception])
        event.exception  # type: ignore[attr-defined]  # only the type is carried
        assert_type(event.tool, str)


class Box:
    """A holder for state tools."""

    value: Context = Context()


assert_type(
    state_tools(Box(), Context, writable={"topic": str}), tuple[Tool, ...]
)
state_tools(Box(), Context, writable=[1])  # type: ignore[list-item]  # names are strings
writable: Writable = ["topic"]
team = ParallelAgent("t", [agent], description="Two views.")
assert_type(team.description, str)
relay = SequentialAgent("s", [agent], description="In turn.")
ParallelAgent("t", [agent], description=3)  # type: ignore[arg-type]


def audit(err: TurnLimitExceeded, m: Message) -> None:
    assert_type(err.messages, tuple[Message, ...])
    assert_type(m.agent, str | None)


async def wait() -> None:
    assert_type(await reader_caught_up(), None)


@attrs.frozen
class Verdict:
    """A structured answer."""

    label: str


def structured(run: AgentRun, openai_model: OpenAIModel) -> None:
    assert_type(ResponseSchema.of(Verdict), ResponseSchema)
    assert_type(run.output(Verdict), Result[Verdict, InvalidOutput])
    run.output("Verdict")  # type: ignore[arg-type]  # a class, not its name
    assert_type(openai_model.client, openai.AsyncOpenAI)


async def closing(anthropic_model: AnthropicModel) -> None:
    async with anthropic_model as m:
        assert_type(m, AnthropicModel)
        assert_type(m.client, anthropic.AsyncAnthropic)
    assert_type(await anthropic_model.aclose(), None)


# -- secrets inside tool arguments -----------------------------------------------


@tool
async def sign_in(password: Secret[str] | None = None) -> str:
    return "in" if password is not None else "out"


assert_type(sign_in.redact('{"password": "x"}'), str)
assert_type(sign_in.secret_arguments, frozenset[str])
assert_type(holds_secret(list[Secret[str]]), bool)
assert_type(redact({"password": "x"}, dict[str, Secret[str]], "ref"), object)
sign_in.redact({"password": "x"})  # type: ignore[arg-type]  # JSON text, not a dict
redact("x", str)  # type: ignore[call-arg]  # the reference is required


# Fallback: a model made of models, given to an agent like any model.
_backup = fallback(
    ScriptedModel(), ScriptedModel(), when=lambda e: e.status == 529
)
assert_type(_backup, Fallback)
_as_model: Model = _backup
fallback(ScriptedModel(), "gpt-4o")  # type: ignore[arg-type]  # not a model
fallback(ScriptedModel(), when=lambda e: e.code)  # type: ignore[attr-defined]  # ModelError has no code
_fb_agent = Agent("fb", _backup)

# Cached models: a model again, its answers in a memory or store cache.
_remembered = cached(ScriptedModel(), ttl=3600)
assert_type(_remembered, CachedModel)
_as_model = _remembered
_kept = cached(_backup, store=stores.MemoryCache())
assert_type(_kept.store, stores.CacheStore | stores.AsyncCacheStore)
_cached_agent = Agent("c", cached(ScriptedModel()))


async def _kept_in_sqlite(store: stores.SQLiteStore) -> None:
    """A StoreCache is an async cache store; a checkpoint store is not."""
    in_file: stores.AsyncCacheStore = stores.StoreCache(store)
    assert_type(await in_file.get("k"), bytes | None)
    cached(ScriptedModel(), store=in_file)
    cached(ScriptedModel(), store=store)  # type: ignore[arg-type]  # a checkpoint store is not a cache


cached(ScriptedModel(), key=lambda r: r.messages[-1].content)
cached(ScriptedModel(), key=lambda r: r.prompt)  # type: ignore[attr-defined]  # the key reads a ModelRequest
cached("gpt-4o")  # type: ignore[arg-type]  # not a model
cached(ScriptedModel(), ttl="1h")  # type: ignore[arg-type]  # seconds

# Tool concurrency: a whole number (or None for no limit).
_bounded = Agent("b", ScriptedModel(), max_parallel_tools=4)
assert_type(_bounded.max_parallel_tools, int | None)
Agent("b", ScriptedModel(), max_parallel_tools="4")  # type: ignore[call-overload]  # not a number
Agent("b", ScriptedModel(), max_parallel_tools=2.5)  # type: ignore[call-overload]  # not whole
