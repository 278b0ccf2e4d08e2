"""What an answer that does not fit is told: the type by its name (not
"a Union", "a Optional", "a dict"), what was expected and where (a
mapping's key by its position, an unresolved secret reference as such),
never a value the human gave (it may be a secret).
"""

from __future__ import annotations

import enum
import json

from typing import Any, Literal, NewType

import attrs
import pytest

from hypothesis import given, settings
from hypothesis import strategies as st
from returns.result import Result, Success

from pipeline import graph, handler, interrupt, stores
from pipeline._decode import decode_json
from pipeline.errors import InvalidAnswer
from pipeline.graph import END
from pipeline.secrets import Secret


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


Uid = NewType("Uid", int)


@attrs.frozen
class Creds:
    pin: Secret[str]


@attrs.frozen
class Said:
    out: str = ""


async def _asked(kind: Any, answer: object) -> str:
    """*answer* to ``interrupt("q?", kind)``: what the run returned, or
    the refusal's text (the thread then waits at the same question)."""

    @handler
    async def ask(s: Said) -> Result[Said, str]:
        return Success(Said(repr(await interrupt("q?", kind))))

    g = graph.builder(Said).node("n", ask).entry("n").edge("n", END).build()
    store = stores.MemoryStore()
    paused = (await g.run(Said(), store=store, thread_id="t")).unwrap()
    try:
        done = await g.resume(
            store, "t", answer=answer, question=paused.question_id
        )
    except InvalidAnswer as exc:
        again = (await g.load(store, "t")).unwrap()
        assert again.question_id == paused.question_id  # waits, same id
        return str(exc)
    return done.unwrap().state.out


async def test_an_enum_keyed_answer_names_the_key_by_position() -> None:
    """``{"red": 1}`` for ``dict[Color, int]`` was "not a dict: expected
    an object" (an object was given): now the key that does not fit, by
    its position, and how keys are written; a value that does not fit is
    said to be a mapping value.  Neither is quoted."""
    text = await _asked(dict[Color, int], {'"red"': 1, "SECRET-k": 2})
    assert text.startswith(
        "the answer is not a dict[tests.graph.test_answer_messages.Color, int]: "
        "the key at position 1 is not a Color: the keys of this object are "
        "JSON texts"
    )
    assert "SECRET" not in text
    text = await _asked(dict[Color, int], {'"red"': "SECRET-v"})
    assert text.endswith(": expected an integer at $[…]")
    assert "SECRET" not in text
    good = await _asked(dict[Color, int], {'"red"': 1})
    assert good == repr({Color.RED: 1})


@pytest.mark.parametrize(
    ("kind", "answer", "expected"),
    [
        (
            dict[int, str] | int,
            {"SECRET": "a"},
            (
                "the answer is not a dict[int, str] | int: the key at "
                "position 0 is not a int"
            ),
        ),
        (
            Literal["skip"] | list[int],
            "SECRET",
            (
                "the answer is not a Literal['skip'] | list[int]: expected "
                'one of ["skip"] or an array'
            ),
        ),
        (
            Uid | list[int],
            "SECRET",
            (
                "the answer is not a Uid | list[int]: expected an integer "
                "or an array"
            ),
        ),
        (
            list[int] | None,
            "SECRET",
            "the answer is not a list[int] | None: expected",
        ),
        (
            Creds,
            {"pin": {"$secret": "env:FIX11_NOT_SET_SECRET"}},
            (
                "the answer is not a Creds: a secret reference no resolver "
                "knows at $.pin"
            ),
        ),
        (
            Creds | list[str],
            {"pin": {"$secret": "env:FIX11_NOT_SET_SECRET"}},
            "a secret reference no resolver knows at $.pin",
        ),
    ],
    ids=["int-keys", "literal", "newtype", "optional", "ref", "ref-in-union"],
)
async def test_a_refusal_names_the_type_and_what_did_not_fit(
    kind: Any, answer: object, expected: str
) -> None:
    """The union by its members (it was "a Union", "a Optional"), a NewType
    by what it stands for (it was "a valid value"), a key by position, an
    unresolved reference as such (it was "a required field is missing"):
    no value and no reference quoted."""
    text = await _asked(kind, answer)
    assert expected in text
    assert "SECRET" not in text
    assert "Union" not in text
    assert "Optional" not in text


@settings(max_examples=80, deadline=None)
@given(
    secret=st.text(
        alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]),
        min_size=1,
    ),
    where=st.sampled_from(["key", "value"]),
    kind=st.sampled_from(
        [dict[Color, int], dict[int, int], dict[tuple[int, int], int] | int]
    ),
)
def test_a_keyed_mapping_refusal_never_quotes_the_answer(
    secret: str, where: str, kind: Any
) -> None:
    """Law: whatever key or value does not fit, the explanation holds
    neither (a marker around the given text never shows)."""
    given_text = f"QQ{secret}QQ"
    doc = {given_text: 1} if where == "key" else {"1": given_text}
    got = decode_json(json.dumps(doc), kind)
    assert got.failure()  # nothing in it fits
    assert "QQ" not in str(got.failure())
