"""A crash inside an agent's conversation repeats no finished call.

An agent node's turns are a fold nested in the node's step; on Temporal
each turn's record is an update to the run's workflow, in its history
before the next turn starts, and each model call and tool call is an
activity of its own whose answer the workflow keeps.  A worker SIGKILLed
during the agent's second tool call: the other worker's attempt restores
the first turn, gets the second turn's model answer from the workflow
(no model call is made twice), and waits for the second tool call's
activity, which is retried once (its attempt on the dead worker is the
only repeat).
"""

from __future__ import annotations

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
from tests.temporal.graphs import BLOCK_ENV, EFFECTS_ENV, TURNS, Tally
from tests.temporal.processes import cli_worker


pytestmark = [pytest.mark.temporal, pytest.mark.slow]


async def test_committed_turns_never_run_again(
    client: Client,
    temporal_address: str,
    queue: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """SIGKILL during the second tool call: three model calls, the first
    tool call once, the second twice (its activity's attempt on the dead
    worker, then its retry), and the run ends as in process."""
    effects = tmp_path / "effects"
    effects.touch()
    monkeypatch.setenv(EFFECTS_ENV, str(effects))
    quick = NodeOptions(heartbeat=1.0, retry=ActivityRetry(initial=0.1))
    async with cli_worker(
        temporal_address,
        queue,
        "tests.temporal.graphs:TURNS",
        env={EFFECTS_ENV: str(effects), BLOCK_ENV: "tool2"},
    ) as (process, output):
        run = await Runs(client, task_queue=queue).start(
            TURNS, Tally(), options=RunOptions(default=quick, calls=quick)
        )
        with anyio.fail_after(60):
            async for line in output:
                if line == "blocked tool2":
                    break
        process.kill()
        await process.wait()
    async with worker(client, [TURNS], task_queue=queue):
        with anyio.fail_after(120):
            final = (await run.result()).unwrap()
    assert Counter(effects.read_text().split()) == Counter(
        {"model": 3, "tool1": 1, "tool2": 2}
    )
    effects.write_text("")
    local = (await TURNS.run(Tally())).unwrap()
    assert final.state == local.state
    assert final.state.notes == pvector(["worker:done1,done2"])
