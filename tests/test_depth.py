"""One nesting limit for JSON read from outside, counted before parsing.

Every entry point takes JSON nested exactly to its limit and refuses it one
level deeper, typed and naming what was read, on every Python (3.13's
decoder no longer raises ``RecursionError`` where 3.11's did).
"""

from __future__ import annotations

import json

from typing import Any

import attrs
import pytest

from hypothesis import given
from hypothesis import strategies as st
from returns.result import Failure, Success

from pipeline import Graph, graph, handler, stores, tool
from pipeline._decode import decode_json
from pipeline._depth import (
    MAX_DEPTH,
    RECORD_DEPTH,
    check_depth,
    depth_of,
    loads,
)
from pipeline._serde import ORJSON_WITHIN_RECORD_DEPTH, canonical_exact
from pipeline.cli._exits import UserError
from pipeline.cli._target import read_json
from pipeline.cli._threads import parse_answer
from pipeline.errors import NestedTooDeeply
from pipeline.failures import CheckpointDecodeError, InvalidState
from pipeline.fold import stored_answer
from pipeline.graph import END
from pipeline.secrets import MARKER, Secret, redact_arguments
from pipeline.stores import Record, record_checksum


CANARY = "CANARY-7f3a"


def nested(depth: int, leaf: object = CANARY) -> Any:
    """*leaf* inside *depth* arrays."""
    value: Any = leaf
    for _ in range(depth):
        value = [value]
    return value


def text(depth: int) -> str:
    return json.dumps(nested(depth))


def reference_depth(value: object) -> int:
    """How deep a parsed JSON value nests (the obvious recursion)."""
    if isinstance(value, list):
        return 1 + max((reference_depth(v) for v in value), default=0)
    if isinstance(value, dict):
        return 1 + max((reference_depth(v) for v in value.values()), default=0)
    return 0


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.text(alphabet='[]{}"\\ab,:'),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(alphabet='[]{}"\\a'), inner, max_size=4)
    ),
    max_leaves=40,
)


@given(value=json_values, ascii_only=st.booleans())
def test_depth_is_counted_as_the_parser_nests(
    value: object, ascii_only: bool
) -> None:
    """Brackets inside strings (escaped quotes and backslashes included)
    are text; the count equals the parsed value's depth."""
    data = json.dumps(value, ensure_ascii=ascii_only)
    assert depth_of(data) == reference_depth(value)
    assert depth_of(data.encode()) == reference_depth(value)


def test_the_limit_and_one_past() -> None:
    check_depth(text(MAX_DEPTH), "--input")
    with pytest.raises(NestedTooDeeply) as caught:
        check_depth(text(MAX_DEPTH + 1), "--input")
    assert caught.value.where == "--input"
    assert caught.value.limit == MAX_DEPTH
    assert str(caught.value) == f"--input nests deeper than {MAX_DEPTH} levels"
    assert CANARY not in str(caught.value)


def test_unclosed_brackets_are_refused_before_the_parser_sees_them() -> None:
    with pytest.raises(NestedTooDeeply):
        loads("[" * 100_000, "it")
    with pytest.raises(NestedTooDeeply):
        loads(b"{" * 100_000, "it")
    assert loads(text(MAX_DEPTH), "it") == nested(MAX_DEPTH)


def test_a_model_answer() -> None:
    assert decode_json(text(MAX_DEPTH), list[Any]) == Success(
        nested(MAX_DEPTH)
    )
    assert decode_json(text(MAX_DEPTH + 1), list[Any]) == Failure(
        f"nested deeper than {MAX_DEPTH} levels"
    )


@tool
async def take(x: list[Any]) -> int:
    """Take a value.

    Args:
        x: anything.
    """
    return len(x)


def test_tool_arguments() -> None:
    # The arguments object is a level: its value may nest one less.
    at = json.dumps({"x": nested(MAX_DEPTH - 1)})
    past = json.dumps({"x": nested(MAX_DEPTH)})
    assert take.decode(at) == {"x": nested(MAX_DEPTH - 1)}
    refused = take.decode(past)
    assert refused == (
        f"arguments for 'take' nests deeper than {MAX_DEPTH} levels"
    )
    assert CANARY not in refused


def test_redacted_tool_arguments() -> None:
    """Arguments too deep to read are replaced whole (they might hold a
    secret); at the limit, only the secret parts are."""
    secret = {"pin": Secret[str]}
    at = json.dumps({"pin": "1234", "x": nested(MAX_DEPTH - 1)})
    past = json.dumps({"pin": "1234", "x": nested(MAX_DEPTH)})
    kept = json.loads(redact_arguments("take", at, secret))
    assert kept == {
        "pin": {MARKER: "tool:take.pin"},
        "x": nested(MAX_DEPTH - 1),
    }
    assert json.loads(redact_arguments("take", past, secret)) == {
        MARKER: "tool:take"
    }


def test_cli_input() -> None:
    assert read_json(text(MAX_DEPTH), "--input") == nested(MAX_DEPTH)
    with pytest.raises(UserError) as caught:
        read_json(text(MAX_DEPTH + 1), "--input")
    assert caught.value.message == (
        f"--input: nests too deeply (more than {MAX_DEPTH} levels)"
    )


def test_cli_answer() -> None:
    """The 3.13 regression: 5,000 levels parsed there, and failed later as
    "cannot be stored" (exit 1); it is a usage error (exit 2) everywhere."""
    assert parse_answer(text(MAX_DEPTH)) == nested(MAX_DEPTH)
    for deep in (text(MAX_DEPTH + 1), "[" * 5000 + "]" * 5000):
        with pytest.raises(UserError) as caught:
            parse_answer(deep)
        assert caught.value.message.startswith(
            "malformed answer: nests too deeply"
        )


@attrs.frozen
class Deep:
    value: Any = None


@handler
async def keep(s: Deep) -> Success[Deep]:
    return Success(s)


def deep_graph() -> Graph[Deep, Any]:
    return (
        graph.builder(Deep)
        .node("keep", keep)
        .entry("keep")
        .edge("keep", END)
        .build()
    )


def test_an_answer_through_the_api() -> None:
    codec = deep_graph().codec
    assert stored_answer(codec, nested(MAX_DEPTH)) == nested(MAX_DEPTH)
    refused = stored_answer(codec, nested(MAX_DEPTH + 1))
    assert isinstance(refused, InvalidState)
    assert refused.reason == f"the answer nests deeper than {MAX_DEPTH} levels"


# A record is {"state": {"value": ...}, ...}: the value sits two levels in.
_IN_RECORD = 2


async def test_a_state_as_deep_as_a_record_holds() -> None:
    """What is written is read back; one level deeper is not written, and
    the failure names the field."""
    g = deep_graph()
    store = stores.MemoryStore()
    at = Deep(nested(RECORD_DEPTH - _IN_RECORD))
    ran = (await g.run(at, store=store, thread_id="at")).unwrap()
    assert (await g.load(store, "at")).unwrap().state == ran.state == at
    records = await store.records("at")
    assert max(depth_of(r.data) for r in records) == RECORD_DEPTH

    past = Deep(nested(RECORD_DEPTH - _IN_RECORD + 1))
    failed = (await g.run(past, store=store, thread_id="past")).failure()
    assert isinstance(failed, InvalidState)
    assert failed.field == "value"
    assert "nested deeper than a record can hold" in failed.reason
    assert await store.records("past") == ()


async def test_a_stored_record_one_level_too_deep() -> None:
    g = deep_graph()
    store = stores.MemoryStore()
    await g.run(Deep(nested(3)), store=store, thread_id="t")
    (good,) = (await store.records("t"))[:1]
    doc = json.loads(good.data)
    doc["state"]["value"] = nested(RECORD_DEPTH - _IN_RECORD + 1)
    data = json.dumps(doc).encode()
    await store.delete("t")
    await store.commit(
        Record("t", 0, None, data, record_checksum("t", 0, None, data)),
        expected_head=None,
    )
    failed = (await g.load(store, "t")).failure()
    assert isinstance(failed, CheckpointDecodeError)
    assert (
        failed.reason == f"the record nests deeper than {RECORD_DEPTH} levels"
    )


def test_a_policy_verdict() -> None:
    from pipeline.failures import BadVerdict  # noqa: PLC0415
    from pipeline.llm import PolicyResult, _verdict  # noqa: PLC0415

    fields = ', "allowed": true, "reason": "ok"'
    at = '{"extra": ' + text(MAX_DEPTH - 1) + fields + "}"
    past = '{"extra": ' + text(MAX_DEPTH) + fields + "}"
    # At the limit the depth is not the problem (the field is unknown).
    assert _verdict(at, PolicyResult) != _verdict(past, PolicyResult)
    refused = _verdict(past, PolicyResult).failure()
    assert isinstance(refused, BadVerdict)
    assert refused.problem == "NestedTooDeeply"


def test_a_temporal_payload() -> None:
    from temporalio.api.common.v1 import Payload  # noqa: PLC0415

    from pipeline.temporal import CattrsJSONPayloadConverter  # noqa: PLC0415
    from pipeline.temporal._converter import PAYLOAD_DEPTH  # noqa: PLC0415

    converter = CattrsJSONPayloadConverter()

    def payload(depth: int) -> Payload:
        data = ("[" * depth + "]" * depth).encode()
        return Payload(metadata={"encoding": b"json/plain"}, data=data)

    assert depth_of(payload(PAYLOAD_DEPTH).data) == PAYLOAD_DEPTH
    converter.from_payload(payload(PAYLOAD_DEPTH))
    with pytest.raises(RuntimeError) as caught:
        converter.from_payload(payload(PAYLOAD_DEPTH + 1))
    assert str(caught.value) == (
        f"a Temporal payload nests deeper than {PAYLOAD_DEPTH} levels"
    )


@pytest.mark.parametrize("wrap", [lambda v: [v], lambda v: {"a": v}])
def test_what_orjson_writes_fits_a_record(wrap: Any) -> None:
    """A commit counts the depth of its bytes only when orjson did not
    write them: it refuses to nest deeper than a record may (probed at
    import; if another orjson wrote deeper, every record is counted)."""
    value: object = []
    written = 1
    while True:
        try:
            data, exact = canonical_exact(value)
        except TypeError:  # pragma: no cover  # the fallback refused too
            break
        if not exact:
            break
        assert depth_of(data) == written <= RECORD_DEPTH
        value = wrap(value)
        written += 1
    assert (written <= RECORD_DEPTH + 1) == ORJSON_WITHIN_RECORD_DEPTH
    assert ORJSON_WITHIN_RECORD_DEPTH
