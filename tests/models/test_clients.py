"""Model clients (issue 10, item 6): closing, one client per event loop,
one place for retries, structured output into an attrs class."""

from __future__ import annotations

import enum
import gc
import json
import sys

from collections.abc import Callable, Iterator
from typing import Any, Literal

import anyio
import attrs
import pytest

from returns.result import Failure

from pipeline import Agent, Context, Message, Secret
from pipeline.agents import AgentRun
from pipeline.errors import ConstructionError
from pipeline.failures import InvalidOutput, ModelError
from pipeline.middleware import retry
from pipeline.models import Model, ModelRequest, ResponseSchema
from pipeline.models.anthropic import AnthropicModel
from pipeline.models.openai import OpenAIModel
from pipeline.testing import Reply, ScriptedModel
from tests.models.llm_server import FakeLLM, Json
from tests.models.test_anthropic import message, text
from tests.models.test_openai import completion


def openai_model(llm: FakeLLM) -> OpenAIModel:
    """An adapter with the SDK client left to it: default settings."""
    return OpenAIModel("m", base_url=f"{llm.url}/v1", api_key="k")


def anthropic_model(llm: FakeLLM) -> AnthropicModel:
    """The Anthropic adapter, default settings."""
    return AnthropicModel("m", base_url=llm.url, api_key="k")


ADAPTERS: dict[str, tuple[Callable[[FakeLLM], Any], Callable[[], Any]]] = {
    "openai": (openai_model, completion),
    "anthropic": (anthropic_model, lambda: message([text("Hello!")])),
}


@pytest.fixture(name="unraisable")
def _unraisable() -> Iterator[list[str]]:
    """What the interpreter could not raise (a socket or transport the
    garbage collector found open, say), collected instead of printed."""
    seen: list[str] = []
    before = sys.unraisablehook

    def hook(info: Any) -> None:
        seen.append(f"{info.exc_type.__name__}: {info.exc_value}")

    sys.unraisablehook = hook
    try:
        yield seen
    finally:
        sys.unraisablehook = before


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(ADAPTERS))
def test_a_client_left_open_breaks_no_other_loop(
    llm: FakeLLM, unraisable: list[str], kind: str
) -> None:
    """One adapter, never closed, used on asyncio, then trio, then a new
    asyncio loop: every call succeeds, and no connection of an ended loop
    is left for the garbage collector to find."""
    make, body = ADAPTERS[kind]
    models: list[Model] = [make(llm)]

    async def ask() -> None:
        llm.reply(Json(body()))
        request = ModelRequest((Message.user("hi"),))
        out = await models[0].generate(request)
        assert out.unwrap().text == "Hello!"

    for backend in ("asyncio", "trio", "asyncio"):
        anyio.run(ask, backend=backend)
    models.clear()  # dropped unclosed
    gc.collect()
    assert unraisable == []
    assert len(llm.requests) == 3


@pytest.mark.parametrize("kind", sorted(ADAPTERS))
async def test_retry_middleware_is_the_one_place_retries_happen(
    llm: FakeLLM, kind: str
) -> None:
    """retry(3) over an agent on a default adapter makes exactly three HTTP
    requests: the SDK does not retry underneath."""
    make, _ = ADAPTERS[kind]
    failing = {"error": {"type": "x", "message": "overloaded"}}
    llm.reply(*(Json(failing, status=503) for _ in range(9)))
    async with make(llm) as model:
        agent = Agent("a", model).use(retry(3))
        out = await agent(Context.of(Message.user("hi")))
    assert isinstance(out, Failure)
    assert isinstance(out.failure(), ModelError)
    assert len(llm.requests) == 3


async def test_async_with_and_aclose_close_the_client(llm: FakeLLM) -> None:
    """async with closes the loop's client (and ends the task that would
    have closed it with the loop); the next call makes a new one; closing
    twice is harmless."""
    before = len(anyio.get_running_tasks())
    async with openai_model(llm) as model:
        first = model.client
        assert model.client is first  # one per loop
        await anyio.wait_all_tasks_blocked()
        assert len(anyio.get_running_tasks()) == before + 1
    await model.aclose()
    await anyio.wait_all_tasks_blocked()
    assert len(anyio.get_running_tasks()) == before
    second = model.client
    assert second is not first
    await model.aclose()


class Mood(enum.Enum):
    """How it went."""

    GOOD = "good"
    BAD = "bad"


@attrs.frozen
class Score:
    """A reviewer's verdict."""

    mood: Mood
    points: int
    label: Literal["pass", "fail"]


@attrs.frozen
class Review:
    """A review with its verdict."""

    summary: str
    score: Score
    tags: list[str] = attrs.Factory(list)


def test_schema_from_an_attrs_class() -> None:
    """ResponseSchema.of derives the schema from the class: types, enums,
    literals, nested classes, every field required, nothing else."""
    schema = ResponseSchema.of(Review)
    assert schema.name == "Review"
    assert schema.description == "A review with its verdict."
    body = schema.schema
    assert body["required"] == ["summary", "score", "tags"]
    assert body["additionalProperties"] is False
    score = body["properties"]["score"]
    assert score["required"] == ["mood", "points", "label"]
    assert score["properties"]["mood"] == {"enum": ["good", "bad"]}
    assert score["properties"]["label"] == {"enum": ["pass", "fail"]}
    assert score["properties"]["points"] == {"type": "integer"}
    with pytest.raises(ConstructionError):
        ResponseSchema.of(dict)


async def test_structured_output_through_the_openai_adapter(
    llm: FakeLLM,
) -> None:
    """The class's schema goes out as a strict json_schema; the answer
    comes back as the class."""
    answer = {
        "summary": "fine",
        "score": {"mood": "good", "points": 7, "label": "pass"},
        "tags": ["a"],
    }
    llm.reply(Json(completion(json.dumps(answer))))
    async with openai_model(llm) as model:
        agent = Agent("rev", model, response_schema=ResponseSchema.of(Review))
        run = (await agent.run([Message.user("review")])).unwrap()
    assert run.output(Review).unwrap() == Review(
        "fine", Score(Mood.GOOD, 7, "pass"), ["a"]
    )
    sent = llm.requests[0][1]["response_format"]["json_schema"]
    assert sent["strict"] is True
    assert sent["schema"] == dict(ResponseSchema.of(Review).schema)


async def test_bad_structured_output_is_typed_and_quiet() -> None:
    """An answer that does not fit is an InvalidOutput naming the field and
    the type expected, never the value."""
    bad = {
        "summary": "fine",
        "score": {"mood": "SECRET", "points": 7, "label": "pass"},
    }
    model = ScriptedModel(Reply.json(bad), Reply.text("not json SECRET"))
    agent = Agent("rev", model, response_schema=ResponseSchema.of(Review))
    runs: list[AgentRun] = [
        (await agent.run([Message.user("go")])).unwrap() for _ in range(2)
    ]
    wrong, garbage = (r.output(Review).failure() for r in runs)
    assert wrong == InvalidOutput(
        "Review",
        'expected one of ["good", "bad"] at $.score.mood',
        path=("rev",),
    )
    assert garbage.reason == "not valid JSON"
    assert "SECRET" not in str(wrong)
    assert "SECRET" not in str(garbage)


KEY = "sk-canary-key-5e7d-do-not-leak"


def _given_client(kind: str, llm: FakeLLM) -> Any:
    """The SDK's own client, made by the caller with the key."""
    if kind == "openai":
        import openai  # noqa: PLC0415

        return openai.AsyncOpenAI(
            base_url=f"{llm.url}/v1", api_key=KEY, max_retries=0
        )
    import anthropic  # noqa: PLC0415

    return anthropic.AsyncAnthropic(
        base_url=llm.url, api_key=KEY, max_retries=0
    )


@pytest.mark.parametrize("how", ["secret", "text", "client"])
@pytest.mark.parametrize("kind", sorted(ADAPTERS))
async def test_a_key_the_provider_quotes_is_withheld(
    llm: FakeLLM, kind: str, how: str
) -> None:
    """A 401 whose message quotes the API key sent (as some proxies do):
    the ModelError shows <api key>, whether the adapter got the key as a
    Secret, as text, or inside a client it was given."""
    key: Any = Secret(KEY, ref="env:KEY") if how == "secret" else KEY
    cls: Any = OpenAIModel if kind == "openai" else AnthropicModel
    base = f"{llm.url}/v1" if kind == "openai" else llm.url
    model = (
        cls("m", client=_given_client(kind, llm))
        if how == "client"
        else cls("m", base_url=base, api_key=key, max_retries=0)
    )
    quoted = {"type": "invalid_request_error", "message": f"bad key: {KEY}"}
    llm.reply(Json({"error": quoted}, status=401))
    async with model:
        out = await model.generate(ModelRequest((Message.user("hi"),)))
    error = out.failure()
    assert isinstance(error, ModelError)
    assert error.status == 401
    assert "bad key: <api key>" in str(error)
    assert KEY not in str(error) + repr(error)
