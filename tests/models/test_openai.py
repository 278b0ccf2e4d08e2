"""The OpenAI adapter against a real HTTP server speaking its wire format."""

from __future__ import annotations

import json

from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest

from returns.result import Failure

from pipeline import Agent, Message, ToolCall, Usage, tool
from pipeline.failures import ModelError
from pipeline.models import (
    ModelDelta,
    ModelRequest,
    ResponseSchema,
    TextDelta,
    ToolCallDelta,
    ToolSpec,
)
from pipeline.models.openai import OpenAIModel
from tests.models.llm_server import FakeLLM, Json, Sse, sse_lines


def completion(
    text: str | None = "Hello!",
    calls: list[tuple[str, str, str]] | None = None,
    finish: str = "stop",
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if calls:
        message["tool_calls"] = [
            {
                "id": i,
                "type": "function",
                "function": {"name": n, "arguments": a},
            }
            for i, n, a in calls
        ]
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {
            "prompt_tokens": 7,
            "completion_tokens": 3,
            "total_tokens": 10,
        },
    }


def chunk(
    delta: dict[str, Any],
    finish: str | None = None,
    usage: dict[str, int] | None = None,
) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": []
        if usage
        else [{"index": 0, "delta": delta, "finish_reason": finish}],
        "usage": usage,
    }


def text_stream(*pieces: str, done: bool = True) -> Sse:
    events: list[tuple[str | None, Any]] = [
        (None, chunk({"role": "assistant", "content": ""}))
    ]
    events += [(None, chunk({"content": p})) for p in pieces]
    if done:
        events += [
            (None, chunk({}, "stop")),
            (
                None,
                chunk(
                    {},
                    usage={
                        "prompt_tokens": 5,
                        "completion_tokens": 2,
                        "total_tokens": 7,
                    },
                ),
            ),
            (None, "[DONE]"),
        ]
    return Sse(sse_lines(iter(events)))


@pytest.fixture(name="model")
async def _model(llm: FakeLLM) -> AsyncIterator[OpenAIModel]:
    async with OpenAIModel(
        "m",
        base_url=f"{llm.url}/v1",
        api_key="test",
        max_retries=0,
        timeout=10,
    ) as m:
        yield m


REQUEST = ModelRequest((Message.system("be brief"), Message.user("hi")))


async def test_plain_completion(llm: FakeLLM, model: OpenAIModel) -> None:
    """A plain answer: text, usage, finish reason, and the request sent."""
    llm.reply(Json(completion()))
    out = await model.generate(REQUEST)
    response = out.unwrap()
    assert response.text == "Hello!"
    assert response.usage == Usage(7, 3)
    assert response.finish_reason == "stop"
    path, body = llm.requests[0]
    assert path == "/v1/chat/completions"
    assert body["model"] == "m"
    assert body["messages"] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hi"},
    ]


async def test_streamed_text(llm: FakeLLM, model: OpenAIModel) -> None:
    """Streaming passes each fragment on and returns the whole answer."""
    llm.reply(text_stream("Hel", "lo", "!"))
    seen: list[ModelDelta] = []

    async def sink(d: ModelDelta) -> None:
        seen.append(d)

    response = (await model.generate(REQUEST, on_delta=sink)).unwrap()
    assert seen == [TextDelta("Hel"), TextDelta("lo"), TextDelta("!")]
    assert response.text == "Hello!"
    assert response.usage == Usage(5, 2)
    assert llm.requests[0][1]["stream"] is True


TOOLS = (
    ToolSpec(
        "add",
        "Add numbers.",
        {"type": "object", "properties": {"a": {"type": "integer"}}},
    ),
)


async def test_tool_call_and_tool_messages(
    llm: FakeLLM, model: OpenAIModel
) -> None:
    """Tool calls come back typed; tool results go out in OpenAI's shape."""
    llm.reply(
        Json(completion(None, [("c1", "add", '{"a": 1}')], "tool_calls"))
    )
    history = (
        Message.user("add"),
        Message.assistant("", tool_calls=[ToolCall("c0", "add", '{"a": 0}')]),
        Message.tool("0", tool_call_id="c0"),
    )
    response = (await model.generate(ModelRequest(history, TOOLS))).unwrap()
    assert response.tool_calls == (ToolCall("c1", "add", '{"a": 1}'),)
    assert response.finish_reason == "tool_calls"
    body = llm.requests[0][1]
    assert body["tools"][0]["function"]["name"] == "add"
    assert body["messages"][1]["tool_calls"][0]["id"] == "c0"
    assert body["messages"][2] == {
        "role": "tool",
        "tool_call_id": "c0",
        "content": "0",
    }


async def test_streamed_tool_call(llm: FakeLLM, model: OpenAIModel) -> None:
    """Tool-call fragments are assembled into whole calls."""
    events = [
        (
            None,
            chunk(
                {
                    "role": "assistant",
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": "c9",
                            "type": "function",
                            "function": {"name": "add", "arguments": ""},
                        }
                    ],
                }
            ),
        ),
        (
            None,
            chunk(
                {
                    "tool_calls": [
                        {"index": 0, "function": {"arguments": '{"a"'}}
                    ]
                }
            ),
        ),
        (
            None,
            chunk(
                {
                    "tool_calls": [
                        {"index": 0, "function": {"arguments": ": 2}"}}
                    ]
                }
            ),
        ),
        (None, chunk({}, "tool_calls")),
        (None, "[DONE]"),
    ]
    llm.reply(Sse(sse_lines(iter(events))))
    seen: list[ModelDelta] = []

    async def sink(d: ModelDelta) -> None:
        seen.append(d)

    response = (
        await model.generate(
            ModelRequest((Message.user("x"),), TOOLS), on_delta=sink
        )
    ).unwrap()
    assert response.tool_calls == (ToolCall("c9", "add", '{"a": 2}'),)
    assert all(isinstance(d, ToolCallDelta) for d in seen)


async def test_structured_output_request(
    llm: FakeLLM, model: OpenAIModel
) -> None:
    """A response schema becomes a strict json_schema response format."""
    llm.reply(Json(completion('{"ok": true}')))
    schema = ResponseSchema(
        "verdict",
        {"type": "object", "properties": {"ok": {"type": "boolean"}}},
    )
    response = (
        await model.generate(
            ModelRequest((Message.user("?"),), response_schema=schema)
        )
    ).unwrap()
    assert json.loads(response.text) == {"ok": True}
    fmt = llm.requests[0][1]["response_format"]
    assert fmt["type"] == "json_schema"
    assert fmt["json_schema"]["name"] == "verdict"
    assert fmt["json_schema"]["strict"] is True


@pytest.mark.parametrize("status", [400, 401, 404, 429, 500, 503])
async def test_error_statuses_are_typed(
    llm: FakeLLM, model: OpenAIModel, status: int
) -> None:
    """HTTP errors become ModelError naming the provider and status."""
    llm.reply(
        Json(
            {"error": {"message": f"nope {status}", "type": "x"}},
            status=status,
        )
    )
    out = await model.generate(REQUEST)
    err = out.failure()
    assert isinstance(err, ModelError)
    assert (err.provider, err.status) == ("openai", status)
    assert "nope" in str(err)


async def test_malformed_body_is_typed(
    llm: FakeLLM, model: OpenAIModel
) -> None:
    """A 200 with a body that is not a completion is a ModelError."""
    llm.reply(Json(None, raw=b"{not json"))
    assert isinstance((await model.generate(REQUEST)).failure(), ModelError)
    llm.reply(Json({"unexpected": True}))
    assert isinstance((await model.generate(REQUEST)).failure(), ModelError)


async def test_dropped_stream_is_typed(
    llm: FakeLLM, model: OpenAIModel
) -> None:
    """A stream that ends before the model finished is a ModelError."""
    llm.reply(text_stream("par", "tial", done=False))

    async def sink(d: ModelDelta) -> None:
        pass

    out = await model.generate(REQUEST, on_delta=sink)
    assert isinstance(out, Failure)
    assert "before the model finished" in str(out.failure())


async def test_connection_refused_is_typed() -> None:
    """Nothing listening: a ModelError, not an exception."""
    async with OpenAIModel(
        "m", base_url="http://127.0.0.1:9/v1", api_key="x", max_retries=0
    ) as m:
        err = (await m.generate(REQUEST)).failure()
    assert isinstance(err, ModelError)
    assert err.status is None


async def test_cancelling_mid_stream_closes_the_connection(
    llm: FakeLLM, model: OpenAIModel
) -> None:
    """Leaving a stream early hangs up on the server."""
    events = text_stream("one", "two").events
    llm.reply(Sse(events, stall_after=2))
    got: list[ModelDelta] = []
    with anyio.CancelScope() as scope:

        async def sink(d: ModelDelta) -> None:
            got.append(d)
            scope.cancel()

        await model.generate(REQUEST, on_delta=sink)
    assert scope.cancelled_caught
    assert got == [TextDelta("one")]
    gone = await anyio.to_thread.run_sync(llm.client_gone.wait, 10)
    assert gone


async def test_lone_surrogate_in_arguments_is_an_error_result(
    llm: FakeLLM, model: OpenAIModel
) -> None:
    """Arguments holding a lone surrogate (valid JSON, not Unicode) give the
    agent an error result; the next request goes out and the run answers."""

    @tool
    async def echo(text: str) -> str:
        """Echo."""
        return text

    llm.reply(
        Json(completion(None, [("c1", "echo", '{"text": "SECRET\ud800"}')])),
        Json(completion("done")),
    )
    agent = Agent("a", model, tools=[echo])
    run = (await agent.run([Message.user("hi")])).unwrap()
    assert run.text == "done"
    result = run.messages[1]
    assert result.content.startswith("error: invalid arguments for 'echo'")
    assert "SECRET" not in result.content
    sent = llm.requests[1][1]["messages"]
    assert sent[-1]["content"] == result.content


async def test_lone_surrogate_in_tool_name_or_id_is_an_error_result(
    llm: FakeLLM, model: OpenAIModel
) -> None:
    """A tool call whose name and id hold lone surrogates is an unknown
    tool (its error result does not repeat the name); the next request
    goes out, with the id escaped the same way in the call and its result."""

    @tool
    async def add(a: int = 1) -> int:
        """Add."""
        return a

    llm.reply(
        Json(completion(None, [("call_\ud800", "ad\ud800d", "{}")])),
        Json(completion("done")),
    )
    run = (
        await Agent("a", model, tools=[add]).run([Message.user("hi")])
    ).unwrap()
    assert run.text == "done"
    result = run.messages[1]
    assert result.content == "error: unknown tool; available: ['add']"
    sent = llm.requests[1][1]["messages"]
    call = sent[-2]["tool_calls"][0]
    assert call["id"] == sent[-1]["tool_call_id"] == "call_\\ud800"
    assert call["function"]["name"] == "ad\\ud800d"
