"""The model protocol: requests, responses, deltas and failures."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol, TypeAlias, final

import attrs

from returns.result import Result

from .._messages import Message, ToolCall, Usage
from .._schema import schema_for
from ..errors import ConstructionError
from ..failures import ModelError


@final
@attrs.frozen
class ToolSpec:
    """A tool as a model sees it: name, description, JSON schema.

    .. versionadded:: 0.1.0
    """

    name: str
    description: str
    parameters: Mapping[str, Any]


@final
@attrs.frozen
class ResponseSchema:
    """Ask for structured output: a JSON object matching *schema*.

    :meth:`of` derives one from an attrs class; decode the answer with
    :meth:`pipeline.agents.AgentRun.output`.

    .. versionadded:: 0.1.0
    """

    name: str
    schema: Mapping[str, Any]
    description: str = ""

    @classmethod
    def of(cls, kind: type[Any], *, name: str | None = None) -> ResponseSchema:
        r"""The schema of the attrs class *kind*: its fields' types, enums
        and ``Literal``\ s, every field required (as OpenAI's strict mode
        asks), no other keys; named after the class, described by the
        first paragraph of its docstring.

        Raises:
            ConstructionError: *kind* is not an attrs class, or a field's
                type has no JSON schema.
        """
        if not attrs.has(kind):
            msg = f"ResponseSchema.of takes an attrs class, not {kind!r}"
            raise ConstructionError(msg)
        schema = _all_required(schema_for(kind))
        description = str(schema.pop("description", ""))
        return cls(name or kind.__name__, schema, description)


def _all_required(schema: Mapping[str, Any]) -> dict[str, Any]:
    """*schema* with every object's properties required, nested ones too."""
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if isinstance(value, Mapping):
            out[key] = _all_required(value)
        elif isinstance(value, list):
            out[key] = [
                _all_required(v) if isinstance(v, Mapping) else v
                for v in value
            ]
        else:
            out[key] = value
    if isinstance(out.get("properties"), dict):
        out["required"] = list(out["properties"])
    return out


@final
@attrs.frozen
class ModelRequest:
    """What a model is asked: messages, tools and options.

    .. versionadded:: 0.1.0
    """

    messages: Sequence[Message]
    """The conversation, oldest first; a read-only sequence (a tuple, or a
    view joining the parts of a conversation without copying them)."""
    tools: tuple[ToolSpec, ...] = ()
    response_schema: ResponseSchema | None = attrs.field(
        default=None, kw_only=True
    )
    temperature: float | None = attrs.field(default=None, kw_only=True)
    max_tokens: int | None = attrs.field(default=None, kw_only=True)
    use_tools: bool = attrs.field(default=True, kw_only=True)
    """False: tools are listed for context but must not be called."""


def built_request(
    messages: Sequence[Message],
    tools: tuple[ToolSpec, ...],
    response_schema: ResponseSchema | None,
    temperature: float | None,
    max_tokens: int | None,
    use_tools: bool,
) -> ModelRequest:
    """A :class:`ModelRequest` of *messages* and the options, built without
    attrs' generic ``__init__`` (none of its fields converts nor checks
    what it is given, so the result is the same; an agent builds one per
    turn)."""
    out = _new(ModelRequest)
    _set_messages(out, messages)
    _set_tools(out, tools)
    _set_response_schema(out, response_schema)
    _set_temperature(out, temperature)
    _set_max_tokens(out, max_tokens)
    _set_use_tools(out, use_tools)
    return out


# Each field's slot, set directly (frozen: no __setattr__ to go through).
_new = object.__new__
_set_messages = ModelRequest.__dict__["messages"].__set__
_set_tools = ModelRequest.__dict__["tools"].__set__
_set_response_schema = ModelRequest.__dict__["response_schema"].__set__
_set_temperature = ModelRequest.__dict__["temperature"].__set__
_set_max_tokens = ModelRequest.__dict__["max_tokens"].__set__
_set_use_tools = ModelRequest.__dict__["use_tools"].__set__


@final
@attrs.frozen
class ModelResponse:
    """A complete answer: an assistant message and why the model stopped.

    *finish_reason* is normalised: ``stop``, ``tool_calls``, ``length`` or
    ``content_filter`` (anything else is passed through).

    .. versionadded:: 0.1.0
    """

    message: Message
    finish_reason: str = "stop"

    @property
    def text(self) -> str:
        """The message's text."""
        return self.message.content

    @property
    def tool_calls(self) -> tuple[ToolCall, ...]:
        """The tool calls asked for (empty for a plain answer)."""
        return self.message.tool_calls

    @property
    def usage(self) -> Usage:
        """Token usage (zero if the provider reported none)."""
        return self.message.usage or _NO_USAGE


_NO_USAGE = Usage()
"""Zero usage, shared (it is frozen): a model that reports none is asked
for it on every turn of an agent's run, and a new one each time is an
object built for nothing."""


@final
@attrs.frozen
class TextDelta:
    """A piece of streamed text.

    .. versionadded:: 0.1.0
    """

    text: str


@final
@attrs.frozen
class ToolCallDelta:
    """A piece of a streamed tool call; *index* orders the calls.

    .. versionadded:: 0.1.0
    """

    index: int
    id: str = ""
    name: str = ""
    arguments: str = ""


ModelDelta: TypeAlias = TextDelta | ToolCallDelta
"""One streamed fragment: text, or a piece of a tool call."""

DeltaSink: TypeAlias = Callable[[ModelDelta], Awaitable[None]]
"""``on_delta``: awaited with each fragment as the model streams it."""


class Model(Protocol):
    """Anything that answers a :class:`ModelRequest`.

    With *on_delta*, the model streams: each text or tool-call fragment is
    passed to it as it arrives; the complete response is returned at the end
    either way.  Failures are values; cancellation closes the connection.

    .. versionadded:: 0.1.0
    """

    @property
    def name(self) -> str:
        """A name for logs and events, e.g. ``openai:gpt-4o-mini``."""
        ...

    async def generate(
        self, request: ModelRequest, *, on_delta: DeltaSink | None = None
    ) -> Result[ModelResponse, ModelError]:
        """Answer *request*."""
        ...


@final
class ToolCallAssembler:
    """Builds complete tool calls out of streamed fragments.

    .. versionadded:: 0.1.0
    """

    def __init__(self) -> None:
        self._parts: dict[int, list[str]] = {}

    def add(self, delta: ToolCallDelta) -> None:
        """Fold one fragment in."""
        part = self._parts.setdefault(delta.index, ["", "", ""])
        part[0] = part[0] or delta.id
        part[1] = part[1] or delta.name
        part[2] += delta.arguments

    def calls(self) -> tuple[ToolCall, ...]:
        """The calls so far, in index order."""
        return tuple(
            ToolCall(p[0] or f"call_{i}", p[1], p[2] or "{}")
            for i, p in sorted(self._parts.items())
        )
