"""SIGKILL a worker holding leases, at random points, then resume.

A child process runs many seeded graphs at once, each on its own thread,
each holding its lease; it is killed with SIGKILL after a random delay.
Then, in this process, every thread is resumed (after its dead owner's
lease lapses): each ends as its uninterrupted run does, no node whose
record was committed runs again, and the node in flight runs at most once
more.  ``PIPELINE_SIGKILL_ROUNDS`` sets the number of kills (each covers
``PER_ROUND`` trials).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys

from collections import Counter
from pathlib import Path

import anyio
import pytest

from returns.result import Failure

from pipeline.failures import ThreadBusy
from tests.graph.crashgraphs import make_graph
from tests.graph.helpers import Counted, Runs
from tests.graph.store_urls import open_store


pytestmark = pytest.mark.slow

ROUNDS = int(os.environ.get("PIPELINE_SIGKILL_ROUNDS", "10"))
PER_ROUND = 20
WORKER = Path(__file__).with_name("sigkill_worker.py")


def _kill_at_random(
    spec: str, first: int, log: Path, rng: random.Random
) -> None:
    """Start the worker on the round's seeds and SIGKILL it after a random
    number of node executions (counted as it reports them, so the kill falls
    inside the runs however loaded the machine is), while it goes on."""
    total = 0
    for seed in range(first, first + PER_ROUND):
        runs = Runs()
        anyio.run(make_graph(seed, runs).run, Counted())
        total += runs.total()
    at = rng.randint(1, total)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    with subprocess.Popen(  # noqa: S603
        [
            sys.executable,
            str(WORKER),
            spec,
            str(first),
            str(PER_ROUND),
            str(log),
        ],
        stdout=subprocess.PIPE,
        env=env,
    ) as proc:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == b"ready"
        seen = 0
        while seen < at:
            line = proc.stdout.readline()
            if line in {b"", b"finished\n"}:
                break
            seen += 1
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL


def _effects(log: Path) -> dict[int, Counter[tuple[str, int]]]:
    out: dict[int, Counter[tuple[str, int]]] = {}
    for line in log.read_text().splitlines():
        parts = line.split()
        if len(parts) != 3:
            continue  # a line cut by the kill
        seed, name, count = int(parts[0]), parts[1], int(parts[2])
        out.setdefault(seed, Counter())[name, count] += 1
    return out


async def _resume_all(
    spec: str, first: int
) -> dict[int, tuple[Counted, int, bool]]:
    """Resume every thread of the round: (final state, committed count,
    whether it was killed mid-run)."""
    out: dict[int, tuple[Counted, int, bool]] = {}
    async with open_store(spec, lease_ttl=5) as store:
        for seed in range(first, first + PER_ROUND):
            g = make_graph(seed, Runs())
            thread = f"s{seed}"
            if await store.head(thread) is None:
                continue  # killed before its admission: nothing to resume
            head = (await g.load(store, thread)).unwrap()
            committed = head.state.count
            done = await g.resume(store, thread)
            if isinstance(done, Failure) and isinstance(
                done.failure(), ThreadBusy
            ):
                await anyio.sleep(
                    done.failure().expires_in
                )  # the lease lapses
                done = await g.resume(store, thread)
            out[seed] = (done.unwrap().state, committed, not head.done)
    return out


def _check_round(spec: str, first: int, log: Path) -> tuple[int, int]:
    """Resume the round's threads (a fresh process's work) and check them:
    (threads resumed, of which killed mid-run)."""
    before = _effects(log)
    resumed = anyio.run(_resume_all, spec, first)
    for seed, (state, committed, _) in resumed.items():
        baseline = Runs()
        expected = anyio.run(
            make_graph(seed, baseline).run, Counted()
        ).unwrap()
        assert state == expected.state, seed
        runs_before = before.get(seed, Counter())
        for key, count in runs_before.items():
            extra = count - baseline.calls[key]
            assert extra in (0, 1), (seed, key)
            if extra:
                # Only the step in flight ran twice: it starts from the last
                # committed state.
                assert key[1] == committed, (seed, key, committed)
    return len(resumed), sum(mid for *_, mid in resumed.values())


def test_sigkill_at_random_points(tmp_path: Path, store_spec: str) -> None:
    """Seeded SIGKILLs of a worker holding many leases on one store (an
    SQLite file, a PostgreSQL schema, a Redis prefix): after the leases
    lapse every thread resumes to its uninterrupted end, committed nodes
    never run again, the one in flight at most once more."""
    rng = random.Random(1234)
    trials = midway = 0
    for r in range(ROUNDS):
        log = tmp_path / f"effects{r}.log"
        log.touch()
        spec = store_spec
        first = r * PER_ROUND  # each round its own threads
        _kill_at_random(spec, first, log, rng)
        resumed, killed = _check_round(spec, first, log)
        trials += resumed
        midway += killed
    assert trials >= ROUNDS  # every kill fell after some admission
    assert midway >= ROUNDS  # and inside some runs
