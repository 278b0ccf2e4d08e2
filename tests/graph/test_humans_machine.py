"""A state machine over generated graphs that ask humans (issue 16).

Questions (``pipeline.interrupt``) stand in nodes, in the tools of agent
nodes, in fan-out branches, and in gates (``Interrupt``, untyped, and typed
with an ``apply`` that makes the answer reach the state); the calls of a
tool made with ``tool(approval=True)`` wait for ``Approve()``,
``Approve(arguments=...)`` or ``Deny(reason)`` (alone in the model's
reply, or with a call of a tool that asks after it, in the same turn);
the machine runs
and resumes threads on a SQLite file with random answers (valid, invalid,
stale), crashes runs (an exception that kills the runner, a cancelled
run) and reopens the file, forks at questions and answers there (what
``pipeline fork --answer`` does), edits paused and stopped threads, and
lets gates stop.

Invariants:

- every answer reaches its own question only (each answer given is a value
  no other question got; what the code after a question sees, and what
  the state keeps, is the value given to that question, also what a
  gate's ``apply`` put there, committed once, by the answer's author);
- every approved tool call runs once, with the arguments approved (the
  edited ones when the answer edits them); a denied one never runs and
  its model sees the reason; neither a crash, another question of the
  same turn nor a fork past the answer runs it again; edited arguments
  that do not fit are refused (``InvalidAnswer``), nothing stored;
- the code after a question runs at most once per thread (and a finished
  thread's state holds one entry per question it answered);
- every stop stays stopped: its head stays stopped, resuming returns the
  stored stop and runs nothing, an answer is refused;
- history: records never change, versions increase, every parent is an
  earlier version of the same thread.

Under the ``ci`` profile (``derandomize=True``) ``--hypothesis-seed`` is
ignored: to run other seeds, load a profile without ``derandomize``.
"""

from __future__ import annotations

import tempfile

from collections import Counter
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import anyio
import attrs
import pytest

from anyio.from_thread import BlockingPortal, start_blocking_portal
from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)
from pyrsistent import PVector, pvector
from returns.result import Failure, Result, Success

from pipeline import (
    Agent,
    Approve,
    Deny,
    Graph,
    Handler,
    Message,
    Role,
    graph,
    handler,
    interrupt,
    stores,
    tool,
)
from pipeline.agents import AgentRun
from pipeline.errors import InvalidAnswer
from pipeline.failures import EditRefused, StaleAnswer
from pipeline.fold import (
    Continue,
    Decision,
    Gate,
    Interrupt,
    Pending,
    Snapshot,
    Status,
    Stop,
    Transition,
)
from pipeline.graph import END
from pipeline.models import ModelRequest, ModelResponse
from pipeline.testing import Reply, ScriptedModel
from pipeline.tools import Tool


pytestmark = pytest.mark.slow

KINDS = (
    "plain",
    "ask",
    "agent",
    "fanout",
    "gate",
    "approve",
    "approve+ask",
    "apply",
)
SENT = 3
"""The amount the approval stages' models ask their tool to pay."""


@attrs.frozen
class Pick:
    """What a human answers to a question of a node, tool or branch."""

    value: int
    note: str = ""


@attrs.frozen
class Desk:
    """The generated graphs' state: what each step did, and a note that
    edits change."""

    trail: PVector[str] = attrs.field(factory=pvector)
    note: str = ""


@attrs.frozen
class Verdict:
    """What a person answered to the approval of a tool call in a thread."""

    runs: bool
    what: int | str
    """The amount approved, or the reason of a denial."""
    at: int
    """The version of the thread that waited at the question (-1: the
    thread is a fork of a version past the answer)."""
    inherited: bool = False
    """Answered in the thread this one was forked from: the call ran (or
    not) there, and the fork keeps its result."""


class SimulatedCrash(BaseException):
    """The runner dies here (a BaseException: nothing may catch it)."""


@attrs.define
class World:
    """What the steps did, outside the store (the side effects)."""

    thread: str = ""
    """The thread the machine is running (one run at a time)."""
    after: Counter[tuple[str, str]] = attrs.field(factory=Counter)
    """(thread, question): how often the code after it ran."""
    seen: list[tuple[str, str, int]] = attrs.field(factory=list)
    """(thread, question, value) each time code after a question ran."""
    nodes: int = 0
    """Every node (and tool) start, to tell that nothing ran."""
    paid: list[tuple[str, str, int]] = attrs.field(factory=list)
    """(thread, question, amount) each time a tool needing approval ran
    (its side effect)."""
    told: list[tuple[str, str, str]] = attrs.field(factory=list)
    """(thread, question, result) each time such a tool's model saw the
    call's result (or its denial)."""
    crash: str = ""
    """``raise`` or ``cancel``: the next plain node kills its runner."""
    scope: anyio.CancelScope | None = None


def _crashed(exc: BaseException) -> bool:
    """Whether *exc* is the simulated crash (maybe in a group)."""
    if isinstance(exc, BaseExceptionGroup):
        return all(_crashed(e) for e in exc.exceptions)
    return isinstance(exc, SimulatedCrash)


def _entry(question: str, value: int) -> str:
    return f"{question}={value}"


class Stages:
    """The steps of the generated graphs, each telling *world* what it
    did."""

    def __init__(self, world: World) -> None:
        self.world = world

    async def start(self, *, crashes: bool) -> None:
        """A step starts: counted, and maybe the runner dies here (not in a
        fan-out branch: a sibling may have run past its question)."""
        world = self.world
        world.nodes += 1
        if crashes and world.crash:
            how, world.crash = world.crash, ""
            if how == "raise":
                raise SimulatedCrash
            assert world.scope is not None
            world.scope.cancel()
            await anyio.lowlevel.checkpoint()  # cancelled here

    def after(self, question: str, value: int) -> None:
        """The code after *question* runs, having got *value*."""
        self.world.after[self.world.thread, question] += 1
        self.world.seen.append((self.world.thread, question, value))

    def plain(self, name: str) -> Handler[Desk, Desk, str]:
        @handler(name=name)
        async def run(d: Desk) -> Result[Desk, str]:
            await self.start(crashes=True)
            return Success(attrs.evolve(d, trail=d.trail.append(name)))

        return run

    def asking(
        self, name: str, *, branch: bool = False
    ) -> Handler[Desk, Desk, str]:
        question = f"{name}?"

        @handler(name=name)
        async def run(d: Desk) -> Result[Desk, str]:
            await self.start(crashes=not branch)
            got = await interrupt(
                question, Pick, payload={"trail": len(d.trail)}
            )
            self.after(question, got.value)
            entry = _entry(question, got.value)
            return Success(attrs.evolve(d, trail=d.trail.append(entry)))

        return run

    def asker(self, name: str) -> Tool[Any, Any, Any]:
        """A tool that asks a human for a number."""
        question = f"tool {name}?"

        @tool(name=f"ask_{name}")
        async def ask(amount: int) -> str:
            """Ask a human for a number."""
            await self.start(crashes=False)
            got = await interrupt(question, Pick, payload={"amount": amount})
            self.after(question, got.value)
            return _entry(question, got.value)

        return ask

    def agent(self, name: str) -> Agent:
        """An agent whose one tool asks; it answers what the tool said."""
        ask = self.asker(name)

        def reply(req: ModelRequest) -> ModelResponse:
            results = [m for m in req.messages if m.role is Role.TOOL]
            if not results:
                return Reply.tool_call(
                    f"ask_{name}", {"amount": 3}, call_id="c1"
                )
            return Reply.text(results[-1].content)

        return Agent(name, ScriptedModel(reply, cycle=True), tools=[ask])

    def approving(self, name: str, *, asks: bool = False) -> Agent:
        """An agent whose tool pays, once a person approves the call; it
        answers what the call (or its denial) said.  With *asks*, its reply
        also calls a tool that asks a question (after the approval, in the
        same turn), and it answers what that tool said."""
        question = f"approve pay_{name}?"

        @tool(name=f"pay_{name}", approval=True)
        async def pay(amount: int) -> str:
            """Pay *amount*."""
            await self.start(crashes=False)
            self.world.paid.append((self.world.thread, question, amount))
            return f"paid {amount}"

        tools: list[Tool[Any, Any, Any]] = [pay]
        calls: list[tuple[str, dict[str, Any], str]] = [
            (f"pay_{name}", {"amount": SENT}, "c1")
        ]
        if asks:
            tools.append(self.asker(name))
            calls.append((f"ask_{name}", {"amount": SENT}, "c2"))

        def reply(req: ModelRequest) -> ModelResponse:
            results = {
                m.tool_call_id: m.content
                for m in req.messages
                if m.role is Role.TOOL
            }
            if not results:
                return Reply.tool_calls(*calls)
            said = results["c1"]
            self.world.told.append((self.world.thread, question, said))
            return Reply.text(results["c2" if asks else "c1"])

        model = ScriptedModel(reply, cycle=True)
        return Agent(name, model, tools=tools)

    @staticmethod
    def gate(name: str) -> Gate[Desk]:
        """Asks before *name*: "yes" goes on, "no" stops (an answer that
        is no text is invalid, other text asks again)."""
        question = f"gate {name}?"

        async def gate(t: Transition[Desk]) -> Decision:
            verdict = t.answer_as(str)  # InvalidAnswer if it is not
            if verdict == "yes":
                return Continue()
            if verdict == "no":
                return Stop(f"{question} declined")
            return Interrupt(question)

        return gate

    @staticmethod
    def signing(name: str) -> Gate[Desk]:
        """Asks before *name* for a typed answer that reaches the state
        (``apply``): the same ``Interrupt`` answered or not."""
        question = f"sign {name}?"

        def sign(d: Desk, got: Pick) -> Desk:
            entry = _entry(question, got.value)
            return attrs.evolve(d, trail=d.trail.append(entry))

        async def gate(t: Transition[Desk]) -> Decision:
            return Interrupt(question, Pick, apply=sign)

        return gate


def _see(d: Desk) -> PVector[Message]:
    return pvector([Message.user(f"step {len(d.trail)}")])


def _keep(d: Desk, run: AgentRun) -> Desk:
    return attrs.evolve(d, trail=d.trail.append(run.messages[-1].content))


def _stage(
    b: graph.GraphBuilder[Desk, Any], stages: Stages, name: str, kind: str
) -> tuple[graph.GraphBuilder[Desk, Any], list[str]]:
    """*b* with the node(s) of stage *name* of *kind*; the questions it
    may ask."""
    if kind == "ask":
        return b.node(name, stages.asking(name)), [f"{name}?"]
    if kind == "agent":
        agent = stages.agent(name)
        return b.agent(name, agent, messages=_see, update=_keep), [
            f"tool {name}?"
        ]
    if kind.startswith("approve"):
        asks = kind == "approve+ask"
        agent = stages.approving(name, asks=asks)
        b = b.agent(name, agent, messages=_see, update=_keep)
        return b, [f"approve pay_{name}?"] + (
            [f"tool {name}?"] if asks else []
        )
    b = b.node(name, stages.plain(name))
    if kind == "fanout":
        for end in "ab":
            b = b.node(name + end, stages.asking(name + end, branch=True))
        return b, [f"{name}a?", f"{name}b?"]
    if kind == "gate":
        return b.gate(stages.gate(name), before=name), [f"gate {name}?"]
    if kind == "apply":
        return b.gate(stages.signing(name), before=name), [f"sign {name}?"]
    return b, []


def build(
    kinds: list[str], world: World
) -> tuple[Graph[Desk, Any], list[str]]:
    """A chain of stages of *kinds*; the questions it may ask."""
    stages = Stages(world)
    b: graph.GraphBuilder[Desk, Any] = graph.builder(Desk)
    questions: list[str] = []
    names = [f"s{i}" for i in range(len(kinds))]
    for name, kind in zip(names, kinds, strict=True):
        b, asks = _stage(b, stages, name, kind)
        questions += asks
    b = b.entry(names[0])
    for i, (name, kind) in enumerate(zip(names, kinds, strict=True)):
        target = names[i + 1] if i + 1 < len(names) else END
        if kind == "fanout":
            b = b.fan_out(name, [f"{name}a", f"{name}b"], join=target)
        else:
            b = b.edge(name, target)
    return b.build(), questions


class HumansMachine(RuleBasedStateMachine):
    """Threads of one generated graph, driven by people and crashes."""

    backend = "asyncio"

    def __init__(self) -> None:
        super().__init__()
        self._stack = ExitStack()
        self.portal: BlockingPortal = self._stack.enter_context(
            start_blocking_portal(self.backend)
        )
        where = self._stack.enter_context(tempfile.TemporaryDirectory())
        self.path = Path(where) / "threads.db"
        self.store = self.open()
        self.world = World()
        self.threads: list[str] = []
        self.given: dict[int, str] = {}
        """Each answer value given, and the question it was given to."""
        self.answered: dict[tuple[str, str], int] = {}
        """(thread, question): the last value given to it in that thread."""
        self.verdicts: dict[tuple[str, str], Verdict] = {}
        """(thread, approval question): the last answer given to it in that
        thread (or in the thread it was forked from, past the answer)."""
        self.ids: set[str] = set()
        """Every question id seen (stale ones, once answered)."""
        self.stopped: dict[str, Snapshot[Desk]] = {}
        self.records: dict[tuple[str, int], bytes] = {}
        self.next_value = 0
        self.forks = 0
        self.status: dict[str, Status] = {}
        """Each thread's status after the last rule (for preconditions)."""

    def open(self) -> stores.SQLiteStore:
        store = stores.SQLiteStore(self.path)
        self.portal.call(store.__aenter__)
        return store

    def close(self) -> None:
        self.portal.call(self.store.__aexit__, None, None, None)

    @initialize(kinds=st.lists(st.sampled_from(KINDS), min_size=2, max_size=5))
    def start(self, kinds: list[str]) -> None:
        self.graph, self.questions = build(kinds, self.world)
        self.threads.append("t")
        out = self.call(
            "t",
            lambda: self.graph.run(Desk(), store=self.store, thread_id="t"),
        )
        self.resumed("t", out)

    # -- helpers -----------------------------------------------------------

    def call(self, thread: str, fn: Any) -> Any:
        self.world.thread = thread
        return self.portal.call(fn)

    def head(self, thread: str) -> Snapshot[Desk]:
        return self.portal.call(
            lambda: self.graph.load(self.store, thread)
        ).unwrap()

    def fresh(self, question: str) -> int:
        self.next_value += 1
        self.given[self.next_value] = question
        return self.next_value

    def waiting(self) -> list[str]:
        """The threads waiting at a question (as of the last rule)."""
        return [t for t, s in self.status.items() if s is Status.INTERRUPTED]

    def live(self) -> list[str]:
        """The threads waiting or crashed (as of the last rule)."""
        live = {Status.INTERRUPTED, Status.RUNNING}
        return [t for t, s in self.status.items() if s in live]

    def pick(
        self, snap: Snapshot[Desk], data: st.DataObject
    ) -> tuple[str, Pending]:
        """One of the questions *snap* waits at (several, when fan-out
        branches ask at once): its id and what it asks."""
        waiting = sorted(snap.questions.items())
        assert waiting, snap
        return data.draw(st.sampled_from(waiting), label="question")

    def answer_for(
        self, snap: Snapshot[Desk], data: st.DataObject, pending: Pending
    ) -> object:
        """A valid answer to *pending*, a question *snap* waits at."""
        question = pending.question
        if question.startswith("gate "):
            return data.draw(
                st.sampled_from(["yes", "yes", "no"]), label="gate"
            )
        if question.startswith("approve "):
            return self.verdict(snap, question, data)
        value = self.fresh(question)
        self.answered[snap.thread_id, question] = value
        return Pick(value, note=data.draw(st.text(max_size=3), label="note"))

    def verdict(
        self, snap: Snapshot[Desk], question: str, data: st.DataObject
    ) -> Approve | Deny:
        """A person's answer to the approval *question*: approve the call
        as sent, approve it with an amount of its own, or deny it with a
        reason of its own."""
        how = data.draw(
            st.sampled_from(["approve", "edit", "deny"]), label="verdict"
        )
        event(f"approval: {how}")
        key = (snap.thread_id, question)
        if how == "deny":
            reason = f"no {self.fresh(question)}"
            self.verdicts[key] = Verdict(False, reason, snap.version)
            return Deny(reason)
        if how == "edit":
            amount = self.fresh(question)
            self.verdicts[key] = Verdict(True, amount, snap.version)
            return Approve(arguments={"amount": amount})
        self.verdicts[key] = Verdict(True, SENT, snap.version)
        return Approve()

    def told(self, thread: str, question: str) -> list[str]:
        """What *question*'s model saw of the call in *thread*."""
        return [
            r for t, q, r in self.world.told if (t, q) == (thread, question)
        ]

    def check_told(self, verdict: Verdict, said: str) -> None:
        """The model saw what *verdict* decided."""
        if verdict.runs:
            assert said == f"paid {verdict.what}", (verdict, said)
        else:
            assert said.endswith(f": {verdict.what}"), (verdict, said)
            assert "denied" in said, said

    def paid(self, thread: str, question: str) -> list[int]:
        """The amounts *question*'s tool paid in *thread*."""
        return [
            a for t, q, a in self.world.paid if (t, q) == (thread, question)
        ]

    def settled(
        self, thread: str, question: str, before: int, author: str
    ) -> None:
        """After *question* of *thread* (waiting at version *before*) was
        answered and its run returned: an approved call ran once, with the
        arguments approved; a denied one never ran and its model saw the
        reason; a gate's ``apply`` put the answer in the state in the
        answer's own record, by its author."""
        if question.startswith("approve "):
            verdict = self.verdicts[thread, question]
            paid, said = (
                self.paid(thread, question),
                self.told(thread, question),
            )
            if not verdict.runs:
                assert paid == []
            elif said:  # the turn is over: the call ran
                assert paid == [verdict.what]
            else:  # another call of the turn asks
                event(f"approval: turn paused, {len(paid)} call(s) ran")
            assert len(said) <= 1, said
            for one in said:
                self.check_told(verdict, one)
        elif question.startswith("sign "):
            value = self.answered[thread, question]
            entry = _entry(question, value)
            later = [
                h
                for h in self.portal.call(
                    lambda: self.graph.history(self.store, thread)
                ).unwrap()
                if h.version > before
            ]
            event("sign: applied")
            assert entry in later[0].state.trail
            assert later[0].author == author
            for h in later:
                assert list(h.state.trail).count(entry) == 1

    def resumed(self, thread: str, out: Result[Snapshot[Desk], Any]) -> None:
        """Bookkeeping after a run or resume that returned."""
        snap = out.unwrap()
        if snap.status is Status.STOPPED:
            self.stopped.setdefault(thread, snap)
        self.ids.update(snap.questions)

    # -- rules -------------------------------------------------------------

    @precondition(lambda self: bool(self.waiting()))
    @rule(data=st.data())
    def answer(self, data: st.DataObject) -> None:
        """Answer a question a waiting thread waits at (with its id, or
        without: that is refused, nothing committed, when several wait)."""
        thread = data.draw(st.sampled_from(self.waiting()), label="thread")
        snap = self.head(thread)
        qid, pending = self.pick(snap, data)
        with_id = data.draw(st.booleans(), label="with id")
        if not with_id and len(snap.questions) > 1:
            before = self.portal.call(self.store.records, thread)
            out = self.call(
                thread,
                lambda: self.graph.resume(self.store, thread, answer=Pick(0)),
            )
            assert isinstance(out.failure(), StaleAnswer), out
            assert self.portal.call(self.store.records, thread) == before
            event("answered: several wait, no id")
            return
        given = self.answer_for(snap, data, pending)
        out = self.call(
            thread,
            lambda: self.graph.resume(
                self.store,
                thread,
                answer=given,
                author="ana",
                question=qid if with_id else None,
            ),
        )
        self.resumed(thread, out)
        done = out.unwrap()
        assert done.version > snap.version
        event(f"answered: {done.status}")
        # Who and when: the answer is the first record after the question,
        # by its author; every record has its time.
        later = [
            h
            for h in self.portal.call(
                lambda: self.graph.history(self.store, thread)
            ).unwrap()
            if h.version > snap.version
        ]
        assert later[0].author == "ana"
        assert all(h.committed_at is not None for h in later)
        self.settled(thread, pending.question, snap.version, "ana")
        if given == "no":
            assert done.status is Status.STOPPED

    @precondition(lambda self: bool(self.waiting()))
    @rule(data=st.data())
    def answer_invalid(self, data: st.DataObject) -> None:
        """An answer that does not fit the type the node, tool or gate
        declared: ``InvalidAnswer``; nothing after the question runs, the
        thread waits at the same question."""
        thread = data.draw(st.sampled_from(self.waiting()), label="thread")
        snap = self.head(thread)
        qid, pending = self.pick(snap, data)
        question = pending.question
        after = Counter(self.world.after)
        paid = list(self.world.paid)
        records = self.portal.call(self.store.records, thread)
        bads: list[object] = [{"value": "many"}, {"note": "x"}, [1]]
        if question.startswith("approve "):
            # Edited arguments that do not fit the tool's schema (the
            # amount is an int); a denial with arguments.
            bads = [
                {"approved": "yes"},
                Approve(arguments={"amount": "many-zq"}),
                Approve(arguments={"amount": [7]}),
                {"approved": False, "reason": "x", "arguments": {"amount": 1}},
            ]
        bad = data.draw(st.sampled_from(bads), label="bad")
        with pytest.raises(InvalidAnswer):
            self.call(
                thread,
                lambda: self.graph.resume(
                    self.store, thread, answer=bad, question=qid
                ),
            )
        again = self.head(thread)
        assert again.status is Status.INTERRUPTED
        assert question in {p.question for p in again.questions.values()}
        assert self.world.after == after
        assert self.world.paid == paid
        event(f"invalid: {question.split()[0]} {type(bad).__name__}")
        if question.startswith(("approve ", "sign ")):
            # Nothing stored: the thread waits at the same question.
            assert self.portal.call(self.store.records, thread) == records
            assert again.questions == snap.questions
        self.ids.update(again.questions)

    @precondition(lambda self: bool(self.ids) and bool(self.threads))
    @rule(data=st.data())
    def answer_stale(self, data: st.DataObject) -> None:
        """An answer with the id of a question that is not the one pending
        (answered before, another thread's, another branch's, made up):
        ``StaleAnswer``, nothing committed, nothing run."""
        thread = data.draw(st.sampled_from(self.threads), label="thread")
        snap = self.head(thread)
        ids = sorted(self.ids - set(snap.questions))
        stale = data.draw(st.sampled_from([*ids, "1-abc"]), label="stale")
        before = self.portal.call(self.store.records, thread)
        nodes = self.world.nodes
        out = self.call(
            thread,
            lambda: self.graph.resume(
                self.store, thread, answer=Pick(0), question=stale
            ),
        )
        refused = out.failure()
        assert isinstance(refused, StaleAnswer), out
        assert self.portal.call(self.store.records, thread) == before
        assert self.world.nodes == nodes

    @precondition(lambda self: bool(self.live()))
    @rule(data=st.data())
    def resume_without_answer(self, data: st.DataObject) -> None:
        """Resume a live thread with no answer: a waiting one asks its
        question again and runs nothing after it; a crashed one goes on."""
        thread = data.draw(st.sampled_from(self.live()), label="thread")
        snap = self.head(thread)
        after = Counter(self.world.after)
        out = self.call(thread, lambda: self.graph.resume(self.store, thread))
        self.resumed(thread, out)
        again = out.unwrap()
        if snap.status is Status.INTERRUPTED:
            assert again.status is Status.INTERRUPTED
            assert sorted(p.question for p in again.questions.values()) == (
                sorted(p.question for p in snap.questions.values())
            )
            assert self.world.after == after

    @precondition(lambda self: bool(self.live()))
    @rule(data=st.data(), how=st.sampled_from(["raise", "cancel"]))
    def crash(self, data: st.DataObject, how: str) -> None:
        """The next plain node kills its runner (an exception nothing
        catches, or the run cancelled); the store is closed and the file
        opened again, as a new process would."""
        thread = data.draw(st.sampled_from(self.live()), label="thread")
        snap = self.head(thread)
        given: object = None
        qid: str | None = None
        if snap.status is Status.INTERRUPTED:
            qid, pending = self.pick(snap, data)
            given = self.answer_for(snap, data, pending)
            event(f"crash after answering: {pending.question.split()[0]}")
        self.world.crash = how

        async def run() -> Result[Snapshot[Desk], Any] | None:
            # (In the portal's loop: a BaseException out of it would end it.)
            try:
                with anyio.CancelScope() as scope:
                    self.world.scope = scope
                    return await self.graph.resume(
                        self.store, thread, answer=given, question=qid
                    )
            except BaseException as exc:  # the crash only
                if not _crashed(exc):
                    raise
            return None

        try:
            out = self.call(thread, run)
        finally:
            self.world.crash = ""
            self.world.scope = None
        if out is not None:
            event(f"crash: none ({how})")  # no plain node before a pause
            self.resumed(thread, out)
        else:
            event(f"crash: {how}")
        self.close()
        self.store = self.open()

    @precondition(lambda self: bool(self.threads))
    @rule(data=st.data())
    def fork_and_answer(self, data: st.DataObject) -> None:
        """Fork a thread at a version that waits at a question and answer
        it there (``pipeline fork --answer``): the fork's question has an id
        of its own; the source thread does not change."""
        thread = data.draw(st.sampled_from(self.threads), label="thread")
        history = self.portal.call(
            lambda: self.graph.history(self.store, thread)
        ).unwrap()
        asking = [s for s in history if s.question_id is not None]
        if not asking:
            return
        at = data.draw(st.sampled_from(asking), label="at")
        source = self.portal.call(self.store.records, thread)
        self.forks += 1
        new = f"f{self.forks}"
        forked = self.portal.call(
            lambda: self.graph.fork(
                self.store, thread, version=at.version, new_thread_id=new
            )
        ).unwrap()
        self.threads.append(new)
        assert forked.status is Status.INTERRUPTED
        assert forked.origin == (thread, at.version)
        assert forked.question_id not in (None, at.question_id)
        assert forked.pending is not None
        assert at.pending is not None
        assert forked.pending.question == at.pending.question
        self.ids.update(at.questions)
        for (source_thread, question), verdict in list(self.verdicts.items()):
            if source_thread == thread and verdict.at < at.version:
                # Past the answer: the fork keeps what the call did.
                inherited = attrs.evolve(verdict, at=-1, inherited=True)
                event("fork: past an approval")
                self.verdicts[new, question] = inherited
        qid, pending = self.pick(forked, data)
        given = self.answer_for(forked, data, pending)
        out = self.call(
            new,
            lambda: self.graph.resume(
                self.store, new, answer=given, author="bo", question=qid
            ),
        )
        self.resumed(new, out)
        self.settled(new, pending.question, forked.version, "bo")
        assert self.portal.call(self.store.records, thread) == source

    @precondition(lambda self: bool(self.threads))
    @rule(data=st.data())
    def edit(self, data: st.DataObject) -> None:
        """Edit a thread's note: a paused-at-a-gate or stopped thread takes
        it as a version of its own (still paused, still stopped); one
        paused inside a node, running or done refuses, committing
        nothing."""
        thread = data.draw(st.sampled_from(self.threads), label="thread")
        snap = self.head(thread)
        note = data.draw(st.text(max_size=5), label="note")
        before = self.portal.call(self.store.records, thread)
        out = self.portal.call(
            lambda: self.graph.update_state(
                self.store,
                thread,
                patch={"note": note},
                author="cy",
                reason="a fix",
            )
        )
        if isinstance(out, Failure):
            event(f"edit refused ({snap.status})")
            assert isinstance(out.failure(), EditRefused), out
            assert self.portal.call(self.store.records, thread) == before
            return
        edited = out.unwrap()
        event(f"edited ({snap.status})")
        assert snap.status in {Status.INTERRUPTED, Status.STOPPED}
        assert edited.status is snap.status
        assert edited.state == attrs.evolve(snap.state, note=note)
        assert (edited.version, edited.parent) == (
            snap.version + 1,
            snap.version,
        )
        assert edited.edit is not None
        assert (edited.edit.author, edited.edit.reason) == ("cy", "a fix")
        if snap.question_id is not None:
            assert edited.question_id not in (None, snap.question_id)
            self.ids.add(snap.question_id)
        if thread in self.stopped:
            self.stopped[thread] = edited

    @precondition(lambda self: bool(self.stopped))
    @rule(data=st.data())
    def poke_a_stop(self, data: st.DataObject) -> None:
        """A stopped thread: resuming returns the stored stop and runs no
        node; an answer is refused (``StaleAnswer`` saying stopped)."""
        thread = data.draw(
            st.sampled_from(sorted(self.stopped)), label="thread"
        )
        stop = self.stopped[thread]
        nodes = self.world.nodes
        again = self.call(
            thread, lambda: self.graph.resume(self.store, thread)
        ).unwrap()
        assert again == stop
        out = self.call(
            thread,
            lambda: self.graph.resume(self.store, thread, answer="yes"),
        )
        refused = out.failure()
        assert isinstance(refused, StaleAnswer), out
        assert refused.status == "stopped"
        assert self.world.nodes == nodes

    # -- invariants --------------------------------------------------------

    @invariant()
    def answers_reach_their_own_question(self) -> None:
        for thread, question, value in self.world.seen:
            assert self.given[value] == question, (thread, question, value)
            own = self.answered.get((thread, question))
            if own is not None:
                assert value == own, (thread, question, value, own)

    @invariant()
    def approved_calls_run_once(self) -> None:
        """Every run of a tool needing approval was approved in its thread,
        with those arguments, and ran once; what its model saw is what
        the answer decided (the call's result, or the denial's reason)."""
        runs = Counter((t, q) for t, q, _ in self.world.paid)
        assert all(n == 1 for n in runs.values()), runs
        for thread, question, amount in self.world.paid:
            verdict = self.verdicts.get((thread, question))
            assert verdict is not None, (thread, question, amount)
            assert not verdict.inherited, (thread, question, verdict)
            assert (verdict.runs, verdict.what) == (True, amount), verdict
        for thread, question, said in self.world.told:
            self.check_told(self.verdicts[thread, question], said)

    @invariant()
    def code_after_a_question_runs_once(self) -> None:
        assert all(n == 1 for n in self.world.after.values()), self.world.after

    @invariant()
    def history_is_consistent(self) -> None:
        for thread in self.threads:
            records = self.portal.call(self.store.records, thread)
            versions = [r.version for r in records]
            assert versions == sorted(set(versions))
            for record in records:
                key = (thread, record.version)
                assert self.records.setdefault(key, record.data) == record.data
                assert (record.parent is None) == (record.version == 0)
                assert record.parent is None or record.parent < record.version
                assert record.parent is None or record.parent in versions

    @invariant()
    def heads_hold(self) -> None:
        """Every thread's head loads (its status noted for the rules'
        preconditions); a stopped thread's head is its stop; a finished
        thread's state holds one answer per question, each the value
        given to that question."""
        heads = {t: self.head(t) for t in self.threads}
        self.status = {t: h.status for t, h in heads.items()}
        for thread, stop in self.stopped.items():
            assert heads[thread] == stop
        asked = sorted(
            q
            for q in self.questions
            if not q.startswith(("gate ", "approve "))
        )
        approvals = [q for q in self.questions if q.startswith("approve ")]
        for snap in heads.values():
            # An answer a gate applied is in the state once, the value
            # given to that question.
            for entry in snap.state.trail:
                question, _, value = entry.partition("=")
                if question.startswith("sign "):
                    assert self.given[int(value)] == question, entry
                    assert list(snap.state.trail).count(entry) == 1
            if snap.status is not Status.DONE:
                continue
            for question in approvals:
                verdict = self.verdicts.get((snap.thread_id, question))
                paid = self.paid(snap.thread_id, question)
                said = self.told(snap.thread_id, question)
                if verdict is None or verdict.inherited:
                    # Forked past it: the call ran (or not) in the source.
                    assert paid == [], (snap.thread_id, question, verdict)
                    assert len(said) <= 1, said
                else:
                    assert paid == ([verdict.what] if verdict.runs else [])
                    assert len(said) == 1, said
            answers = [e for e in snap.state.trail if "?=" in e]
            assert sorted(e.partition("=")[0] for e in answers) == asked
            for entry in answers:
                question, _, value = entry.partition("=")
                assert self.given[int(value)] == question

    def teardown(self) -> None:
        try:
            self.close()
        finally:
            self._stack.close()


class TrioHumansMachine(HumansMachine):
    """The same machine on trio."""

    backend = "trio"


# The examples come from the suite's profile (tests/conftest.py).
TestHumansMachine = HumansMachine.TestCase
TestHumansMachine.settings = settings(stateful_step_count=12)
TestTrioHumansMachine = TrioHumansMachine.TestCase
TestTrioHumansMachine.settings = settings(stateful_step_count=12)
