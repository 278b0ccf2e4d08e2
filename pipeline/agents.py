"""Agents: the tool-calling loop, and agents composed from the algebra.

An :class:`Agent` asks its model, runs the tools it asks for (concurrently,
results in call order), and repeats until the model answers or the turn
limit is reached.  :class:`ParallelAgent` and :class:`SequentialAgent` are
built from ``must`` and ``sequential``; :func:`as_tool` lets one agent call
another.  Every agent lifts into a handler over contexts with
:meth:`Agent.handler`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal, Protocol, TypeAlias, final

import attrs

from returns.result import Failure, Result, Success

from ._combinators import must, sequential
from ._context import Context, Message, Role, Usage
from ._handler import Handler, ok
from .errors import ConstructionError, PipelineError
from .events import (
    MessageComplete,
    MessageDelta,
    ToolCallFinished,
    ToolCallStarted,
    emit,
    listening,
)
from .models._types import (
    Model,
    ModelDelta,
    ModelError,
    ModelRequest,
    ResponseSchema,
    TextDelta,
)
from .tools import Tool, run_tools


__all__ = (
    "Agent",
    "AgentError",
    "AgentLike",
    "AgentOutput",
    "AgentRun",
    "ParallelAgent",
    "SequentialAgent",
    "TurnLimitExceeded",
    "as_tool",
    "default_merge",
)

HANDOFF_MESSAGE = "Please proceed."


@final
@attrs.frozen
class TurnLimitExceeded(PipelineError):
    """The model still wanted tools when the agent's turn limit was reached."""

    agent: str
    turns: int

    def __str__(self) -> str:
        return f"agent {self.agent!r} still calling tools after {self.turns} turns"


AgentError: TypeAlias = ModelError | TurnLimitExceeded


@final
@attrs.frozen
class AgentRun:
    """What one run of an agent produced.

    *messages* are the messages it added (its answers and tool results, in
    order), *usage* the tokens summed over its model calls, *turns* the
    number of model calls.
    """

    agent: str
    messages: tuple[Message, ...]
    usage: Usage = Usage()
    turns: int = 0

    @property
    def text(self) -> str:
        """The content of the last assistant message with text ('' if none)."""
        for m in reversed(self.messages):
            if m.role is Role.ASSISTANT and m.content:
                return m.content
        return ""


class AgentLike(Protocol):
    """Anything that runs on a conversation like an agent."""

    @property
    def name(self) -> str:
        """The agent's name (attribution in merged answers and events)."""
        ...

    async def run(
        self, messages: Sequence[Message]
    ) -> Result[AgentRun, AgentError]:
        """Run on *messages*; return what was added."""
        ...


def _tools(tools: Iterable[Tool]) -> tuple[Tool, ...]:
    return tuple(tools)


def _agents(agents: Iterable[AgentLike]) -> tuple[AgentLike, ...]:
    return tuple(agents)


def _lift(agent: AgentLike) -> Handler[Context, Context, AgentError]:
    async def run_agent(ctx: Context) -> Result[Context, AgentError]:
        out = await agent.run(ctx.messages)
        if not ok(out):
            return Failure(out.failure())
        run = out.unwrap()
        return Success(ctx.append(*run.messages) if run.messages else ctx)

    return Handler(run_agent, agent.name)


@final
@attrs.frozen
class Agent:
    """A model with instructions and tools, in a loop.

    *max_turns* bounds model calls.  When the limit is reached and the model
    still asks for tools, ``on_turn_limit="fail"`` (default) returns a
    :class:`TurnLimitExceeded` failure; ``"answer"`` makes the last allowed
    call with tools disabled, so the model must answer.  Streaming: when a
    :func:`pipeline.stream` is listening, the model streams and each text
    fragment is emitted as a ``MessageDelta``.
    """

    name: str
    model: Model
    instructions: str = ""
    tools: tuple[Tool, ...] = attrs.field(default=(), converter=_tools)
    max_turns: int = 10
    on_turn_limit: Literal["fail", "answer"] = "fail"
    response_schema: ResponseSchema | None = None
    temperature: float | None = None
    max_tokens: int | None = None

    def __attrs_post_init__(self) -> None:
        if self.max_turns < 1:
            msg = f"agent {self.name!r}: max_turns must be at least 1"
            raise ConstructionError(msg)
        names = [t.name for t in self.tools]
        if len(set(names)) != len(names):
            msg = f"agent {self.name!r}: duplicate tool names {sorted(names)}"
            raise ConstructionError(msg)

    async def run(
        self, messages: Sequence[Message]
    ) -> Result[AgentRun, AgentError]:
        """Run the loop on *messages*; return the messages it added."""
        history: list[Message] = []
        if self.instructions:
            history.append(Message.system(self.instructions))
        history.extend(messages)
        added: list[Message] = []
        usage = Usage()
        tools = {t.name: t for t in self.tools}
        specs = tuple(t.spec for t in self.tools)
        name = self.name

        async def on_delta(delta: ModelDelta) -> None:
            if isinstance(delta, TextDelta):
                await emit(MessageDelta(name, delta.text))

        async def on_result(call: Any, content: str, failed: bool) -> None:
            await emit(ToolCallFinished(name, call, content, failed))

        for turn in range(1, self.max_turns + 1):
            last = turn == self.max_turns
            request = ModelRequest(
                tuple(history),
                specs,
                self.response_schema,
                self.temperature,
                self.max_tokens,
                use_tools=not (last and self.on_turn_limit == "answer"),
            )
            answer = await self.model.generate(
                request, on_delta=on_delta if listening() else None
            )
            if not ok(answer):
                return Failure(answer.failure())
            response = answer.unwrap()
            message = attrs.evolve(response.message, name=name)
            usage = usage + response.usage
            history.append(message)
            added.append(message)
            await emit(MessageComplete(name, message))
            if not message.tool_calls:
                return Success(AgentRun(name, tuple(added), usage, turn))
            if last:
                return Failure(TurnLimitExceeded(name, turn, path=(name,)))
            for call in message.tool_calls:
                await emit(ToolCallStarted(name, call))
            results = await run_tools(
                message.tool_calls, tools, on_result=on_result
            )
            for result in results:
                await emit(MessageComplete(name, result))
            history.extend(results)
            added.extend(results)
        raise AssertionError("unreachable")  # pragma: no cover

    def handler(self) -> Handler[Context, Context, AgentError]:
        """This agent as a handler: runs on the context's messages and
        appends what it added."""
        return _lift(self)


@final
@attrs.frozen
class AgentOutput:
    """One sub-agent's contribution to a :class:`ParallelAgent`."""

    name: str
    messages: tuple[Message, ...]


def default_merge(outputs: Sequence[AgentOutput]) -> Message:
    """``[name]\\ntext`` for each agent's last text, in definition order.

    Agents without text are left out.
    """
    parts = []
    for out in outputs:
        text = AgentRun(out.name, out.messages).text
        if text:
            parts.append(f"[{out.name}]\n{text}")
    return Message.assistant("\n\n".join(parts))


@final
@attrs.frozen
class ParallelAgent:
    """Sub-agents on the same messages, concurrently; one merged answer.

    Built on :func:`pipeline.must`: the first failure cancels the siblings
    and is returned (a sibling's cancellation is never reported as the
    cause).  *merge* turns the outputs, in definition order, into one
    assistant message (default: :func:`default_merge`).
    """

    name: str
    agents: tuple[AgentLike, ...] = attrs.field(converter=_agents)
    merge: Callable[[Sequence[AgentOutput]], Message] = default_merge

    def __attrs_post_init__(self) -> None:
        if not self.agents:
            msg = (
                f"parallel agent {self.name!r}: at least one agent is required"
            )
            raise ConstructionError(msg)

    async def run(
        self, messages: Sequence[Message]
    ) -> Result[AgentRun, AgentError]:
        """Run every sub-agent; merge their answers."""
        branches = [_runner(a) for a in self.agents]

        def collect(
            _: object, runs: tuple[AgentRun, ...]
        ) -> Result[tuple[AgentRun, ...], AgentError]:
            return Success(runs)

        out = await must(*branches, aggregate=collect, name=self.name)(
            tuple(messages)
        )
        if not ok(out):
            return Failure(out.failure())
        runs = out.unwrap()
        merged = attrs.evolve(
            self.merge([AgentOutput(r.agent, r.messages) for r in runs]),
            name=self.name,
        )
        await emit(MessageComplete(self.name, merged))
        usage = sum((r.usage for r in runs), Usage())
        return Success(
            AgentRun(self.name, (merged,), usage, sum(r.turns for r in runs))
        )

    def handler(self) -> Handler[Context, Context, AgentError]:
        """This agent as a handler over contexts."""
        return _lift(self)


def _runner(
    agent: AgentLike,
) -> Handler[tuple[Message, ...], AgentRun, AgentError]:
    async def run(
        messages: tuple[Message, ...],
    ) -> Result[AgentRun, AgentError]:
        return await agent.run(messages)

    return Handler(run, agent.name)


@final
@attrs.frozen
class _Relay:
    original: tuple[Message, ...]
    added: tuple[Message, ...] = ()
    usage: Usage = Usage()
    turns: int = 0


@final
@attrs.frozen
class SequentialAgent:
    """Sub-agents one after another, each seeing what came before.

    Agent *i* sees the original messages, every message the agents before
    it added, and (when there are any) one user message *handoff*
    ("Please proceed.").  The handoff is not part of the result.  Built on
    :func:`pipeline.sequential`; the first failure stops the rest.
    """

    name: str
    agents: tuple[AgentLike, ...] = attrs.field(converter=_agents)
    handoff: str = HANDOFF_MESSAGE

    def __attrs_post_init__(self) -> None:
        if not self.agents:
            msg = f"sequential agent {self.name!r}: at least one agent is required"
            raise ConstructionError(msg)

    async def run(
        self, messages: Sequence[Message]
    ) -> Result[AgentRun, AgentError]:
        """Run the sub-agents in order."""
        steps = [self._step(a) for a in self.agents]
        out = await sequential(*steps, name=self.name)(_Relay(tuple(messages)))
        if not ok(out):
            return Failure(out.failure())
        relay = out.unwrap()
        return Success(
            AgentRun(self.name, relay.added, relay.usage, relay.turns)
        )

    def _step(self, agent: AgentLike) -> Handler[_Relay, _Relay, AgentError]:
        handoff = self.handoff

        async def step(relay: _Relay) -> Result[_Relay, AgentError]:
            view = relay.original + relay.added
            if relay.added:
                view += (Message.user(handoff),)
            out = await agent.run(view)
            if not ok(out):
                return Failure(out.failure())
            run = out.unwrap()
            return Success(
                _Relay(
                    relay.original,
                    relay.added + run.messages,
                    relay.usage + run.usage,
                    relay.turns + run.turns,
                )
            )

        return Handler(step, agent.name)

    def handler(self) -> Handler[Context, Context, AgentError]:
        """This agent as a handler over contexts."""
        return _lift(self)


class AgentFailed(Exception):  # raised inside a tool: becomes its error result
    """An agent used as a tool failed; the calling model sees why."""


def as_tool(
    agent: AgentLike,
    *,
    name: str | None = None,
    description: str | None = None,
) -> Tool:
    """Let a model call *agent* as a tool taking ``{"prompt": "..."}``.

    The agent gets a fresh history (just the prompt, as a user message); the
    tool returns its final text.  A failure becomes an error result.
    """
    from .tools import tool  # noqa: PLC0415  # tools imports nothing from here

    async def call(prompt: str) -> str:
        out = await agent.run((Message.user(prompt),))
        if not ok(out):
            raise AgentFailed(str(out.failure()))
        return out.unwrap().text

    label = name or agent.name
    made = tool(
        name=label,
        description=description
        or f"Ask the {agent.name!r} agent to do a task.",
    )(call)
    return attrs.evolve(
        made,
        parameters={
            "type": "object",
            "properties": {
                "prompt": {
                    "type": "string",
                    "description": "The task or question for the agent.",
                }
            },
            "required": ["prompt"],
            "additionalProperties": False,
        },
    )
