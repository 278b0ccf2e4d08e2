"""Images and files through the OpenAI and Anthropic adapters: the bodies
a real loopback server receives, checked against the SDKs' own request
types, and random parts mapped there and back."""

from __future__ import annotations

import base64

from collections.abc import AsyncIterator
from typing import Any

import pytest

from anthropic.types import message_create_params as anthropic_params
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from openai.types.chat import completion_create_params as openai_params
from returns.result import Failure

from pipeline import (
    Agent,
    FilePart,
    ImagePart,
    Message,
    Part,
    TextPart,
    ToolCall,
)
from pipeline.failures import ModelError
from pipeline.models import ModelRequest, PartLimits
from pipeline.models.anthropic import AnthropicModel
from pipeline.models.openai import OpenAIModel
from tests.models.llm_server import FakeLLM, Json
from tests.models.sdk_shapes import check, mismatch
from tests.models.test_anthropic import message as anthropic_reply
from tests.models.test_anthropic import text as anthropic_text
from tests.models.test_openai import completion
from tests.strategies import parts


PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(40))
PDF = b"%PDF-1.7\n1 0 obj /Type /Page endobj"
PNG64 = base64.b64encode(PNG).decode()
PDF64 = base64.b64encode(PDF).decode()
OPENAI_BODY = openai_params.CompletionCreateParamsNonStreaming
ANTHROPIC_BODY = anthropic_params.MessageCreateParamsNonStreaming

ASKED = Message.user(
    [
        "Compare these.",
        ImagePart(data=PNG, media_type="image/png"),
        ImagePart(
            url="https://cdn.example/b.jpg?sig=x", media_type="image/jpeg"
        ),
        FilePart(data=PDF, media_type="application/pdf", name="report.pdf"),
    ]
)


@pytest.fixture(name="openai_model")
async def _openai_model(llm: FakeLLM) -> AsyncIterator[OpenAIModel]:
    async with OpenAIModel(
        "m", base_url=f"{llm.url}/v1", api_key="test", timeout=10
    ) as m:
        yield m


@pytest.fixture(name="anthropic_model")
async def _anthropic_model(llm: FakeLLM) -> AsyncIterator[AnthropicModel]:
    async with AnthropicModel(
        "m", base_url=llm.url, api_key="test", timeout=10
    ) as m:
        yield m


# -- OpenAI ------------------------------------------------------------------------


async def test_openai_user_parts(
    llm: FakeLLM, openai_model: OpenAIModel
) -> None:
    """Text, images (bytes as data: URLs, and URLs) and a PDF as file_data:
    the body fits the SDK's request type."""
    llm.reply(Json(completion("Two charts.")))
    out = await openai_model.generate(
        ModelRequest((Message.system("s"), ASKED))
    )
    assert out.unwrap().text == "Two charts."
    body = llm.requests[0][1]
    check(body, OPENAI_BODY)
    assert body["messages"][1] == {
        "role": "user",
        "content": [
            {"type": "text", "text": "Compare these."},
            {
                "type": "image_url",
                "image_url": {"url": f"data:image/png;base64,{PNG64}"},
            },
            {
                "type": "image_url",
                "image_url": {"url": "https://cdn.example/b.jpg?sig=x"},
            },
            {
                "type": "file",
                "file": {
                    "file_data": f"data:application/pdf;base64,{PDF64}",
                    "filename": "report.pdf",
                },
            },
        ],
    }


async def test_openai_tool_images_follow_the_results(
    llm: FakeLLM, openai_model: OpenAIModel
) -> None:
    """Chat Completions takes only text in tool results: their images go in
    one user message after the run of tool results, which stays whole."""
    llm.reply(Json(completion("ok")))
    history = (
        Message.user("chart both"),
        Message.assistant(
            "", tool_calls=[ToolCall("c1", "chart"), ToolCall("c2", "chart")]
        ),
        Message.tool(
            ["chart 1", ImagePart(data=PNG, media_type="image/png")],
            tool_call_id="c1",
        ),
        Message.tool(
            [ImagePart(url="https://cdn.example/2.png")], tool_call_id="c2"
        ),
        Message.user("thanks"),
    )
    (await openai_model.generate(ModelRequest(history))).unwrap()
    body = llm.requests[0][1]
    check(body, OPENAI_BODY)
    roles = [m["role"] for m in body["messages"]]
    assert roles == ["user", "assistant", "tool", "tool", "user", "user"]
    assert body["messages"][2]["content"] == "chart 1"
    assert (
        body["messages"][3]["content"] == "(see the attachments that follow)"
    )
    assert body["messages"][4]["content"] == [
        {"type": "text", "text": "Attached to the result of tool call c1:"},
        {
            "type": "image_url",
            "image_url": {"url": f"data:image/png;base64,{PNG64}"},
        },
        {"type": "text", "text": "Attached to the result of tool call c2:"},
        {
            "type": "image_url",
            "image_url": {"url": "https://cdn.example/2.png"},
        },
    ]


@pytest.mark.parametrize(
    "bad",
    [
        Message(
            Message.system("x").role,
            "",
            parts=("look", ImagePart(url="https://a.example/")),
        ),
        Message(
            Message.assistant().role,
            "",
            parts=("see", FilePart(data=b"secret", media_type="text/plain")),
        ),
    ],
)
async def test_openai_refuses_parts_where_the_api_takes_text(
    llm: FakeLLM, openai_model: OpenAIModel, bad: Message
) -> None:
    """An image in a system or assistant message: a ModelError naming the
    message and part, and nothing sent."""
    out = await openai_model.generate(ModelRequest((Message.user("hi"), bad)))
    assert isinstance(out, Failure)
    error = out.failure()
    assert isinstance(error, ModelError)
    assert (
        f"message 1 ({bad.role.value}), part 1: openai takes no"
        in error.message
    )
    assert "secret" not in error.message
    assert llm.requests == []


# -- Anthropic ---------------------------------------------------------------------


async def test_anthropic_user_parts(
    llm: FakeLLM, anthropic_model: AnthropicModel
) -> None:
    """Image blocks (base64 and url sources) and a PDF document block,
    titled: the body fits the SDK's request type."""
    llm.reply(Json(anthropic_reply([anthropic_text("Two charts.")])))
    out = await anthropic_model.generate(
        ModelRequest((Message.system("s"), ASKED))
    )
    assert out.unwrap().text == "Two charts."
    body = llm.requests[0][1]
    check(body, ANTHROPIC_BODY)
    assert body["system"] == "s"
    assert body["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Compare these."},
                {
                    "type": "image",
                    "source": {
                        "type": "base64",
                        "media_type": "image/png",
                        "data": PNG64,
                    },
                },
                {
                    "type": "image",
                    "source": {
                        "type": "url",
                        "url": "https://cdn.example/b.jpg?sig=x",
                    },
                },
                {
                    "type": "document",
                    "source": {
                        "type": "base64",
                        "media_type": "application/pdf",
                        "data": PDF64,
                    },
                    "title": "report.pdf",
                },
            ],
        }
    ]


async def test_anthropic_tool_results_carry_images_and_text_files(
    llm: FakeLLM, anthropic_model: AnthropicModel
) -> None:
    """Tool results hold their parts as blocks; a text/plain file is a
    text document; empty text parts are left out (the API refuses them)."""
    llm.reply(Json(anthropic_reply([anthropic_text("ok")])))
    history = (
        Message.user(
            [
                "",
                "read this",
                FilePart(data="héllo".encode(), media_type="text/plain"),
            ]
        ),
        Message.assistant("", tool_calls=[ToolCall("c1", "chart", "{}")]),
        Message.tool(
            ["chart", ImagePart(data=PNG, media_type="image/png")],
            tool_call_id="c1",
        ),
    )
    (await anthropic_model.generate(ModelRequest(history))).unwrap()
    body = llm.requests[0][1]
    check(body, ANTHROPIC_BODY)
    assert body["messages"][0]["content"] == [
        {"type": "text", "text": "read this"},
        {
            "type": "document",
            "source": {
                "type": "text",
                "media_type": "text/plain",
                "data": "héllo",
            },
        },
    ]
    assert body["messages"][2]["content"] == [
        {
            "type": "tool_result",
            "tool_use_id": "c1",
            "content": [
                {"type": "text", "text": "chart"},
                {
                    "type": "image",
                    "source": {
                        "type": "base64",
                        "media_type": "image/png",
                        "data": PNG64,
                    },
                },
            ],
        }
    ]


@pytest.mark.parametrize(
    ("part", "reason"),
    [
        (
            ImagePart(data=b"secret", media_type="image/tiff"),
            "takes images of types",
        ),
        (
            FilePart(data=b"secret", media_type="text/csv"),
            "takes files of types application/pdf, text/plain, not text/csv",
        ),
        (
            FilePart(data=b"\xffsecret", media_type="text/plain"),
            "a text/plain file that is not UTF-8",
        ),
    ],
)
async def test_anthropic_refuses_media_types_it_cannot_take(
    llm: FakeLLM, anthropic_model: AnthropicModel, part: Part, reason: str
) -> None:
    """A clear ModelError before anything is sent, never the bytes."""
    out = await anthropic_model.generate(
        ModelRequest((Message.user(["x", part]),))
    )
    error = out.failure()
    assert isinstance(error, ModelError)
    assert error.message.startswith("message 0 (user), part 1: ")
    assert reason in error.message
    assert "secret" not in error.message
    assert llm.requests == []


# -- size limits -------------------------------------------------------------------


async def test_parts_past_the_limits_are_never_sent(llm: FakeLLM) -> None:
    """One part over its limit, or all of them over the request's: the
    error names where, the size and the limit."""
    limits = PartLimits(image=100, file=1000, request=1500)
    big = Message.user(
        ["x", ImagePart(data=b"\0" * 101, media_type="image/png")]
    )
    files = Message.user(
        ["x", *[FilePart(data=b"\0" * 600, media_type="application/pdf")] * 2]
    )
    async with (
        OpenAIModel(
            "m", base_url=f"{llm.url}/v1", api_key="t", part_limits=limits
        ) as o,
        AnthropicModel(
            "m", base_url=llm.url, api_key="t", part_limits=limits
        ) as a,
    ):
        for model in (o, a):
            error = (await model.generate(ModelRequest((big,)))).failure()
            assert error.message == (
                "message 0 (user), part 1: image of 101 bytes is over the "
                "limit of 100 bytes an image"
            )
            error = (await model.generate(ModelRequest((files,)))).failure()
            assert error.message == (
                "images and files of 1,600 bytes (as base64) are over the "
                "limit of 1,500 bytes a request"
            )
    assert llm.requests == []


def test_default_limits_are_the_providers() -> None:
    """5 MiB an image for Anthropic, 20 MiB for OpenAI; bad limits refused."""
    assert AnthropicModel("m", api_key="t").part_limits == PartLimits(
        5 * 2**20, 32 * 2**20, 32 * 2**20
    )
    assert OpenAIModel("m", api_key="t").part_limits == PartLimits(
        20 * 2**20, 32 * 2**20, 50 * 2**20
    )
    with pytest.raises(
        ValueError, match=r"PartLimits\(image\): must be a positive int"
    ):
        PartLimits(0, 1, 1)


# -- random parts there and back -----------------------------------------------------


def _openai_back(content: list[dict[str, Any]]) -> list[Part]:
    """Parts from OpenAI content parts (what a server would read)."""
    out: list[Part] = []
    for c in content:
        if c["type"] == "text":
            out.append(TextPart(c["text"]))
        elif c["type"] == "image_url":
            url = c["image_url"]["url"]
            if url.startswith("data:"):
                head, data = url[5:].split(";base64,")
                out.append(
                    ImagePart(data=base64.b64decode(data), media_type=head)
                )
            else:
                out.append(ImagePart(url=url))
        else:
            head, data = c["file"]["file_data"][5:].split(";base64,")
            out.append(
                FilePart(
                    data=base64.b64decode(data),
                    media_type=head,
                    name=c["file"]["filename"],
                )
            )
    return out


def _anthropic_back(content: list[dict[str, Any]]) -> list[Part]:
    out: list[Part] = []
    for c in content:
        source = c.get("source", {})
        if c["type"] == "text":
            out.append(TextPart(c["text"]))
        elif c["type"] == "image" and source["type"] == "url":
            out.append(ImagePart(url=source["url"]))
        elif c["type"] == "image":
            out.append(
                ImagePart(
                    data=base64.b64decode(source["data"]),
                    media_type=source["media_type"],
                )
            )
        elif source["type"] == "text":
            out.append(
                FilePart(
                    data=source["data"].encode(),
                    media_type="text/plain",
                    name=c.get("title"),
                )
            )
        else:
            out.append(
                FilePart(
                    data=base64.b64decode(source["data"]),
                    media_type=source["media_type"],
                    name=c.get("title"),
                )
            )
    return out


def _expected(ps: list[Part], *, openai: bool) -> list[Part]:
    """What survives the trip: URL images lose their media type; OpenAI
    names a nameless file ``file``; Anthropic drops empty text."""
    out: list[Part] = []
    for p in ps:
        if type(p) is ImagePart and p.url is not None:
            out.append(ImagePart(url=p.url))
        elif type(p) is FilePart and openai and p.name is None:
            out.append(
                FilePart(data=p.data, media_type=p.media_type, name="file")
            )
        elif type(p) is TextPart and not openai and not p.text:
            continue
        else:
            out.append(p)
    return out


_ANTHROPIC_OK = st.lists(
    parts().filter(
        lambda p: (
            type(p) is not FilePart
            or p.media_type == "application/pdf"
            or (p.media_type == "text/plain" and _utf8(p.data))
        )
    ),
    min_size=2,
    max_size=8,
).filter(lambda ps: sum(type(p) is not TextPart for p in ps) > 0)


def _utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


@settings(
    suppress_health_check=[HealthCheck.filter_too_much], max_examples=150
)
@given(
    st.lists(parts(), min_size=2, max_size=8).filter(
        lambda ps: any(type(p) is not TextPart for p in ps)
    )
)
def test_random_parts_round_trip_openai(ps: list[Part]) -> None:
    """Any parts in a user message: a body of the SDK's type, and the same
    parts read back from it."""
    model = OpenAIModel("m", api_key="t")
    body = model._kwargs(ModelRequest((Message.user(ps),)))
    assert mismatch(body, OPENAI_BODY) is None
    assert _openai_back(body["messages"][0]["content"]) == _expected(
        ps, openai=True
    )


@settings(
    suppress_health_check=[HealthCheck.filter_too_much], max_examples=150
)
@given(_ANTHROPIC_OK, st.booleans())
def test_random_parts_round_trip_anthropic(
    ps: list[Part], in_tool: bool
) -> None:
    """Any parts Anthropic takes, in a user message or a tool result."""
    model = AnthropicModel("m", api_key="t")
    history = (
        (
            Message.user("go"),
            Message.assistant(tool_calls=[ToolCall("c", "t")]),
            Message.tool(ps, tool_call_id="c"),
        )
        if in_tool
        else (Message.user(ps),)
    )
    body, _ = model._kwargs(ModelRequest(history))
    assert mismatch(body, ANTHROPIC_BODY) is None
    content = body["messages"][-1]["content"]
    if in_tool:
        content = content[0]["content"]
    assert _anthropic_back(content) == _expected(ps, openai=False)


def test_the_shape_check_refuses_what_the_sdks_refuse() -> None:
    """The checker is not vacuous: an image in an OpenAI tool message, a
    TIFF for Anthropic, an unknown key or role, a missing key: refused."""
    image = {"type": "image_url", "image_url": {"url": "https://a.example/"}}
    bad_openai = [
        {"role": "tool", "tool_call_id": "c", "content": [image]},
        {"role": "user", "content": [{**image, "detail": "huge"}]},
        {"role": "user", "content": "hi", "extra": 1},
        {"role": "user"},
    ]
    for m in bad_openai:
        assert mismatch({"model": "m", "messages": [m]}, OPENAI_BODY)
    tiff = {"type": "base64", "media_type": "image/tiff", "data": "YQ=="}
    bad_anthropic = [
        {"role": "user", "content": [{"type": "image", "source": tiff}]},
        {"role": "robot", "content": "hi"},
        {"role": "user", "content": [{"type": "document", "source": {}}]},
    ]
    for m in bad_anthropic:
        body = {"model": "m", "max_tokens": 1, "messages": [m]}
        assert mismatch(body, ANTHROPIC_BODY)


async def test_an_agent_sends_the_users_image(
    llm: FakeLLM, openai_model: OpenAIModel
) -> None:
    """End to end: an Agent given a message with an image sends it in the
    provider's shape, after its instructions."""
    llm.reply(Json(completion("A chart.")))
    agent = Agent("looker", openai_model, instructions="Describe images.")
    run = (await agent.run([ASKED])).unwrap()
    assert run.text == "A chart."
    body = llm.requests[0][1]
    check(body, OPENAI_BODY)
    assert body["messages"][0] == {
        "role": "system",
        "content": "Describe images.",
    }
    assert body["messages"][1]["content"][1]["type"] == "image_url"
