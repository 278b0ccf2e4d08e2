"""No zombie steps: a runner that stalled past its lease (an observer that
blocks the event loop, a GC pause, SIGSTOP) starts no step once it wakes
up, when another runner took the thread over meanwhile.

Before each node, each agent turn and each batch of tool calls, the runner
checks its lease on its own monotonic clock (``stores.Held.ensure``);
near expiry it renews first, and a renewal that fails stops the run.
"""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time

from collections import Counter
from collections.abc import Callable
from pathlib import Path

import anyio
import attrs
import pytest

from returns.result import Failure, Result, Success

from pipeline import (
    Agent,
    Context,
    Graph,
    Handler,
    Message,
    fold,
    graph,
    handler,
    stores,
    tool,
)
from pipeline.failures import LeaseLost, ModelError, ThreadBusy
from pipeline.graph import END
from pipeline.models import DeltaSink, Model, ModelRequest, ModelResponse
from pipeline.testing import Reply, ScriptedModel
from tests.graph.store_urls import open_store
from tests.stores import DelegatingStore


TTL = 0.6
"""Seconds a lease lasts in these tests (short, so a stall outlives it)."""

NODES = [f"n{i}" for i in range(10)]


@attrs.frozen
class Trail:
    """A counter the nodes advance."""

    n: int = 0


def chain(log: Path) -> Graph[Trail, str]:
    """Ten nodes in a row; each writes its name to *log* (its side
    effect) before it returns."""
    b: graph.GraphBuilder[Trail, str] = graph.builder(Trail).entry(NODES[0])
    for name, nxt in zip(NODES, [*NODES[1:], END], strict=True):

        @handler(name=name)
        async def node(s: Trail, name: str = name) -> Result[Trail, str]:
            with log.open("a") as f:
                f.write(name + "\n")
            return Success(Trail(s.n + 1))

        b = b.node(name, node).edge(name, nxt)
    return b.build()


async def _take_over(
    spec: str, log: Path, thread_id: str = "t"
) -> Result[fold.Snapshot[Trail], object]:
    """Another runner: waits (on the clock, as ThreadBusy says) until the
    stalled runner's lease lapses, then runs the thread to its end."""
    async with open_store(spec, lease_ttl=TTL) as store:
        while True:
            out = await chain(log).resume(store, thread_id)
            busy = out.failure() if isinstance(out, Failure) else None
            if not isinstance(busy, ThreadBusy):
                return out
            await anyio.sleep(max(busy.expires_in, 0.01))


@pytest.mark.slow
async def test_a_runner_stalled_past_its_lease_starts_no_step(
    tmp_path: Path, store_spec: str
) -> None:
    """The repro: an observer on n0 blocks the event loop while a second
    runner takes the thread over and runs it to the end; the first runner,
    once unblocked, must not run n1's side effect again."""
    log = tmp_path / "effects.log"
    outcome: list[Result[fold.Snapshot[Trail], object]] = []

    def run_elsewhere() -> None:
        outcome.append(anyio.run(_take_over, store_spec, log))

    async def stall(snap: fold.Snapshot[Trail]) -> None:
        if snap.node == "n0":
            # Blocks this runner's whole event loop (no renewal can run),
            # for as long as the other runner needs to finish the thread.
            other = threading.Thread(target=run_elsewhere)
            other.start()
            other.join()

    async with open_store(store_spec, lease_ttl=TTL) as store:
        out = await chain(log).run(
            Trail(), store=store, thread_id="t", observers=[stall]
        )
        [theirs] = outcome
        assert theirs.unwrap().done
        assert out == Failure(LeaseLost("t"))
        assert Counter(log.read_text().split()) == dict.fromkeys(NODES, 1)
        head = await store.head("t")
        assert head == theirs.unwrap().version


class Renewals(DelegatingStore):
    """A memory store that notes each renewal in *seen*, in order."""

    def __init__(self, seen: list[str]) -> None:
        super().__init__(stores.MemoryStore(lease_ttl=TTL))
        self.seen = seen

    async def renew(
        self, lease: stores.Lease, *, ttl: float
    ) -> Result[stores.Lease, LeaseLost]:
        self.seen.append("renew")
        return await super().renew(lease, ttl=ttl)


class StalledRenewal(DelegatingStore):
    """A memory store whose first renewal answers only after the lease it
    grants has lapsed and another runner took the thread over (the runner
    stalled while the answer came back)."""

    def __init__(self) -> None:
        super().__init__(stores.MemoryStore(lease_ttl=TTL))
        self.renewals = 0

    async def renew(
        self, lease: stores.Lease, *, ttl: float
    ) -> Result[stores.Lease, LeaseLost]:
        self.renewals += 1
        renewed = await super().renew(lease, ttl=ttl)
        if self.renewals == 1:
            time.sleep(ttl)  # noqa: ASYNC251  # the stall under test
            await self.inner.release(renewed.unwrap())
            taken = await self.inner.acquire(lease.thread_id, "other", ttl=ttl)
            assert type(taken) is Success
        return renewed


async def test_a_renewal_that_lapsed_before_its_answer_came_starts_no_step() -> (
    None
):
    """A renewal answered after the lease it granted lapsed is no licence:
    the step renews again, finds the thread taken, and stops."""
    store = StalledRenewal()
    taken = await store.acquire("t", "me", ttl=TTL)
    lease = taken.unwrap()
    held = stores.Held(store, lease, TTL, time.monotonic() - TTL)
    assert await held.ensure() == Failure(LeaseLost("t"))
    assert store.renewals == 2
    assert held.lost


async def test_a_step_renews_a_lease_near_expiry_before_it_starts() -> None:
    """A runner that stalled but was not taken over renews its lease before
    the next step starts (nobody else ran meanwhile) and goes on."""
    seen: list[str] = []
    store = Renewals(seen)

    def noting(name: str) -> Handler[Trail, Trail, str]:
        @handler(name=name)
        async def node(s: Trail) -> Result[Trail, str]:
            seen.append(name)
            return Success(Trail(s.n + 1))

        return node

    g = (
        graph.builder(Trail)
        .node("a", noting("a"))
        .node("b", noting("b"))
        .edge("a", "b")
        .edge("b", END)
        .entry("a")
        .build()
    )

    async def stall(snap: fold.Snapshot[Trail]) -> None:
        if snap.node == "a":
            time.sleep(TTL)  # noqa: ASYNC251  # the stall under test
            seen.append("stalled")

    out = await g.run(Trail(), store=store, thread_id="t", observers=[stall])
    assert out.unwrap().state == Trail(2)
    after = seen[seen.index("stalled") :]
    assert after[:3] == ["stalled", "renew", "b"]


class Stalling:
    """A model whose first answer comes only after *stall* ran, blocking
    its caller's event loop meanwhile."""

    def __init__(self, inner: Model, stall: Callable[[], None]) -> None:
        self.inner = inner
        self.stall: Callable[[], None] | None = stall

    @property
    def name(self) -> str:
        return "stalling"

    async def generate(
        self, request: ModelRequest, *, on_delta: DeltaSink | None = None
    ) -> Result[ModelResponse, ModelError]:
        stall, self.stall = self.stall, None
        if stall is not None:
            stall()
        return await self.inner.generate(request, on_delta=on_delta)


def _asking(model: Model, effects: Path) -> Graph[Context, object]:
    """One graph node: an agent whose model asks for a tool with a side
    effect, then answers."""

    @tool
    def refund(amount: int) -> str:
        """Refund *amount*."""
        with effects.open("a") as f:
            f.write(f"refund {amount}\n")
        return "refunded"

    agent = Agent("clerk", model, tools=[refund])
    return (
        graph.builder(Context)
        .node("ask", agent)
        .edge("ask", END)
        .entry("ask")
        .build()
    )


def _script() -> ScriptedModel:
    return ScriptedModel(
        Reply.tool_call("refund", {"amount": 5}), Reply.text("done")
    )


@pytest.mark.slow
async def test_a_stalled_agent_runs_no_tool_after_a_takeover(
    tmp_path: Path,
) -> None:
    """An agent's model call stalls the runner past its lease; another
    runner takes the thread over and runs the tool call; the stalled one,
    once its model answers, must not run the tool again."""
    effects = tmp_path / "effects.log"
    spec = f"sqlite:{tmp_path / 'runs.db'}"
    outcome: list[Result[fold.Snapshot[Context], object]] = []

    async def take_over() -> None:
        async with open_store(spec, lease_ttl=TTL) as store:
            g = _asking(_script(), effects)
            while True:
                out = await g.resume(store, "t")
                busy = out.failure() if isinstance(out, Failure) else None
                if not isinstance(busy, ThreadBusy):
                    outcome.append(out)
                    return
                await anyio.sleep(max(busy.expires_in, 0.01))

    def stall() -> None:
        other = threading.Thread(target=anyio.run, args=(take_over,))
        other.start()
        other.join()

    async with open_store(spec, lease_ttl=TTL) as store:
        g = _asking(Stalling(_script(), stall), effects)
        out = await g.run(
            Context.of(Message.user("refund me")), store=store, thread_id="t"
        )
    [theirs] = outcome
    assert theirs.unwrap().done
    assert isinstance(out.failure(), LeaseLost)
    assert effects.read_text().splitlines() == ["refund 5"]


TRIALS = int(os.environ.get("PIPELINE_SIGSTOP_TRIALS", "25"))
CHILD = Path(__file__).with_name("sigstop_child.py")
TAKEOVER = 300.0
"""Seconds a takeover may take before the trial fails (a guard against a
hang, not a timing: CI runs three whole suites at once on two cores, and
every SQLite commit here waits for its fsync)."""


def _kill(proc: subprocess.Popen[bytes]) -> None:
    """Kill *proc* if it still runs (stopped or not)."""
    if proc.poll() is None:
        proc.kill()


async def _take_over_within(
    spec: str, log: Path, thread_id: str, seconds: float
) -> Result[fold.Snapshot[Trail], object]:
    """:func:`_take_over`, failing the trial after *seconds*."""
    with anyio.fail_after(seconds):
        return await _take_over(spec, log, thread_id)


def _sigstop_trial(
    spec: str, thread_id: str, tmp: Path, rng: random.Random
) -> bool:
    """One trial: the child runs the chain; after a random number of its
    nodes it is stopped (SIGSTOP), this process takes the thread over once
    the lease lapses and runs it to the end, then the child continues
    (SIGCONT): it must start no further node.

    Returns whether the child ran one node after the takeover: the one
    whose lease check it had passed when the stop came, in the few
    microseconds between that check and the node's first effect (no check
    can close that window; see docs/graph.md, "No zombie steps").  Its
    commit is then refused: the run ends in ``LeaseLost``."""
    theirs, ours = tmp / "child.log", tmp / "takeover.log"
    at = rng.randint(1, len(NODES) - 1)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])}
    with subprocess.Popen(  # noqa: S603
        [sys.executable, str(CHILD), spec, str(theirs), thread_id],
        stdout=subprocess.PIPE,
        env=env,
    ) as proc:
        # A trial that goes wrong fails; it never hangs the suite: past
        # its time the child is killed (its pipe ends, reads return).
        watchdog = threading.Timer(TAKEOVER + 60, _kill, (proc,))
        watchdog.start()
        try:
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == b"ready"
            for _ in range(at):
                assert proc.stdout.readline().strip() in {
                    n.encode() for n in NODES
                }
            _stop(proc)
            ended: list[str] = []
            while spec.startswith("sqlite:") and _write_locked(spec):
                # Stopped inside a write transaction, the child holds the
                # file's lock: no other process can write until it goes
                # on (SQLite has no server to end it).  Let it reach its
                # next node, and stop it there.
                proc.send_signal(signal.SIGCONT)
                line = proc.stdout.readline().strip()
                _stop(proc)
                if line not in {n.encode() for n in NODES}:
                    ended = line.decode().split()
                    break  # it ended: nothing is left to take over
            out = anyio.run(_take_over_within, spec, ours, thread_id, TAKEOVER)
            assert out.unwrap().done
            before = theirs.read_text().splitlines()
            proc.send_signal(signal.SIGCONT)
            rest = ended + proc.stdout.read().decode().split()
            assert proc.wait(timeout=60) == 0
        finally:
            watchdog.cancel()
            _kill(proc)
    taken = ours.read_text().splitlines() if ours.exists() else []
    # Stopped, the child started no step after the takeover: every node it
    # ran is one it had started (passed its lease check for) before it was
    # stopped, which is at most the one after those it had logged.
    after = theirs.read_text().splitlines()
    late = after[len(before) :]
    assert after[: len(before)] == before
    assert late in ([], NODES[len(before) : len(before) + 1])
    # It lost its lease, unless it had run the chain to its end before it
    # was stopped (a loaded machine runs the child ahead of this process):
    # then the takeover found the thread done and ran nothing.
    assert rest[-2:] == ["ended", "LeaseLost" if taken else "done"]
    effects = Counter(after + taken)
    assert set(effects) == set(NODES)
    # The node in flight at the stop may run once more; no other does.
    assert sum(n - 1 for n in effects.values()) <= 1
    return bool(late)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """Stop *proc* (SIGSTOP) and return once it is stopped (or ended).

    A signal is delivered asynchronously: without the wait, the child may
    still run for a moment after ``send_signal`` returns, long enough to
    begin a write transaction after :func:`_write_locked` looked, and then
    hold the SQLite file's lock for as long as it stays stopped.
    ``WNOWAIT`` leaves the child's state for ``Popen`` to reap.
    """
    proc.send_signal(signal.SIGSTOP)
    os.waitid(os.P_PID, proc.pid, os.WSTOPPED | os.WEXITED | os.WNOWAIT)


def _write_locked(spec: str) -> bool:
    """Whether a process holds the write lock of the SQLite file *spec*."""
    conn = sqlite3.connect(spec.removeprefix("sqlite:"), timeout=0)
    try:
        conn.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError:
        return True
    else:
        conn.execute("ROLLBACK")
        return False
    finally:
        conn.close()


@pytest.mark.slow
def test_a_runner_stopped_past_its_lease_starts_no_step_after_a_takeover(
    tmp_path: Path, store_spec: str
) -> None:
    """SIGSTOP past the lease's time, at a random node, ``TRIALS`` times
    (``PIPELINE_SIGSTOP_TRIALS``, 25 by default) on each store."""
    rng = random.Random(20261203)  # trial points, not secrets
    late = 0
    for trial in range(TRIALS):
        where = tmp_path / f"trial{trial}"
        where.mkdir()
        late += _sigstop_trial(store_spec, f"trial{trial}", where, rng)
    # The stop lands between a lease check and the node's first effect in
    # about one trial in a hundred (a few microseconds of a node's time);
    # a runner that skipped the check would run a late node in most.
    assert late <= max(2, TRIALS // 10)
