"""The Anthropic adapter against a real HTTP server speaking its wire format."""

from __future__ import annotations

import json

from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest

from returns.result import Failure

from pipeline import (
    Agent,
    Context,
    Message,
    ToolCall,
    Usage,
    stream,
    tool,
)
from pipeline.failures import ModelError
from pipeline.models import (
    ModelDelta,
    ModelRequest,
    ResponseSchema,
    TextDelta,
    ToolCallDelta,
    ToolSpec,
)
from pipeline.models.anthropic import AnthropicModel
from tests.models.llm_server import FakeLLM, Json, Sse, sse_lines


def message(
    blocks: list[dict[str, Any]], stop: str = "end_turn"
) -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "m",
        "content": blocks,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": 11, "output_tokens": 4},
    }


def text(t: str) -> dict[str, Any]:
    return {"type": "text", "text": t}


def tool_use(i: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_use", "id": i, "name": name, "input": args}


def stream_events(
    blocks: list[tuple[dict[str, Any], list[dict[str, Any]]]],
    stop: str = "end_turn",
    *,
    finish: bool = True,
) -> Sse:
    events: list[tuple[str | None, Any]] = [
        (
            "message_start",
            {
                "type": "message_start",
                "message": {
                    **message([], stop),
                    "content": [],
                    "stop_reason": None,
                    "usage": {"input_tokens": 9, "output_tokens": 0},
                },
            },
        ),
    ]
    for i, (start, deltas) in enumerate(blocks):
        events.append(
            (
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": i,
                    "content_block": start,
                },
            )
        )
        events.extend(
            (
                "content_block_delta",
                {"type": "content_block_delta", "index": i, "delta": d},
            )
            for d in deltas
        )
        events.append(
            ("content_block_stop", {"type": "content_block_stop", "index": i})
        )
    if finish:
        events.append(
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop, "stop_sequence": None},
                    "usage": {"output_tokens": 5},
                },
            )
        )
        events.append(("message_stop", {"type": "message_stop"}))
    return Sse(sse_lines(iter(events)))


@pytest.fixture(name="model")
async def _model(llm: FakeLLM) -> AsyncIterator[AnthropicModel]:
    async with AnthropicModel(
        "m", base_url=llm.url, api_key="test", max_retries=0, timeout=10
    ) as m:
        yield m


REQUEST = ModelRequest((Message.system("be brief"), Message.user("hi")))
TOOLS = (
    ToolSpec(
        "add",
        "Add numbers.",
        {"type": "object", "properties": {"a": {"type": "integer"}}},
    ),
)


async def test_plain_message(llm: FakeLLM, model: AnthropicModel) -> None:
    """Text, usage, stop reason; system messages go to the system field."""
    llm.reply(Json(message([text("Hello!")])))
    response = (await model.generate(REQUEST)).unwrap()
    assert response.text == "Hello!"
    assert response.usage == Usage(11, 4)
    assert response.finish_reason == "stop"
    path, body = llm.requests[0]
    assert path == "/v1/messages"
    assert body["system"] == "be brief"
    assert body["messages"] == [{"role": "user", "content": "hi"}]
    assert body["max_tokens"] == 1024


async def test_streamed_text(llm: FakeLLM, model: AnthropicModel) -> None:
    """Text deltas stream; the whole answer comes back at the end."""
    llm.reply(
        stream_events(
            [
                (
                    text(""),
                    [
                        {"type": "text_delta", "text": "Hel"},
                        {"type": "text_delta", "text": "lo"},
                    ],
                )
            ]
        )
    )
    seen: list[ModelDelta] = []

    async def sink(d: ModelDelta) -> None:
        seen.append(d)

    response = (await model.generate(REQUEST, on_delta=sink)).unwrap()
    assert seen == [TextDelta("Hel"), TextDelta("lo")]
    assert response.text == "Hello"
    assert response.usage == Usage(9, 5)


async def test_tool_use_and_results(
    llm: FakeLLM, model: AnthropicModel
) -> None:
    """tool_use blocks become tool calls; tool results go back as one user turn."""
    llm.reply(
        Json(
            message(
                [text("let me"), tool_use("t1", "add", {"a": 1})], "tool_use"
            )
        )
    )
    history = (
        Message.user("add"),
        Message.assistant(
            "",
            tool_calls=[
                ToolCall("t0", "add", '{"a": 0}'),
                ToolCall("t9", "add", "{}"),
            ],
        ),
        Message.tool("0", tool_call_id="t0"),
        Message.tool("9", tool_call_id="t9"),
    )
    response = (await model.generate(ModelRequest(history, TOOLS))).unwrap()
    assert response.text == "let me"
    assert response.tool_calls == (ToolCall("t1", "add", '{"a": 1}'),)
    assert response.finish_reason == "tool_calls"
    body = llm.requests[0][1]
    assert body["tools"] == [
        {
            "name": "add",
            "description": "Add numbers.",
            "input_schema": dict(TOOLS[0].parameters),
        }
    ]
    assert body["messages"][1]["content"][0] == {
        "type": "tool_use",
        "id": "t0",
        "name": "add",
        "input": {"a": 0},
    }
    assert body["messages"][2] == {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "t0", "content": "0"},
            {"type": "tool_result", "tool_use_id": "t9", "content": "9"},
        ],
    }


async def test_streamed_tool_use(llm: FakeLLM, model: AnthropicModel) -> None:
    """input_json_delta fragments assemble into the call's arguments."""
    llm.reply(
        stream_events(
            [
                (
                    tool_use("t7", "add", {}),
                    [
                        {"type": "input_json_delta", "partial_json": '{"a"'},
                        {"type": "input_json_delta", "partial_json": ": 3}"},
                    ],
                ),
            ],
            "tool_use",
        )
    )
    seen: list[ModelDelta] = []

    async def sink(d: ModelDelta) -> None:
        seen.append(d)

    response = (
        await model.generate(
            ModelRequest((Message.user("x"),), TOOLS), on_delta=sink
        )
    ).unwrap()
    assert response.tool_calls == (ToolCall("t7", "add", '{"a": 3}'),)
    assert response.finish_reason == "tool_calls"
    assert all(isinstance(d, ToolCallDelta) for d in seen)


async def test_structured_output_by_forced_tool(
    llm: FakeLLM, model: AnthropicModel
) -> None:
    """A response schema forces a tool whose input is the JSON answer."""
    llm.reply(
        Json(message([tool_use("s1", "verdict", {"ok": True})], "tool_use"))
    )
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
    assert response.tool_calls == ()
    body = llm.requests[0][1]
    assert body["tool_choice"] == {"type": "tool", "name": "verdict"}


@pytest.mark.parametrize("status", [400, 401, 429, 500, 529])
async def test_error_statuses_are_typed(
    llm: FakeLLM, model: AnthropicModel, status: int
) -> None:
    """HTTP errors become ModelError naming the provider and status."""
    llm.reply(
        Json(
            {
                "type": "error",
                "error": {"type": "x", "message": f"nope {status}"},
            },
            status=status,
        )
    )
    err = (await model.generate(REQUEST)).failure()
    assert isinstance(err, ModelError)
    assert (err.provider, err.status) == ("anthropic", status)


async def test_malformed_and_dropped(
    llm: FakeLLM, model: AnthropicModel
) -> None:
    """A broken body or a stream cut short is a ModelError."""
    llm.reply(Json(None, raw=b"{nope"))
    assert isinstance((await model.generate(REQUEST)).failure(), ModelError)
    llm.reply(
        stream_events(
            [(text(""), [{"type": "text_delta", "text": "par"}])], finish=False
        )
    )

    async def sink(d: ModelDelta) -> None:
        pass

    out = await model.generate(REQUEST, on_delta=sink)
    assert isinstance(out, Failure)
    assert "before the model finished" in str(out.failure())


async def test_cancelling_mid_stream_closes_the_connection(
    llm: FakeLLM, model: AnthropicModel
) -> None:
    """Leaving a stream early hangs up on the server."""
    full = stream_events(
        [
            (
                text(""),
                [
                    {"type": "text_delta", "text": "one"},
                    {"type": "text_delta", "text": "two"},
                ],
            )
        ]
    )
    llm.reply(Sse(full.events, stall_after=3))
    with anyio.CancelScope() as scope:

        async def sink(d: ModelDelta) -> None:
            scope.cancel()

        await model.generate(REQUEST, on_delta=sink)
    assert scope.cancelled_caught
    assert await anyio.to_thread.run_sync(llm.client_gone.wait, 10)


async def test_deeply_nested_streamed_input_is_an_error_result(
    llm: FakeLLM, model: AnthropicModel
) -> None:
    """A streamed tool input nested past any limit is an error result for
    the tool, and the next turn's request still goes out."""

    @tool
    async def add(a: int) -> int:
        """Add."""
        return a

    deep = "[" * 50_000 + "]" * 50_000
    llm.reply(
        stream_events(
            [
                (
                    tool_use("t1", "add", {}),
                    [{"type": "input_json_delta", "partial_json": deep}],
                )
            ],
            "tool_use",
        ),
        stream_events([(text(""), [{"type": "text_delta", "text": "ok"}])]),
    )
    agent = Agent("a", model, tools=[add])
    async with stream(agent, Context.of(Message.user("go"))) as events:
        async for _ in events:
            pass
    assert events.result is not None
    messages = events.result.unwrap().messages
    assert messages[-1].content == "ok"
    assert messages[-2].content == (
        "error: arguments for 'add' nests deeper than 64 levels"
    )
    second = llm.requests[1][1]["messages"]
    assert second[1]["content"][0]["input"] == {}


async def test_lone_surrogate_in_tool_name_or_id_is_an_error_result(
    llm: FakeLLM, model: AnthropicModel
) -> None:
    """A tool_use block whose name and id hold lone surrogates is an
    unknown tool; the next request goes out, the id escaped alike in the
    call and its result."""

    @tool
    async def add(a: int = 1) -> int:
        """Add."""
        return a

    llm.reply(
        Json(message([tool_use("toolu_\ud800", "ad\ud800d", {})], "tool_use")),
        Json(message([text("done")])),
    )
    run = (
        await Agent("a", model, tools=[add]).run([Message.user("hi")])
    ).unwrap()
    assert run.text == "done"
    assert run.messages[1].content == "error: unknown tool; available: ['add']"
    sent = llm.requests[1][1]["messages"]
    use = sent[-2]["content"][0]
    assert (
        use["id"] == sent[-1]["content"][0]["tool_use_id"] == "toolu_\\ud800"
    )
    assert use["name"] == "ad\\ud800d"
