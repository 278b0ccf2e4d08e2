"""Type-directed serialisation: round trips, canonical bytes, strictness."""

from __future__ import annotations

import enum
import json
import math

from collections.abc import Sequence
from typing import Any, Literal

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


class Level(enum.Enum):
    """Numbered members."""

    LOW = 1
    HIGH = 2


@pytest.mark.parametrize(
    ("value", "kind", "expected"),
    [
        ([1, 2], tuple[int, ...], (1, 2)),
        ([1, "a"], tuple[int, str], (1, "a")),
        (["a", "a"], set[str], {"a"}),
        (("a",), frozenset[str], frozenset({"a"})),
        ({"a"}, set[str], {"a"}),
        ([1], Sequence[int], [1]),
        (1, Literal[1, 2], 1),
        (True, Literal[True, 1], True),
        (1, Literal[Level.LOW], Level.LOW),
        (2, Level, Level.HIGH),
        (Level.LOW, Level, Level.LOW),
        (1e308, float, 1e308),
        (10**300, float, 1e300),
    ],
)
def test_what_fits_still_decodes(
    value: object, kind: Any, expected: object
) -> None:
    """Strictness refuses look-alikes only: arrays, literals, enums and
    floats in range decode as before, to the declared type."""
    out = CONV.structure(value, kind)
    assert out == expected
    assert type(out) is type(expected)


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
        (10**400, float),
        (math.inf, float),
        (-math.inf, float | None),
        ("ab", list[str]),
        ({"a": 1}, list[str]),
        ("ab", set[str]),
        ({"a": 1}, frozenset[str]),
        ("ab", tuple[str, ...]),
        ("ab", tuple[str, str]),
        ({"a": 1}, Sequence[str]),
        (True, Literal[1, 2]),
        (1.0, Literal[1, 2]),
        (1, Literal[True]),
        (1.0, Level),
        (True, Level),
        (1.0, Literal[Level.LOW]),
    ],
)
def test_primitives_are_strict(value: object, kind: Any) -> None:
    """No silent coercion: bools are not ints, floats are not ints, floats
    are finite and in range, strings and objects are not arrays, a
    Literal's or an enum's values are of their own kind.

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
