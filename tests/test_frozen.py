"""Deeply frozen values and the memos valid only for them (pipeline._frozen)."""

from __future__ import annotations

import enum
import sys
import threading

from typing import Any

import attrs
import hypothesis.strategies as st
import orjson

from hypothesis import given
from pyrsistent import pmap, pvector

from pipeline import Message
from pipeline._frozen import ContentMemo, IdentityMemo, deeply_frozen
from pipeline._serde import canonical
from pipeline.models import ModelResponse
from pipeline.models._cached import _CONVERTER, _decode
from tests.strategies import messages


@attrs.frozen
class Pair:
    a: object
    b: object


@attrs.define
class Loose:
    a: object


@attrs.frozen
class Sneaky:
    """Frozen by attrs, but a subclass below lets its fields be set."""

    a: object


class Opened(Sneaky):
    def __setattr__(self, name: str, value: object) -> None:
        object.__setattr__(self, name, value)


class Colour(enum.Enum):
    RED = "red"
    BAG = ["mutable"]  # noqa: RUF012  # an enum whose value is mutable


_LEAVES = st.one_of(
    st.integers(), st.text(max_size=5), st.booleans(), st.none(), st.floats()
)


def _tagged() -> st.SearchStrategy[tuple[object, bool]]:
    """A value and whether it is deeply frozen, built side by side."""
    leaves = _LEAVES.map(lambda v: (v, True))

    def extend(
        children: st.SearchStrategy[tuple[object, bool]],
    ) -> st.SearchStrategy[tuple[object, bool]]:
        many = st.lists(children, max_size=3)

        def all_of(xs: list[tuple[object, bool]]) -> bool:
            return all(f for _, f in xs)

        return st.one_of(
            many.map(lambda xs: (tuple(v for v, _ in xs), all_of(xs))),
            many.map(lambda xs: ([v for v, _ in xs], False)),
            many.map(lambda xs: (pvector(v for v, _ in xs), all_of(xs))),
            st.tuples(children, children).map(
                lambda p: (Pair(p[0][0], p[1][0]), p[0][1] and p[1][1])
            ),
            children.map(lambda c: (Loose(c[0]), False)),
            children.map(lambda c: (Opened(c[0]), False)),
            children.map(lambda c: ({"k": c[0]}, False)),
            children.map(lambda c: (pmap({"k": c[0]}), c[1])),
        )

    return st.recursive(leaves, extend, max_leaves=12)


@given(_tagged())
def test_deeply_frozen_says_whether_anything_inside_can_change(
    tagged: tuple[object, bool],
) -> None:
    value, frozen = tagged
    assert deeply_frozen(value) is frozen


def test_enum_members_are_as_frozen_as_their_values() -> None:
    assert deeply_frozen(Colour.RED)
    assert not deeply_frozen(Colour.BAG)
    assert not deeply_frozen(object())
    assert not deeply_frozen({1, 2})


def test_a_value_nested_too_deep_is_not_frozen() -> None:
    deep: object = 0
    for _ in range(100_000):
        deep = (deep,)
    assert not deeply_frozen(deep)


def test_identity_memo_answers_only_for_the_same_frozen_object() -> None:
    memo: IdentityMemo[str] = IdentityMemo()
    frozen, equal = Pair(1, (2,)), Pair(1, (2,))
    memo.put(frozen, "k")
    assert memo.get(frozen) == "k"
    assert memo.get(equal) is None  # equal, but another object


def test_identity_memo_never_answers_for_a_mutable_object() -> None:
    memo: IdentityMemo[str] = IdentityMemo()
    items: list[int] = [1]
    shell = Pair(1, items)  # frozen, but holds a list
    memo.put(shell, "k")
    memo.put(items, "l")
    items.append(2)
    assert memo.get(shell) is None
    assert memo.get(items) is None
    assert memo.entries == {}  # dropped when found mutable


def test_identity_memo_never_mistakes_a_new_object_for_a_dead_one() -> None:
    memo: IdentityMemo[str] = IdentityMemo()
    seen: set[int] = set()
    reused = 0
    for i in range(200):  # freed at once (no cycles): their ids get reused
        p = Pair(i, i)
        if id(p) in seen:
            reused += 1
            assert memo.get(p) is None
        memo.put(p, str(i))
        seen.add(id(p))
        assert memo.get(p) == str(i)
        del p
    assert reused


def test_memos_keep_at_most_their_bound() -> None:
    keys: IdentityMemo[int] = IdentityMemo(bound=4)
    values: ContentMemo[Any] = ContentMemo(bound=4)
    kept = [(i,) for i in range(10)]
    for i, v in enumerate(kept):
        keys.put(v, i)
        values.put(str(i).encode(), v, v)
    assert len(keys.entries) == len(values.entries) == 4
    assert keys.get(kept[9]) == 9
    assert keys.get(kept[0]) is None
    assert list(values.entries) == [b"6", b"7", b"8", b"9"]


def test_content_memo_keeps_only_frozen_values() -> None:
    memo: ContentMemo[object] = ContentMemo()
    memo.put(b"a", [1], "answer")
    memo.put(b"b", (1,), "answer")
    assert memo.entries == {b"b": "answer"}


@given(message=messages(), reason=st.sampled_from(["stop", "length"]))
def test_a_cached_models_answer_decoded_once_equals_decoding_again(
    message: Message, reason: str
) -> None:
    data = canonical(_CONVERTER.unstructure(ModelResponse(message, reason)))
    first, second = _decode(data), _decode(data)
    expected = _CONVERTER.structure(orjson.loads(data), ModelResponse)
    assert first == second == expected
    assert type(second) is ModelResponse
    assert (second is first) is deeply_frozen(expected)


def test_memos_shared_by_threads_keep_their_bound() -> None:
    keys: IdentityMemo[int] = IdentityMemo(bound=2)
    values: ContentMemo[int] = ContentMemo(bound=2)
    kept = [(i,) for i in range(50)]
    wrong: list[object] = []
    sizes: list[int] = []

    def churn() -> None:
        for _ in range(40):
            for i, v in enumerate(kept):
                keys.put(v, i)
                if keys.get(v) not in {i, None}:
                    wrong.append(v)
                values.put(bytes([i]), i, i)
                sizes.append(max(len(keys.entries), len(values.entries)))

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible
    try:
        threads = [threading.Thread(target=churn) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
    assert wrong == []
    # The lock keeps the bound strict, however the threads interleave.
    assert len(sizes) == 4 * 40 * 50
    assert max(sizes) <= 2
