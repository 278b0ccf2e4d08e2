"""Per-model-call caching: ``models.cached(model, store=..., ttl=...)``."""

from __future__ import annotations

from pathlib import Path

import pytest

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)
from returns.result import Success

from pipeline import Agent, Budget, Context, Message, events, run, stores
from pipeline.errors import ConstructionError
from pipeline.events import ModelCacheLookup
from pipeline.models import (
    CachedModel,
    ModelDelta,
    ModelRequest,
    ResponseSchema,
    TextDelta,
    ToolCallDelta,
    ToolSpec,
    cached,
)
from pipeline.testing import Reply, ScriptedModel


class Clock:
    """A fake clock: time moves only when a test moves it."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class DictCache:
    """A cache store of the test's own: its entries can be altered."""

    def __init__(self) -> None:
        self.entries: dict[str, bytes] = {}

    def get(self, key: str, /) -> bytes | None:
        return self.entries.get(key)

    def put(self, key: str, value: bytes, ttl: float | None, /) -> None:
        del ttl
        self.entries[key] = value


def _ask(text: str = "hi", **kw: object) -> ModelRequest:
    return ModelRequest([Message.user(text)], **kw)  # type: ignore[arg-type]


async def test_a_request_asked_again_is_answered_from_the_cache() -> None:
    with ScriptedModel(Reply.text("hello")) as model:  # one call, strictly
        m = cached(model)
        first = await m.generate(_ask())
        second = await m.generate(_ask())
    assert first == second == Success(Reply.text("hello"))
    assert len(model.requests) == 1


@pytest.mark.parametrize(
    "other",
    [
        pytest.param(_ask("bye"), id="messages"),
        pytest.param(ModelRequest([Message.user("hi", name="bo")]), id="name"),
        pytest.param(_ask(temperature=0.5), id="temperature"),
        pytest.param(_ask(max_tokens=10), id="max_tokens"),
        pytest.param(_ask(use_tools=False), id="use_tools"),
        pytest.param(
            ModelRequest(
                [Message.user("hi")],
                (ToolSpec("t", "a tool", {"type": "object"}),),
            ),
            id="tools",
        ),
        pytest.param(
            _ask(response_schema=ResponseSchema("Out", {"type": "object"})),
            id="response_schema",
        ),
    ],
)
async def test_any_difference_in_the_request_misses(
    other: ModelRequest,
) -> None:
    with ScriptedModel(Reply.text("a"), Reply.text("b")) as model:
        m = cached(model)
        await m.generate(_ask())
        assert (await m.generate(other)).unwrap().text == "b"


async def test_a_tool_schema_change_misses() -> None:
    def asking(schema: dict[str, object]) -> ModelRequest:
        return ModelRequest(
            [Message.user("hi")], (ToolSpec("t", "a tool", schema),)
        )

    with ScriptedModel(Reply.text("a"), Reply.text("b")) as model:
        m = cached(model)
        await m.generate(asking({"type": "object"}))
        await m.generate(asking({"type": "object"}))
        out = await m.generate(asking({"type": "object", "required": []}))
    assert out.unwrap().text == "b"


async def test_key_selects_what_the_answer_depends_on() -> None:
    def last_text(request: ModelRequest) -> str:
        return request.messages[-1].content

    with ScriptedModel(Reply.text("a"), Reply.text("b")) as model:
        m = cached(model, key=last_text)
        await m.generate(
            ModelRequest([Message.system("be terse"), Message.user("hi")])
        )
        again = ModelRequest([Message.system("be kind"), Message.user("hi")])
        assert (await m.generate(again)).unwrap().text == "a"  # a hit
        assert (await m.generate(_ask("bye"))).unwrap().text == "b"


async def test_a_request_that_is_not_json_is_answered_uncached() -> None:
    with ScriptedModel(Reply.text("a"), Reply.text("b")) as model:
        m = cached(model, key=lambda _: object())
        assert (await m.generate(_ask())).unwrap().text == "a"
        assert (await m.generate(_ask())).unwrap().text == "b"


async def test_another_model_sharing_the_store_misses() -> None:
    store = stores.MemoryCache()
    with (
        ScriptedModel(Reply.text("from a"), name="a") as a,
        ScriptedModel(Reply.text("from b"), name="b") as b,
    ):
        assert (
            await cached(a, store=store).generate(_ask())
        ).unwrap().text == "from a"
        assert (
            await cached(b, store=store).generate(_ask())
        ).unwrap().text == "from b"
    assert len(store) == 2


async def test_a_failure_is_not_cached() -> None:
    with ScriptedModel(Reply.error("down"), Reply.text("up")) as model:
        m = cached(model)
        assert type(await m.generate(_ask())) is not Success
        assert (await m.generate(_ask())).unwrap().text == "up"
        assert (await m.generate(_ask())).unwrap().text == "up"
    assert len(model.requests) == 2


async def test_ttl_expiry_with_a_fake_clock() -> None:
    clock = Clock()
    with ScriptedModel(Reply.text("a"), Reply.text("b")) as model:
        m = cached(model, store=stores.MemoryCache(clock), ttl=60)
        await m.generate(_ask())
        clock.now += 60
        assert (await m.generate(_ask())).unwrap().text == "a"
        clock.now += 0.5
        assert (await m.generate(_ask())).unwrap().text == "b"


async def test_an_entry_that_no_longer_decodes_is_a_miss() -> None:
    store = DictCache()
    with ScriptedModel(Reply.text("a"), Reply.text("b")) as model:
        m = cached(model, store=store)
        await m.generate(_ask())
        (key,) = store.entries
        store.entries[key] = b'{"message": 3}'  # an older response type
        assert (await m.generate(_ask())).unwrap().text == "b"
        assert (await m.generate(_ask())).unwrap().text == "b"  # replaced
    assert len(model.requests) == 2


async def test_a_hit_streams_the_stored_answer() -> None:
    answer = Reply.tool_call("lookup", {"q": "x"}, call_id="c1")
    with ScriptedModel(answer) as model:
        m = cached(model)
        await m.generate(_ask())
        seen: list[ModelDelta] = []

        async def sink(delta: ModelDelta) -> None:
            seen.append(delta)

        out = await m.generate(_ask(), on_delta=sink)
    assert out.unwrap() == answer
    assert seen == [ToolCallDelta(0, "c1", "lookup", '{"q": "x"}')]
    with ScriptedModel(Reply.text("hello")) as model:
        m = cached(model)
        await m.generate(_ask())
        seen.clear()
        await m.generate(_ask(), on_delta=sink)
    assert seen == [TextDelta("hello")]


def _user(text: str) -> Context:
    return Context.of(Message.user(text))


async def test_a_budget_counts_only_the_calls_made() -> None:
    with ScriptedModel(Reply.text("hello")) as model:
        agent = Agent("x", cached(model))
        first = await run(agent, _user("hi"), budget=Budget(model_calls=1))
        again = await run(agent, _user("hi"), budget=Budget(model_calls=1))
    assert first.usage.model_calls == 1
    assert again.usage.model_calls == 0  # answered from the cache
    assert again.usage.input_tokens == again.usage.output_tokens == 0
    assert (
        again.result.unwrap().messages[-1].content
        == first.result.unwrap().messages[-1].content
        == "hello"
    )


async def test_a_refused_call_is_not_made_nor_cached() -> None:
    with ScriptedModel(Reply.text("hello")) as model:
        agent = Agent("x", cached(model))
        refused = await run(agent, _user("hi"), budget=Budget(model_calls=0))
        assert type(refused.result) is not Success
        done = await run(agent, _user("hi"))
    assert done.usage.model_calls == 1
    assert len(model.requests) == 1


async def test_events_say_hit_and_miss() -> None:
    with ScriptedModel(Reply.text("hello")) as model:
        agent = Agent("x", cached(model))
        seen: list[tuple[str, bool]] = []
        for _ in range(2):
            async with events.stream(agent, _user("hi")) as stream:
                seen += [
                    (e.model, e.hit)
                    async for e in stream
                    if isinstance(e, ModelCacheLookup)
                ]
    assert seen == [("scripted:scripted", False), ("scripted:scripted", True)]


async def test_spans_say_hit_and_miss() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with ScriptedModel(Reply.text("hello")) as model:
        agent = Agent("x", cached(model))
        for _ in range(2):
            await run(agent, _user("hi"), tracer_provider=provider)
    spans = [
        (s.name, (s.attributes or {}).get("pipeline.cache.hit"))
        for s in exporter.get_finished_spans()
        if s.name.startswith(("cache ", "chat "))
    ]
    provider.shutdown()
    assert spans == [
        ("cache scripted", False),
        ("chat scripted", None),  # the call made on the miss
        ("cache scripted", True),  # no call on the hit
    ]


async def test_answers_kept_in_a_sqlite_file_outlive_the_store(
    tmp_path: Path,
) -> None:
    path = tmp_path / "calls.db"
    with ScriptedModel(Reply.text("hello")) as model:
        async with stores.SQLiteStore(path) as store:
            m = cached(model, store=stores.StoreCache(store), ttl=3600)
            await m.generate(_ask())
        async with stores.SQLiteStore(path) as store:
            m = cached(model, store=stores.StoreCache(store), ttl=3600)
            out = await m.generate(_ask())
    assert out.unwrap() == Reply.text("hello")
    assert len(model.requests) == 1


def test_cached_refuses_what_is_not_a_model_or_a_bad_ttl() -> None:
    with pytest.raises(ConstructionError, match="of type int"):
        cached(3)  # type: ignore[arg-type]
    with pytest.raises(ConstructionError, match="ttl"):
        cached(ScriptedModel(), ttl=0)


def test_a_cached_model_keeps_its_models_name() -> None:
    model = cached(ScriptedModel(name="a"))
    assert isinstance(model, CachedModel)
    assert model.name == "scripted:a"
    assert isinstance(model.model, ScriptedModel)
