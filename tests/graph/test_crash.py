"""F6: crash at every node boundary, then resume (seeded, in-process)."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys

from collections import Counter
from pathlib import Path
from typing import Any

import attrs
import pytest

from returns.result import Failure, Success

from pipeline import fold, stores
from pipeline.failures import ThreadBusy
from pipeline.fold import Continue, Transition
from pipeline.stores import Lease, Record
from tests.graph.crashgraphs import make_graph
from tests.graph.helpers import Counted, DelegatingStore, Runs
from tests.stores import CommitResult


POINTS = ("before", "inside", "before-write", "during-write", "after-write")
RUNS = int(os.environ.get("PIPELINE_CRASH_RUNS", "1000"))


class SimulatedCrash(BaseException):
    """The process dies here (a BaseException: nothing may catch it)."""


class CrashingStore(DelegatingStore):
    """A MemoryStore that dies around its *at*-th commit."""

    def __init__(self, inner: stores.MemoryStore, point: str, at: int) -> None:
        super().__init__(inner)
        self.point, self.at, self.n = point, at, 0

    async def commit(
        self,
        record: Record,
        *,
        expected_head: int | None,
        lease: Lease | None = None,
    ) -> CommitResult:
        self.n += 1
        if self.n == self.at and self.point == "before-write":
            raise SimulatedCrash
        if self.n == self.at and self.point == "during-write":
            torn = attrs.evolve(
                record, data=record.data[: len(record.data) // 2]
            )
            await self.inner.commit(
                torn, expected_head=expected_head, lease=lease
            )
            raise SimulatedCrash
        out = await self.inner.commit(
            record, expected_head=expected_head, lease=lease
        )
        if self.n == self.at and self.point == "after-write":
            raise SimulatedCrash
        return out


def _timeless(data: bytes) -> dict[str, Any]:
    """A record's document without its commit time (the two compared were
    encoded at different times)."""
    doc: dict[str, Any] = json.loads(data)
    del doc["at"]
    return doc


async def crash_and_resume(seed: int) -> None:
    rng = random.Random(seed)
    baseline_runs = Runs()
    g0 = make_graph(seed, baseline_runs)
    expected = (await g0.run(Counted())).unwrap()
    transitions = expected.step
    point = POINTS[seed % len(POINTS)]
    k = rng.randint(1, transitions)  # the k-th transition is in flight

    runs = Runs()
    hook: Any = None
    gates: list[fold.Gate[Counted]] = []
    store = stores.MemoryStore()
    target: stores.CheckpointStore = store
    if point == "before":
        seen = Counter[str]()

        async def gate(t: Transition[Counted]) -> fold.Decision:
            seen["n"] += 1
            if seen["n"] == k:
                raise SimulatedCrash
            return Continue()

        gates.append(gate)
    elif point == "inside":
        counter = Counter[str]()

        async def crash_inside(name: str, s: Counted) -> None:
            counter["n"] += 1
            if counter["n"] == k:
                raise SimulatedCrash  # it started (and was counted), then died

        hook = crash_inside
    else:
        target = CrashingStore(store, point, k + 1)  # commit 1 is admission
    g = make_graph(seed, runs, hook)
    assert g.fingerprint == g0.fingerprint

    with pytest.raises(SimulatedCrash):
        await g.run(Counted(), store=target, thread_id="t", gates=gates)
    g = make_graph(seed, runs)  # the process restarts: no crash this time
    committed = (await g.load(store, "t")).unwrap()
    before = Counter(runs.calls)
    done = (await g.resume(store, "t")).unwrap()

    assert done.state == expected.state, (seed, point, k)
    assert _timeless(
        g.codec.encode(
            attrs.evolve(done, thread_id="x", version=0, parent=None), None
        ).data
    ) == _timeless(
        g.codec.encode(
            attrs.evolve(expected, thread_id="x", version=0, parent=None), None
        ).data
    )
    for key, count in runs.calls.items():
        extra = count - baseline_runs.calls[key]
        assert extra in (0, 1), (seed, point, key)
        if extra:
            # Only the in-flight step re-ran: it starts from the last commit.
            assert key[1] == committed.state.count, (seed, point, key)
            assert before[key] == 1
    assert (
        runs.total() - baseline_runs.total() <= 2
    )  # one step (2 branches at most)


@pytest.mark.slow
async def test_crash_at_every_boundary_then_resume() -> None:
    """Seeded crashes at each boundary: same end, nothing committed re-runs."""
    for seed in range(RUNS):
        await crash_and_resume(seed)


CHILD = Path(__file__).with_name("sigkill_child.py")


@pytest.mark.slow
def test_sigkill_mid_run_resumes_from_sqlite(tmp_path: Path) -> None:
    """A real process killed with SIGKILL mid-node resumes from its file."""
    import anyio  # noqa: PLC0415

    db = tmp_path / "run.db"
    seed = 7
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    with subprocess.Popen(  # noqa: S603
        [sys.executable, str(CHILD), str(db), str(seed)],
        stdout=subprocess.PIPE,
        env=env,
    ) as proc:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # the child blocks inside its last node
        assert line.strip() == b"inside-last-node", line
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL

    async def resume(path: Path) -> tuple[Counted, Counted, int]:
        runs = Runs()
        g = make_graph(seed, runs)
        expected = (
            (await make_graph(seed, Runs()).run(Counted())).unwrap().state
        )
        async with stores.SQLiteStore(path) as store:
            out = await g.resume(store, "t")
            busy = out.failure() if isinstance(out, Failure) else None
            if isinstance(busy, ThreadBusy):
                # The dead run's lease: it lapses on its own (no one
                # releases it); wait exactly that long.
                await anyio.sleep(busy.expires_in)
                out = await g.resume(store, "t")
            done = out.unwrap()
        return done.state, expected, runs.total()

    # Each backend resumes its own copy of the killed run's file.
    for backend in ("asyncio", "trio"):
        copy = tmp_path / backend
        copy.mkdir()
        for part in tmp_path.glob("run.db*"):
            shutil.copy(part, copy / part.name)
        state, expected, reran = anyio.run(
            resume, copy / "run.db", backend=backend
        )
        assert state == expected, backend
        assert reran == 1, backend  # only the node in flight ran again


def test_result_type_is_success() -> None:
    """Sanity: the helpers build a successful uninterrupted run."""
    import anyio  # noqa: PLC0415

    out = anyio.run(make_graph(3, Runs()).run, Counted())
    assert isinstance(out, Success)
