"""Anthropic Messages adapter.  Needs the ``anthropic`` extra.

Structured output uses a forced tool whose input schema is the response
schema; the tool's input becomes the message text (JSON).
"""

from __future__ import annotations

from .._extras import require


require(__name__, "the Anthropic SDK", "anthropic", ("anthropic",))

import json

from collections.abc import Sequence
from typing import Any, final

import anthropic
import anthropic.types as at
import anyio

from returns.result import Failure, Result, Success

from .._depth import loads
from .._messages import (
    FilePart,
    ImagePart,
    Message,
    Part,
    Role,
    TextPart,
    ToolCall,
    Usage,
)
from .._serde import safe_call, unicode_safe
from ..failures import ModelError
from ..secrets import Secret, reveal
from ._adapter import ClientOwner, sdk_error, stop_reason
from ._parts import PartLimits, Takes, b64, refusal
from ._transport import TRANSPORT_ERRORS
from ._types import (
    DeltaSink,
    ModelRequest,
    ModelResponse,
    TextDelta,
    ToolCallAssembler,
    ToolCallDelta,
)


__all__ = ("AnthropicModel",)


def _norm(reason: str | None) -> str:
    return stop_reason(reason, _FINISH, "end_turn")


_SDK_ERRORS: tuple[type[Exception], ...] = (
    anthropic.APIError,
    ValueError,
    RecursionError,  # a body nested past the JSON decoder's limit
    *TRANSPORT_ERRORS,
)
_FINISH = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "refusal": "content_filter",
}
_LIMITS = PartLimits(image=5 * 2**20, file=32 * 2**20, request=32 * 2**20)
"""Anthropic's documented limits: 5 MiB an image, 32 MiB a request."""
_TAKES = Takes(
    "anthropic",
    images=frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"}),
    files=frozenset({"application/pdf", "text/plain"}),
    utf8=frozenset({"text/plain"}),
)
"""Images and files in user messages and tool results, of the media types
the Messages API names."""


@final
class AnthropicModel(ClientOwner[anthropic.AsyncAnthropic]):
    """A :class:`~pipeline.models.Model` over ``anthropic.AsyncAnthropic``.

    *max_tokens* is the default answer budget (Anthropic requires one).
    A *client* you give is yours to close; one it makes is one per event
    loop, closed by ``aclose()`` (or ``async with``) or when its loop
    ends.  *max_retries* is the SDK's own retry count: 0 by default, so
    that the :func:`pipeline.middleware.retry` middleware is the one place
    retries happen.

    Images and files (``Message.parts``) go as
    ``image`` blocks (``base64`` or ``url`` sources; JPEG, PNG, GIF, WebP)
    and ``document`` blocks (a PDF as ``base64``, ``text/plain`` as
    ``text``, titled with the part's name), in user messages and in tool
    results.  System and assistant messages take text only; another media
    type, or parts past *part_limits* (Anthropic's limits by default), fail
    the call with a clear :class:`~pipeline.failures.ModelError` before
    anything is sent.

    .. versionadded:: 0.1.0
    """

    def __init__(
        self,
        model: str = "claude-sonnet-4-5",
        *,
        client: anthropic.AsyncAnthropic | None = None,
        base_url: str | None = None,
        api_key: str | Secret[str] | None = None,
        max_tokens: int = 1024,
        max_retries: int = 0,
        timeout: float = 60.0,
        part_limits: PartLimits = _LIMITS,
    ) -> None:
        self.model = model
        self.max_tokens = max_tokens
        self.part_limits = part_limits
        self._own(
            client,
            anthropic.AsyncAnthropic,
            key_variable="ANTHROPIC_API_KEY",
            base_url=base_url,
            api_key=reveal(api_key),
            max_retries=max_retries,
            timeout=timeout,
        )

    @property
    def name(self) -> str:
        """``anthropic:model``."""
        return f"anthropic:{self.model}"

    def _fail(
        self, message: str, status: int | None = None
    ) -> Failure[ModelError]:
        return Failure(
            ModelError("anthropic", message, status, path=(self.name,))
        )

    def _kwargs(
        self, request: ModelRequest
    ) -> tuple[dict[str, Any], str | None]:
        system = "\n\n".join(
            m.content for m in request.messages if m.role is Role.SYSTEM
        )
        kwargs: dict[str, Any] = {
            "model": self.model,
            "max_tokens": request.max_tokens or self.max_tokens,
            "messages": _messages(request.messages),
        }
        if system:
            kwargs["system"] = system
        tools = [
            {
                "name": t.name,
                "description": t.description,
                "input_schema": dict(t.parameters),
            }
            for t in request.tools
        ]
        forced: str | None = None
        if request.response_schema is not None:
            schema = request.response_schema
            forced = schema.name
            tools.append(
                {
                    "name": schema.name,
                    "description": schema.description or "Give the answer.",
                    "input_schema": dict(schema.schema),
                }
            )
            kwargs["tool_choice"] = {"type": "tool", "name": schema.name}
        elif tools and not request.use_tools:
            kwargs["tool_choice"] = {"type": "none"}
        if tools:
            kwargs["tools"] = tools
        if request.temperature is not None:
            kwargs["temperature"] = request.temperature
        return kwargs, forced

    def _error(self, exc: Exception) -> ModelError:
        return sdk_error(
            exc,
            provider="anthropic",
            name=self.name,
            status_error=anthropic.APIStatusError,
            connection_error=anthropic.APIConnectionError,
            withheld=self.withheld,
        )

    async def generate(
        self, request: ModelRequest, *, on_delta: DeltaSink | None = None
    ) -> Result[ModelResponse, ModelError]:
        """Answer *request* (streaming when *on_delta* is given)."""
        if any(m.parts for m in request.messages):
            why = refusal(request.messages, _TAKES, self.part_limits)
            if why is not None:
                return self._fail(why)
        kwargs, forced = self._kwargs(request)
        if on_delta is not None:
            return await self._stream(kwargs, forced, on_delta)
        try:
            response = await self.client.messages.create(**kwargs)
        except _SDK_ERRORS as exc:
            return Failure(self._error(exc))
        return self._parse(response, forced)

    def _parse(
        self, response: Any, forced: str | None
    ) -> Result[ModelResponse, ModelError]:
        try:
            text: list[str] = []
            calls: list[ToolCall] = []
            for block in response.content:
                if block.type == "text":
                    text.append(block.text)
                elif block.type == "tool_use":
                    calls.append(
                        ToolCall(block.id, block.name, _arguments(block.input))
                    )
            usage = Usage(
                int(response.usage.input_tokens or 0),
                int(response.usage.output_tokens or 0),
            )
            finish = _norm(response.stop_reason)
        except (AttributeError, TypeError, ValueError) as exc:
            return self._fail(f"malformed response body: {exc}")
        return Success(
            _answer("".join(text), tuple(calls), usage, finish, forced)
        )

    async def _stream(
        self, kwargs: dict[str, Any], forced: str | None, on_delta: DeltaSink
    ) -> Result[ModelResponse, ModelError]:
        try:
            stream = await self.client.messages.create(**kwargs, stream=True)
        except _SDK_ERRORS as exc:
            return Failure(self._error(exc))
        text: list[str] = []
        calls = ToolCallAssembler()
        blocks: dict[int, int] = {}  # content block index -> tool call index
        input_tokens = output_tokens = 0
        finish: str | None = None
        stopped = False
        events = stream.__aiter__()
        try:
            while True:
                # Only the SDK's own work is guarded: an exception from
                # *on_delta* (the caller's code) propagates as itself.
                try:
                    event = await events.__anext__()
                except StopAsyncIteration:
                    break
                except _SDK_ERRORS as exc:
                    return Failure(self._error(exc))
                if isinstance(event, at.RawMessageStartEvent):
                    input_tokens = int(event.message.usage.input_tokens or 0)
                elif isinstance(event, at.RawContentBlockStartEvent):
                    block = event.content_block
                    if isinstance(block, at.ToolUseBlock):
                        blocks[event.index] = len(blocks)
                        piece = ToolCallDelta(
                            blocks[event.index], block.id, block.name
                        )
                        calls.add(piece)
                        if forced is None:
                            await on_delta(piece)
                elif isinstance(event, at.RawContentBlockDeltaEvent):
                    delta = event.delta
                    if isinstance(delta, at.TextDelta):
                        text.append(delta.text)
                        await on_delta(TextDelta(delta.text))
                    elif isinstance(delta, at.InputJSONDelta):
                        piece = ToolCallDelta(
                            blocks.get(event.index, 0),
                            arguments=delta.partial_json,
                        )
                        calls.add(piece)
                        await on_delta(
                            TextDelta(delta.partial_json)
                            if forced is not None
                            else piece
                        )
                elif isinstance(event, at.RawMessageDeltaEvent):
                    finish = _norm(event.delta.stop_reason)
                    output_tokens = int(event.usage.output_tokens or 0)
                elif isinstance(event, at.RawMessageStopEvent):
                    stopped = True
        finally:
            with anyio.CancelScope(shield=True):
                await stream.close()
        if not stopped or finish is None:
            return self._fail("stream ended before the model finished")
        return Success(
            _answer(
                "".join(text),
                calls.calls(),
                Usage(input_tokens, output_tokens),
                finish,
                forced,
            )
        )


def _arguments(value: object) -> str:
    """A tool input as argument text (``"[]"`` if it has no JSON form:
    the tool then says why; nesting past the encoder's limit, say)."""
    try:
        return json.dumps(value)
    except (ValueError, TypeError, RecursionError):
        return "[]"


def _answer(
    text: str,
    calls: tuple[ToolCall, ...],
    usage: Usage,
    finish: str,
    forced: str | None,
) -> ModelResponse:
    text = unicode_safe(text)
    calls = tuple(safe_call(c.id, c.name, c.arguments) for c in calls)
    if forced is not None:
        # Structured output: the forced tool's input is the answer.
        structured = next(
            (c.arguments for c in calls if c.name == forced), text
        )
        return ModelResponse(
            Message.assistant(structured, usage=usage), "stop"
        )
    return ModelResponse(
        Message.assistant(text, tool_calls=calls, usage=usage), finish
    )


def _block(p: Part) -> dict[str, Any]:
    """A part as a content block (``refusal`` has checked that it fits)."""
    if type(p) is TextPart:
        return {"type": "text", "text": p.text}
    if type(p) is ImagePart:
        if p.data is None:
            return {"type": "image", "source": {"type": "url", "url": p.url}}
        return {
            "type": "image",
            "source": {
                "type": "base64",
                "media_type": p.media_type,
                "data": b64(p.data),
            },
        }
    assert type(p) is FilePart  # noqa: S101  # the Part union is closed
    source: dict[str, Any] = (
        {
            "type": "text",
            "media_type": "text/plain",
            "data": p.data.decode("utf-8"),
        }
        if p.media_type == "text/plain"
        else {
            "type": "base64",
            "media_type": p.media_type,
            "data": b64(p.data),
        }
    )
    block: dict[str, Any] = {"type": "document", "source": source}
    if p.name:
        block["title"] = p.name
    return block


def _blocks(m: Message) -> list[dict[str, Any]]:
    """A message's parts as content blocks (empty text left out: the API
    refuses empty text blocks)."""
    return [_block(p) for p in m.parts if type(p) is not TextPart or p.text]


def _messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.role is Role.SYSTEM:
            continue
        if m.role is Role.TOOL:
            block = {
                "type": "tool_result",
                "tool_use_id": m.tool_call_id or "",
                "content": _blocks(m) if m.parts else m.content,
            }
            if (
                out
                and out[-1]["role"] == "user"
                and isinstance(out[-1]["content"], list)
            ):
                out[-1]["content"].append(
                    block
                )  # one user turn for all results
            else:
                out.append({"role": "user", "content": [block]})
        elif m.role is Role.ASSISTANT:
            content: list[dict[str, Any]] = []
            if m.content:
                content.append({"type": "text", "text": m.content})
            for c in m.tool_calls:
                try:
                    args = loads(c.arguments or "{}", "tool arguments")
                except ValueError:  # NestedTooDeeply included
                    args = {}  # the tool said so already: not JSON
                if not isinstance(args, dict):
                    args = {}
                content.append(
                    {
                        "type": "tool_use",
                        "id": c.id,
                        "name": c.name,
                        "input": args,
                    }
                )
            out.append({"role": "assistant", "content": content or m.content})
        elif m.parts:
            out.append({"role": "user", "content": _blocks(m)})
        else:
            out.append({"role": "user", "content": m.content})
    return out
