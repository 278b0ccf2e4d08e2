"""A typed question from inside a step: ``pipeline.interrupt`` (issue 16,
item 1), in graph nodes, on every store."""

from __future__ import annotations

import dataclasses

from collections.abc import Awaitable, Callable
from typing import Any, Literal, Optional, TypedDict

import attrs
import pytest

from pyrsistent import PVector, pvector
from returns.result import Result, Success

from pipeline import (
    Agent,
    Context,
    Graph,
    Handler,
    Message,
    graph,
    handler,
    interrupt,
)
from pipeline.errors import InvalidAnswer, NotCheckpointed, Suspended
from pipeline.failures import EditRefused, StaleAnswer
from pipeline.fold import (
    Continue,
    Decision,
    Interrupt,
    Status,
    Stop,
    Transition,
)
from pipeline.graph import END
from pipeline.secrets import Secret
from pipeline.stores import MemoryStore
from pipeline.testing import Reply, ScriptedModel
from tests.servers import StoreFactory


@attrs.frozen
class Approval:
    """What the reviewer answers."""

    approved: bool
    note: str = ""


@attrs.frozen
class Draft:
    """What the reviewer looks at (the question's payload)."""

    title: str
    amount: int


@attrs.frozen
class Order:
    """Graph state."""

    amount: int = 0
    log: PVector[str] = attrs.field(factory=pvector)


class Effects:
    """Counts what the nodes did, by name."""

    def __init__(self) -> None:
        self.done: list[str] = []

    def count(self, name: str) -> int:
        return self.done.count(name)


def refund_graph(effects: Effects) -> Graph[Order, object]:
    """prepare -> review (asks) -> pay."""

    @handler(name="prepare")
    async def prepare(s: Order) -> Result[Order, object]:
        effects.done.append("prepare")
        return Success(attrs.evolve(s, log=s.log.append("prepared")))

    @handler(name="review")
    async def review(s: Order) -> Result[Order, object]:
        effects.done.append("before-question")
        answer = await interrupt(
            "refund this order?",
            Approval,
            payload=Draft("refund", s.amount),
        )
        effects.done.append("after-question")
        word = "approved" if answer.approved else "declined"
        return Success(
            attrs.evolve(s, log=s.log.append(f"{word}:{answer.note}"))
        )

    @handler(name="pay")
    async def pay(s: Order) -> Result[Order, object]:
        effects.done.append("pay")
        return Success(attrs.evolve(s, log=s.log.append("paid")))

    return (
        graph.builder(Order)
        .node("prepare", prepare)
        .node("review", review)
        .node("pay", pay)
        .entry("prepare")
        .edge("prepare", "review")
        .edge("review", "pay")
        .edge("pay", END)
        .build()
    )


async def test_question_pauses_and_the_typed_answer_reaches_the_node(
    make_store: StoreFactory,
) -> None:
    """First run: the question (text and payload) is the thread's pending
    question, nothing after it ran.  The answer (an Approval) is committed,
    the node runs again and ``interrupt`` returns it, typed."""
    effects = Effects()
    g = refund_graph(effects)
    async with make_store() as store:
        paused = (
            await g.run(Order(amount=40), store=store, thread_id="t")
        ).unwrap()
        assert paused.status is Status.INTERRUPTED
        assert paused.pending is not None
        assert paused.pending.question == "refund this order?"
        assert paused.pending.payload == {"title": "refund", "amount": 40}
        assert (paused.pending.source, paused.pending.targets) == (
            "prepare",
            ("review",),
        )
        assert effects.done == ["prepare", "before-question"]
        # What a reader of the thread sees is what the run returned.
        loaded = (await g.load(store, "t")).unwrap()
        assert loaded.status is Status.INTERRUPTED
        assert loaded.pending is not None
        assert loaded.pending.payload == paused.pending.payload
        assert loaded.question_id == paused.question_id is not None

        done = (
            await g.resume(
                store,
                "t",
                answer=Approval(approved=True, note="ok by ana"),
                question=paused.question_id,
            )
        ).unwrap()
        assert done.status is Status.DONE
        assert list(done.state.log) == [
            "prepared",
            "approved:ok by ana",
            "paid",
        ]
        # The part before the question ran twice; nothing else did.
        assert effects.done == [
            "prepare",
            "before-question",
            "before-question",
            "after-question",
            "pay",
        ]
        # The answer is a record of its own (the question's progress, by
        # its author), committed once checked, before the node's.
        records = (await g.history(store, "t")).unwrap()
        answered = [
            s
            for s in records
            if any(
                isinstance(d, dict) and "answer" in d
                for docs in s.progress.values()
                for d in docs
            )
        ]
        assert len(answered) == 1
        assert answered[0].parent == paused.version
        assert records[-1].version > answered[0].version


async def test_answer_as_json_is_structured_into_the_declared_type(
    make_store: StoreFactory,
) -> None:
    """An answer given as JSON (what the CLI sends) is structured into the
    type the node declared."""
    effects = Effects()
    g = refund_graph(effects)
    async with make_store() as store:
        await g.run(Order(amount=5), store=store, thread_id="t")
        done = (
            await g.resume(
                store, "t", answer={"approved": False, "note": "too late"}
            )
        ).unwrap()
        assert list(done.state.log) == [
            "prepared",
            "declined:too late",
            "paid",
        ]


async def test_a_gates_answer_as_names_the_field_too(
    make_store: StoreFactory,
) -> None:
    """A gate's ``answer_as(T)`` says which field does not fit and what it
    should be, as ``interrupt`` does (it said only "not a T"), never the
    value; the thread waits at the same question again."""
    effects = Effects()
    g = refund_graph(effects)

    async def approve(t: Transition[Order]) -> Decision:
        if t.targets != ("prepare",):
            return Continue()
        if t.answer is None:
            return Interrupt("start?")
        answer = t.answer_as(Approval)
        return Continue() if answer and answer.approved else Stop("no")

    async with make_store() as store:
        paused = (
            await g.run(Order(), store=store, thread_id="t", gates=[approve])
        ).unwrap()
        assert paused.pending is not None
        assert paused.pending.question == "start?"
        with pytest.raises(InvalidAnswer) as caught:
            await g.resume(
                store,
                "t",
                answer={"approved": "SECRET-maybe", "extra": 1},
                gates=[approve],
            )
        text = str(caught.value)
        assert "$.approved" in text
        assert "unknown field(s): expected only ['approved', 'note']" in text
        assert "extra" not in text  # what the human typed, key or value
        assert "SECRET" not in text
        again = (await g.load(store, "t")).unwrap()
        assert again.status is Status.INTERRUPTED


async def test_invalid_answer_names_the_field_and_asks_again(
    make_store: StoreFactory,
) -> None:
    """An answer that does not fit: ``InvalidAnswer`` names the field and
    the type expected, never the value; the thread waits at the same
    question, and a good answer then goes through."""
    effects = Effects()
    g = refund_graph(effects)
    async with make_store() as store:
        paused = (await g.run(Order(), store=store, thread_id="t")).unwrap()
        with pytest.raises(InvalidAnswer) as caught:
            await g.resume(
                store, "t", answer={"approved": "SECRET-maybe", "note": "x"}
            )
        text = str(caught.value)
        assert "$.approved" in text
        assert "Approval" in text
        assert "SECRET" not in text
        assert caught.value.kind is Approval
        # A key is what the human typed too (a pasted token, say): the
        # fields expected are named instead.
        with pytest.raises(InvalidAnswer) as caught:
            await g.resume(
                store, "t", answer={"approved": True, "sk-SECRET-key": 1}
            )
        assert "SECRET" not in str(caught.value)
        assert "expected only ['approved', 'note']" in str(caught.value)
        again = (await g.load(store, "t")).unwrap()
        assert again.status is Status.INTERRUPTED
        assert again.pending is not None
        assert again.pending.question == "refund this order?"
        assert again.pending.payload == {"title": "refund", "amount": 0}
        # Nothing was committed: the same question waits, same id.
        assert again.question_id == paused.question_id is not None
        assert "after-question" not in effects.done
        done = (
            await g.resume(
                store,
                "t",
                answer=Approval(approved=True),
                question=again.question_id,
            )
        ).unwrap()
        assert list(done.state.log) == ["prepared", "approved:", "paid"]
        assert effects.count("after-question") == 1


async def test_a_stale_question_id_is_refused(
    make_store: StoreFactory,
) -> None:
    """The question's id binds the answer: an id that is not the pending
    question's is refused, nothing runs."""
    effects = Effects()
    g = refund_graph(effects)
    async with make_store() as store:
        await g.run(Order(), store=store, thread_id="t")
        out = await g.resume(
            store, "t", answer=Approval(approved=True), question="1-abc"
        )
        assert isinstance(out.failure(), StaleAnswer)
        assert "after-question" not in effects.done


@attrs.frozen
class Asked:
    """State of the two-question graph: what each answer was."""

    first: int = 0
    second: str = ""


async def test_several_questions_in_one_step_are_answered_in_order(
    make_store: StoreFactory,
) -> None:
    """A step asks two questions: the first answer is kept when the
    second is asked (replayed, not asked again), a crash after the second
    answer asks neither again."""
    calls: list[str] = []
    crash = [True]

    @handler(name="ask")
    async def ask(s: Asked) -> Result[Asked, object]:
        calls.append("start")
        n = await interrupt("how many?", int)
        calls.append(f"n={n}")
        word = await interrupt(f"name for {n}?", str)
        calls.append(f"word={word}")
        if crash.pop() if crash else False:
            msg = "the process dies here"
            raise RuntimeError(msg)
        return Success(Asked(n, word))

    g: Graph[Asked, object] = (
        graph.builder(Asked)
        .node("ask", ask)
        .entry("ask")
        .edge("ask", END)
        .build()
    )
    async with make_store() as store:
        first = (await g.run(Asked(), store=store, thread_id="t")).unwrap()
        assert first.pending is not None
        assert first.pending.question == "how many?"
        second = (await g.resume(store, "t", answer=3)).unwrap()
        assert second.status is Status.INTERRUPTED
        assert second.pending is not None
        assert second.pending.question == "name for 3?"
        with pytest.raises(RuntimeError, match="dies"):
            await g.resume(
                store, "t", answer="three", question=second.question_id
            )
        # After the crash: no question is asked again, both answers replay.
        done = (await g.resume(store, "t")).unwrap()
        assert done.status is Status.DONE
        assert done.state == Asked(3, "three")
        assert calls == [
            "start",
            "start",
            "n=3",
            "start",
            "n=3",
            "word=three",
            "start",
            "n=3",
            "word=three",
        ]


async def test_resume_without_an_answer_asks_the_same_question_again(
    make_store: StoreFactory,
) -> None:
    effects = Effects()
    g = refund_graph(effects)
    async with make_store() as store:
        first = (await g.run(Order(), store=store, thread_id="t")).unwrap()
        again = (await g.resume(store, "t")).unwrap()
        assert again.status is Status.INTERRUPTED
        assert again.pending is not None
        assert first.pending is not None
        assert again.pending.question == first.pending.question
        assert again.pending.payload == first.pending.payload
        assert "after-question" not in effects.done


@attrs.frozen
class Chat:
    """State of the agent-then-question graph."""

    messages: PVector[Message] = attrs.field(factory=pvector)
    verdict: str = ""


async def test_journaled_work_before_the_question_is_not_repeated(
    make_store: StoreFactory,
) -> None:
    """An agent runs in the node before the question: its turns are
    records, so the resumed node replays them; the model is not called
    again."""
    model = ScriptedModel(Reply.text("Refund 40 EUR to the customer."))
    agent = Agent("drafter", model, instructions="Draft a refund.")

    @handler(name="draft")
    async def draft(s: Chat) -> Result[Chat, object]:
        out = await agent(Context.of(Message.user("order 7")))
        drafted = out.unwrap().messages[-1].content
        ok = await interrupt("send this?", bool, payload=drafted)
        return Success(Chat(s.messages, drafted if ok else "held"))

    g: Graph[Chat, object] = (
        graph.builder(Chat)
        .node("draft", draft)
        .entry("draft")
        .edge("draft", END)
        .build()
    )
    with model:
        async with make_store() as store:
            paused = (await g.run(Chat(), store=store, thread_id="t")).unwrap()
            assert paused.pending is not None
            assert paused.pending.payload == "Refund 40 EUR to the customer."
            done = (await g.resume(store, "t", answer=True)).unwrap()
            assert done.state.verdict == "Refund 40 EUR to the customer."
    assert len(model.requests) == 1


async def test_outside_a_checkpointed_run_it_is_a_clear_error() -> None:
    """No store, no enclosing checkpointed step: ``NotCheckpointed``
    naming what to do; the same when called with nothing around it."""
    g = refund_graph(Effects())
    with pytest.raises(NotCheckpointed, match="store="):
        await g.run(Order())
    with pytest.raises(NotCheckpointed, match="nowhere to wait"):
        await interrupt("alone?", bool)


class Opaque:
    """Not JSON, whatever the converter does."""

    def __repr__(self) -> str:
        return "Opaque(SECRET)"


async def test_a_payload_that_is_not_json_is_refused(
    make_store: StoreFactory,
) -> None:
    @handler(name="odd")
    async def odd(s: Asked) -> Result[Asked, object]:
        await interrupt("odd?", bool, payload=Opaque())
        return Success(s)

    g: Graph[Asked, object] = (
        graph.builder(Asked)
        .node("odd", odd)
        .entry("odd")
        .edge("odd", END)
        .build()
    )
    async with make_store() as store:
        with pytest.raises(TypeError, match="a Opaque does not") as caught:
            await g.run(Asked(), store=store, thread_id="t")
        assert "SECRET" not in str(caught.value)


async def test_except_exception_in_the_node_does_not_swallow_the_pause(
    make_store: StoreFactory,
) -> None:
    """The signal is a BaseException (like cancellation): a node that
    catches ``Exception`` around the question still pauses."""
    assert not issubclass(Suspended, Exception)
    caught: list[str] = []

    @handler(name="careful")
    async def careful(s: Asked) -> Result[Asked, object]:
        try:
            n = await interrupt("how many?", int)
        except Exception as exc:  # noqa: BLE001  # what a careless node does
            caught.append(type(exc).__name__)
            n = -1
        return Success(Asked(n))

    g: Graph[Asked, object] = (
        graph.builder(Asked)
        .node("careful", careful)
        .entry("careful")
        .edge("careful", END)
        .build()
    )
    async with make_store() as store:
        paused = (await g.run(Asked(), store=store, thread_id="t")).unwrap()
        assert paused.status is Status.INTERRUPTED
        done = (await g.resume(store, "t", answer=2)).unwrap()
        assert done.state == Asked(2)
    assert caught == []


async def test_an_edit_waits_until_a_question_inside_a_node_is_answered(
    make_store: StoreFactory,
) -> None:
    """A thread paused inside a node cannot be edited (its node is half
    run): ``EditRefused`` says to answer first; nothing is committed."""
    g = refund_graph(Effects())
    async with make_store() as store:
        await g.run(Order(amount=3), store=store, thread_id="t")
        before = list(await store.records("t"))
        out = await g.update_state(
            store, "t", Order(amount=4), author="ana", reason="typo"
        )
        refused = out.failure()
        assert isinstance(refused, EditRefused)
        assert "answer it first" in str(refused)
        assert list(await store.records("t")) == before


async def test_the_answer_is_committed_once_its_question_takes_it(
    make_store: StoreFactory,
) -> None:
    """The answer is checked by the question it answers, then committed
    before anything after the question runs: a node that dies *after* the
    question gets it back without asking again; one that dies *before* it
    (in the part that runs again) committed nothing (the answer was never
    checked), and the thread still waits at the same question."""
    dies = {"before": False, "after": False}

    @handler(name="ask")
    async def ask(s: Asked) -> Result[Asked, object]:
        if dies["before"]:
            dies["before"] = False
            msg = "the process dies before the question"
            raise RuntimeError(msg)
        n = await interrupt("how many?", int)
        if dies["after"]:
            dies["after"] = False
            msg = "the process dies after the question"
            raise RuntimeError(msg)
        return Success(Asked(n))

    g: Graph[Asked, object] = (
        graph.builder(Asked)
        .node("ask", ask)
        .entry("ask")
        .edge("ask", END)
        .build()
    )
    async with make_store() as store:
        paused = (await g.run(Asked(), store=store, thread_id="t")).unwrap()
        dies["before"] = True
        before = list(await store.records("t"))
        with pytest.raises(RuntimeError, match="before"):
            await g.resume(store, "t", answer=5, question=paused.question_id)
        assert list(await store.records("t")) == before
        dies["after"] = True
        with pytest.raises(RuntimeError, match="after"):
            await g.resume(store, "t", answer=5, question=paused.question_id)
        head = (await g.load(store, "t")).unwrap()
        assert head.status is Status.RUNNING
        assert head.pending is None
        done = (await g.resume(store, "t")).unwrap()
        assert done.state == Asked(5)


@attrs.frozen
class Pin:
    """An answer that carries a secret."""

    ok: bool
    pin: Secret[str] | None = None


@dataclasses.dataclass(frozen=True)
class DataPin:
    """The same, as a dataclass."""

    ok: bool
    pin: Secret[str] | None = None


class TypedPin(TypedDict):
    """The same, as a typed dict."""

    ok: bool
    pin: Secret[str] | None


async def test_a_secret_in_an_answer_is_taken_by_reference_only(
    make_store: StoreFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ``Secret`` field of an answer given in the clear (as JSON, the
    only way from the command line or the web UI) is refused, naming the
    field, and nothing is stored (it was stored in the clear); given as a
    reference, the node gets the secret and the records hold only the
    reference."""
    got: list[str] = []

    @handler(name="unlock")
    async def unlock(s: Order) -> Result[Order, object]:
        answer = await interrupt("pin?", Pin)
        if answer.pin is not None:
            got.append(answer.pin.reveal())
        return Success(s)

    g = graph.builder(Order).node("unlock", unlock).entry("unlock")
    g2 = g.edge("unlock", END).build()
    monkeypatch.setenv("ANSWER_PIN", "4321-sk-pin")
    async with make_store() as store:
        await g2.run(Order(), store=store, thread_id="t")
        head = await store.head("t")
        with pytest.raises(InvalidAnswer) as caught:
            await g2.resume(
                store, "t", answer={"ok": True, "pin": "1234-sk-canary"}
            )
        assert "a secret given by value" in str(caught.value)
        assert "$.pin" in str(caught.value)
        assert "sk-canary" not in str(caught.value)
        assert await store.head("t") == head  # nothing stored
        done = await g2.resume(
            store,
            "t",
            answer={"ok": True, "pin": {"$secret": "env:ANSWER_PIN"}},
        )
        assert done.unwrap().done
        records = await store.records("t")
    assert got == ["4321-sk-pin"]
    assert not any(
        b"sk-canary" in r.data or b"sk-pin" in r.data for r in records
    )


async def test_a_question_typed_by_a_union_or_a_literal(
    make_store: StoreFactory,
) -> None:
    """``interrupt`` and a gate's ``Interrupt`` take any type form (``int |
    None``, a ``Literal``), not only classes: the answer is structured into
    it, and one that does not fit is refused without its value."""

    @handler(name="count")
    async def count(s: Order) -> Result[Order, object]:
        many = await interrupt("how many?", int | None)
        return Success(attrs.evolve(s, amount=many or 0))

    async def pick(t: Transition[Order]) -> Decision:
        if t.targets != ("count",):
            return Continue()
        return Interrupt("which way?", Literal["count", "skip"])

    g = (
        graph.builder(Order)
        .node("count", count)
        .entry("count")
        .edge("count", END)
        .build()
    )
    async with make_store() as store:
        await g.run(Order(), store=store, thread_id="t", gates=[pick])
        with pytest.raises(InvalidAnswer) as caught:
            await g.resume(store, "t", answer="SECRET-way", gates=[pick])
        assert "SECRET" not in str(caught.value)
        asked = (
            await g.resume(store, "t", answer="count", gates=[pick])
        ).unwrap()
        assert asked.pending is not None
        assert asked.pending.question == "how many?"
        with pytest.raises(InvalidAnswer) as caught:
            await g.resume(store, "t", answer="SECRET-many", gates=[pick])
        assert "SECRET" not in str(caught.value)
        done = (await g.resume(store, "t", answer=7, gates=[pick])).unwrap()
        assert done.status is Status.DONE
        assert done.state.amount == 7


async def test_a_union_told_apart_by_the_json_kind_of_the_answer(
    make_store: StoreFactory,
) -> None:
    """``Approval | list[str]``: cattrs has no hook for a union holding an
    array type, but an object and an array are told apart by the answer
    itself; one of neither kind is refused without its value."""

    @handler(name="ask")
    async def ask(s: Order) -> Result[Order, object]:
        got = await interrupt(
            "approve, or list the notes", Approval | list[str]
        )
        note = got.note if isinstance(got, Approval) else ",".join(got)
        return Success(attrs.evolve(s, log=s.log.append(note)))

    g = graph.builder(Order).node("ask", ask).entry("ask").edge("ask", END)
    built = g.build()
    async with make_store() as store:
        for thread, answer, note in (
            ("a", {"approved": True, "note": "ok"}, "ok"),
            ("b", ["x", "y"], "x,y"),
        ):
            await built.run(Order(), store=store, thread_id=thread)
            with pytest.raises(InvalidAnswer) as caught:
                await built.resume(store, thread, answer="SECRET-text")
            assert "SECRET" not in str(caught.value)
            assert "an object (Approval) or an array" in str(caught.value)
            done = (await built.resume(store, thread, answer=answer)).unwrap()
            assert done.status is Status.DONE
            assert list(done.state.log) == [note]


async def test_a_type_no_answer_fits_is_refused_when_asked(
    make_store: StoreFactory,
) -> None:
    """``Approval | dict[str, int]`` (two objects cattrs cannot tell apart),
    ``object`` and a type named by a string would make a thread that no
    answer resumes: ``interrupt``, a gate's ``Interrupt`` and
    ``Transition.answer_as`` refuse them with a ``TypeError`` when asked,
    and nothing waits."""
    unreadable: list[Any] = [
        Approval | dict[str, int],
        object,
        "int",
        # T | None has cattrs' Optional hook, whether or not T has one:
        Approval | dict[str, int] | None,
        Optional["int"],  # a string inside: the point
        list[Approval | dict[str, int]] | None,
        list[Approval | dict[str, int] | None],  # at any depth too
        list[object | None],
    ]
    for n, kind in enumerate(unreadable):
        built = _asking(kind)
        async with make_store() as store:
            with pytest.raises(TypeError, match=r"interrupt\(\)"):
                await built.run(Order(), store=store, thread_id=f"t{n}")
            loaded = await built.load(store, f"t{n}")
            assert not isinstance(loaded, Success) or (
                loaded.unwrap().pending is None
            )
            with pytest.raises(TypeError, match=r"Interrupt\(\)"):
                await built.run(
                    Order(),
                    store=store,
                    thread_id=f"u{n}",
                    gates=[_gate(kind)],
                )
        for answer in ({"a": 1}, None):  # asked before any answer too
            t = Transition(None, ("ask",), Order(), 0, answer)
            with pytest.raises(TypeError, match=r"answer_as\(\)"):
                t.answer_as(kind)


def _asking(kind: Any) -> Graph[Order, object]:
    """One node asking a question whose answer is a *kind*."""

    @handler(name="ask")
    async def ask(s: Order) -> Result[Order, object]:
        await interrupt("which?", kind)
        return Success(s)

    return (
        graph.builder(Order)
        .node("ask", ask)
        .entry("ask")
        .edge("ask", END)
        .build()
    )


def _gate(kind: Any) -> Callable[[Transition[Order]], Awaitable[Decision]]:
    """A gate asking, before any node, for an answer of *kind*."""

    async def gate(t: Transition[Order]) -> Decision:
        return Interrupt("which?", kind)

    return gate


async def test_none_is_an_answer_when_the_question_is_named(
    make_store: StoreFactory,
) -> None:
    """``resume(answer=None)`` alone resumes without an answer (the same
    question waits); with ``question=`` it answers ``None``: an
    ``int | None`` question inside a node, and a gate's typed
    ``Interrupt``, both take it, and it is kept for good (a replay of the
    node sees ``None`` again, without asking)."""
    seen: list[int | None] = []

    @handler(name="count")
    async def count(s: Order) -> Result[Order, object]:
        many = await interrupt("how many?", int | None)
        seen.append(many)
        more = await interrupt("and then?", int)
        return Success(attrs.evolve(s, amount=(many or 0) + more))

    async def gate(t: Transition[Order]) -> Decision:
        if t.targets != ("count",):
            return Continue()
        return Interrupt("limit?", int | None)

    g = (
        graph.builder(Order)
        .node("count", count)
        .entry("count")
        .edge("count", END)
        .build()
    )
    async with make_store() as store:
        paused = (
            await g.run(Order(), store=store, thread_id="t", gates=[gate])
        ).unwrap()
        assert paused.pending is not None
        assert paused.pending.question == "limit?"
        again = (
            await g.resume(store, "t", answer=None, gates=[gate])
        ).unwrap()
        assert again.pending is not None
        assert again.pending.question == "limit?"
        asked = (
            await g.resume(
                store,
                "t",
                answer=None,
                question=again.question_id,
                gates=[gate],
            )
        ).unwrap()
        assert asked.pending is not None
        assert asked.pending.question == "how many?"
        then = (
            await g.resume(
                store,
                "t",
                answer=None,
                question=asked.question_id,
                gates=[gate],
            )
        ).unwrap()
        assert then.pending is not None
        assert then.pending.question == "and then?"
        done = (await g.resume(store, "t", answer=5, gates=[gate])).unwrap()
        assert done.status is Status.DONE
        assert done.state.amount == 5
        assert seen == [None, None]  # the replay read the kept None


@attrs.frozen
class Limits:
    """Two limits, each asked by its own fan-out branch."""

    a: int | None = -1
    b: int | None = -1


def _asking_apart() -> Graph[Limits, object]:
    """start, then two branches that each ask for a limit or none."""

    @handler(name="start")
    async def start(p: Limits) -> Result[Limits, object]:
        return Success(p)

    def asking(field: str) -> Handler[Limits, Limits, object]:
        @handler(name=f"ask_{field}")
        async def ask(p: Limits) -> Result[Limits, object]:
            got = await interrupt(f"{field}?", int | None)
            return Success(attrs.evolve(p, **{field: got}))

        return ask

    return (
        graph.builder(Limits)
        .node("start", start)
        .node("ask_a", asking("a"))
        .node("ask_b", asking("b"))
        .entry("start")
        .fan_out("start", ["ask_a", "ask_b"], join=END)
        .build()
    )


async def test_none_answers_one_of_two_waiting_branches(
    make_store: StoreFactory,
) -> None:
    """Two fan-out branches wait at once: ``None`` answers the one its
    ``question=`` names, and the other keeps waiting for its own."""
    g = _asking_apart()
    async with make_store() as store:
        both = (await g.run(Limits(), store=store, thread_id="t")).unwrap()
        by_text = {p.question: qid for qid, p in both.questions.items()}
        one = (
            await g.resume(store, "t", answer=None, question=by_text["a?"])
        ).unwrap()
        assert [p.question for p in one.questions.values()] == ["b?"]
        done = (
            await g.resume(store, "t", answer=3, question=by_text["b?"])
        ).unwrap()
        assert done.status is Status.DONE
        assert done.state == Limits(a=None, b=3)


@pytest.mark.parametrize(
    "kind",
    [
        Pin | list[str],
        list[Pin],
        tuple[Pin, int],
        PVector[Pin],
        dict[int, Pin],
        dict[str, Secret[str]] | int,
        DataPin,
        TypedPin,
    ],
    ids=[
        "kind-union",
        "list",
        "tuple",
        "pvector",
        "int-keys",
        "dict-of",
        "dataclass",
        "typeddict",
    ],
)
async def test_a_secret_given_by_value_is_refused_wherever_it_sits(
    kind: Any,
) -> None:
    """However the answer's type holds a ``Secret`` (in a union, a list, a
    tuple, a persistent vector, a mapping), one given in the clear is
    refused and never stored, though the run's converter made its hooks
    for the type when the question was asked."""
    clear: object = (
        {"7": "1234-sk-canary"}
        if kind == dict[str, Secret[str]] | int
        else {"ok": True, "pin": "1234-sk-canary"}
    )
    if kind in (list[Pin], PVector[Pin]):
        clear = [clear]
    elif kind == tuple[Pin, int]:
        clear = [clear, 1]
    elif kind == dict[int, Pin]:
        clear = {"1": clear}

    @handler(name="ask")
    async def ask(s: Order) -> Result[Order, object]:
        await interrupt("pin?", kind)
        return Success(s)

    g = graph.builder(Order).node("ask", ask).entry("ask").edge("ask", END)
    built = g.build()
    store = MemoryStore()  # (asking made the run converter's hooks)
    await built.run(Order(), store=store, thread_id="t")
    head = await store.head("t")
    with pytest.raises(InvalidAnswer) as caught:
        await built.resume(store, "t", answer=clear)
    assert "a secret given by value" in str(caught.value)
    assert "sk-canary" not in str(caught.value)
    assert await store.head("t") == head
    records = await store.records("t")
    assert not any(b"sk-canary" in r.data for r in records)
