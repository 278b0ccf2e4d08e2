"""OpenAI Chat Completions, and any OpenAI-compatible server (vLLM, Ollama,
llama.cpp, ...): pass *base_url*.  Needs the ``openai`` extra."""

from __future__ import annotations

from .._extras import require


require(__name__, "the OpenAI SDK", "openai", ("openai",))

from collections.abc import Sequence
from typing import Any, final

import anyio
import openai

from returns.result import Failure, Result, Success

from .._messages import (
    FilePart,
    ImagePart,
    Message,
    Part,
    Role,
    TextPart,
    Usage,
)
from .._serde import safe_call, unicode_safe
from ..failures import ModelError
from ..secrets import Secret, reveal
from ._adapter import ClientOwner, sdk_error, stop_reason
from ._parts import PartLimits, Takes, data_url, refusal
from ._transport import TRANSPORT_ERRORS
from ._types import (
    DeltaSink,
    ModelRequest,
    ModelResponse,
    TextDelta,
    ToolCallAssembler,
    ToolCallDelta,
)


__all__ = ("OpenAIModel",)


def _norm(reason: str | None) -> str:
    return stop_reason(reason, _FINISH, "stop")


_SDK_ERRORS: tuple[type[Exception], ...] = (
    openai.APIError,
    ValueError,
    RecursionError,  # a body nested past the JSON decoder's limit
    *TRANSPORT_ERRORS,
)
_FINISH = {
    "stop": "stop",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "length": "length",
    "content_filter": "content_filter",
}
_LIMITS = PartLimits(image=20 * 2**20, file=32 * 2**20, request=50 * 2**20)
"""OpenAI's documented limits: 20 MiB an image, 32 MiB a file (PDF), 50 MiB
of images and files a request."""
_TAKES = Takes("openai")
"""Images and files in user messages and tool results (sent after them),
of any media type: OpenAI-compatible servers differ in what they take."""


@final
class OpenAIModel(ClientOwner[openai.AsyncOpenAI]):
    """A :class:`~pipeline.models.Model` over ``openai.AsyncOpenAI``.

    Give a *client* you made (yours to close, on the event loop you use it
    on), or the settings to make one (*api_key* falls back to
    ``OPENAI_API_KEY``).  *provider* names it in errors and events.

    A client it makes is one per event loop, closed by ``aclose()`` (or
    ``async with``) or when its loop ends.  *max_retries* is the SDK's own
    retry count: 0 by default, so that the :func:`pipeline.middleware.retry`
    middleware is the one place retries happen (the SDK's default of 2
    under ``retry(3)`` made 9 requests).

    Images and files (``Message.parts``) go as
    ``image_url`` parts (a URL, or the bytes as a ``data:`` URL) and
    ``file`` parts (``file_data``, with the part's name or ``file``), in
    user messages.  Tool results may hold only text in Chat Completions:
    their images and files go in a user message after the tool results.
    System and assistant messages take text only (a clear
    :class:`~pipeline.failures.ModelError` otherwise, before anything is
    sent), as do parts past *part_limits* (OpenAI's limits by default).

    .. versionadded:: 0.1.0
    """

    def __init__(
        self,
        model: str = "gpt-4o-mini",
        *,
        client: openai.AsyncOpenAI | None = None,
        base_url: str | None = None,
        api_key: str | Secret[str] | None = None,
        max_retries: int = 0,
        timeout: float = 60.0,
        provider: str = "openai",
        part_limits: PartLimits = _LIMITS,
    ) -> None:
        self.model = model
        self.provider = provider
        self.part_limits = part_limits
        self._own(
            client,
            openai.AsyncOpenAI,
            key_variable="OPENAI_API_KEY",
            base_url=base_url,
            api_key=reveal(api_key),
            max_retries=max_retries,
            timeout=timeout,
        )

    @property
    def name(self) -> str:
        """``provider:model``."""
        return f"{self.provider}:{self.model}"

    def _fail(
        self, message: str, status: int | None = None
    ) -> Failure[ModelError]:
        return Failure(
            ModelError(self.provider, message, status, path=(self.name,))
        )

    def _kwargs(self, request: ModelRequest) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": _messages(request.messages),
        }

        if request.tools:
            kwargs["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": dict(t.parameters),
                    },
                }
                for t in request.tools
            ]
            if not request.use_tools:
                kwargs["tool_choice"] = "none"
        if request.response_schema is not None:
            schema = request.response_schema
            kwargs["response_format"] = {
                "type": "json_schema",
                "json_schema": {
                    "name": schema.name,
                    "description": schema.description,
                    "schema": dict(schema.schema),
                    "strict": True,
                },
            }
        if request.temperature is not None:
            kwargs["temperature"] = request.temperature
        if request.max_tokens is not None:
            kwargs["max_tokens"] = request.max_tokens
        return kwargs

    def _error(self, exc: Exception) -> ModelError:
        return sdk_error(
            exc,
            provider=self.provider,
            name=self.name,
            status_error=openai.APIStatusError,
            connection_error=openai.APIConnectionError,
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
        kwargs = self._kwargs(request)
        if on_delta is not None:
            return await self._stream(kwargs, on_delta)
        try:
            response = await self.client.chat.completions.create(**kwargs)
        except _SDK_ERRORS as exc:
            return Failure(self._error(exc))
        return self._parse(response)

    def _parse(self, response: Any) -> Result[ModelResponse, ModelError]:
        try:
            choice = response.choices[0]
            msg = choice.message
            calls = tuple(
                safe_call(c.id, c.function.name, c.function.arguments or "{}")
                for c in (msg.tool_calls or ())
            )
            usage = _usage(response.usage)
            finish = _norm(choice.finish_reason)
        except (AttributeError, IndexError, TypeError, KeyError) as exc:
            return self._fail(f"malformed response body: {exc}")
        return Success(
            ModelResponse(
                Message.assistant(
                    unicode_safe(msg.content or ""),
                    tool_calls=calls,
                    usage=usage,
                ),
                finish,
            )
        )

    async def _stream(
        self, kwargs: dict[str, Any], on_delta: DeltaSink
    ) -> Result[ModelResponse, ModelError]:
        try:
            stream = await self.client.chat.completions.create(
                **kwargs, stream=True, stream_options={"include_usage": True}
            )
        except _SDK_ERRORS as exc:
            return Failure(self._error(exc))
        text: list[str] = []
        calls = ToolCallAssembler()
        usage: Usage | None = None
        finish: str | None = None
        chunks = stream.__aiter__()
        try:
            while True:
                # Only the SDK's own work is guarded: an exception from
                # *on_delta* (the caller's code) propagates as itself.
                try:
                    chunk = await chunks.__anext__()
                except StopAsyncIteration:
                    break
                except _SDK_ERRORS as exc:
                    return Failure(self._error(exc))
                if chunk.usage is not None:
                    usage = _usage(chunk.usage)
                for choice in chunk.choices[:1]:
                    delta = choice.delta
                    if delta.content:
                        text.append(delta.content)
                        await on_delta(TextDelta(delta.content))
                    for tc in delta.tool_calls or ():
                        fn = tc.function
                        piece = ToolCallDelta(
                            tc.index,
                            tc.id or "",
                            (fn.name or "") if fn else "",
                            (fn.arguments or "") if fn else "",
                        )
                        calls.add(piece)
                        await on_delta(piece)
                    if choice.finish_reason:
                        finish = _norm(choice.finish_reason)
        finally:
            # Close the connection even when cancelled mid-stream.
            with anyio.CancelScope(shield=True):
                await stream.close()
        if finish is None:
            return self._fail("stream ended before the model finished")
        message = Message.assistant(
            unicode_safe("".join(text)),
            tool_calls=[
                safe_call(c.id, c.name, c.arguments) for c in calls.calls()
            ],
            usage=usage,
        )
        return Success(ModelResponse(message, finish))


def _usage(raw: Any) -> Usage | None:
    if raw is None:
        return None
    return Usage(int(raw.prompt_tokens or 0), int(raw.completion_tokens or 0))


def _messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    held: list[dict[str, Any]] = []  # tool results' images and files
    for m in messages:
        if held and m.role is not Role.TOOL:
            out.append({"role": "user", "content": held})
            held = []
        out.append(_message(m, held))
    if held:
        out.append({"role": "user", "content": held})
    return out


def _part(p: Part) -> dict[str, Any]:
    if type(p) is TextPart:
        return {"type": "text", "text": p.text}
    if type(p) is ImagePart:
        return {"type": "image_url", "image_url": {"url": data_url(p)}}
    assert type(p) is FilePart  # noqa: S101  # the Part union is closed
    return {
        "type": "file",
        "file": {"file_data": data_url(p), "filename": p.name or "file"},
    }


def _message(m: Message, held: list[dict[str, Any]]) -> dict[str, Any]:
    if m.role is Role.TOOL:
        content = m.content
        if m.parts:
            held.append(
                {
                    "type": "text",
                    "text": f"Attached to the result of tool call "
                    f"{m.tool_call_id or ''}:",
                }
            )
            held.extend(_part(p) for p in m.parts if type(p) is not TextPart)
            content = content or "(see the attachments that follow)"
        return {
            "role": "tool",
            "tool_call_id": m.tool_call_id or "",
            "content": content,
        }
    if m.role is Role.ASSISTANT:
        out: dict[str, Any] = {
            "role": "assistant",
            "content": m.content or None,
        }
        if m.tool_calls:
            out["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                }
                for c in m.tool_calls
            ]
        return out
    if m.role is Role.USER and m.parts:
        out = {"role": "user", "content": [_part(p) for p in m.parts]}
    else:
        out = {
            "role": m.role.value,
            "content": m.content,
        }
    if m.name and m.role is Role.USER:
        out["name"] = m.name
    return out
