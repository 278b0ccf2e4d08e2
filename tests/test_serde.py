"""Type-directed serialisation: round trips, canonical bytes, strictness."""

from __future__ import annotations

import json

import attrs
import cattrs
import pytest

from hypothesis import given
from hypothesis import strategies as st
from pyrsistent import PMap, PVector, pmap, pvector

from pipeline import Context, Message, ToolCall, Usage
from pipeline._serde import canonical, make_converter
from tests.strategies import contexts, messages


CONV = make_converter()


@given(ctx=contexts())
def test_context_round_trips(ctx: Context) -> None:
    """structure(unstructure(ctx)) == ctx, through canonical JSON bytes."""
    data = canonical(CONV.unstructure(ctx))
    back = CONV.structure(json.loads(data), Context)
    assert back == ctx
    assert canonical(CONV.unstructure(back)) == data


@given(
    msg=messages(),
    calls=st.lists(
        st.tuples(st.text(max_size=5), st.text(max_size=5)), max_size=3
    ),
)
def test_messages_with_calls_and_usage_round_trip(
    msg: Message, calls: list[tuple[str, str]]
) -> None:
    """Tool calls and usage survive the trip."""
    full = attrs.evolve(
        msg,
        tool_calls=tuple(ToolCall(i, n, "{}") for i, n in calls),
        usage=Usage(3, 4),
    )
    assert (
        CONV.structure(json.loads(canonical(CONV.unstructure(full))), Message)
        == full
    )


@attrs.frozen
class Bag:
    """A state with persistent containers."""

    items: PVector[int] = attrs.field(factory=pvector)
    index: PMap[str, int] = attrs.field(factory=pmap)


def test_persistent_containers_round_trip() -> None:
    """PVector and PMap fields become lists and objects and come back."""
    bag = Bag(pvector([1, 2]), pmap({"a": 1}))
    raw = CONV.unstructure(bag)
    assert raw == {"items": [1, 2], "index": {"a": 1}}
    assert CONV.structure(raw, Bag) == bag


def test_canonical_bytes_ignore_insertion_order() -> None:
    """Equal metadata gives equal bytes whatever order it was built in."""
    a = Context(run_id="r").set("x", 1).set("y", {"b": 1, "a": 2})
    b = Context(run_id="r").set("y", {"a": 2, "b": 1}).set("x", 1)
    assert canonical(CONV.unstructure(a)) == canonical(CONV.unstructure(b))


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        (True, int),
        (1.5, int),
        ("1", int),
        (1, str),
        (1, bool),
        ("x", float),
        ([1], Bag),
    ],
)
def test_primitives_are_strict(value: object, kind: type) -> None:
    """No silent coercion: bools are not ints, floats are not ints.

    (A list where a class is expected surfaces from cattrs as an
    AttributeError; every caller in the package catches that too.)
    """
    with pytest.raises(
        (cattrs.BaseValidationError, TypeError, ValueError, AttributeError)
    ):
        CONV.structure(value, kind)


@pytest.mark.parametrize(
    "doc",
    [
        {"messages": [], "metadata": {}, "run_id": "r", "extra": 1},
        {"messages": "no", "metadata": {}, "run_id": "r"},
        {"messages": [], "metadata": [], "run_id": "r"},
        {
            "messages": [{"role": "wizard", "content": "x"}],
            "metadata": {},
            "run_id": "r",
        },
        [],
    ],
)
def test_bad_context_documents_are_refused(doc: object) -> None:
    """Extra keys, wrong kinds and unknown roles fail to structure."""
    with pytest.raises((cattrs.BaseValidationError, TypeError, ValueError)):
        CONV.structure(doc, Context)
