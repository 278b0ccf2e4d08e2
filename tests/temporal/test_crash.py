"""Worker processes die; runs do not.

A worker started with ``python -m pipeline.temporal worker`` (the CLI
entry) is SIGKILLed while a node runs; another worker finishes the run.
The nodes record every execution in a file (an external side-effect
counter): the nodes whose activities had completed never run again, and
the node in flight runs exactly once more.
"""

from __future__ import annotations

import signal

from collections import Counter
from pathlib import Path

import anyio
import pytest

from pyrsistent import pvector
from temporalio.client import Client

from pipeline.temporal import (
    ActivityRetry,
    NodeOptions,
    RunOptions,
    Runs,
    worker,
)
from tests.temporal.graphs import (
    BLOCK_ENV,
    CRASH,
    CRASH_NODES,
    EFFECTS_ENV,
    RELAY,
    Tally,
    ask,
)
from tests.temporal.processes import cli_worker


pytestmark = [pytest.mark.temporal, pytest.mark.slow]


async def test_a_killed_workers_run_is_finished_by_another(
    client: Client,
    temporal_address: str,
    queue: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """SIGKILL during node c3: c1 and c2 (completed) never run again, c3
    runs once more, on the other worker, and the run ends as in process."""
    effects = tmp_path / "effects"
    effects.touch()
    monkeypatch.setenv(EFFECTS_ENV, str(effects))
    quick = NodeOptions(heartbeat=1.0, retry=ActivityRetry(initial=0.1))
    async with cli_worker(
        temporal_address,
        queue,
        "tests.temporal.graphs:CRASH",
        env={EFFECTS_ENV: str(effects), BLOCK_ENV: "c3"},
    ) as (process, output):
        run = await Runs(client, task_queue=queue).start(
            CRASH, Tally(), options=RunOptions(default=quick)
        )
        with anyio.fail_after(60):
            async for line in output:
                if line == "blocked c3":
                    break
        process.send_signal(signal.SIGKILL)
        await process.wait()
    async with worker(client, [CRASH], task_queue=queue):
        with anyio.fail_after(120):
            final = (await run.result()).unwrap()
    assert final.state.trail == pvector(CRASH_NODES)
    ran = Counter(effects.read_text().split())
    assert ran == Counter({"c1": 1, "c2": 1, "c3": 2, "c4": 1, "c5": 1})


async def test_the_cli_worker_stops_cleanly_on_sigterm(
    client: Client, temporal_address: str, queue: str
) -> None:
    """The CLI worker hosts what it is given (a swarm here) and exits 0
    on SIGTERM."""
    async with cli_worker(
        temporal_address, queue, "tests.temporal.graphs:RELAY", env={}
    ) as (process, _):
        run = await Runs(client, task_queue=queue).start(RELAY, ask("hi"))
        final = (await run.result()).unwrap()
        assert final.state.active == "support"
        process.send_signal(signal.SIGTERM)
        with anyio.fail_after(60):
            assert await process.wait() == 0
