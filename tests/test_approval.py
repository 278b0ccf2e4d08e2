"""Approval of single tool calls (issue 16, item 6): ``tool(approval=...)``
turns the calls it selects into questions of the checkpointed run,
answered with ``Approve()``, ``Approve(arguments=...)`` or
``Deny(reason)``; approved calls run once, across pauses and crashes."""

from __future__ import annotations

import json
import os
import sys

from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import attrs
import pytest

from pyrsistent import pvector
from returns.result import Failure

from pipeline import (
    Agent,
    Approve,
    Context,
    Deny,
    Graph,
    Message,
    Role,
    Secret,
    Tool,
    graph,
    interrupt,
    swarm,
    tool,
)
from pipeline.agents import as_tool
from pipeline.cli import ExitCode, main
from pipeline.errors import ConstructionError, InvalidAnswer, NotCheckpointed
from pipeline.failures import ThreadBusy
from pipeline.fold import Snapshot, Status
from pipeline.graph import END
from pipeline.models import ModelRequest, ModelResponse
from pipeline.stores import CheckpointStore, Lease, MemoryStore, Record
from pipeline.testing import Reply, ScriptedModel
from tests.graph.store_urls import open_store
from tests.servers import StoreFactory
from tests.stores import CommitResult, DelegatingStore
from tests.test_interrupt_nested import Desk, desk_graph


START = Desk(pvector([Message.user("refund me")]))


def calling(
    *calls: tuple[str, dict[str, Any]],
) -> Callable[[ModelRequest], ModelResponse]:
    """A model that asks for *calls* (one reply), then says what each tool
    answered."""

    def reply(req: ModelRequest) -> ModelResponse:
        results = [m for m in req.messages if m.role is Role.TOOL]
        if not results:
            return Reply.tool_calls(
                *(
                    (name, args, f"c{i}")
                    for i, (name, args) in enumerate(calls)
                )
            )
        return Reply.text(" | ".join(m.content for m in results))

    return reply


class Till:
    """The outside world: what the tools did (survives a crash)."""

    def __init__(self) -> None:
        self.paid: list[int] = []
        self.logged: list[str] = []
        self.predicate_saw: list[object] = []

    def refund(self, approval: bool | Callable[..., bool] = True) -> Tool:
        async def refund(amount: int, note: str = "") -> str:
            """Refund the customer."""
            self.paid.append(amount)
            return f"refunded {amount}{note}"

        if isinstance(approval, bool):
            return tool(approval=approval)(refund)
        return tool(approval=approval)(refund)

    def log(self) -> Tool:
        @tool
        async def log(text: str) -> str:
            """Log a line."""
            self.logged.append(text)
            return "logged"

        return log


def last_text(snap: Snapshot[Desk]) -> str:
    return snap.state.messages[-1].content


async def test_an_approved_call_runs_once_after_the_answer(
    make_store: StoreFactory,
) -> None:
    """The call is a question showing agent, tool and arguments; nothing
    runs before the answer; ``Approve()`` runs it once."""
    till = Till()
    model = ScriptedModel(calling(("refund", {"amount": 40})), cycle=True)
    g = desk_graph(Agent("desk", model, tools=[till.refund()]))
    async with make_store() as store:
        paused = (await g.run(START, store=store, thread_id="t")).unwrap()
        assert paused.status is Status.INTERRUPTED
        assert paused.pending is not None
        assert paused.pending.question == "approve refund?"
        assert paused.pending.payload == {
            "agent": "desk",
            "tool": "refund",
            "arguments": {"amount": 40},
        }
        assert paused.question_id is not None
        assert till.paid == []
        done = (
            await g.resume(
                store, "t", answer=Approve(), question=paused.question_id
            )
        ).unwrap()
        assert done.status is Status.DONE
        assert last_text(done) == "refunded 40"
        assert till.paid == [40]
        # Resuming a finished thread runs nothing again.
        again = (await g.resume(store, "t")).unwrap()
        assert again.status is Status.DONE
        assert till.paid == [40]


async def test_a_denied_call_gives_the_model_an_error_with_the_reason(
    make_store: StoreFactory,
) -> None:
    till = Till()
    model = ScriptedModel(calling(("refund", {"amount": 40})), cycle=True)
    g = desk_graph(Agent("desk", model, tools=[till.refund()]))
    async with make_store() as store:
        await g.run(START, store=store, thread_id="t")
        done = (
            await g.resume(store, "t", answer=Deny("over the limit"))
        ).unwrap()
        assert till.paid == []
        result = [m for m in done.state.messages if m.role is Role.TOOL]
        assert len(result) == 1
        assert result[0].content == (
            "error: a person denied this call of 'refund': over the limit"
        )
        assert result[0].tool_call_id == "c0"


async def test_an_answer_as_json_approves_denies_or_edits() -> None:
    """What ``pipeline answer`` sends: plain JSON objects."""
    for answer, text, paid in (
        ({"approved": True}, "refunded 40", [40]),
        ({"approved": False}, "no reason given", []),
        ({"approved": False, "reason": "no"}, "'refund': no", []),
        ({"approved": True, "arguments": {"amount": 7}}, "refunded 7", [7]),
    ):
        till = Till()
        model = ScriptedModel(calling(("refund", {"amount": 40})), cycle=True)
        g = desk_graph(Agent("desk", model, tools=[till.refund()]))
        store = MemoryStore()
        await g.run(START, store=store, thread_id="t")
        done = (await g.resume(store, "t", answer=answer)).unwrap()
        assert last_text(done).endswith(text)
        assert till.paid == paid


async def test_approve_with_edited_arguments_runs_them_and_records_them(
    make_store: StoreFactory,
) -> None:
    """The edit replaces the arguments it names (the others stay as the
    model sent them); the conversation records the call as it ran."""
    till = Till()
    model = ScriptedModel(
        calling(("refund", {"amount": 400, "note": "!"})), cycle=True
    )
    g = desk_graph(Agent("desk", model, tools=[till.refund()]))
    async with make_store() as store:
        await g.run(START, store=store, thread_id="t")
        done = (
            await g.resume(
                store, "t", answer=Approve(arguments={"amount": 300})
            )
        ).unwrap()
        assert till.paid == [300]
        assert last_text(done) == "refunded 300!"
        (call,) = [c for m in done.state.messages for c in m.tool_calls]
        assert json.loads(call.arguments) == {"amount": 300, "note": "!"}


@pytest.mark.parametrize(
    ("answer", "names"),
    [
        (Approve(arguments={"amount": "SECRET-9"}), "argument 'amount'"),
        (Approve(arguments={"amonut": 1}), "unknown argument(s)"),
        ({"approved": True, "reason": "SECRET-9"}, "$.reason"),
        ({"approved": False, "arguments": {}}, "$.arguments"),
        ({"approved": "SECRET-9"}, "$.approved"),
        ({"approve": True}, "unknown field(s)"),
        ("SECRET-9", "ToolApproval"),
    ],
)
async def test_an_answer_that_does_not_fit_is_refused_and_asked_again(
    make_store: StoreFactory, answer: object, names: str
) -> None:
    """InvalidAnswer names the field or argument, never the value; the
    thread waits at the same question, and a good answer then works."""
    till = Till()
    model = ScriptedModel(calling(("refund", {"amount": 40})), cycle=True)
    g = desk_graph(Agent("desk", model, tools=[till.refund()]))
    async with make_store() as store:
        paused = (await g.run(START, store=store, thread_id="t")).unwrap()
        with pytest.raises(InvalidAnswer) as caught:
            await g.resume(store, "t", answer=answer)
        text = str(caught.value)
        assert names in text
        assert "ToolApproval" in text
        assert "SECRET" not in text
        assert till.paid == []
        waiting = (await g.load(store, "t")).unwrap()
        assert waiting.status is Status.INTERRUPTED
        assert waiting.pending is not None
        assert paused.pending is not None
        assert waiting.pending.question == paused.pending.question
        assert waiting.pending.payload == paused.pending.payload
        done = (await g.resume(store, "t", answer=Approve())).unwrap()
        assert till.paid == [40]
        assert last_text(done) == "refunded 40"


async def test_a_predicate_selects_calls_by_their_typed_arguments() -> None:
    """Small refunds run without asking; large ones wait.  The predicate
    gets the decoded arguments (defaults filled in)."""
    till = Till()

    def large(amount: int, note: str) -> bool:
        till.predicate_saw.append((amount, note))
        return amount > 100

    model = ScriptedModel(
        calling(("refund", {"amount": 40}), ("refund", {"amount": 400})),
        cycle=True,
    )
    g = desk_graph(Agent("desk", model, tools=[till.refund(large)]))
    store = MemoryStore()
    paused = (await g.run(START, store=store, thread_id="t")).unwrap()
    assert paused.pending is not None
    assert paused.pending.payload == {
        "agent": "desk",
        "tool": "refund",
        "arguments": {"amount": 400},
    }
    assert till.predicate_saw == [(40, ""), (400, "")]
    # The small refund waits with the large one: no tool of the reply ran.
    assert till.paid == []
    done = (await g.resume(store, "t", answer=Approve())).unwrap()
    assert sorted(till.paid) == [40, 400]
    assert last_text(done) == "refunded 40 | refunded 400"


@attrs.frozen
class Line:
    sku: str
    quantity: int


async def test_the_predicate_gets_attrs_arguments_as_instances() -> None:
    seen: list[object] = []
    done: list[Line] = []

    def bulk(line: Line) -> bool:
        seen.append(line)
        return line.quantity > 10

    @tool(approval=bulk)
    def order(line: Line) -> str:
        """Order a line."""
        done.append(line)
        return "ordered"

    model = ScriptedModel(
        calling(("order", {"line": {"sku": "a", "quantity": 50}})), cycle=True
    )
    g = desk_graph(Agent("desk", model, tools=[order]))
    store = MemoryStore()
    await g.run(START, store=store, thread_id="t")
    assert seen == [Line("a", 50)]
    await g.resume(
        store,
        "t",
        answer=Approve(arguments={"line": {"sku": "a", "quantity": 5}}),
    )
    assert done == [Line("a", 5)]


async def test_other_calls_of_the_reply_wait_and_then_run_once(
    make_store: StoreFactory,
) -> None:
    """Calls not needing approval wait for the reply's questions; two
    approvals in one reply are asked one after the other; each call runs
    exactly once."""
    till = Till()
    model = ScriptedModel(
        calling(
            ("refund", {"amount": 1}),
            ("log", {"text": "x"}),
            ("refund", {"amount": 2}),
        ),
        cycle=True,
    )
    g = desk_graph(Agent("desk", model, tools=[till.refund(), till.log()]))
    async with make_store() as store:
        first = (await g.run(START, store=store, thread_id="t")).unwrap()
        assert first.pending is not None
        assert first.pending.payload["arguments"] == {"amount": 1}
        assert (till.paid, till.logged) == ([], [])
        second = (
            await g.resume(
                store, "t", answer=Approve(), question=first.question_id
            )
        ).unwrap()
        assert second.status is Status.INTERRUPTED
        assert second.pending is not None
        assert second.pending.payload["arguments"] == {"amount": 2}
        assert second.question_id != first.question_id
        assert (till.paid, till.logged) == ([], [])
        done = (
            await g.resume(
                store, "t", answer=Deny("no"), question=second.question_id
            )
        ).unwrap()
        assert (till.paid, till.logged) == ([1], ["x"])
        assert last_text(done) == (
            "refunded 1 | logged | "
            "error: a person denied this call of 'refund': no"
        )


async def test_an_approved_call_is_not_run_again_when_a_later_question_pauses(
    make_store: StoreFactory,
) -> None:
    """A tool of the same reply asking its own question (interrupt) after
    the approved call ran: the approved call's result is kept, so the
    turn run again does not pay twice."""
    till = Till()

    @tool
    async def confirm() -> str:
        """Ask the customer."""
        ok = await interrupt("customer there?", bool)
        return "confirmed" if ok else "gone"

    model = ScriptedModel(
        calling(("refund", {"amount": 5}), ("confirm", {})), cycle=True
    )
    g = desk_graph(
        Agent(
            "desk",
            model,
            tools=[till.refund(), confirm],
            max_parallel_tools=1,
        )
    )
    async with make_store() as store:
        await g.run(START, store=store, thread_id="t")
        asked = (await g.resume(store, "t", answer=Approve())).unwrap()
        assert asked.pending is not None
        assert asked.pending.question == "customer there?"
        assert till.paid == [5]
        done = (await g.resume(store, "t", answer=True)).unwrap()
        assert last_text(done) == "refunded 5 | confirmed"
        assert till.paid == [5]


async def test_secret_arguments_are_shown_as_references_and_not_editable(
    make_store: StoreFactory,
) -> None:
    """The question shows a secret argument as its reference; an answer
    editing it is refused (answers are stored); the model's secret reaches
    no record."""
    used: list[str] = []

    @tool(approval=True)
    async def charge(card: Secret[str], amount: int) -> str:
        """Charge a card."""
        used.append(card.reveal())
        return f"charged {amount}"

    model = ScriptedModel(
        calling(("charge", {"card": "4111-SECRET", "amount": 3})), cycle=True
    )
    g = desk_graph(Agent("desk", model, tools=[charge]))
    async with make_store() as store:
        paused = (await g.run(START, store=store, thread_id="t")).unwrap()
        assert paused.pending is not None
        assert paused.pending.payload == {
            "agent": "desk",
            "tool": "charge",
            "arguments": {
                "card": {"$secret": "tool:charge.card"},
                "amount": 3,
            },
        }
        with pytest.raises(InvalidAnswer, match=r"'card'.*hold secrets"):
            await g.resume(
                store, "t", answer=Approve(arguments={"card": "4000-OTHER"})
            )
        done = (
            await g.resume(store, "t", answer=Approve(arguments={"amount": 2}))
        ).unwrap()
        assert used == ["4111-SECRET"]
        assert last_text(done) == "charged 2"
        records = await store.records("t")
        # The model's secret reaches no record.  (An answer is committed
        # as given before it is checked: never type a secret into one.)
        assert all(b"4111-SECRET" not in r.data for r in records)


async def test_a_swarm_agents_tool_waits_for_approval(
    make_store: StoreFactory,
) -> None:
    till = Till()
    agent = Agent(
        "desk",
        ScriptedModel(calling(("refund", {"amount": 9})), cycle=True),
        tools=[till.refund()],
    )
    team = swarm.builder().agent("desk", agent).entry("desk").build()
    async with make_store() as store:
        paused = (
            await team.run(
                Context.of(Message.user("refund me")),
                store=store,
                thread_id="t",
            )
        ).unwrap()
        assert paused.status is Status.INTERRUPTED
        assert paused.pending is not None
        assert paused.pending.payload == {
            "agent": "desk",
            "tool": "refund",
            "arguments": {"amount": 9},
        }
        done = (
            await team.resume(
                store,
                "t",
                answer={"approved": True},
                question=paused.question_id,
            )
        ).unwrap()
        assert done.done
        assert till.paid == [9]
        assert done.state.messages[-1].content == "refunded 9"


async def test_an_agent_used_as_a_tool_waits_for_its_tools_approval(
    make_store: StoreFactory,
) -> None:
    """The inner agent's call is the question of the whole run; the answer
    reaches it, and the outer agent sees the inner one's answer."""
    till = Till()
    clerk = Agent(
        "clerk",
        ScriptedModel(calling(("refund", {"amount": 8})), cycle=True),
        tools=[till.refund()],
    )
    front = Agent(
        "front",
        ScriptedModel(calling(("clerk", {"prompt": "refund 8"})), cycle=True),
        tools=[as_tool(clerk)],
    )
    team = swarm.builder().agent("front", front).entry("front").build()
    async with make_store() as store:
        paused = (
            await team.run(
                Context.of(Message.user("refund me")),
                store=store,
                thread_id="t",
            )
        ).unwrap()
        assert paused.pending is not None
        assert paused.pending.payload == {
            "agent": "clerk",
            "tool": "refund",
            "arguments": {"amount": 8},
        }
        assert till.paid == []
        done = (await team.resume(store, "t", answer=Approve())).unwrap()
        assert done.done
        assert till.paid == [8]
        assert done.state.messages[-1].content == "refunded 8"


async def test_outside_a_checkpointed_run_approval_is_a_typed_error() -> None:
    """No store, nowhere for the question to wait: NotCheckpointed, before
    any tool of the reply runs."""
    till = Till()
    model = ScriptedModel(
        calling(("log", {"text": "x"}), ("refund", {"amount": 1})), cycle=True
    )
    agent = Agent("desk", model, tools=[till.log(), till.refund()])
    with pytest.raises(NotCheckpointed, match="approve refund"):
        await agent.run([Message.user("hi")])
    with pytest.raises(NotCheckpointed, match="approve refund"):
        await desk_graph(agent).run(START)
    assert (till.paid, till.logged) == ([], [])


async def test_a_call_the_predicate_does_not_select_needs_no_store() -> None:
    till = Till()
    model = ScriptedModel(calling(("refund", {"amount": 1})), cycle=True)
    agent = Agent(
        "desk", model, tools=[till.refund(lambda amount, note: amount > 100)]
    )
    out = (await agent.run([Message.user("hi")])).unwrap()
    assert out.messages[-1].content == "refunded 1"
    assert till.paid == [1]


async def test_a_call_whose_arguments_do_not_decode_asks_no_one() -> None:
    """It gets its error result, as without approval (the model fixes it)."""
    till = Till()
    model = ScriptedModel(calling(("refund", {"amount": "x"})), cycle=True)
    agent = Agent("desk", model, tools=[till.refund()])
    out = (await agent.run([Message.user("hi")])).unwrap()
    assert "argument 'amount'" in out.messages[-1].content
    assert till.paid == []


def test_approval_takes_a_bool_or_a_callable() -> None:
    async def f(a: int) -> int:
        return a

    with pytest.raises(ConstructionError, match="approval= takes"):
        tool(approval="yes")(f)  # type: ignore[call-overload]

    async def later(a: int) -> bool:
        return a > 1

    with pytest.raises(ConstructionError, match="plain function"):
        tool(approval=later)(f)  # type: ignore[arg-type]
    assert tool(approval=True)(f).approval is True
    assert tool(f).approval is False


async def test_a_predicate_that_raises_leaves_the_run() -> None:
    """A bug in a predicate is not a reason to ask, nor to run: it
    propagates, and no tool runs."""
    till = Till()

    def broken(amount: int, note: str) -> bool:
        raise LookupError(amount)

    model = ScriptedModel(calling(("refund", {"amount": 1})), cycle=True)
    g = desk_graph(Agent("desk", model, tools=[till.refund(broken)]))
    with pytest.raises(LookupError):
        await g.run(START, store=MemoryStore(), thread_id="t")
    assert till.paid == []


async def test_calling_the_tool_directly_asks_no_one() -> None:
    """Approval is the agent loop's: ``Tool.call`` (a unit test) and
    ``Tool.fn`` run the function."""
    till = Till()
    assert await till.refund().call('{"amount": 2}') == ("refunded 2", False)
    assert till.paid == [2]


# -- crashes ------------------------------------------------------------------


class Crash(BaseException):
    """The process dies here (nothing may catch it)."""


class CrashingStore(DelegatingStore):
    """Dies before or after its *at*-th commit."""

    def __init__(
        self, inner: CheckpointStore, *, at: int, after: bool
    ) -> None:
        super().__init__(inner)
        self.at, self.after, self.n = at, after, 0
        self.crashed: Record | None = None

    async def commit(
        self,
        record: Record,
        *,
        expected_head: int | None,
        lease: Lease | None = None,
    ) -> CommitResult:
        self.n += 1
        if self.n == self.at and not self.after:
            self.crashed = record
            raise Crash
        out = await self.inner.commit(
            record, expected_head=expected_head, lease=lease
        )
        if self.n == self.at:
            self.crashed = record
            raise Crash
        return out


async def _finish(
    g: Graph[Desk, object],
    store: CheckpointStore,
    answer: object,
    thread: str,
) -> Snapshot[Desk]:
    """Go on as a restarted process would: answer the question if the
    thread waits at one, else resume."""
    for _ in range(5):
        head = (await g.load(store, thread)).unwrap()
        if head.status is Status.DONE:
            return head
        out = await g.resume(
            store,
            thread,
            answer=answer if head.status is Status.INTERRUPTED else None,
        )
        snap = out.unwrap()
        if snap.status is Status.DONE:
            return snap
    raise AssertionError("the thread did not finish")


@pytest.mark.slow
@pytest.mark.parametrize("after", [True, False], ids=["after", "before"])
async def test_an_approved_call_runs_once_whatever_commit_a_crash_hits(
    make_store: StoreFactory, after: bool
) -> None:
    """The answer, then the approved call's result, are committed: a crash
    at (before or after) any commit of the answered run, then a restart,
    runs the approved call exactly once, except a crash after the call
    returned and before its result is durable (the call's own window:
    documented; it runs again)."""
    at = 1
    while True:
        till = Till()
        model = ScriptedModel(
            calling(("refund", {"amount": 40}), ("log", {"text": "x"})),
            cycle=True,
        )
        g = desk_graph(Agent("desk", model, tools=[till.refund(), till.log()]))
        thread = f"t{at}"  # a SQLite file is shared by the trials
        async with make_store() as inner:
            await g.run(START, store=inner, thread_id=thread)
            crashing = CrashingStore(inner, at=at, after=after)
            try:
                await g.resume(crashing, thread, answer=Approve())
            except Crash:
                crashed = crashing.crashed
            else:
                assert till.paid == [40]
                break
            assert crashed is not None
            done = await _finish(g, inner, Approve(), thread)
            assert last_text(done) == "refunded 40 | logged"
            # The one window: the call returned, and the process died
            # before the record keeping its result was durable.
            window = not after and b'{"content":"refunded 40"' in crashed.data
            assert till.paid == ([40, 40] if window else [40]), (at, after)
            assert till.logged in (["x"], ["x", "x"])
        at += 1
    assert at > 3  # the answer, the result, the turn, the node, at least


CHILD = Path(__file__).with_name("approval_child.py")
CHILD_LEASE_TTL = 1.0


def paying_graph(effects: Path) -> Graph[Desk, object]:
    """A desk whose refunds (each approved) write a line to *effects*: what
    survives the process."""

    @tool(approval=True)
    def refund(amount: int) -> str:
        """Refund the customer."""
        with effects.open("a", encoding="utf-8") as f:
            f.write(f"paid {amount}\n")
        return f"refunded {amount}"

    model = ScriptedModel(calling(("refund", {"amount": 40})), cycle=True)
    return desk_graph(Agent("desk", model, tools=[refund]))


@pytest.mark.slow
@pytest.mark.parametrize("at", [1, 2, 3, 4])
async def test_a_process_killed_after_the_answer_pays_once_on_restart(
    tmp_path: Path, at: int
) -> None:
    """A real process on a real SQLite file approves the refund and dies
    (no cleanup) right after its *at*-th commit: the answer (1), the
    answer in the turn's progress (2), the refund's result (3), the turn
    (4).  Another process resumes the thread once the dead one's lease
    lapses: the refund was paid exactly once, and no one is asked again."""
    spec = f"sqlite:{tmp_path / 'desk.db'}"
    effects = tmp_path / "effects.log"
    effects.touch()
    g = paying_graph(effects)
    async with open_store(spec, lease_ttl=CHILD_LEASE_TTL) as store:
        paused = (await g.run(START, store=store, thread_id="t")).unwrap()
        assert paused.status is Status.INTERRUPTED
    child = await anyio.run_process(
        [sys.executable, str(CHILD), spec, str(effects), str(at)],
        check=False,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])},
    )
    assert child.returncode == 9, child.stderr.decode()
    async with open_store(spec, lease_ttl=CHILD_LEASE_TTL) as store:
        head = (await g.load(store, "t")).unwrap()
        assert head.status is not Status.INTERRUPTED  # the answer is kept
        done = await g.resume(store, "t")
        while isinstance(done, Failure):
            busy = done.failure()
            assert isinstance(busy, ThreadBusy), busy
            await anyio.sleep(busy.expires_in)  # the dead one's lease lapses
            done = await g.resume(store, "t")
        final = done.unwrap()
    assert final.status is Status.DONE
    assert last_text(final) == "refunded 40"
    assert effects.read_text(encoding="utf-8") == "paid 40\n"


# -- from the command line ----------------------------------------------------


@attrs.frozen
class Claim:
    """A claim the cashier refunds (the command line's graph state)."""

    amount: int
    verdict: str = ""


@tool(approval=lambda amount: amount > 10)
async def pay_out(amount: int) -> str:
    """Pay a claim out."""
    return f"paid {amount}"


def _cashier_reply(req: ModelRequest) -> ModelResponse:
    last = req.messages[-1]
    if last.role is Role.TOOL:
        return Reply.text(last.content)
    return Reply.tool_call("pay_out", {"amount": int(last.content)})


cashier = (
    graph.builder(Claim)
    .agent(
        "cashier",
        Agent(
            "cashier",
            ScriptedModel(_cashier_reply, cycle=True),
            tools=[pay_out],
        ),
        messages=lambda c: [Message.user(str(c.amount))],
        update=lambda c, run: attrs.evolve(
            c, verdict=run.messages[-1].content
        ),
    )
    .entry("cashier")
    .edge("cashier", END)
    .build()
)
"""A claim -> the cashier (its pay-outs over 10 wait for approval) -> END."""


def test_an_approval_answered_with_json_from_the_command_line(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``show`` has the question and its payload; ``answer`` with edited
    arguments that do not fit is exit 2 naming the argument (never the
    value) and the thread still waits; a fitting edit runs the call."""
    monkeypatch.chdir(tmp_path)
    store = str(tmp_path / "threads.sqlite3")
    run = ["run", "tests.test_approval:cashier", "--input", '{"amount": 40}']
    assert main([*run, "--thread", "r", "--store", store]) == ExitCode.PAUSED
    assert "paused: approve pay_out?" in capsys.readouterr().err
    assert main(["show", "r", "--store", store, "--json"]) == ExitCode.OK
    pending = json.loads(capsys.readouterr().out)["pending"]
    assert pending["question"] == "approve pay_out?"
    assert pending["payload"] == {
        "agent": "cashier",
        "tool": "pay_out",
        "arguments": {"amount": 40},
    }
    wrong = '{"approved": true, "arguments": {"amount": "SECRET-9"}}'
    assert main(["answer", "r", wrong, "--store", store]) == ExitCode.USAGE
    err = capsys.readouterr().err
    assert "argument 'amount'" in err
    assert "SECRET" not in err
    assert main(["show", "r", "--store", store, "--json"]) == ExitCode.OK
    assert json.loads(capsys.readouterr().out)["status"] == "interrupted"
    right = '{"approved": true, "arguments": {"amount": 30}}'
    assert main(["answer", "r", right, "--store", store]) == ExitCode.OK
    assert json.loads(capsys.readouterr().out) == {
        "amount": 40,
        "verdict": "paid 30",
    }
