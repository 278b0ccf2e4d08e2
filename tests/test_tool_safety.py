"""Bad model input and failing tools never crash an agent, nor leak values.

Regression tests for issue 10, items 1-3: arguments outside a ``Literal``,
lone surrogates, NaN, deep nesting and huge strings become error results
naming the argument (never its value); a tool's exception text is not shown
to the model but logged with its traceback and announced by an event; a
tool may list the exceptions that become error results (others propagate);
``timeout=`` bounds sync tools too.
"""

from __future__ import annotations

import asyncio
import enum
import json
import logging
import math
import threading

from typing import Any, Literal

import anyio
import attrs
import pytest

from hypothesis import given, settings
from hypothesis import strategies as st
from returns.result import Failure, Result, Success

from pipeline import (
    Agent,
    Context,
    Message,
    Role,
    Secret,
    Tool,
    graph,
    handler,
    stream,
    tool,
)
from pipeline.agents import as_tool
from pipeline.errors import ConstructionError, ToolError
from pipeline.events import ToolCallFinished, ToolRaised
from pipeline.graph import END, state_tools
from pipeline.models import ResponseSchema
from pipeline.testing import Reply, ScriptedModel
from pipeline.tools import MAX_ARGUMENT_BYTES, MAX_ARGUMENT_DEPTH


class Mode(enum.Enum):
    """A closed set of values."""

    FAST = "fast"
    SLOW = "slow"


class Level(enum.Enum):
    """A closed set of numbers."""

    LOW = 1
    HIGH = 2


@attrs.frozen
class Inner:
    """A nested object."""

    n: int
    tags: list[str]


@attrs.frozen
class Outer:
    """An object holding an object."""

    inner: Inner
    mode: Literal["x", "y"]


@attrs.frozen
class Login:
    """An object holding a secret."""

    user: str
    password: Secret[str]


SHAPES: dict[str, Any] = {
    "integer": int,
    "number": float,
    "boolean": bool,
    "string": str,
    "literal": Literal["a", "b"],
    "int_literal": Literal[1, 2],
    "enum": Mode,
    "attrs": Inner,
    "nested_attrs": Outer,
    "list": list[int],
    "mapping": dict[str, float],
    "pair": tuple[int, str],
    "optional": int | None,
    "int_enum": Level,
    "strings": list[str],
    "string_set": set[str],
    "secret": Secret[str],
    "optional_secret": Secret[str] | None,
    "secret_list": list[Secret[str]],
    "secret_values": dict[str, Secret[str]],
    "secret_attrs": Login,
}
"""Every kind of parameter a tool can declare."""

WHOLE = frozenset({"integer", "optional"})
"""Kinds a JSON integer of any size fits."""

OBJECTS = frozenset({"attrs", "nested_attrs", "secret_attrs"})
"""Kinds whose unknown keys an error may name (short identifiers)."""


def shape_tool(kind: str) -> Tool:
    """A tool with one parameter ``x`` of the shape *kind*."""

    async def fn(x: Any) -> str:
        del x
        return "ran"

    fn.__annotations__ = {"x": SHAPES[kind], "return": str}
    return tool(name=f"t_{kind}")(fn)


@attrs.frozen
class Board:
    """A typed state for the state tools."""

    priority: int = 0
    mode: Mode = Mode.FAST
    lane: Literal["a", "b"] = "a"
    owner: str = ""


@attrs.define
class Holder:
    """Where the state tools find the state."""

    value: Any


READ, WRITE = state_tools(
    Holder(Board()), Board, writable=["priority", "mode", "lane", "owner"]
)
CTX_READ, CTX_WRITE = state_tools(
    Holder(Context()), Context, writable={"count": int, "tag": str}
)
ASK = as_tool(Agent("helper", ScriptedModel()))

TOOLS = {kind: shape_tool(kind) for kind in SHAPES}
TARGETS: dict[str, tuple[Tool, str, str]] = {
    **{kind: (made, "x", kind) for kind, made in TOOLS.items()},
    "write_state.priority": (WRITE, "priority", "integer"),
    "write_state.mode": (WRITE, "mode", "enum"),
    "write_state.lane": (WRITE, "lane", "literal"),
    "write_state.owner": (WRITE, "owner", "string"),
    "read_state.field": (READ, "field", "string"),
    "context.write_state.count": (CTX_WRITE, "count", "integer"),
    "context.write_state.tag": (CTX_WRITE, "tag", "string"),
    "context.read_state.key": (CTX_READ, "key", "string"),
    "as_tool.prompt": (ASK, "prompt", "string"),
}
"""Every tool shape: (tool, the parameter, its kind)."""


def wrong_type(kind: str, canary: str) -> object:
    """A value of the wrong type for *kind*, holding *canary*."""
    if kind in {"string", "secret", "optional_secret", "secret_values"}:
        return [canary]
    if kind == "nested_attrs":
        return {"inner": {"n": canary, "tags": [canary]}, "mode": canary}
    if kind == "attrs":
        return {"n": 1, "tags": [1, canary], "zzz": canary}
    if kind == "mapping":
        return {canary: canary}
    return canary


def _huge_number(kind: str, canary: str, _: int) -> object:
    # Past the float range, and holding the canary's digits.
    digits = "".join(str(ord(c) % 10) for c in canary)
    big = int("9" + digits * (400 // len(digits) + 1))
    return [big] if kind in WHOLE else big


def _array_lookalike(kind: str, canary: str, size: int) -> object:
    # A string or an object where an array belongs.
    if kind in OBJECTS:
        return [canary]
    if kind in {"string", "secret", "optional_secret"}:
        return {canary: 1}
    if kind in {"mapping", "secret_values"}:
        return canary
    return canary if size % 2 else {canary: 1}


def _number_lookalike(kind: str, _: str, size: int) -> object:
    # true for 1, 1.0 for 1 (1 for true).
    if kind == "boolean":
        return 1
    return 1.0 if size % 2 and kind != "number" else True


VALUES = {
    "wrong_type": lambda kind, canary, _: wrong_type(kind, canary),
    "escaped_surrogate": lambda _, canary, __: canary + "\ud800",
    "surrogate_in_list": lambda _, canary, __: [canary, "\udfff" + canary],
    "huge_number": _huge_number,
    "array_lookalike": _array_lookalike,
    "number_lookalike": _number_lookalike,
}
"""Malformations that are JSON values: (kind, canary, size) -> value."""


def arguments(
    kind: str, canary: str, how: str, size: int, param: str = "x"
) -> str:
    """The argument text for a malformation *how* of a parameter *param*
    of shape *kind*."""
    key = json.dumps(param)
    if how in VALUES:
        return json.dumps({param: VALUES[how](kind, canary, size)})
    if how == "raw_surrogate":
        return "{" + key + ': "' + canary + '\ud800"}'
    if how == "nan":
        return "{" + key + ': [NaN, "' + canary + '"]}'
    if how == "infinity":
        return "{" + key + ': -Infinity, "y": "' + canary + '"}'
    if how == "infinite_number":  # 1e400 reads as infinity
        return "{" + key + ": " + "-" * (size % 2) + "1e400}"
    if how == "deep":
        depth = MAX_ARGUMENT_DEPTH + size
        nested = "[" * depth + json.dumps(canary) + "]" * depth
        return "{" + key + ": " + nested + "}"
    assert how == "huge"
    repeat = MAX_ARGUMENT_BYTES // len(canary) + 1 + size
    return json.dumps({param: canary * repeat})


MALFORMATIONS = (
    "wrong_type",
    "escaped_surrogate",
    "raw_surrogate",
    "surrogate_in_list",
    "nan",
    "infinity",
    "deep",
    "huge",
    "huge_number",
    "infinite_number",
    "array_lookalike",
    "number_lookalike",
)


@pytest.mark.slow
@given(
    target=st.sampled_from(sorted(TARGETS)),
    how=st.sampled_from(MALFORMATIONS),
    token=st.text("abcdefghijklmnopqrstuvwxyz", min_size=8, max_size=16),
    size=st.integers(0, 4000),
)
@settings(max_examples=300, deadline=None)
async def test_malformed_arguments_give_an_error_without_the_value(
    target: str, how: str, token: str, size: int
) -> None:
    """Every tool shape (plain tools of every parameter kind, state tools
    over attrs states and contexts, an agent as a tool) turns every
    malformation into an error result that never contains the value."""
    made, param, kind = TARGETS[target]
    canary = f"SECRET{token}"
    out, failed = await made.call(arguments(kind, canary, how, size, param))
    assert failed, (target, how, out)
    assert out.startswith("error: ")
    assert canary not in out
    assert "".join(str(ord(c) % 10) for c in canary) not in out
    assert "\ud800" not in out
    assert "\udfff" not in out
    assert len(out) < 1000
    # Nor its size: a longer value gives the same error.
    longer = canary + token * 3
    again, _ = await made.call(arguments(kind, longer, how, size, param))
    assert again == out


@pytest.mark.parametrize("kind", sorted(SHAPES))
async def test_out_of_range_numbers_are_not_echoed(kind: str) -> None:
    """A number where it does not fit is refused without quoting it."""
    number = 987654321987654321.5 if kind != "number" else "98765"
    out, failed = await TOOLS[kind].call(json.dumps({"x": number}))
    assert failed
    assert "98765" not in out


async def test_literal_and_surrogate_errors_name_the_argument() -> None:
    """The error says which argument, where inside it, and what fits."""
    out, _ = await TOOLS["literal"].call('{"x": "SECRET"}')
    assert out == (
        "error: invalid arguments for 't_literal': argument 'x': "
        'expected one of ["a", "b"]'
    )
    out, _ = await TOOLS["nested_attrs"].call(
        '{"x": {"inner": {"n": "SECRET", "tags": []}, "mode": "x"}}'
    )
    assert out == (
        "error: invalid arguments for 't_nested_attrs': argument 'x': "
        "expected an integer at $.inner.n"
    )
    out, _ = await TOOLS["mapping"].call('{"x": {"SECRET": "no"}}')
    assert out.endswith("argument 'x': expected a number at $[…]")
    out, _ = await TOOLS["string"].call('{"x": "SECRET\\ud800"}')
    assert out.endswith(
        "argument 'x': text that is not valid Unicode (a lone surrogate)"
    )
    out, _ = await TOOLS["list"].call(json.dumps({"x": [[[[1]]]] * 1}))
    assert "argument 'x'" in out


async def test_agent_survives_malformed_arguments() -> None:
    """An agent whose model sends bad arguments gets error results, then
    answers: nothing is raised out of the run."""
    lit = TOOLS["literal"]
    with ScriptedModel(
        Reply.tool_calls(
            ("t_literal", '{"x": "SECRET"}', "c1"),
            ("t_literal", '{"x": "SECRET\ud800"}', "c2"),
            ("t_literal", '{"x": NaN}', "c3"),
            ("t_literal", "[" * 100_000, "c4"),
        ),
        Reply.text("sorry"),
    ) as model:
        run = (await Agent("a", model, tools=[lit]).run([])).unwrap()
    results = [m for m in run.messages if m.role is Role.TOOL]
    assert [m.tool_call_id for m in results] == ["c1", "c2", "c3", "c4"]
    assert all(m.content.startswith("error: ") for m in results)
    assert not any("SECRET" in m.content for m in results)
    assert run.text == "sorry"


async def test_results_that_cannot_be_sent_become_errors(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """NaN, objects with no JSON form and lone surrogates in a tool's
    result never raise: an error result, or the text cleaned."""

    @tool
    async def nan() -> float:
        """Not a number."""
        return math.nan

    @tool
    async def thing() -> object:
        """Not JSON."""
        return object()

    @tool
    async def broken_text() -> str:
        """Half a character."""
        return "ok\ud800"

    caplog.set_level(logging.ERROR, "pipeline.tools")
    for made in (nan, thing):
        out, failed = await made.call("{}")
        assert failed
        assert out == (
            f"error: tool {made.name!r} returned a value that cannot be "
            "sent to the model"
        )
    assert len(caplog.records) == 2
    out, failed = await broken_text.call("{}")
    assert not failed
    assert out.encode() == b"ok?"


async def test_exception_text_is_logged_not_shown(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A tool's exception reaches the model as its type only; the log has
    the traceback with its message withheld and a stream sees a ToolRaised
    event with the type."""
    problem = RuntimeError("password=hunter2")

    @tool
    async def leaky() -> str:
        """Fails with a secret in its message."""
        raise problem

    caplog.set_level(logging.ERROR, "pipeline.tools")
    model = ScriptedModel(Reply.tool_call("leaky"), Reply.text("done"))
    agent = Agent("a", model, tools=[leaky])
    seen: list[object] = []
    async with stream(agent, Context.of(Message.user("go"))) as events:
        seen.extend([e async for e in events])
    raised = [e for e in seen if isinstance(e, ToolRaised)]
    assert raised == [ToolRaised("leaky", RuntimeError)]
    assert "hunter2" not in repr(raised)
    finished = [e for e in seen if isinstance(e, ToolCallFinished)]
    assert finished[0].is_error
    assert "hunter2" not in finished[0].content
    assert "RuntimeError" in finished[0].content
    (record,) = caplog.records
    assert record.exc_info is None  # a formatter would print the message
    text = record.getMessage()
    assert "hunter2" not in text
    assert "in leaky" in text  # the frames are there
    assert text.endswith(
        "RuntimeError (message withheld: it may hold a secret)"
    )


async def test_tool_error_message_is_shown() -> None:
    """ToolError is the tool's own word to the model: its text is shown."""

    @tool(errors=(LookupError,))
    async def lookup(order: int) -> str:
        """Find an order."""
        msg = f"no order {order}"
        raise ToolError(msg)

    # Shown even when errors= does not list it.
    assert await lookup.call('{"order": 7}') == ("error: no order 7", True)


async def test_unlisted_exceptions_propagate() -> None:
    """errors= lists the exceptions that become error results; any other
    propagates out of the agent's run (a bug is not a result)."""

    @tool(errors=(LookupError,))
    async def fetch(key: str) -> str:
        """Fetch a key."""
        if key == "missing":
            raise KeyError(key)
        msg = "bug"
        raise ZeroDivisionError(msg)

    out, failed = await fetch.call('{"key": "missing"}')
    assert failed
    assert "KeyError" in out
    model = ScriptedModel(Reply.tool_call("fetch", {"key": "other"}))
    with pytest.raises(ZeroDivisionError):
        await Agent("a", model, tools=[fetch]).run([])


def test_errors_and_timeout_are_checked() -> None:
    """errors= takes Exception subclasses only; timeout must be positive."""

    async def f() -> str:
        return ""

    with pytest.raises(ConstructionError, match="errors="):
        tool(errors=(KeyboardInterrupt,))(f)  # type: ignore[arg-type]  # the point
    with pytest.raises(ConstructionError, match="timeout"):
        tool(timeout=0)(f)


async def test_timeout_bounds_a_sync_tool() -> None:
    """A blocking sync tool is cut off at its timeout (its thread is
    abandoned), not when it returns."""
    release = threading.Event()
    finished = threading.Event()

    @tool(timeout=0.2)
    def stuck() -> str:
        """Blocks until released."""
        release.wait(30)
        finished.set()
        return "late"

    try:
        with anyio.fail_after(10):
            out, failed = await stuck.call("{}")
        assert failed
        assert out == "error: tool 'stuck' timed out after 0.2 s"
        assert not finished.is_set()
    finally:
        release.set()
    await anyio.to_thread.run_sync(finished.wait, 10)


async def test_cancelling_a_run_leaves_a_timed_sync_tool_behind() -> None:
    """A run cancelled while a sync tool with a timeout blocks returns at
    once (the thread is abandoned, as at the timeout), not when the
    thread does."""
    release = threading.Event()
    finished = threading.Event()
    started = threading.Event()

    @tool(timeout=60)
    def stuck() -> str:
        """Blocks until released."""
        started.set()
        release.wait(30)
        finished.set()
        return "late"

    model = ScriptedModel(Reply.tool_call("stuck"), strict=False)
    agent = Agent("a", model, tools=[stuck])
    try:
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(agent.run, [])
                await anyio.to_thread.run_sync(started.wait, 10)
                tg.cancel_scope.cancel()
        assert not finished.is_set()
    finally:
        release.set()
    await anyio.to_thread.run_sync(finished.wait, 10)


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_native_task_cancel_leaves_a_timed_sync_tool_behind() -> None:
    """The same with asyncio's own task.cancel(): the cancellation comes
    back at once, as a cancellation."""
    release = threading.Event()
    started = threading.Event()

    @tool(timeout=60)
    def stuck() -> str:
        """Blocks until released."""
        started.set()
        release.wait(30)
        return "late"

    model = ScriptedModel(Reply.tool_call("stuck"), strict=False)
    agent = Agent("a", model, tools=[stuck])
    task = asyncio.get_running_loop().create_task(agent.run([]))
    try:
        await anyio.to_thread.run_sync(started.wait, 10)
        task.cancel()
        with anyio.fail_after(10), pytest.raises(asyncio.CancelledError):
            await task
    finally:
        release.set()


# -- red-team findings on issue 10 (5, 6, 8, 9, 11-14, 16) ----------------------

BIG = "9" * 400
"""A JSON integer past the float range."""


@attrs.frozen
class Quote:
    """A state with a float field."""

    price: float = 0.0


async def test_numbers_past_the_float_range_are_error_results() -> None:
    """A 400-digit integer or 1e400 for a float parameter (bare, optional,
    secret, a state field) is an error result naming the argument: the
    agent and the graph run on, the tool never sees infinity."""
    seen: list[object] = []

    @tool
    async def scale(
        a: float = 1.0,
        b: float | None = None,
        c: Secret[float] | None = None,
    ) -> str:
        """Scale."""
        seen.append((a, b, c))
        return "ok"

    for name in ("a", "b", "c"):
        for number in (BIG, "1e400", "-1e400"):
            out, failed = await scale.call(f'{{"{name}": {number}}}')
            assert failed
            where = f"invalid arguments for 'scale': argument {name!r}: "
            assert out.startswith(f"error: {where}")
            assert "number" in out
            assert "999" not in out
    assert seen == []
    with ScriptedModel(
        Reply.tool_call("scale", f'{{"a": {BIG}}}'), Reply.text("done")
    ) as model:
        run = (await Agent("ag", model, tools=[scale]).run([])).unwrap()
    assert run.text == "done"
    assert run.messages[1].content.startswith("error: ")

    holder = Holder(Quote())
    _, write = state_tools(holder, Quote, writable=["price"])
    for number in (BIG, "1e400"):
        out, failed = await write.call(f'{{"price": {number}}}')
        assert failed
        assert "'price'" in out
    assert holder.value == Quote()


async def test_secrets_inside_arguments_are_redacted() -> None:
    """A secret anywhere in a parameter's type (optional, list, mapping
    values, attrs field) reaches the tool as a Secret and never appears in
    the recorded messages, the events or the next request; the rest of the
    argument stays as the model sent it."""
    got: list[object] = []

    @tool
    async def login(
        creds: Login,
        backup: Secret[str] | None = None,
        keys: list[Secret[str]] | None = None,
        named: dict[str, Secret[str]] | None = None,
    ) -> str:
        """Log in."""
        got.extend(
            [creds.password, backup, *(keys or ()), *(named or {}).values()]
        )
        return "in"

    assert login.secret_arguments == {"creds", "backup", "keys", "named"}
    arguments = {
        "creds": {"user": "ann", "password": "CANARY1"},
        "backup": "CANARY2",
        "keys": ["CANARY3"],
        "named": {"main": "CANARY4"},
    }
    model = ScriptedModel(
        Reply.tool_call("login", arguments), Reply.text("ok")
    )
    finished: list[ToolCallFinished] = []
    async with stream(Agent("a", model, tools=[login]), Context()) as events:
        async for event in events:
            if isinstance(event, ToolCallFinished):
                finished.append(event)
    assert all(isinstance(s, Secret) for s in got)
    assert [s.reveal() for s in got if isinstance(s, Secret)] == [
        "CANARY1", "CANARY2", "CANARY3", "CANARY4"
    ]  # fmt: skip
    recorded = model.requests[1].messages[-2].tool_calls[0]
    assert "CANARY" not in repr(model.requests[1].messages)
    assert "CANARY" not in repr(finished)
    assert json.loads(recorded.arguments) == {
        "creds": {"user": "ann", "password": {"$secret": "tool:login.creds"}},
        "backup": {"$secret": "tool:login.backup"},
        "keys": [{"$secret": "tool:login.keys"}],
        "named": {"main": {"$secret": "tool:login.named"}},
    }


@pytest.mark.slow
async def test_error_text_is_bounded_and_does_not_tell_the_size() -> None:
    """A string for a list is one short error (not one per character); a
    list of many wrong items lists a few and says there are more."""
    out, _ = await TOOLS["list"].call(json.dumps({"x": "x" * 1_000_000}))
    assert out == (
        "error: invalid arguments for 't_list': argument 'x': expected an array"
    )
    few, _ = await TOOLS["list"].call(json.dumps({"x": ["a"] * 10}))
    many, _ = await TOOLS["list"].call(json.dumps({"x": ["a"] * 100_000}))
    assert few == many
    assert many.endswith("expected an integer at $[3]; and other problems")


@pytest.mark.parametrize(
    "kind", ["list", "strings", "string_set", "secret_list"]
)
async def test_arrays_take_only_arrays(kind: str) -> None:
    """A string is not a list of its characters, nor an object a list of
    its keys: both are refused, and the tool does not run."""
    for value in ('"SECRET"', '{"k1": 1, "k2": 2}'):
        out, failed = await TOOLS[kind].call(f'{{"x": {value}}}')
        assert failed
        assert out == (
            f"error: invalid arguments for 't_{kind}': argument 'x': "
            "expected an array"
        )


async def test_literals_and_enums_refuse_lookalikes() -> None:
    """true and 1.0 are not Literal[1, 2]'s 1, nor 1.0 an enum's 1: the
    static type holds at run time."""
    for value in ("true", "1.0"):
        out, failed = await TOOLS["int_literal"].call(f'{{"x": {value}}}')
        assert failed
        assert out.endswith("argument 'x': expected one of [1, 2]")
        out, failed = await TOOLS["int_enum"].call(f'{{"x": {value}}}')
        assert failed
        assert out.endswith("argument 'x': expected one of [1, 2]")
    assert await TOOLS["int_literal"].call('{"x": 1}') == ("ran", False)
    assert await TOOLS["int_enum"].call('{"x": 2}') == ("ran", False)


async def test_unknown_tool_names_are_not_echoed() -> None:
    """A call to a tool that is not there gets the list of tools, never
    the name the model wrote (it may be anything, at any length)."""
    name = "sk-live-CANARY-" + "x" * 200_000
    with ScriptedModel(Reply.tool_call(name, {}), Reply.text("ok")) as model:
        run = (
            await Agent("a", model, tools=[TOOLS["integer"]]).run([])
        ).unwrap()
    assert run.messages[1].content == (
        "error: unknown tool; available: ['t_integer']"
    )


@attrs.frozen
class Query:
    """A state for a graph used as a tool."""

    kind: Literal["a", "b"]
    n: int = attrs.field(default=0, validator=attrs.validators.ge(0))


async def test_as_tool_shows_the_failure_type_not_its_text(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A sub-run's failure reaches the calling model as its type (the text
    may hold a provider's error body or a secret: it is logged); a graph
    over a state names the bad field without its value."""
    caplog.set_level(logging.WARNING, "pipeline.agents")
    sub = Agent(
        "sub", ScriptedModel(Reply.error("401: key sk-CANARY", status=401))
    )
    out, failed = await as_tool(sub).call('{"prompt": "hi"}')
    assert (out, failed) == (
        "error: 'sub' failed (ModelError); the details were logged",
        True,
    )
    assert "sk-CANARY" in caplog.text

    @handler
    async def leaky(c: Context) -> Result[Context, str]:
        del c
        return Failure("token=CANARY-2")

    @handler
    async def work(q: Query) -> Result[Query, str]:
        return Success(attrs.evolve(q, n=q.n + 1))

    cg = graph.builder(Context).node("w", leaky).entry("w").edge("w", END)
    out, failed = await as_tool(cg.build(), name="cg").call('{"prompt": "x"}')
    assert failed
    assert "CANARY" not in out
    qg = graph.builder(Query).node("w", work).entry("w").edge("w", END).build()
    made = as_tool(qg, name="qg")
    out, failed = await made.call('{"kind": "a", "n": "SECRET"}')
    assert (out, failed) == (
        "error: invalid arguments for 'qg': argument 'n': expected an integer",
        True,
    )
    out, failed = await made.call('{"kind": "a", "n": -987654}')
    assert (out, failed) == ("error: the arguments do not make a Query", True)
    out, failed = await made.call('{"kind": "c"}')
    assert out.endswith('argument \'kind\': expected one of ["a", "b"]')
    assert await made.call('{"kind": "b", "n": 1}') == (
        '{"kind":"b","n":2}',
        False,
    )


@attrs.frozen
class Tree:
    """A type that holds itself."""

    label: str
    children: list[Tree] = attrs.field(factory=list)


def test_recursive_types_are_refused_by_name() -> None:
    """A parameter or an answer type that holds itself is a
    ConstructionError naming the class, not a RecursionError."""

    async def outline(root: Tree) -> str:
        return root.label

    with pytest.raises(ConstructionError, match=r"^Tree holds itself"):
        tool(outline)
    with pytest.raises(ConstructionError, match=r"^Tree holds itself"):
        ResponseSchema.of(Tree)
