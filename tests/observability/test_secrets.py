"""Secrets: canary values never reach a store file, a log, a span, an
event, a repr or a failure message; resolvers bring them back on resume."""

from __future__ import annotations

import contextlib
import copy
import logging
import pickle

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import attrs
import cattrs
import pytest

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)
from returns.result import Failure, Result, Success

from pipeline import (
    Agent,
    Context,
    Graph,
    Message,
    Secret,
    fold,
    graph,
    handler,
    run,
    scope,
    stores,
    stream,
    tool,
)
from pipeline._serde import canonical, make_converter
from pipeline.errors import ConstructionError, SecretUnresolved
from pipeline.events import Event, ToolRaised
from pipeline.fold import Interrupt, Transition
from pipeline.graph import END
from pipeline.middleware import log, trace
from pipeline.secrets import (
    holds_secret,
    redact,
    redacted_traceback,
    resolve,
    resolver,
)
from pipeline.testing import Reply, ScriptedModel


CANARY = "canary-7f3a9c-do-not-leak"


@attrs.frozen
class Login:
    """A graph state holding a secret."""

    user: str
    token: Secret[str]
    seen: int = 0


@pytest.fixture(name="spans")
def _spans() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider, exporter
    provider.shutdown()


def span_text(spans: tuple[ReadableSpan, ...]) -> str:
    """Everything a span exporter would send, as text."""
    return "\n".join(s.to_json() for s in spans)


def uses_token() -> Any:
    @handler(name="use")
    async def use(s: Login) -> Result[Login, str]:
        # The node uses the value (its length), never shows it.
        return Success(attrs.evolve(s, seen=len(s.token.reveal())))

    return use


def login_graph() -> Graph[Login, str]:
    return (
        graph.builder(Login)
        .node("use", uses_token().use(log(), trace()))
        .node("check", uses_token())
        .entry("use")
        .edge("use", "check")
        .edge("check", END)
        .build(name="login")
    )


def test_repr_str_format_and_pickle() -> None:
    """Reprs, str, f-strings and containers show the reference only."""
    key = Secret(CANARY, ref="api-key")
    state = Login("ann", key)
    shown = [
        repr(key),
        str(key),
        f"{key}",
        f"{key!r:>40}",
        repr(state),
        str([key]),
    ]
    assert all(CANARY not in s for s in shown)
    assert repr(key) == "Secret(ref='api-key')"
    with pytest.raises(TypeError, match="cannot be pickled") as caught:
        pickle.dumps(key)
    assert CANARY not in str(caught.value)
    assert copy.deepcopy(key) is key
    assert copy.copy(key) is key
    with pytest.raises(AttributeError):
        key._value = "x"
    assert key == Secret(CANARY, ref="api-key")
    assert key != Secret(CANARY + "x", ref="api-key")
    assert key != Secret(CANARY, ref="other")
    assert hash(key) == hash(Secret("else", ref="api-key"))


@pytest.mark.parametrize(
    "hook",
    [
        lambda s: s.__getstate__(),
        lambda s: s.__reduce__(),
        *(lambda s, p=p: s.__reduce_ex__(p) for p in range(6)),
    ],
)
def test_no_state_hook_hands_over_the_value(hook: Any) -> None:
    """The copy/pickle protocol's state hooks refuse, as pickling does
    (object's own ``__getstate__`` would return the slots, value included)."""
    with pytest.raises(TypeError, match="cannot be pickled") as caught:
        hook(Secret(CANARY, ref="k"))
    assert CANARY not in str(caught.value)


def test_env_secret_and_default_resolver(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Secret.env reads the environment; env: references resolve there."""
    monkeypatch.setenv("PIPELINE_TEST_KEY", CANARY)
    key = Secret.env("PIPELINE_TEST_KEY")
    assert key.ref == "env:PIPELINE_TEST_KEY"
    assert resolve(key.ref) == CANARY
    monkeypatch.delenv("PIPELINE_TEST_KEY")
    with pytest.raises(ConstructionError, match="PIPELINE_TEST_KEY"):
        Secret.env("PIPELINE_TEST_KEY")
    with pytest.raises(SecretUnresolved, match="env:PIPELINE_TEST_KEY"):
        resolve(key.ref)
    with pytest.raises(ConstructionError):
        Secret(CANARY, ref="")


async def test_converter_stores_the_reference() -> None:
    """Unstructured, a secret is {"$secret": ref}; structured, resolved."""
    conv = make_converter()
    doc = conv.unstructure(Login("ann", Secret(CANARY, ref="k")))
    assert doc == {"user": "ann", "token": {"$secret": "k"}, "seen": 0}
    with pytest.raises(cattrs.ClassValidationError) as caught:
        conv.structure(doc, Login)
    (inner,) = caught.value.exceptions
    assert isinstance(inner, SecretUnresolved)
    assert inner.ref == "k"
    with scope(secrets=resolver({"k": CANARY})):
        back = conv.structure(doc, Login)
    assert back.token.reveal() == CANARY


@pytest.mark.parametrize("kind", ["sqlite", "memory"])
async def test_canaries_across_every_sink(
    kind: str,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    spans: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    """A checkpointed, traced, logged, streamed run that pauses and resumes:
    zero canaries in the SQLite file, logs, spans, events and reprs; the
    resumed run gets the value back from the resolver."""
    provider, exporter = spans
    caplog.set_level(logging.DEBUG)
    g = login_graph()
    path = tmp_path / "secrets.db"
    secrets = resolver({"login-token": CANARY}, env=False)
    state = Login("ann", Secret(CANARY, ref="login-token"))
    seen: list[Event] = []
    async with _store(kind, path) as store:
        with scope(tracer_provider=provider, secrets=secrets):
            paused = await g.run(
                state,
                store=store,
                thread_id="t1",
                gates=[_gate],
                on_event=_collect(seen),
            )
        assert paused.unwrap().status is fold.Status.INTERRUPTED
        with scope(tracer_provider=provider, secrets=secrets):
            done = await g.resume(
                store=store, thread_id="t1", answer="yes", gates=[_gate]
            )
        final = done.unwrap()
        assert final.state.seen == len(CANARY)
        assert final.state.token.reveal() == CANARY
        assert type(await g.history(store=store, thread_id="t1")) is Failure
        with scope(secrets=secrets):  # loading needs the resolver
            history = (await g.history(store=store, thread_id="t1")).unwrap()
        assert len(history) == 5
        shown = repr(final) + repr(history)
        stored = [r.data for r in await store.records("t1")]
    blobs = _files(tmp_path)
    assert blobs or kind == "memory"
    assert len(stored) == 5  # admission, use, pause, answer, check
    assert CANARY.encode() not in blobs
    assert all(CANARY.encode() not in d for d in stored)
    assert CANARY not in caplog.text
    assert any(r.message.startswith("use") for r in caplog.records)
    assert CANARY not in span_text(exporter.get_finished_spans())
    assert exporter.get_finished_spans()
    assert seen
    assert all(CANARY not in repr(e) for e in seen)
    assert CANARY not in shown


def _files(folder: Path) -> bytes:
    """Every file the store left (the database, its WAL and journal)."""
    return b"".join(p.read_bytes() for p in folder.iterdir())


@contextlib.asynccontextmanager
async def _store(kind: str, path: Path) -> AsyncIterator[Any]:
    if kind == "memory":
        yield stores.MemoryStore()
        return
    async with stores.SQLiteStore(path) as store:
        yield store


async def _gate(t: Transition[Login]) -> Any:
    if t.targets == ("check",) and t.answer is None:
        return Interrupt("go on?")
    return fold.Continue()


def _collect(into: list[Event]) -> Any:
    async def on_event(event: Any) -> None:
        into.append(event)

    return on_event


async def test_unresolvable_secret_is_refused_before_commit(
    tmp_path: Path,
) -> None:
    """A secret no resolver can bring back is not committed: the failure
    names the field and the reference, never the value."""
    g = login_graph()
    async with stores.SQLiteStore(tmp_path / "s.db") as store:
        out = await g.run(
            Login("ann", Secret(CANARY, ref="nowhere")),
            store=store,
            thread_id="t",
        )
        assert await store.records("t") == []
    failure = out.failure()
    assert "nowhere" in str(failure)
    assert CANARY not in str(failure) + repr(failure)


async def test_resume_without_the_resolver_fails_by_reference(
    tmp_path: Path,
) -> None:
    """Loading a checkpoint whose secret cannot be resolved is a typed
    failure naming the reference."""
    g = login_graph()
    secrets = resolver({"login-token": CANARY}, env=False)
    async with stores.SQLiteStore(tmp_path / "s.db") as store:
        with scope(secrets=secrets):
            await g.run(
                Login("ann", Secret(CANARY, ref="login-token")),
                store=store,
                thread_id="t",
                gates=[_gate],
            )
        out = await g.resume(store=store, thread_id="t", answer="yes")
    failure = out.failure()
    text = str(failure) + repr(failure)
    assert "login-token" in text
    assert CANARY not in text


@tool
async def sign_in(user: str, password: Secret[str]) -> str:
    """Sign a user in.

    Args:
        user: who
        password: their password
    """
    assert isinstance(password, Secret)
    return "welcome" if password.reveal() == CANARY else "denied"


async def test_secret_tool_arguments_are_redacted(
    spans: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    """The tool gets the value; the conversation, events and spans hold a
    reference to it."""
    provider, exporter = spans
    assert sign_in.secret_arguments == frozenset({"password"})
    assert sign_in.parameters["properties"]["password"]["type"] == "string"
    model = ScriptedModel(
        Reply.tool_call("sign_in", {"user": "ann", "password": CANARY}),
        Reply.text("signed in"),
    )
    agent = Agent("a", model, tools=[sign_in])
    ctx = Context.of(Message.user("sign me in"))
    events: list[Event] = []
    with scope(tracer_provider=provider):
        async with stream(agent, ctx) as received:
            events.extend([e async for e in received])
    result = received.result
    assert result is not None
    out = result.unwrap()
    assert [m.content for m in out.messages][-2:] == ["welcome", "signed in"]
    call = out.messages[1].tool_calls[0]
    assert '"password":{"$secret":"tool:sign_in.password"}' in call.arguments
    assert CANARY not in repr(out)
    assert CANARY.encode() not in canonical(make_converter().unstructure(out))
    assert all(CANARY not in repr(e) for e in events)
    assert CANARY not in span_text(exporter.get_finished_spans())
    # The model's next request shows the reference, not the value.
    assert CANARY not in repr(model.requests[1].messages)


async def test_secret_argument_of_the_wrong_type_is_not_echoed() -> None:
    """A bad secret argument's error result names the field only."""
    model = ScriptedModel(
        Reply.tool_call("sign_in", {"user": "ann", "password": [CANARY]}),
        Reply.text("sorry"),
    )
    done = await run(
        Agent("a", model, tools=[sign_in]), Context.of(Message.user("x"))
    )
    messages = done.result.unwrap().messages
    assert messages[2].content.startswith("error: invalid arguments")
    assert "password" in messages[2].content
    assert CANARY not in repr(messages)


async def test_failure_messages_never_show_the_value() -> None:
    """A failing node's failure, repr'd and str'd, shows the reference."""

    @handler(name="boom")
    async def boom(s: Login) -> Result[Login, Any]:
        return Failure(("bad state", s))

    done = await run(boom, Login("ann", Secret(CANARY, ref="k")))
    assert isinstance(done.result, Failure)
    assert CANARY not in str(done.result) + repr(done.result)


async def test_model_clients_take_secret_keys() -> None:
    """Model adapters accept a Secret API key; their repr never shows it."""
    from pipeline.models.openai import OpenAIModel  # noqa: PLC0415

    async with OpenAIModel(
        "gpt-4o-mini", api_key=Secret(CANARY, ref="k")
    ) as model:
        assert model.client.api_key == CANARY
        assert CANARY not in repr(model)


@attrs.frozen
class Vault:
    """An attrs class holding secrets at two depths."""

    name: str
    key: Secret[str]
    spares: tuple[Secret[str], int] = (Secret("x", ref="x"), 0)


HIDDEN = {"$secret": "r"}


@pytest.mark.parametrize(
    ("value", "kind", "expected"),
    [
        ("v", Secret[str], HIDDEN),
        (None, Secret[str] | None, None),
        ("v", Secret[str] | None, HIDDEN),
        ("v", Secret[str] | int, HIDDEN),  # which part is which: unknown
        (["v", "w"], list[Secret[str]], [HIDDEN, HIDDEN]),
        ("v", list[Secret[str]], HIDDEN),  # not the declared shape
        ({"a": "v"}, dict[str, Secret[str]], {"a": HIDDEN}),
        (["v", 1], tuple[Secret[str], int], [HIDDEN, 1]),
        (["v"], tuple[Secret[str], int], HIDDEN),
        (["v", "w"], tuple[Secret[str], ...], [HIDDEN, HIDDEN]),
        (
            {"name": "n", "key": "v", "spares": ["w", 2], "zzz": 1},
            Vault,
            {"name": "n", "key": HIDDEN, "spares": [HIDDEN, 2], "zzz": 1},
        ),
        (["v"], Vault, HIDDEN),
        ({"k": "v"}, dict[str, int], {"k": "v"}),  # no secret: as it is
    ],
)
def test_redact_replaces_each_secret_part(
    value: object, kind: Any, expected: object
) -> None:
    """Only the parts a type declares secret are replaced; where the type
    cannot tell, the whole value is."""
    assert holds_secret(kind) is (kind != dict[str, int])
    assert redact(value, kind, "r") == expected


@pytest.mark.slow
def test_redact_never_keeps_a_secret_by_doubt() -> None:
    """A value nested past the interpreter's depth is replaced whole."""
    deep: object = "v"
    for _ in range(1_500):
        deep = [deep]
    kind: Any = Secret[str]
    for _ in range(1_500):
        kind = list[kind]
    assert redact(deep, kind, "r") == HIDDEN


@tool
async def unlock(pin: Secret[str]) -> str:
    """Unlock with a numeric PIN: ``int()`` quotes a bad one in its error."""
    return "open" if int(pin.reveal()) == 1234 else "shut"


async def test_a_tool_exception_quoting_a_secret_shows_nowhere(
    spans: tuple[TracerProvider, InMemorySpanExporter],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A tool's own exception whose message holds its secret argument: the
    value is in no event, log record (formatted, traceback included), span,
    or conversation."""
    provider, exporter = spans
    caplog.set_level(logging.DEBUG)
    model = ScriptedModel(
        Reply.tool_call("unlock", {"pin": CANARY}), Reply.text("still shut")
    )
    agent = Agent("a", model, tools=[unlock])
    events: list[Event] = []
    with scope(tracer_provider=provider):
        async with stream(agent, Context.of(Message.user("open"))) as seen:
            events.extend([e async for e in seen])
    assert seen.result is not None
    out = seen.result.unwrap()
    assert "raised ValueError" in out.messages[2].content
    raised = [e for e in events if isinstance(e, ToolRaised)]
    assert raised == [ToolRaised("unlock", ValueError)]
    assert all(CANARY not in repr(e) for e in events)
    formatted = [logging.Formatter().format(r) for r in caplog.records]
    assert any("ValueError" in text for text in formatted)
    assert all(CANARY not in text for text in formatted)
    assert CANARY not in span_text(exporter.get_finished_spans())
    assert CANARY not in repr(out)


def test_redacted_traceback_keeps_frames_and_types_only() -> None:
    """Chained exceptions: every message withheld, every frame kept."""

    def convert(pin: Secret[str]) -> int:
        try:
            return int(pin.reveal())
        except ValueError as exc:
            raise LookupError(pin.reveal()) from exc

    with pytest.raises(LookupError) as caught:
        convert(Secret(CANARY, ref="pin"))
    text = redacted_traceback(caught.value)
    assert CANARY not in text
    assert "in convert" in text
    assert text.index("ValueError (message withheld") < text.index(
        "LookupError (message withheld"
    )
    group = ExceptionGroup("many", [KeyError(CANARY), OSError(CANARY)])
    assert redacted_traceback(group) == (
        "ExceptionGroup of KeyError, OSError "
        "(message withheld: it may hold a secret)"
    )


@pytest.mark.parametrize(
    "arguments",
    [
        {"user": "ann", "Password": CANARY},  # a misspelt name
        {"user": CANARY},  # the secret in the wrong place, one missing
        {
            "user": ["ann"],
            "password": "x",
            "note": CANARY,
        },  # unknown, wrong type
    ],
    ids=["misspelt", "misplaced", "unknown"],
)
async def test_a_secret_call_that_does_not_decode_is_redacted_whole(
    spans: tuple[TracerProvider, InMemorySpanExporter],
    arguments: dict[str, Any],
) -> None:
    """A call to a tool with secret parameters that does not decode keeps
    nothing the model sent: the value may sit under any name."""
    provider, exporter = spans
    model = ScriptedModel(
        Reply.tool_call("sign_in", arguments), Reply.text("sorry")
    )
    events: list[Event] = []
    with scope(tracer_provider=provider):
        async with stream(
            Agent("a", model, tools=[sign_in]), Context.of(Message.user("x"))
        ) as received:
            events.extend([e async for e in received])
    assert received.result is not None
    out = received.result.unwrap()
    (call,) = out.messages[1].tool_calls
    assert call.arguments == '{"$secret": "tool:sign_in"}'
    assert out.messages[2].content.startswith("error: ")
    assert CANARY not in repr(out)
    assert all(CANARY not in repr(e) for e in events)
    assert CANARY not in span_text(exporter.get_finished_spans())
    assert CANARY not in repr(model.requests[1].messages)
