"""Typed events, and streaming them while any pipeline runs.

>>> import anyio
>>> from returns.result import Result, Success
>>> from pipeline import handler
>>> @handler
... async def shout(text: str) -> Result[str, str]:
...     await emit(Note("shout", "working"))
...     return Success(text.upper())
>>> async def main() -> list[str]:
...     async with stream(shout, "hi") as events:
...         return [type(e).__name__ async for e in events]
>>> anyio.run(main)
['Note', 'Finished']

Handlers, agents and graphs call :func:`~pipeline.emit`; it reaches the
innermost :func:`~pipeline.stream` that is running them (through a context variable), and does
nothing when nobody listens.
"""

from __future__ import annotations

import contextlib
import contextvars
import math

from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any, Generic, Self, TypeAlias, TypeVar, final

import anyio
import attrs

from anyio.streams.memory import (
    MemoryObjectReceiveStream,
    MemoryObjectSendStream,
)
from returns.result import Result

from ._concurrency import Siblings, collapse
from ._handler import Handler
from ._messages import Message, ToolCall


In = TypeVar("In")
Out = TypeVar("Out")
Err = TypeVar("Err")
Out_co = TypeVar("Out_co", covariant=True)
Err_co = TypeVar("Err_co", covariant=True)

__all__ = (
    "CacheLookup",
    "CheckpointSaved",
    "CheckpointSkipped",
    "Event",
    "EventStream",
    "Finished",
    "FoldEvent",
    "GuardrailChecked",
    "Handoff",
    "Interrupted",
    "McpServerLost",
    "MessageComplete",
    "MessageDelta",
    "ModelCacheLookup",
    "NodeFinished",
    "NodeStarted",
    "OutputRejected",
    "Stopped",
    "ToolCallFinished",
    "ToolCallStarted",
    "ToolRaised",
    "listening",
    "reader_caught_up",
)


# -- the values a stream yields ----------------------------------------------


@final
@attrs.frozen
class NodeStarted:
    """A node (or the branches of a fan-out) started.

    .. versionadded:: 0.1.0
    """

    nodes: tuple[str, ...]
    step: int


@final
@attrs.frozen
class NodeFinished:
    """A node (or a whole fan-out) finished and its state is merged.

    .. versionadded:: 0.1.0
    """

    nodes: tuple[str, ...]
    step: int


@final
@attrs.frozen
class CacheLookup:
    """A cached node looked its input up: *hit* (not run) or a miss (run).

    *key* is the first 16 hex digits of the input's digest.

    .. versionadded:: 0.1.0
    """

    node: str
    hit: bool
    key: str


@final
@attrs.frozen
class ModelCacheLookup:
    """A cached model (:func:`pipeline.models.cached`) looked a request up:
    *hit* (answered from the cache, the model not called) or a miss.

    *key* is the first 16 hex digits of the request's digest.

    .. versionadded:: 0.1.0
    """

    model: str
    hit: bool
    key: str


@final
@attrs.frozen
class CheckpointSaved:
    """A record was committed.

    .. versionadded:: 0.1.0
    """

    thread_id: str
    version: int


@final
@attrs.frozen
class Interrupted:
    """A gate paused the run for a human.

    .. versionadded:: 0.1.0
    """

    question: str


@final
@attrs.frozen
class Stopped:
    """A gate stopped the run gracefully.

    .. versionadded:: 0.1.0
    """

    reason: str


@final
@attrs.frozen
class CheckpointSkipped:
    """Loading a thread skipped its last record: torn or failing its
    checksum (a write cut short).  The run goes on from the one before.

    .. versionadded:: 0.1.0
    """

    thread_id: str
    version: int
    reason: str


@final
@attrs.frozen
class MessageDelta:
    """A fragment of text an agent's model is streaming.

    .. versionadded:: 0.1.0
    """

    agent: str
    text: str


@final
@attrs.frozen
class MessageComplete:
    """A whole message an agent added (its answer, or a tool result).

    .. versionadded:: 0.1.0
    """

    agent: str
    message: Message


@final
@attrs.frozen
class ToolCallStarted:
    """An agent started a tool call.

    .. versionadded:: 0.1.0
    """

    agent: str
    call: ToolCall


@final
@attrs.frozen
class ToolCallFinished:
    """A tool call finished; *is_error* if the model got an error result.

    .. versionadded:: 0.1.0
    """

    agent: str
    call: ToolCall
    content: str
    is_error: bool


@final
@attrs.frozen
class ToolRaised:
    """A tool raised an exception, which the model got as an error result.

    *exception_type* is the exception's type, which is all the model saw
    too.  The exception itself is not carried, nor its message: its text
    may quote a secret argument (``int(pin.reveal())`` raises a
    ``ValueError`` that does).  Its traceback, messages withheld, is
    logged on the ``pipeline.tools`` logger.

    .. versionadded:: 0.1.0
    """

    tool: str
    exception_type: type[Exception]


@final
@attrs.frozen
class McpServerLost:
    """An MCP server's connection ended while *tool* was being called (the
    process died, the HTTP server went away): the model got an error
    result, and later calls to *server* fail at once.

    .. versionadded:: 0.1.0
    """

    server: str
    tool: str


@final
@attrs.frozen
class Handoff:
    """A swarm moved the conversation from one agent to another.

    *count* is this handoff's number in the run (1 for the first).

    .. versionadded:: 0.1.0
    """

    source: str
    target: str
    count: int


@final
@attrs.frozen
class OutputRejected:
    """An agent's final answer did not fit its :class:`pipeline.Output`:
    *reason* names the fields and rules (never the value); *attempt*
    counts the answers refused so far in this run; *retrying* says whether
    the model is asked again.

    .. versionadded:: 0.1.0
    """

    agent: str
    attempt: int
    reason: str
    retrying: bool


@final
@attrs.frozen
class GuardrailChecked:
    """An agent's guardrail gave its verdict: *stage* is ``input`` or
    ``output``, *outcome* ``pass``, ``retry`` or ``stop``, *reason* what
    the check said ('' when it passed).

    .. versionadded:: 0.1.0
    """

    agent: str
    guardrail: str
    stage: str
    outcome: str
    reason: str = ""


@final
@attrs.frozen
class Note:
    """A free-form progress note from your own handler.

    .. versionadded:: 0.1.0
    """

    source: str
    text: str


@final
@attrs.frozen
class Finished(Generic[Out_co, Err_co]):
    """The run is over; *result* is what the pipeline returned.

    .. versionadded:: 0.1.0
    """

    result: Result[Out_co, Err_co]


Event: TypeAlias = (
    MessageDelta
    | MessageComplete
    | ToolCallStarted
    | ToolCallFinished
    | ToolRaised
    | McpServerLost
    | Handoff
    | OutputRejected
    | GuardrailChecked
    | Note
    | NodeStarted
    | NodeFinished
    | CacheLookup
    | ModelCacheLookup
    | CheckpointSaved
    | CheckpointSkipped
    | Interrupted
    | Stopped
    | Finished[Any, Any]
)
"""Everything a stream can yield; ``Finished`` always comes last."""

FoldEvent: TypeAlias = (
    NodeStarted
    | NodeFinished
    | CheckpointSaved
    | CheckpointSkipped
    | Interrupted
    | Stopped
)
"""The events the fold engine itself produces (graphs, swarms, agents)."""


# -- emitting and streaming ------------------------------------------------

_Sink: TypeAlias = Callable[[Event], Awaitable[None]]
_SINK: contextvars.ContextVar[_Sink | None] = contextvars.ContextVar(
    "pipeline_event_sink", default=None
)


async def emit(event: Event) -> None:
    """Send *event* to the stream running this code, if there is one.

    .. versionadded:: 0.1.0
    """
    sink = _SINK.get()
    if sink is not None:
        await sink(event)


current_sink: Callable[[], Callable[[Event], Awaitable[None]] | None] = (
    _SINK.get
)
"""Where :func:`~pipeline.emit` sends events now (a listening stream), if
anywhere (read once per run by :func:`pipeline.fold.ambient`)."""


def listening() -> bool:
    """Whether a stream is listening (so it is worth streaming deltas).

    .. versionadded:: 0.1.0
    """
    return _SINK.get() is not None


async def reader_caught_up() -> None:
    """Wait until the stream running this code has had every event emitted
    so far taken by its reader, and the reader asks for another.

    Agents call it before each model call, so a reader leaving a
    :func:`~pipeline.stream` early never starts another one: a model call starts only
    once the reader has seen everything before it and is still reading.
    Returns at once when nothing listens.

    .. versionadded:: 0.1.0
    """
    gate = _GATE.get()
    if gate is not None:
        await gate()


_GATE: contextvars.ContextVar[Callable[[], Awaitable[None]] | None] = (
    contextvars.ContextVar("pipeline_reader_gate", default=None)
)

current_gate: Callable[[], Callable[[], Awaitable[None]] | None] = _GATE.get
"""What :func:`reader_caught_up` waits on now, if anything."""


@final
class EventStream(Generic[Out, Err]):
    """Runs a handler and yields its events; see :func:`~pipeline.stream`.

    An async context manager and an async iterator.  Leaving the block early
    cancels the run and waits for it to stop: no task outlives the block.

    .. versionadded:: 0.1.0
    """

    def __init__(
        self, handler: Handler[In, Out, Err], value: In, buffer: float
    ) -> None:
        self._handler: Handler[Any, Out, Err] = handler
        self._value = value
        self._buffer = buffer
        self.result: Result[Out, Err] | None = None
        """The pipeline's result, once it finished."""
        self._send: MemoryObjectSendStream[Event] | None = None
        self._receive: MemoryObjectReceiveStream[Event] | None = None
        self._group: anyio.abc.TaskGroup | None = None
        # Events sent, events asked for, and a wake-up for the gate.
        self._sent = 0
        self._asked = 0
        self._more = anyio.Event()
        # The run's own scope, shielded and cancelled explicitly: never the
        # group's scope (see pipeline/_concurrency.py for why).  A stray
        # cancellation the run ends in is kept, and raised when the block
        # ends.
        self._siblings = Siblings()
        self._scope = self._siblings.scope()

    async def __aenter__(self) -> Self:
        send, receive = anyio.create_memory_object_stream[Event](self._buffer)
        self._send, self._receive = send, receive
        self._group = anyio.create_task_group()
        await self._group.__aenter__()
        self._group.start_soon(self._run, send)
        return self

    async def _run(self, send: MemoryObjectSendStream[Event]) -> None:
        async def deliver(event: Event) -> None:
            self._sent += 1
            # The reader left the block: the run is being stopped, but a
            # fan-out's branches (each in a shielded scope of its own) only
            # stop once the run forwards that to them.  What they emit until
            # then has nobody to go to.  (send is a checkpoint either way.)
            with contextlib.suppress(anyio.BrokenResourceError):
                await send.send(event)

        _SINK.set(deliver)  # this task's context only
        _GATE.set(self._caught_up)
        try:
            with self._scope, send:
                result = await self._handler(self._value)
                self.result = result
                await send.send(Finished(result))
        except anyio.get_cancelled_exc_class() as exc:  # not the stream's
            self._siblings.keep_stray(self._scope, exc)

    async def _caught_up(self) -> None:
        while self._asked <= self._sent:
            if self._more.is_set():
                self._more = anyio.Event()
            await self._more.wait()

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> Event:
        assert self._receive is not None, "use EventStream in async with"  # noqa: S101
        self._asked += 1
        self._more.set()
        try:
            return await self._receive.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        assert self._group is not None  # noqa: S101
        assert self._receive is not None  # noqa: S101
        # Leaving early (or finishing) stops the run; a no-op if it is done.
        self._siblings.cancel()
        self._receive.close()
        try:
            suppressed = await self._group.__aexit__(exc_type, exc, tb)
        except BaseExceptionGroup as group:
            raise collapse(group) from None
        if exc is None:
            self._siblings.raise_stray()
        return suppressed


def stream(
    handler: Handler[In, Out, Err], value: In, *, buffer: float = math.inf
) -> EventStream[Out, Err]:
    """Run *handler* on *value*, yielding its events as they happen.

    >>> # async with stream(pipeline, ctx) as events:
    >>> #     async for event in events: ...
    >>> #     events.result  # the final Result, also sent as Finished

    *buffer* bounds the events waiting to be read (unbounded by default, so
    emitters never wait for a slow reader; give a number for backpressure).

    .. versionadded:: 0.1.0
    """
    return EventStream(handler, value, buffer)
