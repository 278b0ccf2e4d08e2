"""Agents: the tool-calling loop, and agents composed from the algebra.

An :class:`Agent` asks its model, runs the tools it asks for (concurrently,
results in call order), and repeats until the model answers or the turn
limit is reached.  :class:`ParallelAgent` and :class:`SequentialAgent` are
built from ``must`` and ``sequential``; :func:`~pipeline.agents.as_tool` lets one agent call
another.  Every agent lifts into a handler over contexts with
:meth:`pipeline.Agent.handler`.
"""

from __future__ import annotations

import copy
import logging

from collections.abc import Callable, Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import (
    TYPE_CHECKING,
    Any,
    Generic,
    Literal,
    NoReturn,
    Protocol,
    TypeAlias,
    final,
    overload,
    runtime_checkable,
)

import attrs

from returns.result import Failure, Result, Success
from typing_extensions import TypeVar

from . import failures
from ._combinators import must, sequential
from ._context import Context
from ._decode import decode_json
from ._guards import AskAgain, Halt, InputGuard, OutputGuard, Verdict
from ._handler import Call, Handler
from ._messages import Message, Role, Usage
from ._moved import moved
from ._offload import note_agent, note_fold_tool
from ._output import Output
from ._runners import ok
from ._turns import (
    Intercept,
    Loop,
    PauseRequested,
    ToolFacts,
    Turns,
    digest,
    tool_facts,
)
from ._views import joined
from .errors import AgentFailed, ConstructionError, MissingDeps
from .events import MessageComplete, emit
from .failures import (
    BudgetExceeded,
    GuardrailTripped,
    HistoryBudgetExceeded,
    InvalidOutput,
    ModelError,
    RunPaused,
)
from .fold import Ambient, Status, ambient, current_boundary, run_machine
from .models._types import Model, ResponseSchema, ToolSpec
from .runs import scope, traced_by_default
from .tools import NO_DEPS, NoDeps, Tool


_LOG = logging.getLogger("pipeline.agents")


if TYPE_CHECKING:
    from .history import HistoryPolicy


__all__ = (
    "AgentError",
    "AgentLike",
    "AgentOutput",
    "AgentRun",
    "AskAgain",
    "Halt",
    "InputGuard",
    "OutputGuard",
    "ParallelAgent",
    "SequentialAgent",
    "ToolSource",
    "Verdict",
    "as_tool",
    "default_merge",
)

_HANDOFF_MESSAGE = "Please proceed."

T = TypeVar("T")
D_contra = TypeVar("D_contra", contravariant=True, default=Any)


AgentError: TypeAlias = (
    ModelError
    | failures.TurnLimitExceeded
    | HistoryBudgetExceeded
    | RunPaused
    | BudgetExceeded
    | InvalidOutput
    | GuardrailTripped
)
"""What running an agent may fail with."""


@final
@attrs.frozen
class AgentRun:
    """What one run of an agent produced.

    *messages* are the messages it added (its answers and tool results, in
    order), *usage* the tokens summed over its model calls, *turns* the
    number of model calls.

    .. versionadded:: 0.1.0
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

    def output(self, kind: type[T]) -> Result[T, InvalidOutput]:
        """The final answer (:attr:`text`, JSON) structured into *kind*, an
        attrs class (ask for it with ``response_schema=
        ResponseSchema.of(kind)``).

        An answer that does not fit is an
        :class:`~pipeline.failures.InvalidOutput` naming the
        field and the type expected, never the value.
        """
        decoded = decode_json(self.text, kind)
        if not ok(decoded):
            reason = decoded.failure()
            name = getattr(kind, "__name__", str(kind))
            return Failure(InvalidOutput(name, reason, path=(self.agent,)))
        return Success(decoded.unwrap())


@runtime_checkable
class ToolSource(Protocol):
    """Something that makes a tool of itself, as :func:`as_tool` asks: a
    graph over a typed state (:meth:`pipeline.Graph.as_tool`).

    .. versionadded:: 0.1.0
    """

    def as_tool(
        self, *, name: str | None = None, description: str | None = None
    ) -> Tool:
        """A tool a model can call to run this."""
        ...


class AgentLike(Protocol):
    """Anything that runs on a conversation like an agent.

    A ``description`` attribute (a string: what the agent is for), when it
    has one, is what :func:`as_tool` shows the calling model; the library's
    agents all have one.

    .. versionadded:: 0.1.0
    """

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


def _input_guards(guards: Iterable[InputGuard]) -> tuple[InputGuard, ...]:
    return tuple(guards)


def _agents(agents: Iterable[AgentLike]) -> tuple[AgentLike, ...]:
    return tuple(agents)


def _own_call(agent: Agent[Any]) -> Call[Context, Context, AgentError]:
    """An :class:`Agent` as a handler: :meth:`Agent.run`'s loop, its
    messages appended as they come (no :class:`AgentRun`, no tuple of
    them: a handler's every run)."""

    async def run_own(ctx: Context) -> Result[Context, AgentError]:
        done = await agent._traced_turns(ctx.messages)  # noqa: SLF001
        if type(done) is Failure:
            return done
        added = done.messages
        return Success(ctx.append(*added) if added else ctx)

    return run_own


def _agent_call(agent: AgentLike) -> Call[Context, Context, AgentError]:
    async def run_agent(ctx: Context) -> Result[Context, AgentError]:
        out = await agent.run(ctx.messages)
        if not ok(out):
            return Failure(out.failure())
        run = out.unwrap()
        return Success(ctx.append(*run.messages) if run.messages else ctx)

    return run_agent


def _tool_map(agent: Agent) -> Mapping[str, Tool]:
    return MappingProxyType({t.name: t for t in agent.tools})


@final
@attrs.frozen(eq=False, repr=False, init=False)
class Agent(Handler[Context, Context, AgentError], Generic[D_contra]):
    """A model with instructions and tools, in a loop; a handler over contexts.

    *max_turns* bounds model calls.  When the limit is reached and the model
    still asks for tools, ``on_turn_limit="fail"`` (default) returns a
    :class:`~pipeline.failures.TurnLimitExceeded` failure; ``"answer"`` makes the last allowed
    call with tools disabled, so the model must answer.  *history* (a
    :mod:`pipeline.history` policy) selects what the agent sees of the
    messages it is given; *description* says what it is for (swarms and
    :func:`~pipeline.agents.as_tool` show it to other models).
    *max_parallel_tools* bounds the tool calls of one reply that run at
    once (default ``None``: all of them; ``1`` runs them one after another);
    results keep the calls' order either way.  *output* (an
    :class:`~pipeline.Output`) makes the final answer structured: the model
    is asked for its JSON schema (unless *response_schema* is given), and an
    answer that does not decode or that its validator refuses goes back to
    the model with the reason, up to ``output.retries`` times, then fails
    with :class:`~pipeline.failures.InvalidOutput`; these repair calls are
    model calls (budgets count them) but not turns against *max_turns*.
    Read the typed answer with ``output.read(run)``.  *input_guards*
    (:class:`~pipeline.agents.InputGuard`) check the messages before the
    first model call, or alongside it; a guard that stops the run makes it
    fail with :class:`~pipeline.failures.GuardrailTripped`.  Streaming: when a
    :func:`pipeline.stream` is listening, the model streams and each text
    fragment is emitted as a ``MessageDelta``.

    As a handler (``agent >> polish``, ``agent & other``, ``stream(agent,
    ctx)``) it runs on the context's messages and appends what it added.
    Inside a checkpointed run every turn is a record: see
    :mod:`pipeline.fold`.

    Dependencies: ``Agent(..., deps_type=Deps)`` is an ``Agent[Deps]``,
    which takes tools whose first parameter is a
    :class:`~pipeline.RunContext` ``[Deps]`` (and tools that take none); a
    run gets them with ``run(..., deps=...)`` or from
    :meth:`with_deps`.  Without *deps_type* it is an ``Agent[None]``, which
    takes only tools without one.  Dependencies are never checkpointed,
    traced or put in events.

    .. versionadded:: 0.1.0
    """

    name: str
    model: Model
    instructions: str = ""
    tools: tuple[Tool[D_contra], ...] = attrs.field(
        default=(), converter=_tools
    )
    max_turns: int = 10
    on_turn_limit: Literal["fail", "answer"] = "fail"
    response_schema: ResponseSchema | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    history: HistoryPolicy | None = None
    description: str = ""
    max_parallel_tools: int | None = None
    output: Output[Any] | None = None
    input_guards: tuple[InputGuard, ...] = attrs.field(
        default=(), converter=_input_guards
    )
    _tool_map: Mapping[str, Tool] = attrs.field(
        init=False, default=attrs.Factory(_tool_map, takes_self=True)
    )
    _call: Call[Context, Context, AgentError] = attrs.field(
        init=False,
        alias="call",
        default=attrs.Factory(_own_call, takes_self=True),
    )
    _tool_facts: ToolFacts = attrs.field(
        init=False,
        default=attrs.Factory(
            lambda self: tool_facts(self._tool_map), takes_self=True
        ),
    )
    _deps: object = attrs.field(init=False, default=NO_DEPS)
    _needs_deps: tuple[str, ...] = attrs.field(
        init=False,
        default=attrs.Factory(
            lambda self: tuple(t.name for t in self.tools if t.takes_deps),
            takes_self=True,
        ),
    )

    @overload
    def __init__(
        self: Agent[None],
        name: str,
        model: Model,
        instructions: str = "",
        tools: Iterable[Tool[None]] = (),
        max_turns: int = 10,
        on_turn_limit: Literal["fail", "answer"] = "fail",
        response_schema: ResponseSchema | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        history: HistoryPolicy | None = None,
        description: str = "",
        max_parallel_tools: int | None = None,
        output: Output[Any] | None = None,
        input_guards: Iterable[InputGuard] = (),
    ) -> None: ...
    @overload
    def __init__(
        self,
        name: str,
        model: Model,
        instructions: str = "",
        tools: Iterable[Tool[D_contra]] = (),
        max_turns: int = 10,
        on_turn_limit: Literal["fail", "answer"] = "fail",
        response_schema: ResponseSchema | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        history: HistoryPolicy | None = None,
        description: str = "",
        max_parallel_tools: int | None = None,
        output: Output[Any] | None = None,
        input_guards: Iterable[InputGuard] = (),
        *,
        deps_type: type[D_contra],
    ) -> None: ...
    def __init__(  # the fields, as attrs would take them
        self,
        name: str,
        model: Model,
        instructions: str = "",
        tools: Iterable[Tool[Any]] = (),
        max_turns: int = 10,
        on_turn_limit: Literal["fail", "answer"] = "fail",
        response_schema: ResponseSchema | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        history: HistoryPolicy | None = None,
        description: str = "",
        max_parallel_tools: int | None = None,
        output: Output[Any] | None = None,
        input_guards: Iterable[InputGuard] = (),
        *,
        deps_type: object = None,  # for the checkers: Agent[deps_type]
    ) -> None:
        del deps_type
        self.__attrs_init__(  # pyright: ignore[reportAttributeAccessIssue]
            name,
            model,
            instructions,
            tools,
            max_turns,
            on_turn_limit,
            response_schema,
            temperature,
            max_tokens,
            history,
            description,
            max_parallel_tools,
            output,
            input_guards,
        )

    def __attrs_post_init__(self) -> None:
        if self.max_turns < 1:
            msg = f"agent {self.name!r}: max_turns must be at least 1"
            raise ConstructionError(msg)
        limit = self.max_parallel_tools
        if limit is not None and (type(limit) is not int or limit < 1):
            msg = (
                f"agent {self.name!r}: max_parallel_tools must be a whole "
                "number at least 1, or None for no limit"
            )
            raise ConstructionError(msg)
        if self.output is not None and self.response_schema is None:
            object.__setattr__(self, "response_schema", self.output.schema)
        names = [t.name for t in self.tools]
        if len(set(names)) != len(names):
            msg = f"agent {self.name!r}: duplicate tool names {sorted(names)}"
            raise ConstructionError(msg)
        note_agent(self)

    def __repr__(self) -> str:
        return f"Agent({self.name!r}, {self.model.name!r})"

    def with_deps(self, deps: D_contra) -> Agent[D_contra]:
        """This agent with *deps* bound: its runs (as a handler, in a swarm
        or a graph, or resumed) give them to its tools, unless ``run`` is
        given others.  The agent itself is unchanged.

        .. versionadded:: 0.1.0
        """
        bound = copy.copy(self)
        object.__setattr__(bound, "_deps", deps)
        object.__setattr__(bound, "_call", _own_call(bound))
        return bound

    async def run(
        self, messages: Sequence[Message], *, deps: D_contra | NoDeps = NO_DEPS
    ) -> Result[AgentRun, AgentError]:
        """Run the loop on *messages*; return the messages it added.

        *deps* go to the tools that take a :class:`~pipeline.RunContext`
        (default: those bound with :meth:`with_deps`).

        Raises:
            MissingDeps: a tool takes a :class:`~pipeline.RunContext` and
                the run has no dependencies.
        """
        done = await self._traced_turns(messages, deps)
        if type(done) is Failure:
            return done
        return Success(
            AgentRun(self.name, tuple(done.messages), done.usage, done.turns)
        )

    async def _traced_turns(
        self, messages: Sequence[Message], deps: object = NO_DEPS
    ) -> Turns | Failure[AgentError]:
        """:meth:`run`'s loop on the agent's own tools, as it left it:
        traced in a scope of its own under a global tracer provider and
        no scope (see :func:`~pipeline.runs.traced_by_default`)."""
        if traced_by_default():  # a global provider, no scope: trace it
            with scope(name=self.name):
                return await self._turns(
                    messages, self._tool_map, None, None, None, None, deps
                )
        return await self._turns(
            messages, self._tool_map, None, None, None, None, deps
        )

    async def converse(
        self,
        messages: Sequence[Message],
        tools: Mapping[str, Tool],
        intercept: Intercept | None = None,
        history: HistoryPolicy | None = None,
        specs: tuple[ToolSpec, ...] | None = None,
        env: Ambient | None = None,
        *,
        deps: object = NO_DEPS,
    ) -> Result[AgentRun, AgentError]:
        """Run the loop with *tools* instead of the agent's own.

        *intercept* takes some tool calls before the tools run (a swarm's
        transfers: see :data:`pipeline._turns.Intercept`); *history*
        replaces the agent's own history policy; *specs* are *tools*'
        specs, when the caller has them at hand; *env*, the ambient values,
        when the caller read them already; *deps*, the run's dependencies
        (default: those bound with :meth:`with_deps`).
        """
        done = await self._turns(
            messages, tools, intercept, history, specs, env, deps
        )
        if type(done) is Failure:
            return done
        return Success(
            AgentRun(self.name, tuple(done.messages), done.usage, done.turns)
        )

    async def _turns(
        self,
        messages: Sequence[Message],
        tools: Mapping[str, Tool],
        intercept: Intercept | None,
        history: HistoryPolicy | None,
        specs: tuple[ToolSpec, ...] | None,
        env: Ambient | None,
        deps: object = NO_DEPS,
    ) -> Turns | Failure[AgentError]:
        """:meth:`converse`'s run, as the loop left it: what it added, as
        the loop's state (a swarm extends its log with it: no
        :class:`AgentRun`, no tuple of the messages to build per turn at
        the conversation), or its failure."""
        if deps is NO_DEPS:
            deps = self._deps
            if deps is NO_DEPS and self._needs_deps:
                raise MissingDeps(self._needs_deps[0])
        view: Sequence[Message] = messages
        if env is None:
            env = ambient()  # read once for the whole run
        nested = env.boundary is not None
        key = digest(self.instructions, messages) if nested else None
        policy = history or self.history
        if policy is not None:
            selected = await policy.select(view)
            if not ok(selected):
                return Failure(selected.failure())
            view = selected.unwrap()
        if self.instructions:
            view = joined((Message.system(self.instructions),), view)
        loop = Loop(
            self,
            view,
            tools,
            intercept,
            specs,
            env,
            self.input_guards,
            deps,
            # Its own tools' facts, made once (tools are frozen).
            self._tool_facts if tools is self._tool_map else None,
        )
        max_steps = (
            self.max_turns
            + 1
            + (self.output.retries if self.output is not None else 0)
        )
        # Nothing records the turns (no enclosing checkpointed step) nor
        # traces them: the engine's snapshots would be built for no one.
        scope = env.scope
        bare = not nested and (scope is None or scope.tracing is None)
        return (
            await loop.unchecked(max_steps)
            if bare
            else await self._folded(loop, max_steps, key, env)
        )

    async def _folded(
        self, loop: Loop, max_steps: int, key: str | None, env: Ambient
    ) -> Turns | Failure[Any]:
        """*loop* run by the fold engine: each turn a record of the
        enclosing checkpointed step (continuing from those it saved before,
        for the input *key*), a span of a traced run."""
        out = await run_machine(
            loop,
            loop.start(),
            None,
            max_steps=max_steps,
            digest=key,
            announce=False,
            env=env,
        )
        if not ok(out):
            return Failure(out.failure())
        snap = out.unwrap()
        if snap.status is Status.INTERRUPTED:  # a tool's fold paused
            question = snap.pending.question if snap.pending else ""
            return Failure(RunPaused(question, path=(self.name,)))
        done: Turns = snap.state
        return done

    def handler(self) -> Handler[Context, Context, AgentError]:
        """This agent as a handler (it is one already: kept for older code)."""
        return self


@final
@attrs.frozen
class AgentOutput:
    """One sub-agent's contribution to a :class:`ParallelAgent`.

    .. versionadded:: 0.1.0
    """

    name: str
    messages: tuple[Message, ...]


def default_merge(outputs: Sequence[AgentOutput]) -> Message:
    """``[name]\\ntext`` for each agent's last text, in definition order.

    Agents without text are left out.

    .. versionadded:: 0.1.0
    """
    parts = []
    for out in outputs:
        text = AgentRun(out.name, out.messages).text
        if text:
            parts.append(f"[{out.name}]\n{text}")
    return Message.assistant("\n\n".join(parts))


@final
@attrs.frozen(eq=False, repr=False)
class ParallelAgent(Handler[Context, Context, AgentError]):
    """Sub-agents on the same messages, concurrently; one merged answer.

    Built on :func:`pipeline.must`: the first failure cancels the siblings
    and is returned (a sibling's cancellation is never reported as the
    cause).  *merge* turns the outputs, in definition order, into one
    assistant message (default: :func:`default_merge`).

    The run's messages are the sub-agents' tool calls and their results
    (an audit trail, each message tagged with its agent, in definition
    order), then the merged answer.

    .. versionadded:: 0.1.0
    """

    name: str
    agents: tuple[AgentLike, ...] = attrs.field(converter=_agents)
    merge: Callable[[Sequence[AgentOutput]], Message] = default_merge
    description: str = ""
    _call: Call[Context, Context, AgentError] = attrs.field(
        init=False,
        alias="call",
        default=attrs.Factory(_agent_call, takes_self=True),
    )

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
            agent=self.name,
        )
        await emit(MessageComplete(self.name, merged))
        usage = sum((r.usage for r in runs), Usage())
        trail = tuple(
            m
            for r in runs
            for m in _tagged(r)
            if m.tool_calls or m.role is Role.TOOL
        )
        return Success(
            AgentRun(
                self.name,
                (*trail, merged),
                usage,
                sum(r.turns for r in runs),
            )
        )

    def handler(self) -> Handler[Context, Context, AgentError]:
        """This agent as a handler (it is one already: kept for older code)."""
        return self

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self.name!r}, {len(self.agents)} agents)"
        )


def _tagged(run: AgentRun) -> tuple[Message, ...]:
    """*run*'s messages, each tagged with the agent that added it (the
    innermost one when agents nest)."""
    agent = run.agent
    return tuple(
        m if m.agent is not None else attrs.evolve(m, agent=agent)
        for m in run.messages
    )


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
@attrs.frozen(eq=False, repr=False)
class SequentialAgent(Handler[Context, Context, AgentError]):
    """Sub-agents one after another, each seeing what came before.

    Agent *i* sees the original messages, every message the agents before
    it added, and (when there are any) one user message *handoff*
    ("Please proceed.").  The handoff is not part of the result.  Built on
    :func:`pipeline.sequential`; the first failure stops the rest.  The
    run's messages are everything the sub-agents added (their tool calls
    included), each tagged with its agent.

    .. versionadded:: 0.1.0
    """

    name: str
    agents: tuple[AgentLike, ...] = attrs.field(converter=_agents)
    handoff: str = _HANDOFF_MESSAGE
    description: str = ""
    _call: Call[Context, Context, AgentError] = attrs.field(
        init=False,
        alias="call",
        default=attrs.Factory(_agent_call, takes_self=True),
    )

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
                    relay.added + _tagged(run),
                    relay.usage + run.usage,
                    relay.turns + run.turns,
                )
            )

        return Handler(step, agent.name)

    def handler(self) -> Handler[Context, Context, AgentError]:
        """This agent as a handler (it is one already: kept for older code)."""
        return self

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self.name!r}, {len(self.agents)} agents)"
        )


@overload
def as_tool(
    agent: AgentLike | Handler[Context, Context, Any],
    *,
    name: str | None = None,
    description: str | None = None,
) -> Tool: ...


@overload
def as_tool(
    agent: ToolSource,
    *,
    name: str | None = None,
    description: str | None = None,
) -> Tool: ...


def as_tool(
    agent: AgentLike | Handler[Context, Context, Any] | ToolSource,
    *,
    name: str | None = None,
    description: str | None = None,
) -> Tool:
    """Let a model call *agent* as a tool.

    *agent* is an agent, or any handler over contexts (a swarm, a graph over
    contexts): the tool takes ``{"prompt": "..."}``, runs it on a fresh
    history (just the prompt, as a user message) and returns the final
    text.  A graph over another state type takes that state, as a JSON
    object of its fields, and returns the final state the same way.  A
    failure becomes an error result.

    .. versionadded:: 0.1.0
    """
    if isinstance(agent, ToolSource):
        return agent.as_tool(name=name, description=description)
    return prompt_tool(agent, name=name, description=description)


def prompt_tool(
    agent: AgentLike | Handler[Context, Context, Any],
    *,
    name: str | None,
    description: str | None,
) -> Tool:
    """*agent* as a tool that takes ``{"prompt": "..."}`` and returns the
    final text (see :func:`as_tool`)."""
    from .tools import tool  # noqa: PLC0415  # tools imports nothing from here

    label = name or agent.name

    async def call(prompt: str) -> str:
        out = await _run_prompt(agent, prompt)
        if not ok(out):
            raise_for(out.failure(), label)
        return out.unwrap()

    own: object = getattr(agent, "description", "")  # handlers have none
    made = tool(
        name=label,
        description=description
        or (own if isinstance(own, str) else "")
        or f"Ask the {agent.name!r} agent to do a task.",
    )(call)
    return note_fold_tool(
        attrs.evolve(
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
    )


def raise_for(failure: object, tool: str) -> NoReturn:
    """Why a fold used as a tool did not answer, raised inside the tool.

    A pause inside a checkpointed run pauses the calling agent's run too
    (and so the run around it): it must not become an error result the
    model could talk its way past.  Anything else is an error result that
    names the failure's type only: its text (a provider's error body, a
    node's message) may hold a secret, so it goes to the log instead.
    """
    if isinstance(failure, RunPaused) and current_boundary() is not None:
        raise PauseRequested(failure.question)
    kind = type(failure).__name__
    _LOG.warning("tool %r: the run failed with %s: %s", tool, kind, failure)
    msg = f"{tool!r} failed ({kind}); the details were logged"
    raise AgentFailed(msg)


async def _run_prompt(
    agent: AgentLike | Handler[Context, Context, Any], prompt: str
) -> Result[str, Any]:
    if isinstance(agent, (Agent, ParallelAgent, SequentialAgent)) or not (
        isinstance(agent, Handler)
    ):
        run = await agent.run((Message.user(prompt),))
        if not ok(run):
            return Failure(run.failure())
        return Success(run.unwrap().text)
    # A fixed run id: the same prompt is the same input (see agent nodes).
    out = await agent(Context.of(Message.user(prompt), run_id=agent.name))
    if not ok(out):
        return Failure(out.failure())
    added = tuple(out.unwrap().messages[1:])
    return Success(AgentRun(agent.name, added).text)


# Old paths of names that live elsewhere now; they warn.
_MOVED: dict[str, str] = {
    "TurnLimitExceeded": "pipeline.failures:TurnLimitExceeded",
}

if not TYPE_CHECKING:  # type checkers refuse the old paths
    __getattr__ = moved(__name__, _MOVED)
