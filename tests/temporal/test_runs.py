"""Graphs and swarms on a real Temporal dev server, through the helpers."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import anyio
import attrs
import pytest

from pyrsistent import pvector
from returns.result import Failure, Result, Success
from temporalio.client import Client

from pipeline import Approve, Deny, handler
from pipeline.failures import (
    InvalidState,
    RemoteFailure,
    RunStopped,
    StepLimitExceeded,
)
from pipeline.fold import Status
from pipeline.graph import END, GraphLimits, builder
from pipeline.stores import MemoryStore
from pipeline.temporal import (
    ActivityRetry,
    NodeOptions,
    RunOptions,
    Runs,
    worker,
)
from tests.temporal.graphs import (
    APPROVAL,
    ASKS,
    EFFECTS_ENV,
    GUARDED,
    HUGE,
    NESTED,
    OPTIONAL,
    RELAY,
    TYPED,
    Approval,
    Refused,
    Tally,
    ask,
    bump,
    chain,
    refuse,
)


pytestmark = [pytest.mark.temporal, pytest.mark.slow]


async def test_chain_gives_the_in_process_snapshot(
    client: Client, queue: str
) -> None:
    """A chain run on Temporal ends on the state, step and node it ends on
    in process."""
    g = chain(["a", "b", "c"], name="chain-abc")
    async with worker(client, [g], task_queue=queue):
        run = await Runs(client, task_queue=queue).start(g, Tally())
        remote = (await run.result()).unwrap()
    local = (await g.run(Tally())).unwrap()
    assert remote.state == local.state == Tally(3, pvector(["a", "b", "c"]))
    assert (remote.step, remote.node, remote.status) == (
        local.step,
        local.node,
        Status.DONE,
    )
    assert remote.thread_id == run.id


async def test_interrupt_waits_for_the_typed_answer_across_workers(
    client: Client, queue: str
) -> None:
    """A gate's interrupt waits; the answer, sent through the client, is
    kept by Temporal: a worker started after it finishes the run."""
    runs = Runs(client, task_queue=queue)
    async with worker(client, [APPROVAL], task_queue=queue):
        run = await runs.start(APPROVAL, Tally())
        paused = (await run.paused()).unwrap()
        assert paused.status is Status.INTERRUPTED
        assert paused.pending is not None
        assert paused.pending.question == "publish?"
        assert paused.state.trail == pvector(["draft"])
        assert (await run.snapshot()).unwrap().status is Status.INTERRUPTED
        answered = await run.answer(Approval(approved=True, by="ada"))
        assert answered == Success(None)
        # A second answer finds nobody waiting.
        again = await run.answer(Approval(approved=True, by="bob"))
        assert isinstance(again.failure(), RemoteFailure)
    # The first worker is gone; the answer is in the run's history.
    async with worker(client, [APPROVAL], task_queue=queue):
        final = (await run.result()).unwrap()
    assert final.state.trail == pvector(["draft", "publish"])
    assert final.status is Status.DONE


async def test_a_pause_inside_a_node_waits_like_an_interrupt(
    client: Client, queue: str
) -> None:
    """A subgraph's gate asks inside its node: the run waits at that node
    with the question, the answer (kept across a worker restart) resumes
    the subgraph where it paused, and the run ends as in process."""
    runs = Runs(client, task_queue=queue)
    # The resumed step may be in flight as this worker stops: it is
    # cancelled a second later and retried by the next worker.
    quick = timedelta(seconds=1)
    async with worker(
        client, [NESTED], task_queue=queue, graceful_shutdown=quick
    ):
        run = await runs.start(NESTED, Tally())
        paused = (await run.paused()).unwrap()
        assert paused.status is Status.INTERRUPTED
        assert paused.pending is not None
        assert paused.pending.question == "publish?"
        assert paused.next == ("inner",)
        (await run.answer(Approval(approved=True, by="ada"))).unwrap()
    async with worker(client, [NESTED], task_queue=queue):
        final = (await run.result()).unwrap()
    store = MemoryStore()
    local = await NESTED.run(Tally(), store=store, thread_id="t")
    assert local.unwrap().status is Status.INTERRUPTED
    answer = Approval(approved=True, by="ada")
    done = (await NESTED.resume(store, "t", answer=answer)).unwrap()
    assert final.state == done.state
    assert final.state.trail == pvector(
        ["before", "draft", "publish", "after"]
    )


async def test_an_answer_of_the_wrong_type_is_refused_and_the_run_waits(
    client: Client, queue: str
) -> None:
    """The gate's ``answer_as`` refuses the answer: the client gets
    ``InvalidAnswer``, the run waits again, and a good answer ends it."""
    runs = Runs(client, task_queue=queue)
    async with worker(client, [APPROVAL], task_queue=queue):
        run = await runs.start(APPROVAL, Tally())
        (await run.paused()).unwrap()
        refused = await run.answer("yes")
        failure = refused.failure()
        assert isinstance(failure, RemoteFailure)
        assert failure.kind == "InvalidAnswer"
        again = (await run.paused()).unwrap()
        assert again.status is Status.INTERRUPTED
        (await run.answer(Approval(approved=True, by="ada"))).unwrap()
        final = (await run.result()).unwrap()
    assert final.state.trail == pvector(["draft", "publish"])


async def history_bytes(client: Client, workflow_id: str) -> bytes:
    """Every event of the workflow's history, as the server keeps it
    (payloads raw, not base64 as in its JSON form)."""
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    return b"".join(e.SerializeToString() for e in history.events)


async def test_a_typed_interrupt_applies_its_answer_on_temporal(
    client: Client, queue: str
) -> None:
    """A gate's ``Interrupt(question, Approval, apply=...)`` on Temporal: an
    answer that does not fit is refused before the workflow takes it (it is
    nowhere in the run's history; the run waits again), a good one reaches
    the state before the gated node runs, as in process."""
    runs = Runs(client, task_queue=queue)
    async with worker(client, [TYPED], task_queue=queue):
        run = await runs.start(TYPED, Tally())
        (await run.paused()).unwrap()
        refused = (await run.answer({"approved": "SECRET-yes"})).failure()
        assert isinstance(refused, RemoteFailure)
        assert refused.kind == "InvalidAnswer"
        assert "$.approved" in str(refused)
        assert "SECRET" not in str(refused)
        assert (await run.paused()).unwrap().status is Status.INTERRUPTED
        # Refused before the update was accepted: not in the run's history.
        assert b"SECRET" not in await history_bytes(client, run.id)
        (await run.answer(Approval(approved=True, by="ada"))).unwrap()
        final = (await run.result()).unwrap()
    kept = await history_bytes(client, run.id)
    assert b"SECRET" not in kept
    assert b'"by":"ada"' in kept.replace(b" ", b"")  # the answer taken is
    store = MemoryStore()
    await TYPED.run(Tally(), store=store, thread_id="t")
    answer = Approval(approved=True, by="ada")
    local = (await TYPED.resume(store, "t", answer=answer)).unwrap()
    assert final.state == local.state
    assert final.state.notes == pvector(["approved by ada"])
    assert final.state.trail == pvector(["draft", "publish"])


async def test_a_question_asked_inside_a_node_on_temporal(
    client: Client, queue: str
) -> None:
    """``pipeline.interrupt`` in a node run as an activity: the run pauses
    at the question; an answer that does not fit is taken, then refused by
    the node's activity (the run waits at the question again); the right
    one reaches the node, typed; the same as in process."""
    runs = Runs(client, task_queue=queue)
    async with worker(client, [ASKS], task_queue=queue):
        run = await runs.start(ASKS, Tally())
        paused = (await run.paused()).unwrap()
        assert paused.status is Status.INTERRUPTED
        assert paused.pending is not None
        assert paused.pending.question == "publish this draft?"
        assert paused.pending.payload == {"trail": ["draft"]}
        (await run.answer({"approved": "SECRET"})).unwrap()
        again = (await run.paused()).unwrap()
        assert again.status is Status.INTERRUPTED
        assert again.pending is not None
        assert again.pending.question == "publish this draft?"
        assert again.pending.payload == {"trail": ["draft"]}
        assert again.version > paused.version
        (await run.answer(Approval(approved=True, by="ada"))).unwrap()
        final = (await run.result()).unwrap()
    assert final.state.trail == pvector(["draft", "ok:ada"])
    store = MemoryStore()
    local = (await ASKS.run(Tally(), store=store, thread_id="t")).unwrap()
    assert local.pending is not None
    assert local.pending.question == "publish this draft?"
    assert local.pending.payload == paused.pending.payload
    answer = Approval(approved=True, by="ada")
    done = (await ASKS.resume(store, "t", answer=answer)).unwrap()
    assert done.state == final.state


async def test_a_tool_call_waits_for_approval_on_temporal(
    client: Client, queue: str
) -> None:
    """``tool(approval=...)`` in an agent node run as an activity: the call
    is a question of the workflow; an edit that does not fit is refused
    (the run asks again); an approval with edited arguments runs it; a
    denial gives the model the reason.  As in process."""
    runs = Runs(client, task_queue=queue)
    async with worker(client, [GUARDED], task_queue=queue):
        run = await runs.start(GUARDED, Tally())
        paused = (await run.paused()).unwrap()
        assert paused.status is Status.INTERRUPTED
        assert paused.pending is not None
        assert paused.pending.question == "approve guarded?"
        assert paused.pending.payload == {
            "agent": "cashier",
            "tool": "guarded",
            "arguments": {"text": "large"},
        }
        (await run.answer(Approve(arguments={"text": 7}))).unwrap()
        again = (await run.paused()).unwrap()
        assert again.status is Status.INTERRUPTED
        assert again.pending is not None
        assert again.pending.payload == paused.pending.payload
        (await run.answer(Approve(arguments={"text": "edited"}))).unwrap()
        final = (await run.result()).unwrap()
        assert final.state.notes == pvector(["cashier:EDITED"])

        denied_run = await runs.start(GUARDED, Tally())
        (await denied_run.paused()).unwrap()
        (await denied_run.answer(Deny("not today"))).unwrap()
        denied = (await denied_run.result()).unwrap()
    denial = "error: a person denied this call of 'guarded': not today"
    assert denied.state.notes == pvector([f"cashier:{denial}"])
    store = MemoryStore()
    await GUARDED.run(Tally(), store=store, thread_id="t")
    answer = Approve(arguments={"text": "edited"})
    local = (await GUARDED.resume(store, "t", answer=answer)).unwrap()
    assert local.state == final.state


async def test_paused_after_the_end_gives_the_final_snapshot(
    client: Client, queue: str
) -> None:
    """``paused()`` on a run that already ended: its final snapshot."""
    g = chain(["a", "b"], name="ended")
    async with worker(client, [g], task_queue=queue):
        run = await Runs(client, task_queue=queue).start(g, Tally())
        final = (await run.result()).unwrap()
        assert await run.paused() == Success(final)


async def test_a_step_result_past_the_payload_limit_ends_the_run(
    client: Client, queue: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A node whose result Temporal would refuse (and retry forever): the
    run ends with ``InvalidState`` naming the size; the node ran once."""
    effects = tmp_path / "effects"
    monkeypatch.setenv(EFFECTS_ENV, str(effects))
    async with worker(client, [HUGE], task_queue=queue):
        run = await Runs(client, task_queue=queue).start(HUGE, Tally())
        out = await run.result()
    failure = out.failure()
    assert isinstance(failure, InvalidState)
    assert "payload limit" in failure.reason
    assert (await anyio.Path(effects).read_text()).split() == ["grow"]


async def test_a_refusal_stops_the_run_with_run_stopped(
    client: Client, queue: str
) -> None:
    """A gate's ``Stop`` ends the workflow; the client gives ``RunStopped``
    with the gate's reason."""
    runs = Runs(client, task_queue=queue)
    async with worker(client, [APPROVAL], task_queue=queue):
        run = await runs.start(APPROVAL, Tally())
        (await run.paused()).unwrap()
        (await run.answer(Approval(approved=False, by="ada"))).unwrap()
        out = await run.result()
    assert out == Failure(RunStopped("refused by ada", path=("approval",)))


async def test_an_answer_that_is_not_json_is_refused(
    client: Client, queue: str
) -> None:
    """An answer JSON cannot hold (or would change) is an ``InvalidState``
    failure, as for a resumed thread; the run keeps waiting."""
    runs = Runs(client, task_queue=queue)
    async with worker(client, [APPROVAL], task_queue=queue):
        run = await runs.start(APPROVAL, Tally())
        (await run.paused()).unwrap()
        for odd in (float("nan"), (1, 2), b"yes"):
            # Not JSON, or not what the gate would see after a crash.
            bad = await run.answer(odd)
            assert type(bad.failure()).__name__ == "InvalidState"
        assert (await run.snapshot()).unwrap().status is Status.INTERRUPTED
        await run.cancel()


async def test_failures_come_back_as_their_own_types(
    client: Client, queue: str
) -> None:
    """A node's failure value of a registered type comes back as that very
    value; unregistered, as a ``RemoteFailure`` naming its kind."""
    g = (
        builder(Tally)
        .node("a", bump("a"))
        .node("no", refuse("no"))
        .entry("a")
        .edge("a", "no")
        .edge("no", END)
        .build(name="refusing")
    )
    async with worker(client, [g], task_queue=queue, failures=[Refused]):
        known = Runs(client, task_queue=queue, failures=[Refused])
        out = await (await known.start(g, Tally())).result()
        assert out == Failure(Refused("no", "count was 1"))
        unknown = Runs(client, task_queue=queue)
        other = await (await unknown.start(g, Tally())).result()
    failure = other.failure()
    assert isinstance(failure, RemoteFailure)
    assert failure.kind == "Refused"


async def test_the_step_limit_ends_the_run(client: Client, queue: str) -> None:
    """``max_steps`` holds on Temporal: ``StepLimitExceeded`` with the
    tail of the nodes that ran, as in process."""
    g = (
        builder(Tally)
        .node("loop", bump("loop"))
        .entry("loop")
        .route("loop", lambda s: "loop", ["loop", END])
        .limits(GraphLimits(max_steps=4))
        .build(name="looping")
    )
    async with worker(client, [g], task_queue=queue):
        out = await (
            await Runs(client, task_queue=queue).start(g, Tally())
        ).result()
    local = await g.run(Tally())
    assert out == local
    assert isinstance(out.failure(), StepLimitExceeded)


async def test_a_node_that_keeps_raising_fails_after_its_retries(
    client: Client, queue: str
) -> None:
    """An exception is retried under the node's policy; past its attempts
    the run fails with a ``RemoteFailure`` naming the exception."""
    attempts: list[int] = []

    @handler(name="boom")
    async def boom(s: Tally) -> Result[Tally, Refused]:
        attempts.append(1)
        msg = "disk on fire"
        raise OSError(msg)

    g = (
        builder(Tally)
        .node("boom", boom)
        .entry("boom")
        .edge("boom", END)
        .build(name="raising")
    )
    options = RunOptions(
        nodes={
            "boom": NodeOptions(retry=ActivityRetry(initial=0.01, attempts=2))
        }
    )
    async with worker(client, [g], task_queue=queue):
        run = await Runs(client, task_queue=queue).start(
            g, Tally(), options=options
        )
        out = await run.result()
    failure = out.failure()
    assert isinstance(failure, RemoteFailure)
    assert failure.kind == "OSError"
    assert len(attempts) == 2


async def test_cancel_ends_the_run(client: Client, queue: str) -> None:
    """A cancelled run's result is a ``RemoteFailure`` (the interrupt it
    waited at is never answered)."""
    runs = Runs(client, task_queue=queue)
    async with worker(client, [APPROVAL], task_queue=queue):
        run = await runs.start(APPROVAL, Tally())
        (await run.paused()).unwrap()
        await run.cancel()
        out = await run.result()
    assert isinstance(out.failure(), RemoteFailure)


async def test_long_runs_continue_as_new(client: Client, queue: str) -> None:
    """Past its history bound a run continues as new from its snapshot
    and still ends where the run in process ends."""
    names = [f"n{i}" for i in range(40)]
    g = chain(names, name="long-chain")
    async with worker(client, [g], task_queue=queue):
        run = await Runs(client, task_queue=queue).start(
            g, Tally(), options=RunOptions(history_bound=100)
        )
        remote = (await run.result()).unwrap()
        first = client.get_workflow_handle(run.id)
        description = await first.describe()
    local = (await g.run(Tally())).unwrap()
    assert remote.state == local.state
    assert remote.step == local.step == 40
    # The run that finished is not the first one of the workflow id.
    assert description.run_id != run._handle.first_execution_run_id


async def test_swarm_hands_off_to_its_final_answer(
    client: Client, queue: str
) -> None:
    """A swarm whose agents hand the conversation round ends, on
    Temporal, with the final answer it gives in process."""
    async with worker(client, [RELAY], task_queue=queue):
        run = await Runs(client, task_queue=queue).start(RELAY, ask("help"))
        remote = (await run.result()).unwrap()
    local = (await RELAY.run(ask("help"))).unwrap()
    assert remote.state.handoffs == local.state.handoffs == 2
    assert remote.state.active == "support"
    assert [m.content for m in remote.state.messages] == [
        m.content for m in local.state.messages
    ]
    assert remote.state.messages[-1].content.startswith("support answers")


async def test_a_state_that_cannot_be_sent_is_refused_at_start(
    client: Client, queue: str
) -> None:
    """A state JSON cannot hold is refused before anything starts, naming
    the field, not the value."""
    g = chain(["a"], name="one")
    bad = attrs.evolve(Tally(), count="sk-secret-7f3a")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="count") as caught:
        await Runs(client, task_queue=queue).start(g, bad)
    assert "sk-secret" not in str(caught.value)


async def test_none_answers_an_optional_question_on_temporal(
    client: Client, queue: str
) -> None:
    """``run.answer(None)`` answers ``None`` (an ``int | None`` question's
    none): the run goes on with it applied, as ``resume(answer=None,
    question=...)`` does in process."""
    runs = Runs(client, task_queue=queue)
    async with worker(client, [OPTIONAL], task_queue=queue):
        run = await runs.start(OPTIONAL, Tally())
        (await run.paused()).unwrap()
        (await run.answer(None)).unwrap()
        final = (await run.result()).unwrap()
    store = MemoryStore()
    paused = (await OPTIONAL.run(Tally(), store=store, thread_id="t")).unwrap()
    local = (
        await OPTIONAL.resume(
            store, "t", answer=None, question=paused.question_id
        )
    ).unwrap()
    assert final.state == local.state
    assert final.state.notes == pvector(["limit None"])
