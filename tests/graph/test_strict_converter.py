"""A converter given to ``build()`` reads strictly, or is refused there.

Answers and checkpoints are read with the run's converter (a question's
``interrupt``, a gate's ``Transition.answer_as``), and the docs promise
they are read strictly.  A plain ``cattrs.Converter()`` coerces (``3.7``
is the ``int`` 3, ``"12"`` is 12, ``true`` is 1, unknown keys are
dropped): ``build()`` refuses it with a ``TypeError`` saying how to make
one that does not (:func:`~pipeline.fold.make_converter`, hooks
registered on it; those hooks are honoured).
"""

from __future__ import annotations

from typing import Any

import attrs
import cattrs
import pytest

from returns.result import Result, Success

from pipeline import (
    Agent,
    Graph,
    Handler,
    graph,
    handler,
    interrupt,
    swarm,
)
from pipeline.errors import InvalidAnswer
from pipeline.fold import (
    Continue,
    Decision,
    Interrupt,
    Transition,
    make_converter,
)
from pipeline.graph import END
from pipeline.testing import ScriptedModel
from tests.servers import StoreFactory


@attrs.frozen
class Count:
    out: str = ""


@handler
async def ask(s: Count) -> Result[Count, str]:
    return Success(Count(repr(await interrupt("how many?", int))))


def _asking(
    converter: cattrs.Converter | None,
    node: Handler[Count, Count, str] = ask,
) -> Graph[Count, str]:
    """One node, *node* (``ask`` for an int), built with *converter*."""
    return (
        graph.builder(Count)
        .node("n", node)
        .entry("n")
        .edge("n", END)
        .build(converter=converter)
    )


def _coercing(value: Any, _: object) -> int:
    return int(value)


def _lenient_int() -> cattrs.Converter:
    conv = make_converter()
    conv.register_structure_hook(int, _coercing)
    return conv


def _keeping_extra_keys() -> cattrs.Converter:
    """make_converter()'s hooks, but unknown keys dropped."""
    return make_converter().copy(forbid_extra_keys=False)


@pytest.mark.parametrize(
    "converter",
    [cattrs.Converter(), cattrs.BaseConverter(), _lenient_int()],
    ids=["Converter", "BaseConverter", "lenient-int-hook"],
)
def test_a_lenient_converter_is_refused_at_build(
    converter: cattrs.Converter,
) -> None:
    """By a graph's and a swarm's build(): a TypeError naming the
    parameter, what the converter took, and how to make a strict one."""
    with pytest.raises(TypeError) as graph_refused:
        _asking(converter)
    with pytest.raises(TypeError) as swarm_refused:
        (
            swarm.builder()
            .agent("a", Agent("a", ScriptedModel()))
            .entry("a")
            .build(converter=converter)
        )
    for caught in (graph_refused, swarm_refused):
        text = str(caught.value)
        assert text.startswith("build(converter=...): ")
        assert "reads leniently" in text
        assert "make_converter()" in text


def test_a_converter_that_drops_unknown_keys_is_refused() -> None:
    """Strict scalars are not enough: unknown keys must be refused too."""
    with pytest.raises(TypeError, match="an object with an unknown key"):
        _asking(_keeping_extra_keys())


def test_make_converter_with_hooks_of_ones_own_is_accepted() -> None:
    """A strict converter (make_converter(), a hook registered on it, or a
    copy of one) builds."""
    conv = make_converter()
    conv.register_structure_hook(complex, lambda v, _: complex(v))
    for given in (None, make_converter(), conv, conv.copy()):
        assert isinstance(_asking(given), Graph)


@attrs.frozen
class Cents:
    """Read by a hook of the user's: an integer, or a refusal."""

    value: int


def _cents_in(value: object, _: object) -> Cents:
    if type(value) is not int:
        msg = "cents must be an integer"
        raise TypeError(msg)
    return Cents(value)


def _money() -> cattrs.Converter:
    conv = make_converter()
    conv.register_structure_hook(Cents, _cents_in)
    conv.register_unstructure_hook(Cents, lambda c: c.value)
    return conv


@handler
async def ask_cents(s: Count) -> Result[Count, str]:
    return Success(Count(repr(await interrupt("how much?", Cents))))


async def test_answers_read_strictly_with_the_users_hooks(
    make_store: StoreFactory,
) -> None:
    """With the user's strict converter, a question refuses 3.7, "12" and
    true for an int (never stored: the thread waits), and an answer read
    by the user's own hook goes through it."""
    g = _asking(_money())
    async with make_store() as store:
        paused = (await g.run(Count(), store=store, thread_id="t")).unwrap()
        for bad in (3.7, "12", True):
            with pytest.raises(InvalidAnswer, match="expected an integer"):
                await g.resume(
                    store, "t", answer=bad, question=paused.question_id
                )
        done = await g.resume(
            store, "t", answer=12, question=paused.question_id
        )
        assert done.unwrap().state.out == "12"
        cents = _asking(_money(), ask_cents)
        paused = (
            await cents.run(Count(), store=store, thread_id="c")
        ).unwrap()
        with pytest.raises(InvalidAnswer):
            await cents.resume(
                store, "c", answer=2.5, question=paused.question_id
            )
        done = await cents.resume(
            store, "c", answer=250, question=paused.question_id
        )
        assert done.unwrap().state.out == "Cents(value=250)"


async def test_a_gates_answer_as_reads_strictly_with_the_run_converter(
    make_store: StoreFactory,
) -> None:
    """``Transition.answer_as(int)`` in a gate of a graph built with the
    user's converter refuses 3.7 as an int, as the default does."""
    seen: list[int] = []

    async def gate(t: Transition[Count]) -> Decision:
        if t.source is not None:
            return Continue()
        n = t.answer_as(int)
        if n is None:
            return Interrupt("how many?", int)
        seen.append(n)
        return Continue()

    @handler
    async def done_(s: Count) -> Result[Count, str]:
        return Success(s)

    g = _asking(_money(), done_)
    async with make_store() as store:
        paused = (
            await g.run(Count(), store=store, thread_id="t", gates=[gate])
        ).unwrap()
        with pytest.raises(InvalidAnswer, match="expected an integer"):
            await g.resume(
                store,
                "t",
                answer=3.7,
                question=paused.question_id,
                gates=[gate],
            )
        assert seen == []
        await g.resume(
            store, "t", answer=3, question=paused.question_id, gates=[gate]
        )
        assert seen == [3]
