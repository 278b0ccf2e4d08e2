"""A state machine over generated swarms: run, crash, resume, fork.

Each example draws a swarm of 2-5 scripted agents with a random allow-list
and a random ``max_handoffs`` (0-5), and one script of replies: allowed
transfers, transfers outside the list, to the agent itself, to an unknown
or malformed name, several transfers in one reply, a transfer next to a
tool call, tool calls and state writes; the final answer comes where the
script ends.  A plain Python simulation of the swarm (:func:`predict`)
says who holds the conversation at every turn, which transfers are
accepted, and how the run ends.  Rules run the swarm from scratch, crash it (an exception the fold
does not catch, from the model, from a tool, or from the store as it
commits), resume crashed threads, resume a thread from an older version
(a new branch in the same thread), fork any version of any thread and
resume the fork, and resume finished threads.

Invariants: the model is always asked by the agent the simulation names,
with the tools it says; no handoff ever exceeds the limit or leaves the
allow-list (every ``Handoff`` event, every step between two committed
snapshots); every committed snapshot lies on the predicted conversation;
every run that finishes ends exactly where the uninterrupted run ends; a
committed record or snapshot never changes.
"""

from __future__ import annotations

import json

from collections.abc import Awaitable, Callable, Sequence
from contextlib import ExitStack
from typing import Any, TypeAlias

import attrs
import pytest

from anyio.from_thread import BlockingPortal, start_blocking_portal
from hypothesis import HealthCheck, assume, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)
from returns.result import Result, Success

from pipeline import (
    Agent,
    Context,
    Message,
    Role,
    Swarm,
    ToolCall,
    handler,
    stream,
    tool,
)
from pipeline.events import Handoff
from pipeline.fold import Snapshot, Status
from pipeline.models import ModelRequest, ModelResponse
from pipeline.stores import Lease, MemoryStore, Record
from pipeline.swarm import SwarmLimits, SwarmState, builder
from pipeline.testing import Reply, ScriptedModel
from tests.stores import CommitResult, DelegatingStore


PREFIX = "transfer_to_"
CTX = Context.of(Message.user("go"), run_id="machine")
MALFORMED = (
    PREFIX,
    PREFIX + "bad name!",
    PREFIX + "x" * 60,
    PREFIX + "a0/../a1",
    PREFIX + "a1 ",
    PREFIX + "a1\n",
    PREFIX + "A0",
)
KINDS = (
    "allowed",
    "allowed",
    "outside",
    "self",
    "unknown",
    "malformed",
    "several",
    "mixed",
    "note",
    "write",
)
"""Reply kinds a script draws from (allowed twice: handoffs must happen).
The final answer comes when the script runs out."""


@attrs.frozen
class Board:
    """The swarm's typed state: the last value written."""

    last: str = ""


class Crash(BaseException):
    """A crash the fold does not catch: the process dies here."""


Attempt: TypeAlias = tuple[str, int]
"""One scripted reply: its kind and a number picking among choices."""

Shape: TypeAlias = tuple[Any, ...]
"""A message as the tests compare it (error results are just "error")."""


@attrs.frozen
class Spec:
    """A generated swarm and the script its models follow."""

    names: tuple[str, ...]
    allowed: tuple[tuple[str, ...], ...]  # by agent, in names order
    limit: int
    script: tuple[Attempt, ...]

    def may(self, name: str) -> tuple[str, ...]:
        """The agents *name* may hand off to, in declared order."""
        return self.allowed[self.names.index(name)]


@st.composite
def specs(draw: st.DrawFn) -> Spec:
    """A swarm where every agent is reachable from a0, with a script."""
    n = draw(st.integers(2, 5), label="agents")
    names = tuple(f"a{i}" for i in range(n))
    edges: list[list[str]] = [[] for _ in names]
    for i in range(1, n):  # a spanning tree from a0: every agent reachable
        edges[draw(st.integers(0, i - 1))].append(names[i])
    extra = draw(
        st.lists(
            st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)),
            max_size=2 * n,
        )
    )
    for i, j in extra:
        if i != j and names[j] not in edges[i]:
            edges[i].append(names[j])
    script = draw(
        st.lists(
            st.tuples(st.sampled_from(KINDS), st.integers(0, 99)),
            min_size=6,
            max_size=24,
        ),
        label="script",
    )
    return Spec(
        names,
        tuple(tuple(e) for e in edges),
        draw(st.integers(0, 5), label="max_handoffs"),
        tuple(script),
    )


def calls_for(
    spec: Spec, me: str, attempt: Attempt, turn: int
) -> tuple[ToolCall, ...] | None:
    """The tool calls agent *me* makes at global *turn* (None: it answers).

    This is the models' behaviour, shared by the scripted models and the
    simulation; whether a transfer is accepted is decided separately.
    """
    kind, pick = attempt
    allowed = spec.may(me)
    outside = [n for n in spec.names if n != me and n not in allowed]

    def allowed_or_self(k: int) -> str:
        return allowed[k % len(allowed)] if allowed else me

    names: list[tuple[str, dict[str, Any]]]
    if kind == "answer":
        return None
    if kind == "allowed":
        names = [(PREFIX + allowed_or_self(pick), {})]
    elif kind == "outside":
        target = outside[pick % len(outside)] if outside else "nobody"
        names = [(PREFIX + target, {})]
    elif kind == "self":
        names = [(PREFIX + me, {})]
    elif kind == "unknown":
        names = [(PREFIX + f"ghost{pick % 3}", {})]
    elif kind == "malformed":
        names = [(MALFORMED[pick % len(MALFORMED)], {})]
    elif kind == "several":
        second = spec.names[pick % len(spec.names)]
        names = [
            (PREFIX + allowed_or_self(pick), {}),
            (PREFIX + second, {}),
        ]
    elif kind == "mixed":
        names = [
            ("note", {"turn": turn}),
            (PREFIX + allowed_or_self(pick), {}),
        ]
    elif kind == "note":
        names = [("note", {"turn": turn})]
    else:
        assert kind == "write"
        names = [("write_state", {"last": f"{me}@{turn}"})]
    return tuple(
        ToolCall(f"t{turn}c{k}", name, json.dumps(args))
        for k, (name, args) in enumerate(names)
    )


def answer(me: str, turn: int) -> str:
    """The final answer's text."""
    return f"answer {turn} by {me}"


@attrs.frozen
class Turn:
    """One model call, as the simulation predicts it."""

    agent: str
    tools: tuple[str, ...]
    refused: int


@attrs.frozen
class Prediction:
    """How the run goes: every turn, the conversation, the handoffs."""

    turns: tuple[Turn, ...]
    messages: tuple[Shape, ...]
    handoffs: tuple[tuple[str, str], ...]
    active: str
    state: Board


def predict(spec: Spec) -> Prediction:
    """Simulate the swarm: who holds the conversation, which transfers are
    accepted (exactly one, allowed, under the limit), what everyone sees."""
    active = spec.names[0]
    handoffs: list[tuple[str, str]] = []
    messages: list[Shape] = [("U", "go")]
    turns: list[Turn] = []
    state = Board()
    g = 0
    while True:
        reached = len(handoffs) >= spec.limit
        transfers = () if reached else spec.may(active)
        tools = (
            *(PREFIX + t for t in transfers),
            "read_state",
            "write_state",
            "note",
        )
        attempt = spec.script[g] if g < len(spec.script) else ("answer", 0)
        calls = calls_for(spec, active, attempt, g)
        if calls is None:
            turns.append(Turn(active, tools, 0))
            messages.append(("A", active, answer(active, g), ()))
            break
        messages.append(
            (
                "A",
                active,
                "",
                tuple((c.id, c.name, c.arguments) for c in calls),
            )
        )
        asked = [c for c in calls if c.name.startswith(PREFIX)]
        accepted: str | None = None
        if len(asked) == 1:
            target = asked[0].name[len(PREFIX) :]
            if not reached and target in spec.may(active):
                accepted = target
        refused = len(asked) - (accepted is not None)
        turns.append(Turn(active, tools, refused))
        for c in calls:
            if c.name.startswith(PREFIX):
                content = (
                    f"Transferring to {accepted}..."
                    if accepted is not None
                    else "error"
                )
            elif c.name == "note":
                content = f"noted {json.loads(c.arguments)['turn']}"
            else:
                state = Board(json.loads(c.arguments)["last"])
                content = "state updated: last"
            messages.append(("T", c.id, c.name, content))
        g += 1
        if accepted is not None:
            handoffs.append((active, accepted))
            active = accepted
    return Prediction(
        tuple(turns), tuple(messages), tuple(handoffs), active, state
    )


def shape(m: Message) -> Shape:
    """*m* as :func:`predict` writes it."""
    if m.role is Role.USER:
        return ("U", m.content)
    if m.role is Role.ASSISTANT:
        calls = tuple((c.id, c.name, c.arguments) for c in m.tool_calls)
        return ("A", m.name, m.content, calls)
    assert m.role is Role.TOOL
    content = "error" if m.content.startswith("error:") else m.content
    return ("T", m.tool_call_id, m.name, content)


@attrs.define
class Faults:
    """Where the next run crashes (each fault fires once)."""

    model_at: int | None = None
    tool_at: int | None = None
    commit_at: int | None = None

    def clear(self) -> None:
        self.model_at = self.tool_at = self.commit_at = None


@attrs.define
class Tally:
    """What one test run exercised."""

    adversarial: int = 0
    turns: int = 0
    crashes: int = 0
    finished: int = 0
    forks: int = 0


class CrashingStore(DelegatingStore):
    """A MemoryStore whose commit of version ``faults.commit_at`` dies."""

    def __init__(self, inner: MemoryStore, faults: Faults) -> None:
        super().__init__(inner)
        self.faults = faults

    async def commit(
        self,
        record: Record,
        *,
        expected_head: int | None,
        lease: Lease | None = None,
    ) -> CommitResult:
        if record.version == self.faults.commit_at:
            self.faults.commit_at = None
            raise Crash
        return await self.inner.commit(
            record, expected_head=expected_head, lease=lease
        )


Run: TypeAlias = Callable[
    [], Awaitable[Result[Snapshot[SwarmState[Board]], Any]]
]


@attrs.frozen
class Outcome:
    """What one operation did: its result (None: it crashed), its events,
    and the head of its thread afterwards."""

    result: Result[Snapshot[SwarmState[Board]], Any] | None
    handoffs: tuple[Handoff, ...]
    head: int | None


async def observed(
    run: Run, store: MemoryStore, thread: str | None
) -> Outcome:
    """Run *run* under a stream; catch only our Crash."""
    box: list[Result[Snapshot[SwarmState[Board]], Any]] = []

    @handler
    async def go(_: None) -> Result[None, Any]:
        try:
            box.append(await run())
        except* Crash:
            pass
        return Success(None)

    async with stream(go, None) as events:
        seen = [e async for e in events]
    return Outcome(
        box[0] if box else None,
        tuple(e for e in seen if isinstance(e, Handoff)),
        None if thread is None else await store.head(thread),
    )


async def all_records(store: MemoryStore) -> dict[str, Sequence[Record]]:
    """Every thread's records (one portal round trip)."""
    return {t: await store.records(t) for t in await store.threads()}


History: TypeAlias = tuple[Snapshot[SwarmState[Board]], ...]


async def histories(
    team: Swarm[Board],
    store: MemoryStore,
    threads: Sequence[str],
    versions: Sequence[tuple[str, int]],
) -> tuple[dict[str, tuple[History, int]], History]:
    """history() of each of *threads* that has records, with its record
    count, and the snapshots at *versions* (one portal round trip)."""
    out: dict[str, tuple[History, int]] = {}
    for thread in threads:
        count = len(await store.records(thread))
        if count:
            out[thread] = ((await team.history(store, thread)).unwrap(), count)
    loaded = [
        (await team.load(store, thread, version=v)).unwrap()
        for thread, v in versions
    ]
    return out, tuple(loaded)


def make_swarm(spec: Spec, faults: Faults, tally: Tally) -> Swarm[Board]:
    """The swarm *spec* describes, its models following the script and
    checking, at every call, what the simulation predicts."""
    prediction = predict(spec)

    @tool
    async def note(turn: int) -> str:
        """Take a note."""
        if faults.tool_at == turn:
            faults.tool_at = None
            raise Crash
        return f"noted {turn}"

    def model_for(me: str) -> Callable[[ModelRequest], ModelResponse]:
        def step(request: ModelRequest) -> ModelResponse:
            g = sum(1 for m in request.messages if m.role is Role.ASSISTANT)
            assert g < len(prediction.turns), "a turn the simulation never had"
            turn = prediction.turns[g]
            assert turn.agent == me, (g, turn.agent, me)
            assert tuple(t.name for t in request.tools) == turn.tools, g
            if faults.model_at == g:
                faults.model_at = None
                raise Crash
            tally.turns += 1
            tally.adversarial += turn.refused
            attempt = spec.script[g] if g < len(spec.script) else ("answer", 0)
            calls = calls_for(spec, me, attempt, g)
            if calls is None:
                return Reply.text(answer(me, g))
            return ModelResponse(
                Message.assistant("", tool_calls=calls), "tool_calls"
            )

        return step

    b = builder(state=Board())
    for name, allowed in zip(spec.names, spec.allowed, strict=True):
        model = ScriptedModel(model_for(name), cycle=True)
        agent = Agent(name, model, tools=[note], max_turns=64)
        b = b.agent(name, agent, handoffs=allowed, writable=["last"])
    return b.entry(spec.names[0]).limits(SwarmLimits(spec.limit)).build()


@st.composite
def faults(draw: st.DrawFn) -> tuple[str, int] | None:
    """Where to crash next: nowhere, or a model call, a tool call or a
    commit at a drawn turn or version."""
    where = draw(st.sampled_from(["none", "model", "tool", "commit"]))
    if where == "none":
        return None
    return where, draw(st.integers(0, 40))


class SwarmMachine(RuleBasedStateMachine):
    """Drives threads of one generated swarm through runs, crashes,
    resumes and forks, and checks each against the simulation."""

    def __init__(self, portal: BlockingPortal, tally: Tally) -> None:
        super().__init__()
        self.portal = portal
        self.tally = tally
        self.store = MemoryStore()
        self.faults = Faults()
        self.crashing = CrashingStore(self.store, self.faults)
        self.open: list[str] = []  # crashed threads, not finished
        self.done: list[str] = []
        self.threads = 0
        self.touched: list[str] = []  # threads to read whole again
        self.reread: list[tuple[str, int]] = []  # versions to load again
        self.records: dict[tuple[str, int], bytes] = {}
        self.snapshots: dict[tuple[str, int], Snapshot[SwarmState[Board]]] = {}
        self.events: list[Handoff] = []

    @initialize(spec=specs())
    def build(self, spec: Spec) -> None:
        """Build the swarm and run it once, uninterrupted and unstored."""
        self.spec = spec
        self.prediction = predict(spec)
        self.team = make_swarm(spec, self.faults, self.tally)
        out = self.call(lambda: self.team.run(CTX))
        assert out.result is not None
        self.baseline = out.result.unwrap().state
        self.check_end(out)

    # -- helpers ------------------------------------------------------------

    def call(self, run: Run, thread: str | None = None) -> Outcome:
        """Run one operation on the portal; collect its Handoff events."""
        try:
            out = self.portal.call(observed, run, self.store, thread)
        finally:
            self.faults.clear()
        self.events.extend(out.handoffs)
        if out.result is None:
            self.tally.crashes += 1
        return out

    def arm(self, fault: tuple[str, int] | None, thread: str) -> None:
        """Arm *fault*: a turn for the model or a tool, a version (counted
        from the thread's head) for the store."""
        if fault is None:
            return
        where, at = fault
        if where == "model":
            self.faults.model_at = at % len(self.prediction.turns)
        elif where == "tool":
            self.faults.tool_at = at % len(self.prediction.turns)
        else:
            head = max((v for t, v in self.records if t == thread), default=-1)
            self.faults.commit_at = head + 1 + at

    def new_thread(self) -> str:
        self.threads += 1
        return f"t{self.threads}"

    def settle(self, thread: str, out: Outcome) -> None:
        """File *thread* as open (crashed) or done; check a finished run."""
        self.touched.append(thread)
        if thread in self.open:
            self.open.remove(thread)
        if out.result is None:
            if out.head is not None:
                self.open.append(thread)
            return
        self.check_end(out)
        if thread not in self.done:
            self.done.append(thread)

    def check_end(self, out: Outcome) -> None:
        """A finished run ends exactly as predicted and as the baseline."""
        assert out.result is not None
        snap = out.result.unwrap()
        p = self.prediction
        assert snap.status is Status.DONE
        assert tuple(shape(m) for m in snap.state.messages) == p.messages
        assert snap.state.state == p.state
        assert (snap.state.active, snap.state.handoffs) == (
            p.active,
            len(p.handoffs),
        )
        assert snap.state == self.baseline
        self.tally.finished += 1

    # -- rules --------------------------------------------------------------

    @rule(fault=faults())
    def run_fresh(self, fault: tuple[str, int] | None) -> None:
        """Run the swarm on a new thread, perhaps crashing on the way."""
        thread = self.new_thread()
        self.arm(fault, thread)
        out = self.call(
            lambda: self.team.run(CTX, store=self.crashing, thread_id=thread),
            thread,
        )
        self.settle(thread, out)

    @precondition(lambda self: bool(self.open))
    @rule(data=st.data(), fault=faults())
    def resume_crashed(
        self, data: st.DataObject, fault: tuple[str, int] | None
    ) -> None:
        """Resume a crashed thread from the store (perhaps crashing again)."""
        thread = data.draw(st.sampled_from(self.open), label="thread")
        self.arm(fault, thread)
        out = self.call(
            lambda: self.team.resume(self.crashing, thread), thread
        )
        self.settle(thread, out)

    @precondition(lambda self: bool(self.open or self.done))
    @rule(data=st.data(), fault=faults())
    def fork_and_resume(
        self, data: st.DataObject, fault: tuple[str, int] | None
    ) -> None:
        """Fork any version of any thread; resume the fork."""
        source = data.draw(
            st.sampled_from(self.open + self.done), label="source"
        )
        versions = [
            v for t, v in self.records if t == source
        ]  # every record of a thread was seen by records_never_change
        version = data.draw(st.sampled_from(versions), label="version")
        thread = self.new_thread()
        forked = self.portal.call(
            lambda: self.team.fork(
                self.store, source, version=version, new_thread_id=thread
            )
        ).unwrap()
        original = self.snapshots.get((source, version))
        if original is not None:
            assert forked.state == original.state
            assert forked.progress == original.progress
        self.tally.forks += 1
        self.reread.append((source, version))
        self.arm(fault, thread)
        out = self.call(
            lambda: self.team.resume(self.crashing, thread), thread
        )
        self.settle(thread, out)

    @precondition(lambda self: bool(self.open or self.done))
    @rule(data=st.data(), fault=faults())
    def travel_and_resume(
        self, data: st.DataObject, fault: tuple[str, int] | None
    ) -> None:
        """Resume a thread from an older version: a new branch grows in the
        same thread (perhaps crashing; a crashed branch is resumed later)."""
        thread = data.draw(
            st.sampled_from(self.open + self.done), label="thread"
        )
        versions = [v for t, v in self.records if t == thread]
        version = data.draw(st.sampled_from(versions), label="version")
        if thread in self.done:
            self.done.remove(thread)
        self.arm(fault, thread)
        out = self.call(
            lambda: self.team.resume(self.crashing, thread, version=version),
            thread,
        )
        self.settle(thread, out)

    @precondition(lambda self: bool(self.done))
    @rule(data=st.data())
    def resume_finished(self, data: st.DataObject) -> None:
        """Resuming a finished thread returns it and writes nothing.

        (A thread whose last run resumed an old, finished version may have
        a newer, unfinished branch from an earlier crash: resuming the
        thread continues its head, so such a thread is not finished.)
        """
        thread = data.draw(st.sampled_from(self.done), label="thread")
        head = max(v for t, v in self.records if t == thread)
        at_head = self.snapshots.get((thread, head))
        assume(at_head is not None and at_head.status is Status.DONE)
        out = self.call(lambda: self.team.resume(self.store, thread), thread)
        assert out.result is not None
        assert out.result.unwrap() == self.snapshots[thread, head]
        assert out.handoffs == ()
        assert out.head == head  # nothing written
        self.reread.append((thread, head))

    # -- invariants ---------------------------------------------------------

    @invariant()
    def handoffs_stay_on_the_allow_list_and_under_the_limit(self) -> None:
        """Every Handoff event is the predicted handoff of its number."""
        predicted = self.prediction.handoffs if hasattr(self, "spec") else ()
        for e in self.events:
            assert 1 <= e.count <= self.spec.limit
            assert e.target in self.spec.may(e.source)
            assert (e.source, e.target) == predicted[e.count - 1]
        self.events.clear()

    @invariant()
    def records_never_change(self) -> None:
        """A committed record keeps its bytes forever."""
        for thread, records in self.portal.call(
            all_records, self.store
        ).items():
            for r in records:
                key = (thread, r.version)
                assert self.records.setdefault(key, r.data) == r.data

    @invariant()
    def snapshots_lie_on_the_predicted_run(self) -> None:
        """Every snapshot of a thread just written decodes, equals what it
        was when first read, keeps to the allow-list and the limit step by
        step, and holds a prefix of the predicted conversation; versions
        just forked or resumed load as they were first read."""
        predicted = getattr(self, "prediction", None)
        read, loaded = self.portal.call(
            histories,
            self.team,
            self.store,
            tuple(dict.fromkeys(self.touched)),
            tuple(self.reread),
        )
        for snap in loaded:
            assert self.snapshots[snap.thread_id, snap.version] == snap
        self.reread.clear()
        for thread, (history, count) in read.items():
            assert len(history) == count  # every record decodes
            by_version = {s.version: s for s in history}
            for snap in history:
                key = (thread, snap.version)
                assert self.snapshots.setdefault(key, snap) == snap
                st_ = snap.state
                assert 0 <= st_.handoffs <= self.spec.limit
                assert predicted is not None
                shapes = tuple(shape(m) for m in st_.messages)
                assert shapes == predicted.messages[: len(shapes)]
                if snap.parent is None:
                    continue
                before = by_version[snap.parent].state
                if before.active == st_.active:
                    assert st_.handoffs == before.handoffs
                else:
                    assert st_.active in self.spec.may(before.active)
                    assert st_.handoffs == before.handoffs + 1
                    assert (before.active, st_.active) == (
                        predicted.handoffs[st_.handoffs - 1]
                    )
        self.touched.clear()


SETTINGS = settings(
    max_examples=100,
    stateful_step_count=15,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)

MIN_ADVERSARIAL = 3_000


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_swarm_machine(backend: str) -> None:
    """Generated swarms under random runs, crashes, resumes and forks keep
    to the simulation, and at least 3,000 adversarial transfers are
    refused along the way."""
    tally = Tally()
    with ExitStack() as stack:
        portal = stack.enter_context(start_blocking_portal(backend))

        class Bound(SwarmMachine):
            """The machine on this test's portal, counting into its tally."""

            def __init__(self) -> None:
                super().__init__(portal, tally)

        run_state_machine_as_test(Bound, settings=SETTINGS)
    assert tally.crashes > 0
    assert tally.forks > 0
    assert tally.finished > 0
    assert tally.adversarial >= MIN_ADVERSARIAL, tally


def test_simulation_refuses_what_the_contract_refuses() -> None:
    """The simulation itself: one allowed transfer under the limit is the
    only thing that hands off."""
    spec = Spec(
        ("a0", "a1", "a2"),
        (("a1",), ("a2",), ()),
        1,
        (
            ("outside", 0),  # a0 -> a2: not allowed
            ("self", 0),
            ("several", 0),
            ("malformed", 1),
            ("allowed", 0),  # a0 -> a1: accepted
            ("allowed", 0),  # a1 -> a2: the limit is reached
        ),
    )
    p = predict(spec)
    assert p.handoffs == (("a0", "a1"),)
    assert [t.agent for t in p.turns] == ["a0"] * 5 + ["a1", "a1"]
    assert [t.refused for t in p.turns] == [1, 1, 2, 1, 0, 1, 0]
    assert p.turns[-1].tools == ("read_state", "write_state", "note")
    assert p.messages[-1] == ("A", "a1", answer("a1", 6), ())
