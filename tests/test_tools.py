"""Tools: schemas from annotations, strict decoding, concurrent execution."""

from __future__ import annotations

import enum
import json

from typing import Literal

import anyio
import attrs
import pytest

from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline import Tool, ToolCall, tool
from pipeline.errors import ConstructionError
from pipeline.testing.strategies import tool_arguments
from pipeline.tools import run_tools


class Unit(enum.Enum):
    """Temperature unit."""

    C = "celsius"
    F = "fahrenheit"


@attrs.frozen
class Place:
    """Where to look."""

    city: str
    country: str = "FR"


@tool
async def weather(
    place: Place, unit: Unit = Unit.C, days: list[int] | None = None
) -> dict[str, object]:
    """Forecast for a place.

    Args:
        place: the city to forecast
        unit: degrees to report in
        days: which days ahead (0 = today)
    """
    return {"city": place.city, "unit": unit.value, "days": days or [0]}


def test_schema_from_annotations_and_docstring() -> None:
    """Parameters, attrs classes, enums and optionals become JSON schema."""
    schema = weather.parameters
    assert weather.description == "Forecast for a place."
    assert schema["required"] == ["place"]
    assert schema["additionalProperties"] is False
    place = schema["properties"]["place"]
    assert place["type"] == "object"
    assert place["required"] == ["city"]
    assert place["additionalProperties"] is False
    assert place["description"] == "the city to forecast"
    assert schema["properties"]["unit"] == {
        "enum": ["celsius", "fahrenheit"],
        "description": "degrees to report in",
    }
    assert schema["properties"]["days"]["anyOf"] == [
        {"type": "array", "items": {"type": "integer"}},
        {"type": "null"},
    ]


def test_schema_for_literals_tuples_and_maps() -> None:
    """Literal, fixed tuples and dicts have schemas too."""

    @tool(name="t")
    def t(
        mode: Literal["a", "b"], pair: tuple[int, str], tags: dict[str, float]
    ) -> str:
        return mode

    props = t.parameters["properties"]
    assert props["mode"] == {"enum": ["a", "b"]}
    assert props["pair"]["prefixItems"] == [
        {"type": "integer"},
        {"type": "string"},
    ]
    assert props["tags"] == {
        "type": "object",
        "additionalProperties": {"type": "number"},
    }


def test_bad_tool_definitions() -> None:
    """Unannotated parameters, varargs and bad names refuse to build."""

    def no_hint(x) -> str:  # type: ignore[no-untyped-def]  # the point of the test
        return str(x)

    with pytest.raises(ConstructionError, match="annotation"):
        tool(no_hint)

    def star(*xs: int) -> int:
        return sum(xs)

    with pytest.raises(ConstructionError, match="args"):
        tool(star)
    with pytest.raises(ConstructionError, match="name"):
        tool(name="has space")(star)

    def weird(x: complex) -> str:
        return str(x)

    with pytest.raises(ConstructionError, match="schema"):
        tool(weird)


async def test_call_decodes_strictly() -> None:
    """Good arguments run; bad ones name the field, never the value."""
    out, failed = await weather.call(
        '{"place": {"city": "Paris"}, "unit": "fahrenheit"}'
    )
    assert not failed
    assert json.loads(out) == {
        "city": "Paris",
        "unit": "fahrenheit",
        "days": [0],
    }
    cases = {
        '{"place": {"city": "Paris"}, "oops": 1}': "unknown argument(s) ['oops']",
        "{}": "missing required argument 'place'",
        '{"place": {"city": 7}}': "'place'",
        '{"place": {"city": "x", "zip": "SECRET-123"}}': "'place'",
        '{"place": {"city": "x"}, "days": [1.5]}': "'days'",
        "[1, 2]": "must be a JSON object",
        "not json": "not valid JSON",
    }
    for arguments, expected in cases.items():
        out, failed = await weather.call(arguments)
        assert failed, arguments
        assert expected in out, (arguments, out)
        assert "SECRET-123" not in out


async def test_sync_tools_timeouts_and_exceptions() -> None:
    """Sync tools run off the loop; raising or slow tools give error results."""

    @tool
    def double(x: int) -> int:
        """Double it."""
        return x * 2

    @tool
    async def broken(x: int) -> int:
        """Always fails."""
        msg = "no luck"
        raise RuntimeError(msg)

    @tool(timeout=0.01)
    async def slow(x: int) -> int:
        """Never finishes in time."""
        await anyio.sleep_forever()
        return x  # pragma: no cover

    assert await double.call('{"x": 4}') == ("8", False)
    out, failed = await broken.call('{"x": 1}')
    assert failed
    assert out.startswith("error: tool 'broken' raised RuntimeError")
    assert "no luck" not in out
    out, failed = await slow.call('{"x": 1}')
    assert failed
    assert "timed out" in out


async def test_run_tools_concurrent_in_call_order() -> None:
    """Calls run at once; results come back in call order; unknown ones fail."""
    started = [0]
    both = anyio.Event()

    @tool
    async def wait(tag: str) -> str:
        """Wait for the other call."""
        started[0] += 1
        if started[0] == 2:
            both.set()
        await both.wait()
        return tag

    calls = [
        ToolCall("1", "wait", '{"tag": "a"}'),
        ToolCall("2", "nope", "{}"),
        ToolCall("3", "wait", '{"tag": "b"}'),
    ]
    with anyio.fail_after(5):
        results = await run_tools(calls, {"wait": wait})
    assert [m.tool_call_id for m in results] == ["1", "2", "3"]
    assert [m.content for m in results][::2] == ["a", "b"]
    assert results[1].content == "error: unknown tool; available: ['wait']"


@pytest.mark.slow
@given(data=st.data())
@settings(max_examples=60)
async def test_generated_arguments_never_crash(data: st.DataObject) -> None:
    """Any argument text gives a result string; nothing escapes."""
    arguments = data.draw(tool_arguments(weather))
    out, failed = await weather.call(arguments)
    assert isinstance(out, str)
    if failed:
        assert out.startswith("error: ")


def test_tool_repr_and_spec() -> None:
    """A tool shows its name and lists as a ToolSpec."""
    assert repr(weather) == "Tool(weather)"
    assert weather.spec.name == "weather"
    assert isinstance(weather, Tool)


def test_tool_name_with_a_trailing_newline_is_refused() -> None:
    """A tool name must match whole: "x\\n" is not a tool name."""

    async def x() -> str:
        return "x"

    with pytest.raises(ConstructionError, match="tool name"):
        tool(name="x\n")(x)


async def test_what_a_tool_tells_once_holds_on_every_call() -> None:
    """Parameter names and whether the function is async are told at the
    first call and kept: later calls check and run the same way (a plain
    function in a worker thread, an async one on the event loop)."""
    import threading  # noqa: PLC0415

    seen: list[bool] = []

    @tool
    def plain(a: int) -> int:
        """Record whether this ran off the main thread."""
        seen.append(threading.current_thread() is not threading.main_thread())
        return a

    @tool
    async def awaited(a: int) -> int:
        """Record whether this ran on the main thread."""
        seen.append(threading.current_thread() is threading.main_thread())
        return a

    for each in (plain, awaited):
        for _ in range(2):
            assert await each.call('{"a": 1}') == ("1", False)
            out, failed = await each.call('{"b": 1}')
            assert failed
            assert "unknown argument" in out
    assert seen == [True, True, True, True]


@tool
async def _texts(text: str, n: int) -> str:
    """Plain str and int parameters (decoded without the converter)."""
    return text * n


_JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: (
        st.lists(inner, max_size=2)
        | st.dictionaries(st.text(max_size=3), inner, max_size=2)
    ),
    max_leaves=4,
)


@settings(max_examples=200, deadline=None)
@given(text=_JSON_VALUES | st.text(), n=_JSON_VALUES | st.integers())
def test_plain_str_and_int_arguments_decode_as_the_converter_does(
    text: object, n: object
) -> None:
    """The fast path for a str or int argument gives what the strict hooks
    and the sendability check give: the value, or the same refusal."""
    from pipeline._decode import unsendable  # noqa: PLC0415
    from pipeline.tools import _CONVERTER  # noqa: PLC0415

    arguments = json.dumps({"text": text, "n": n})
    expected: dict[str, object] = {}
    problems = []
    for name, kind in (("text", str), ("n", int)):
        value = json.loads(arguments)[name]
        problem = unsendable(value)
        if problem is None:
            try:
                expected[name] = _CONVERTER.structure(value, kind)
            except (TypeError, ValueError):
                problem = "refused"
        if problem is not None:
            problems.append(name)
    got = _texts.decode(arguments)
    if problems:
        assert isinstance(got, str)
        for name in problems:
            assert f"argument {name!r}" in got
    else:
        assert got == expected
        assert isinstance(got, dict)
        assert [type(v) for v in got.values()] == [str, int]


def _object_in_full(arguments: str, where: str) -> dict[str, object] | str:
    """The arguments' JSON object as it was decoded before the fast path
    (every text through the full JSON decoder), or the error text."""
    from pipeline._decode import JSON  # noqa: PLC0415
    from pipeline._depth import check_depth  # noqa: PLC0415
    from pipeline.errors import NestedTooDeeply  # noqa: PLC0415
    from pipeline.tools import MAX_ARGUMENT_BYTES  # noqa: PLC0415

    if len(arguments.encode("utf-8", "surrogatepass")) > MAX_ARGUMENT_BYTES:
        return f"{where} exceed {MAX_ARGUMENT_BYTES} bytes"
    try:
        check_depth(arguments, where)
        raw = JSON.decode(arguments or "{}")
    except NestedTooDeeply as exc:
        return str(exc)
    except ValueError:
        return f"{where} are not valid JSON"
    if not isinstance(raw, dict):
        return f"{where} must be a JSON object"
    return raw


def _decoded_in_full(tool_: Tool, arguments: str) -> dict[str, object] | str:
    """:meth:`Tool.decode` as it was before its fast paths (every text
    through the full JSON decoder; unlisted arguments looked for one by
    one): what the fast paths must give."""
    from pipeline._decode import (  # noqa: PLC0415
        DECODE_ERRORS,
        explain,
        names,
        unsendable,
    )
    from pipeline.tools import _CONVERTER  # noqa: PLC0415

    where = f"arguments for {tool_.name!r}"
    raw = _object_in_full(arguments, where)
    if isinstance(raw, str):
        return raw
    params = tool_._params  # the reference reads them
    known = {p.name for p in params}
    extra = [k for k in raw if k not in known]
    if extra and not tool_.extra_arguments:
        return (
            f"unknown argument(s) {names(extra)} for {tool_.name!r}; "
            f"expected {sorted(known)}"
        )
    kwargs: dict[str, object] = {k: raw[k] for k in extra}
    unsent = bool(extra) and any(unsendable(raw[k]) is not None for k in extra)
    problems = ["an unlisted argument cannot be sent"] * unsent
    for p in params:
        if p.name not in raw:
            if p.required:
                problems.append(f"missing required argument {p.name!r}")
            continue
        problem = unsendable(raw[p.name])
        if problem is None:
            try:
                kwargs[p.name] = _CONVERTER.structure(
                    raw[p.name], p.annotation
                )
            except DECODE_ERRORS as exc:
                problem = "; ".join(explain(exc, p.annotation))
        if problem is not None:
            problems.append(f"argument {p.name!r}: {problem}")
    if problems:
        return f"invalid {where}: " + "; ".join(problems)
    return kwargs


_AROUND = st.sampled_from(["", " ", "\n", "\t ", " x", "{}", "]", "\ud800"])


@settings(max_examples=300, deadline=None)
@given(
    data=st.data(),
    before=_AROUND,
    after=_AROUND,
    extra=st.booleans(),
)
def test_arguments_decode_as_the_full_decoder_does(
    data: st.DataObject, before: str, after: str, extra: bool
) -> None:
    """The fast paths (an object with nothing around it decoded without
    the full decoder's whitespace scans; no unlisted argument found in one
    set check) give what the full path gives: the same arguments, or the
    same error text, whitespace, trailing data or unlisted keys or not."""
    for tool_ in (_texts, weather):
        opened = attrs.evolve(tool_, extra_arguments=True) if extra else tool_
        arguments = data.draw(
            tool_arguments(tool_).filter(lambda t: len(t) < 5000)
        )
        for text in (arguments, before + arguments + after):
            assert opened.decode(text) == _decoded_in_full(opened, text)
