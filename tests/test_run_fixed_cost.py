"""What a checkpointed run does once, done cheaper, gives what the general
way gives (see docs/performance.md, the checkpointed run's fixed cost)."""

from __future__ import annotations

import os

from collections.abc import Callable
from urllib.parse import quote

import anyio
import pytest

from hypothesis import given
from hypothesis import strategies as st
from pyrsistent import pmap

from pipeline import Agent, Context, Message, _concurrency, graph, stores
from pipeline._context import freeze, metadata_from_json
from pipeline.fold import _journal
from pipeline.testing import Reply, ScriptedModel


def test_empty_metadata_reads_back_as_the_one_empty_map() -> None:
    assert metadata_from_json({}) is pmap() is freeze({}, "metadata")
    assert metadata_from_json({}) == Context().metadata
    # Anything else still goes the general way.
    assert metadata_from_json({"a": [1]}) == pmap({"a": (1,)})
    with pytest.raises(TypeError, match="expected an object"):
        metadata_from_json([])


@given(st.text())
def test_a_quoted_name_is_urllibs(name: str) -> None:
    assert _journal._quoted(name) == quote(name, safe="")
    assert _journal._quoted(name) == quote(name, safe="")  # kept, the same
    assert _journal.fold_key(name, 2) == f"f:{quote(name, safe='')}#2"
    assert _journal.branch_key(name) == f"b:{quote(name, safe='')}"


def test_quoted_names_kept_are_bounded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_journal, "_QUOTED", {})
    monkeypatch.setattr(_journal, "_QUOTED_MAX", 3)
    names = [f"n/{i}" for i in range(10)]
    assert [_journal._quoted(n) for n in names] == [
        quote(n, safe="") for n in names
    ]
    assert len(_journal._QUOTED) == 3


async def test_a_lock_is_the_running_librarys_own() -> None:
    made = [_concurrency.new_lock() for _ in range(3)]
    assert {type(lock) for lock in made} == {
        type(anyio.Lock(fast_acquire=True))
    }
    first, second = made[0], made[1]
    first.acquire_nowait()
    assert first.locked()
    assert not second.locked()
    first.release()
    async with first:
        assert first.locked()


async def test_a_lock_waits_its_turn() -> None:
    lock = _concurrency.new_lock()
    order: list[str] = []

    async def take(name: str) -> None:
        async with lock:
            order.append(name)
            await anyio.lowlevel.checkpoint()
            order.append(name)

    async with anyio.create_task_group() as tg:
        tg.start_soon(take, "a")
        tg.start_soon(take, "b")
    assert order in (["a", "a", "b", "b"], ["b", "b", "a", "a"])


def test_a_lock_made_outside_a_loop_is_not_kept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_concurrency, "_LOCKS", {})
    lock = _concurrency.new_lock()  # anyio's adapter, no loop running
    assert _concurrency._LOCKS == {}

    async def inside() -> type:
        return type(_concurrency.new_lock())

    assert anyio.run(inside) is anyio.run(_lock_type)
    del lock


async def _lock_type() -> type:
    return type(anyio.Lock(fast_acquire=True))


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # asyncio's scope
async def test_an_asyncio_scope_cancels_as_anyios(anyio_backend: str) -> None:
    del anyio_backend
    for _ in range(2):  # made by anyio, then by its class
        with _concurrency.asyncio_scope() as scope:
            assert isinstance(scope, anyio.CancelScope)
            scope.cancel()
            await anyio.sleep(1)
        assert scope.cancelled_caught


async def test_a_checkpointed_agent_run_records_what_it_did() -> None:
    """The records of a W7-like run, metadata empty and not, two runs on
    one store (the same names quoted, the lock made by its class)."""
    for metadata in (None, {"k": "v"}):
        model = ScriptedModel(
            Reply.tool_call("echo", {"text": "hi"}),
            Reply.text("done"),
            cycle=True,
        )
        agent = Agent("a b/c", model, max_turns=3)
        g = (
            graph.builder(Context)
            .node("n", agent)
            .entry("n")
            .edge("n", graph.END)
            .build()
        )
        store = stores.MemoryStore()
        for thread in ("t1", "t2"):
            ctx = Context.of(Message.user("go"), metadata=metadata, run_id="r")
            out = (await g.run(ctx, store=store, thread_id=thread)).unwrap()
            assert out.done
            assert out.state.metadata == pmap(metadata or {})
            loaded = (await g.load(store, thread)).unwrap()
            assert loaded.state == out.state
            records = await store.records(thread)
            assert len(records) >= 3
            assert b"f:a%20b%2Fc#0" in b"".join(r.data for r in records)


def test_the_environment_is_read_now(monkeypatch: pytest.MonkeyPatch) -> None:
    # runs._in_environ asks os.environ's own mapping: a variable set or
    # unset between two runs is seen, as ``in os.environ`` sees it.
    from pipeline import runs  # noqa: PLC0415

    name = "PIPELINE_TEST_ENV_READ_NOW"
    monkeypatch.delenv(name, raising=False)
    assert not runs._in_environ(name)
    monkeypatch.setenv(name, "x")
    assert runs._in_environ(name)
    assert runs._in_environ(name) == (name in os.environ)
    monkeypatch.delenv(name)
    assert not runs._in_environ(name)
    # Something else standing in for os.environ is asked as itself.
    monkeypatch.setattr(os, "environ", {name: "y"})
    assert runs._in_environ(name)
    monkeypatch.setattr(os, "environ", {})
    assert not runs._in_environ(name)


class _KeyedEnv(dict[str, str]):
    """A stand-in for os.environ with a ``_data`` dict of its own keys
    and no ``encodekey`` (found attacking: taken for the stdlib's)."""

    def __init__(self, data: dict[str, str]) -> None:
        super().__init__(data)
        self._data = data


def test_a_stand_in_environment_with_data_is_asked_as_itself(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pipeline import runs  # noqa: PLC0415

    name = "PIPELINE_TEST_ENV_STAND_IN"
    monkeypatch.setattr(os, "environ", _KeyedEnv({name: "y"}))
    assert runs._in_environ(name)
    monkeypatch.setattr(os, "environ", _KeyedEnv({}))
    assert not runs._in_environ(name)


def test_a_provider_named_in_the_environment_is_seen(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Without the OpenTelemetry API imported, only the variable says a
    # provider may be set: set between two checks, the API is looked at.
    import sys  # noqa: PLC0415

    from pipeline import runs  # noqa: PLC0415

    asked: list[str] = []
    monkeypatch.delitem(sys.modules, "opentelemetry.trace", raising=False)
    monkeypatch.delenv("OTEL_PYTHON_TRACER_PROVIDER", raising=False)
    monkeypatch.setattr(runs, "_in_environ", _spy(runs._in_environ, asked))
    assert runs._global_tracing() is None
    assert asked == ["OTEL_PYTHON_TRACER_PROVIDER"]
    monkeypatch.setenv("OTEL_PYTHON_TRACER_PROVIDER", "nothing")
    assert runs._in_environ("OTEL_PYTHON_TRACER_PROVIDER")


def _spy(f: Callable[[str], bool], asked: list[str]) -> Callable[[str], bool]:
    def spied(name: str) -> bool:
        asked.append(name)
        return f(name)

    return spied


async def _shout(text: str) -> str:
    """Return the text, louder."""
    return text.upper()


async def _whisper(text: str) -> str:
    """Return the text, quieter."""
    return text.lower()


def test_an_agents_tool_facts_are_its_own_tools() -> None:
    # An agent makes its own tools' facts (specs, approvals, secret
    # arguments) once; other tools given to a run get theirs.
    from pipeline import tool  # noqa: PLC0415
    from pipeline._turns import tool_facts  # noqa: PLC0415

    shout, whisper = tool(_shout), tool(_whisper)
    asked = tool(approval=True)(_whisper)
    model = ScriptedModel(Reply.text("a"), Reply.text("b"), Reply.text("c"))
    agent = Agent("a", model, tools=[shout])
    assert agent._tool_facts == tool_facts({"_shout": shout})
    other = {"_whisper": asked}

    async def main() -> None:
        await agent.run([Message.user("x")])
        await agent.converse([Message.user("x")], other)
        await agent.converse([Message.user("x")], {"_whisper": whisper})

    anyio.run(main)
    assert [r.tools for r in model.requests] == [
        (shout.spec,),
        (asked.spec,),
        (whisper.spec,),
    ]
    assert tool_facts(other)[1] is True
    assert agent._tool_facts[1] is False
    assert Agent("b", model, tools=[asked])._tool_facts[1] is True


def test_a_checked_thread_id_is_kept_for_plain_str_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # check_thread_id keeps the plain str ids it passed (bounded); a bad
    # id, or a subclass whose __eq__ matches a kept one, is still checked.
    from pipeline.errors import InvalidThreadId  # noqa: PLC0415
    from pipeline.stores import _protocol  # noqa: PLC0415

    monkeypatch.setattr(_protocol, "_CHECKED_IDS", set())
    monkeypatch.setattr(_protocol, "_CHECKED_MAX", 3)
    assert stores.check_thread_id("t") == "t"
    assert stores.check_thread_id("t") == "t"  # kept: the same answer
    assert {"t"} == _protocol._CHECKED_IDS

    class Loose(str):  # looks like "t" to a set
        __slots__ = ()

        def __hash__(self) -> int:
            return hash("t")

        def __eq__(self, other: object) -> bool:
            return True

    for bad in ("", "a\x00b", "\ud800", "x" * 257, Loose("t\x00"), 3):
        with pytest.raises(InvalidThreadId):
            stores.check_thread_id(bad)
    assert type(stores.check_thread_id(Loose("t"))) is Loose
    assert {"t"} == _protocol._CHECKED_IDS  # no subclass kept
    for i in range(5):
        stores.check_thread_id(f"id{i}")
    assert len(_protocol._CHECKED_IDS) <= 3


def test_context_checks_each_message_still() -> None:
    # Exact messages all pass at once; anything else is named with its
    # index, as before.
    msg = Message.user("x")
    assert len(Context().append(msg, msg, msg).messages) == 3
    assert len(Context.of(msg, msg).messages) == 2
    with pytest.raises(TypeError, match=r"argument\[2\] is a str"):
        Context().append(msg, msg, "no")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"messages\[0\] is a int"):
        Context.of(3, msg)  # type: ignore[arg-type]


class _LooseMeta(type):
    """A metaclass whose classes equal every class, with Message's hash."""

    def __eq__(cls, other: object) -> bool:
        return True

    def __hash__(cls) -> int:
        return hash(Message)


class _NotAMessage(metaclass=_LooseMeta):
    pass


def test_a_type_equal_to_message_is_not_taken_for_one() -> None:
    # Found attacking: the types were compared with their own __eq__.
    msg = Message.user("x")
    with pytest.raises(TypeError, match=r"messages\[1\] is a _NotAMessage"):
        Context.of(msg, _NotAMessage())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"argument\[0\] is a _NotAMessage"):
        Context().append(_NotAMessage(), msg)  # type: ignore[arg-type]


def test_a_finished_records_status_is_its_value() -> None:
    from pipeline.fold import Status, _codec  # noqa: PLC0415

    assert {s: _codec._STATUS_VALUES[s] for s in Status} == {
        s: s.value for s in Status
    }
    assert all(type(v) is str for v in _codec._STATUS_VALUES.values())


def test_a_memory_store_checks_a_lease_ttl_not_the_default() -> None:
    from pipeline.errors import ConstructionError  # noqa: PLC0415

    assert stores.MemoryStore().lease_ttl == stores.DEFAULT_LEASE_TTL
    assert stores.MemoryStore(lease_ttl=5).lease_ttl == 5
    for bad in (0, -1.0, float("nan"), "30"):
        with pytest.raises(ConstructionError):
            stores.MemoryStore(lease_ttl=bad)  # type: ignore[arg-type]


def test_an_agents_first_snapshot_is_its_names() -> None:
    from pipeline import _turns  # noqa: PLC0415
    from pipeline.fold import Snapshot  # noqa: PLC0415

    model = ScriptedModel(Reply.text("a"))
    for name in ("a", "b", "a"):
        loop = _turns.Loop(Agent(name, model), (), {})
        start = loop.start()
        assert start == Snapshot.first(
            name, _turns._NO_TURNS, (name,), f"agent:{name}"
        )
        assert start.thread_id == name
        assert start.next == (name,)
    assert (
        _turns.Loop(Agent("a", model), (), {}).start() is _turns._STARTS["a"]
    )


async def test_an_agent_as_a_handler_appends_what_its_run_added() -> None:
    # The handler runs the loop without building an AgentRun: the same
    # messages appended, the same failure.
    from pipeline import tool  # noqa: PLC0415
    from pipeline.failures import TurnLimitExceeded  # noqa: PLC0415

    shout = tool(_shout)

    def script() -> ScriptedModel:
        return ScriptedModel(
            Reply.tool_call("_shout", {"text": "hi"}), Reply.text("done")
        )

    ctx = Context.of(Message.user("go"))
    ran = (
        await Agent("a", script(), tools=[shout]).run(ctx.messages)
    ).unwrap()
    handled = (await Agent("a", script(), tools=[shout])(ctx)).unwrap()
    assert handled.messages == ctx.messages.extend(ran.messages)
    assert handled.run_id == ctx.run_id
    short = Agent("a", script(), tools=[shout], max_turns=1)
    failed = await short(ctx)
    assert isinstance(failed.failure(), TurnLimitExceeded)
    alone = await Agent("a", script(), tools=[shout], max_turns=1).run(
        ctx.messages
    )
    assert failed.failure() == alone.failure()
