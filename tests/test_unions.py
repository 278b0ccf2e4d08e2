"""Unions told apart by the JSON kind of the value (``pipeline._unions``)."""

from __future__ import annotations

from typing import Any, Literal

import attrs
import cattrs
import pytest

from hypothesis import given
from hypothesis import strategies as st
from returns.result import Result, Success

from pipeline import graph, handler
from pipeline._decode import DECODE_ERRORS, explain
from pipeline._serde import make_converter
from pipeline._unions import is_kind_union
from pipeline.failures import InvalidState
from pipeline.stores import MemoryStore


@attrs.frozen
class Plan:
    """An object member."""

    steps: int


@attrs.frozen
class Other:
    """A second object member."""

    name: str


_CONVERTER = make_converter()
_PLAN_OR_LIST: Any = Plan | list[int]

_UNIONS: list[tuple[Any, st.SearchStrategy[Any]]] = [
    (
        Plan | list[int],
        st.builds(Plan, st.integers()) | st.lists(st.integers()),
    ),
    (
        list[str] | dict[str, int] | None,
        st.lists(st.text())
        | st.dictionaries(st.text(), st.integers())
        | st.none(),
    ),
    (
        Literal["skip"] | list[Plan] | int,
        st.just("skip")
        | st.lists(st.builds(Plan, st.integers()))
        | st.integers(),
    ),
    (
        tuple[int, str] | Plan | bool,
        st.tuples(st.integers(), st.text())
        | st.builds(Plan, st.integers())
        | st.booleans(),
    ),
]


@given(data=st.data())
def test_a_value_comes_back_as_the_member_its_kind_names(
    data: st.DataObject,
) -> None:
    """Each member takes another kind of JSON value, so a value's JSON
    comes back as itself: the one member of its kind."""
    for union, values in _UNIONS:
        assert is_kind_union(union)
        value = data.draw(values)
        back = _CONVERTER.structure(_CONVERTER.unstructure(value), union)
        assert back == value
        assert type(back) is type(value)


@given(
    value=st.text()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.booleans()
)
def test_a_value_of_no_members_kind_is_refused_without_it(
    value: object,
) -> None:
    """``Plan | list[int]`` takes an object or an array; anything else
    is refused, the explanation naming the kinds, not the value."""
    with pytest.raises(DECODE_ERRORS) as caught:
        _CONVERTER.structure(value, _PLAN_OR_LIST)
    said = "; ".join(explain(caught.value, Plan | list[int]))
    assert said == "expected an object (Plan) or an array"


def test_a_member_that_does_not_fit_names_where() -> None:
    """The member the kind names structures the value: its own problems
    are reported with their paths."""
    with pytest.raises(DECODE_ERRORS) as caught:
        _CONVERTER.structure([1, "x"], _PLAN_OR_LIST)
    assert explain(caught.value, Plan | list[int]) == [
        "expected an integer at $[1]"
    ]


@pytest.mark.parametrize(
    "union",
    [int | str, Plan | None, list[int] | None, Plan | Other, Plan | int],
)
def test_unions_cattrs_reads_stay_its_own(union: Any) -> None:
    """Scalars, ``T | None`` and attrs classes alone are cattrs' own
    business: not claimed."""
    assert not is_kind_union(union)
    _CONVERTER.get_structure_hook(union)


@pytest.mark.parametrize(
    "union",
    [
        Plan | dict[str, int],
        list[int] | tuple[str, ...],
        list[int] | Plan | frozenset[str],
    ],
)
def test_members_sharing_a_kind_are_not_guessed_between(union: Any) -> None:
    """Two members taking the same kind (two objects, two arrays, two
    numbers): no hook, rather than a guess."""
    assert not is_kind_union(union)
    with pytest.raises(cattrs.errors.StructureHandlerNotFoundError):
        _CONVERTER.get_structure_hook(union)


def test_a_class_with_hooks_of_its_own_has_no_known_kind() -> None:
    """An attrs class the user's converter writes otherwise (here as an
    array, ``[steps]``) may be of any kind: a union holding it is not split
    by kind (no hook, rather than a list for a Plan)."""
    conv = make_converter()
    conv.register_unstructure_hook(Plan, lambda p: [p.steps])
    conv.register_structure_hook(Plan, lambda v, _: Plan(v[0]))
    with pytest.raises(cattrs.errors.StructureHandlerNotFoundError):
        conv.get_structure_hook(Plan | list[int])
    assert _CONVERTER.structure([3], _PLAN_OR_LIST) == [3]  # generated: known


@attrs.frozen
class _Either:
    """A state whose field is a kind union."""

    x: int | list[int] = 0


async def test_a_state_value_of_no_members_kind_is_refused_by_kind() -> None:
    """A state holding ``True`` in an ``int | list[int]`` field is not
    stored; the reason names the kind found, not a private error class,
    and never the value."""

    @handler(name="flip")
    async def flip(_: _Either) -> Result[_Either, object]:
        return Success(_Either(x=True))

    g = (
        graph.builder(_Either)
        .node("flip", flip)
        .entry("flip")
        .edge("flip", graph.END)
        .build()
    )
    out = await g.run(_Either(), store=MemoryStore(), thread_id="t")
    failure = out.failure()
    assert isinstance(failure, InvalidState)
    assert failure.reason == (
        "expected a member of the union, got a value of kind bool"
    )
    assert "True" not in str(failure)
