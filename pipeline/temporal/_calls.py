"""Agents' model calls and tool calls as activities of their own.

A step activity runs a node (or a swarm agent's turn at the conversation)
whole, but an agent inside it does not call its model or its tools there:
each model call and each call of one of the agent's own tools goes to the
run's workflow (the ``pipeline.call`` update), which makes it as an
activity of its own (``pipeline.call``), with the timeouts and retry
policy :class:`~pipeline.temporal.RunOptions` gives that agent or tool,
and keeps its answer while the step is in flight.  So:

* a tool that raises is retried as itself, under its own policy, without
  running the node again;
* an attempt that takes a crashed step over gets the answer of every call
  the step made before (by the call's key: what was asked, and how many
  times the same was asked before in the step) instead of making it again;
  with the turns the step committed (progress records), no model call and
  no tool call whose activity finished runs twice.

The call activity may run on any worker, so it finds the agent by a name
every worker gives it alike: ``name@digest`` over its instructions, its
model's name and its tools' specs (:func:`agent_key`), among the agents
that existed when the worker was made (module-level agents, like the
graphs that use them).  A call stays in the step when the agent cannot be
found that way (made at run time, or two agents alike under one name),
and so do the tools that are not the agent's own (state tools, a swarm's
transfers), tools that run folds (their turns are the step's progress)
and tools with secret arguments (a secret never enters a history).
"""

from __future__ import annotations

import logging

from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, final

from returns.result import Failure, Result, Success
from temporalio.exceptions import ApplicationError

from .._messages import ToolCall
from .._offload import runs_a_fold
from .._serde import canonical, checksum, make_converter
from ..failures import ModelError
from ..models import ModelRequest, ModelResponse
from ._failures import Kinds
from ._wire import CALL, MAX_PAYLOAD, CallDone, CallTask


if TYPE_CHECKING:
    from temporalio.client import WorkflowHandle

    from .._agent_spec import AgentSpec
    from ..agents import Agent
    from ..models import DeltaSink
    from ..runs import ToolHook
    from ..tools import Tool

__all__ = ("Agents", "StepCalls", "agent_key")

_CONVERTER = make_converter()
_LOG = logging.getLogger("pipeline.temporal")


def agent_key(agent: Agent) -> str:
    """The name every worker gives *agent*: ``name@digest``."""
    shape = [
        agent.name,
        agent.instructions,
        agent.model.name,
        [[t.name, t.description, dict(t.parameters)] for t in agent.tools],
    ]
    return f"{agent.name}@{checksum(canonical(shape))[:12]}"


@final
class Agents:
    """The agents a worker finds by key: those alive when it was made, but
    for keys two of them share."""

    __slots__ = ("_by_key", "_keys")

    def __init__(self, agents: Iterable[Agent]) -> None:
        found: dict[str, Agent | None] = {}
        for agent in agents:
            key = agent_key(agent)
            seen = found.get(key, agent)
            found[key] = agent if seen is agent else None  # None: ambiguous
        self._by_key = {k: a for k, a in found.items() if a is not None}
        self._keys = {id(a): k for k, a in self._by_key.items()}

    def key_of(self, agent: AgentSpec) -> str | None:
        """*agent*'s key, if the table finds it by that key."""
        return self._keys.get(id(agent))

    def find(self, key: str) -> Agent | None:
        """The agent *key* names, if any."""
        return self._by_key.get(key)


def _digest(doc: object) -> str:
    return checksum(canonical(_CONVERTER.unstructure(doc)))[:16]


@final
class StepCalls:
    """The offload of one step activity's attempt (see
    :class:`pipeline._offload.Offload`): its agents' calls go to the
    workflow as calls of their own."""

    __slots__ = ("_asked", "agents", "handle", "kinds", "task", "where")

    def __init__(
        self,
        agents: Agents,
        handle: WorkflowHandle[Any, Any],
        task: str,
        where: tuple[str, str],
        kinds: Kinds,
    ) -> None:
        self.agents = agents
        self.handle = handle
        self.task = task
        self.where = where  # the hosted machine's name and fingerprint
        self.kinds = kinds
        self._asked: Counter[str] = Counter()

    def model(self, agent: AgentSpec, /) -> Any:
        """A stand-in for *agent*'s model, or the model itself."""
        key = self.agents.key_of(agent)
        known = None if key is None else self.agents.find(key)
        if key is None or known is None:
            return agent.model
        return _RemoteModel(self, known, key)

    def tools(
        self, agent: AgentSpec, tools: Mapping[str, Tool], /
    ) -> ToolHook | None:
        """The hook that sends *agent*'s own plain tools' calls out."""
        key = self.agents.key_of(agent)
        known = None if key is None else self.agents.find(key)
        if key is None or known is None:
            return None
        own = {t.name: t for t in known.tools}
        remote = frozenset(
            name
            for name, t in tools.items()
            if own.get(name) is t
            and not runs_a_fold(t)
            and not t.secret_arguments
        )
        if not remote:
            return None

        async def send(
            call: ToolCall, run: Callable[[], Awaitable[tuple[str, bool]]]
        ) -> tuple[str, bool]:
            if call.name not in remote:
                return await run()
            done = await self.ask(
                f"t:{key}:{call.id}:{_digest([call.name, call.arguments])}",
                agent=key,
                tool=call.name,
                arguments=call.arguments,
                call_id=call.id,
            )
            return done.content, done.is_error

        return send

    async def ask(self, base: str, **fields: Any) -> CallDone:
        """Make one call through the workflow; its answer.

        Raises:
            ApplicationError: the workflow refused it (this attempt no
                longer owns the step) or the call's activity failed for
                good; the attempt fails and Temporal retries it.
        """
        self._asked[base] += 1
        key = f"{base}#{self._asked[base]}"
        machine, fingerprint = self.where
        task = CallTask(
            self.task, key, machine=machine, fingerprint=fingerprint, **fields
        )
        try:
            done: CallDone = await self.handle.execute_update(
                CALL, task, result_type=CallDone
            )
        except Exception as exc:  # the SDK's RPC and update errors
            what = fields.get("tool") or "model"
            msg = f"call {what} of step {self.task} not made ({type(exc).__name__})"
            raise ApplicationError(msg, type="pipeline.CallLost") from exc
        return done


@final
class _RemoteModel:
    """An agent's model, called through the workflow (no streaming: the
    answer arrives whole)."""

    __slots__ = ("agent", "calls", "key")

    def __init__(self, calls: StepCalls, agent: Agent, key: str) -> None:
        self.calls = calls
        self.agent = agent
        self.key = key

    @property
    def name(self) -> str:
        return self.agent.model.name

    async def generate(
        self, request: ModelRequest, *, on_delta: DeltaSink | None = None
    ) -> Result[ModelResponse, ModelError]:
        del on_delta  # the activity's model does not stream back
        messages = tuple(request.messages)
        asked = canonical(
            _CONVERTER.unstructure(
                [messages, request.tools, request.use_tools]
            )
        )
        if len(asked) > MAX_PAYLOAD:
            # Too big to cross Temporal: the call is made here, in the step.
            return await self.agent.model.generate(request)
        done = await self.calls.ask(
            f"m:{self.key}:{checksum(asked)[:16]}",
            agent=self.key,
            messages=messages,
            tool_specs=request.tools,
            use_tools=request.use_tools,
        )
        if done.response is not None:
            return Success(done.response)
        failure = (
            self.calls.kinds.decode(done.failure) if done.failure else None
        )
        if not isinstance(failure, ModelError):
            msg = f"model call of {self.agent.name!r} came back without an answer"
            raise ApplicationError(msg, type="pipeline.CallLost")
        return Failure(failure)


async def make_call(agents: Agents, task: CallTask, kinds: Kinds) -> CallDone:
    """Make the call *task* names, here (the call activity's body).

    Raises:
        ApplicationError: no agent here has the call's key (another worker
            may: the activity is retried); a tool's exception propagates
            (and is retried under the tool's policy).
    """
    agent = agents.find(task.agent)
    if agent is None:
        msg = f"this worker has no agent {task.agent!r}"
        raise ApplicationError(msg, type="pipeline.NotHosted")
    if task.tool:
        found = {t.name: t for t in agent.tools}.get(task.tool)
        if found is None:
            msg = f"agent {agent.name!r} has no tool {task.tool!r}"
            raise ApplicationError(msg, type="pipeline.NotHosted")
        content, failed = await found.call(task.arguments)
        size = len(content.encode("utf-8", "surrogatepass"))
        if size > MAX_PAYLOAD:
            # Temporal would refuse the answer and retry the call forever.
            _LOG.error("tool %r returned %d bytes", found.name, size)
            failed = True
            content = (
                f"error: tool {found.name!r} returned {size} bytes, more than "
                f"a Temporal run carries ({MAX_PAYLOAD})"
            )
        return CallDone(content=content, is_error=failed)
    request = ModelRequest(
        task.messages,
        task.tool_specs,
        response_schema=agent.response_schema,
        temperature=agent.temperature,
        max_tokens=agent.max_tokens,
        use_tools=task.use_tools,
    )
    answer = await agent.model.generate(request)
    if type(answer) is Success:
        return CallDone(response=answer.unwrap())
    return CallDone(failure=kinds.encode(answer.failure()))
