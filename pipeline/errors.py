"""Exceptions :mod:`pipeline` raises.

Exceptions are for mistakes in how the library is called (found when a
value is built or given, before anything runs), for what a test double
finds, and for the few signals a tool sends its model.  What a run returns
when it fails is a value, never an exception: see :mod:`pipeline.failures`.

The hierarchy::

    ValueError
    ├── ConstructionError      a combinator or value that can never run
    ├── InvalidThreadId        a thread id no store can keep
    ├── GraphDefects           a graph cannot be built (.defects: GraphDefect)
    ├── SwarmDefects           a swarm cannot be built (.defects: GraphDefect)
    ├── InvalidAnswer          a human's answer does not fit its type
    ├── NestedTooDeeply        JSON read from outside nests past the limit
    ├── InvalidPart            a message part no model can take
    └── MalformedToolSchema    an MCP server lists a tool no model can call
    RuntimeError
    ├── RendererUnavailable    Graphviz's ``dot`` is missing or failed
    └── NotCheckpointed        ``interrupt()`` outside a checkpointed run
    KeyError
    └── SecretUnresolved       no resolver knows a secret's reference
    ConnectionError
    └── McpUnavailable         an MCP server cannot be reached or never answers
    ImportError
    └── MissingExtra           an optional dependency is not installed
    TypeError
    └── MissingDeps            a tool takes deps and its run has none
    Exception
    └── ToolError              raised in a tool: its message is the result
        └── AgentFailed        an agent used as a tool failed
    AssertionError
    ├── UnexpectedCall         a scripted double called too often
    └── Unconsumed             a scripted double left replies unused
    BaseException
    └── Suspended              ``interrupt()`` unwinding its step: never catch it

:class:`GraphDefect` is a value, one defect of a graph or swarm.
"""

from __future__ import annotations

import types
import typing

from collections.abc import Sequence
from typing import TYPE_CHECKING, final

import attrs

from ._moved import moved


__all__ = (
    "AgentFailed",
    "ConstructionError",
    "GraphDefect",
    "GraphDefects",
    "InvalidAnswer",
    "InvalidPart",
    "InvalidThreadId",
    "MalformedToolSchema",
    "McpUnavailable",
    "MissingDeps",
    "MissingExtra",
    "NestedTooDeeply",
    "NotCheckpointed",
    "RendererUnavailable",
    "SecretUnresolved",
    "Suspended",
    "SwarmDefects",
    "ToolError",
    "Unconsumed",
    "UnexpectedCall",
)


@final
class ConstructionError(ValueError):
    """A combinator was built with arguments that can never run.

    Raised at construction time (never at run time), for instance for a
    race with no branches or a loop whose limit is not positive.

    .. versionadded:: 0.1.0
    """


@final
class InvalidPart(ValueError):
    """A message part no model can take: image bytes without an image
    media type, a URL that is not ``http(s)``, both bytes and a URL or
    neither.  Raised where the part is built; the message names the part's
    kind and what is wrong, never its bytes or URL.

    .. versionadded:: 0.1.0
    """


class InvalidThreadId(ValueError):
    """A thread id a store cannot keep: not a ``str``, empty, longer than
    256 characters, or holding NUL or a lone surrogate.  Raised where the id
    is given, before anything runs or is written; the message never shows
    the id.

    .. versionadded:: 0.1.0
    """


@final
@attrs.frozen
class GraphDefect:
    """One structural defect found when a graph is built.

    .. versionadded:: 0.1.0
    """

    kind: str
    node: str
    detail: str

    def __str__(self) -> str:
        return f"{self.kind} at {self.node!r}: {self.detail}"


@final
class GraphDefects(ValueError):
    """A graph could not be built; *defects* lists every problem found.

    .. versionadded:: 0.1.0
    """

    def __init__(self, defects: Sequence[GraphDefect]) -> None:
        self.defects = tuple(defects)
        lines = "\n".join(f"  - {d}" for d in self.defects)
        super().__init__(f"{len(self.defects)} graph defect(s):\n{lines}")


@final
class SwarmDefects(ValueError):
    """A swarm could not be built; *defects* lists every problem found.

    .. versionadded:: 0.1.0
    """

    def __init__(self, defects: Sequence[GraphDefect]) -> None:
        self.defects = tuple(defects)
        lines = "\n".join(f"  - {d}" for d in self.defects)
        super().__init__(f"{len(self.defects)} swarm defect(s):\n{lines}")


class RendererUnavailable(RuntimeError):
    """A drawing cannot be rendered: Graphviz's ``dot`` program is not
    installed (``apt-get install graphviz``, ``brew install graphviz``) or
    it failed.  The DOT and Mermaid texts need no renderer.

    .. versionadded:: 0.1.0
    """


class ToolError(Exception):
    """Raise it in a tool to send its message to the model as the result.

    A tool's other exceptions reach the model only as their type and a
    generic sentence (their text may hold secrets); this one's message is
    the tool's own words for the model, so it is shown as it is.

    >>> str(ToolError("no order with that number"))
    'no order with that number'

    .. versionadded:: 0.1.0
    """


@final
class AgentFailed(ToolError):  # raised inside a tool: its error result
    """An agent used as a tool failed; the calling model sees why.

    .. versionadded:: 0.1.0
    """


@final
class MissingDeps(TypeError):
    """A tool takes a :class:`~pipeline.RunContext` and its run was given
    no dependencies (``agent.run(..., deps=...)`` or
    :meth:`~pipeline.Agent.with_deps`).  *tool* names it.

    .. versionadded:: 0.1.0
    """

    def __init__(self, tool: str) -> None:
        self.tool = tool
        super().__init__(
            f"tool {tool!r} takes a RunContext, and the run was given no "
            "dependencies: pass them with agent.run(..., deps=...) or "
            "agent.with_deps(...)"
        )


@final
class UnexpectedCall(AssertionError):
    """A scripted double was called more often than its script allows.

    .. versionadded:: 0.1.0
    """


@final
class Unconsumed(AssertionError):
    """A scripted double ended with replies nobody asked for.

    .. versionadded:: 0.1.0
    """


@final
class InvalidAnswer(ValueError):
    """A human's answer does not fit the type its gate (or
    :func:`pipeline.interrupt`) expects.

    *problems*, when given, says which fields do not fit and what they
    should be (paths and types, never the answer's values).

    .. versionadded:: 0.1.0
    """

    def __init__(self, kind: object, problems: str = "") -> None:
        text = f"the answer is not a {_type_name(kind)}"
        super().__init__(f"{text}: {problems}" if problems else text)
        self.kind = kind
        self.problems = problems


def _type_name(kind: object) -> str:
    """A class or a NewType by its name, a union by its members
    (``Literal['skip'] | None``), any other type by what it says
    (``dict[Color, int]``): their ``__qualname__`` would be ``dict``,
    ``Union``, ``Optional``."""
    if typing.get_origin(kind) in (typing.Union, types.UnionType):
        return " | ".join(_type_name(m) for m in typing.get_args(kind))
    if kind is None or kind is type(None):
        return "None"
    name = getattr(kind, "__qualname__", None)
    if name and (isinstance(kind, type) or hasattr(kind, "__supertype__")):
        return str(name)
    return str(kind).replace("typing.", "")


@final
class NotCheckpointed(RuntimeError):
    """:func:`pipeline.interrupt` was called outside the step of a
    checkpointed run: there is nowhere to keep the question while a human
    answers it.  Run the graph or swarm with a ``store=`` (or the handler
    inside the node of one).

    .. versionadded:: 0.1.0
    """

    def __init__(self, question: str) -> None:
        super().__init__(
            "interrupt() needs a checkpointed run to wait in (a graph or "
            "swarm run with store=..., or a step nested in one); the "
            f"question {question!r} has nowhere to wait"
        )


@final
class Suspended(BaseException):
    """:func:`pipeline.interrupt` unwinds the step it was called in with
    this: the question was recorded (or could not be: *failure*, the
    store's refusal), and the run pauses.  It is a ``BaseException``, like
    cancellation, so ``except Exception`` lets it through: never catch it.

    .. versionadded:: 0.1.0
    """

    def __init__(self, failure: object = None) -> None:
        super().__init__("the step asked a question and is suspended")
        self.failure = failure


@final
class MissingExtra(ImportError):
    """A module needs an optional dependency that is not installed.

    The message is one line that ends with the command installing the
    extra, ``pip install 'typed-pipeline[EXTRA]'`` (also ``.command``;
    the extra is ``.extra``); ``.name`` is the module that could not be
    imported.

    .. versionadded:: 0.1.0
    """

    def __init__(
        self, message: str, *, extra: str, command: str, name: str | None
    ) -> None:
        super().__init__(message, name=name)
        self.extra = extra
        self.command = command


@final
class NestedTooDeeply(ValueError):
    """JSON read from outside (an answer, ``--input``, a stored record,
    metadata, a model's tool arguments) nests deeper than the one limit
    all of them share (64 levels; *limit*).  It is refused by counting,
    before it is parsed, on every Python (3.13's parser no longer raises
    ``RecursionError`` where 3.11's did).  *where* names what was read;
    the value itself is never quoted.

    .. versionadded:: 0.1.0
    """

    def __init__(self, where: str, limit: int) -> None:
        super().__init__(f"{where} nests deeper than {limit} levels")
        self.where = where
        self.limit = limit


@final
class MalformedToolSchema(ValueError):
    """An MCP server listed a tool whose name or input schema no model can
    be given (found when the tools are listed, before any call): the
    message names the server, the tool and where in its schema.

    .. versionadded:: 0.1.0
    """


@final
class McpUnavailable(ConnectionError):
    """Entering an MCP connection failed: the server's process exited or
    its URL did not answer before the handshake was done, or the
    handshake outlasted the connection's ``timeout``.  The message names
    the server and what happened, never the URL or the underlying error's
    text (either may hold a token); that error is the ``__cause__``.

    .. versionadded:: 0.1.0
    """


@final
class SecretUnresolved(KeyError):
    """No resolver knows a secret's reference (the reference is named; a
    reference is never a value).

    .. versionadded:: 0.1.0
    """

    def __init__(self, ref: str) -> None:
        super().__init__(ref)
        self.ref = ref

    def __str__(self) -> str:
        return (
            f"secret {self.ref!r} cannot be resolved (give the run a "
            "resolver that knows it: pipeline.scope(secrets=...))"
        )


# Failure values moved to pipeline.failures; their old paths warn.
_MOVED: dict[str, str] = {
    "format_path": "pipeline.failures:format_path",
    "PipelineError": "pipeline.failures:PipelineError",
    "Raised": "pipeline.failures:Raised",
    "AllFailed": "pipeline.failures:AllFailed",
    "TimedOut": "pipeline.failures:TimedOut",
    "LimitExceeded": "pipeline.failures:LimitExceeded",
    "ConditionError": "pipeline.failures:ConditionError",
    "UnknownRoute": "pipeline.failures:UnknownRoute",
    "StepLimitExceeded": "pipeline.failures:StepLimitExceeded",
    "FanOutLimitExceeded": "pipeline.failures:FanOutLimitExceeded",
    "MergeConflict": "pipeline.failures:MergeConflict",
    "ConcurrentModification": "pipeline.failures:ConcurrentModification",
    "SnapshotNotFound": "pipeline.failures:SnapshotNotFound",
    "IncompatibleGraph": "pipeline.failures:IncompatibleGraph",
    "CheckpointDecodeError": "pipeline.failures:CheckpointDecodeError",
    "RunStopped": "pipeline.failures:RunStopped",
    "RunPaused": "pipeline.failures:RunPaused",
    "HistoryBudgetExceeded": "pipeline.failures:HistoryBudgetExceeded",
    "ThreadBusy": "pipeline.failures:ThreadBusy",
    "LeaseLost": "pipeline.failures:LeaseLost",
    "InvalidState": "pipeline.failures:InvalidState",
    "InvalidOutput": "pipeline.failures:InvalidOutput",
    "BudgetExceeded": "pipeline.failures:BudgetExceeded",
    "ModelError": "pipeline.failures:ModelError",
    "TurnLimitExceeded": "pipeline.failures:TurnLimitExceeded",
    "PolicyViolation": "pipeline.failures:PolicyViolation",
    "BadVerdict": "pipeline.failures:BadVerdict",
    "RemoteFailure": "pipeline.failures:RemoteFailure",
}

if not TYPE_CHECKING:  # type checkers refuse the old paths
    __getattr__ = moved(__name__, _MOVED)
