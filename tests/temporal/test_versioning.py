"""Worker versioning: the build id names the hosted graphs' shapes."""

from __future__ import annotations

import os

from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import pytest

from pyrsistent import pvector
from returns.result import Success
from temporalio.api.enums.v1 import VersioningBehavior
from temporalio.api.workflowservice.v1 import (
    DescribeWorkerDeploymentRequest,
    SetWorkerDeploymentCurrentVersionRequest,
)
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from pipeline import Graph
from pipeline.fold import Status
from pipeline.graph import END, builder
from pipeline.temporal import Run, Runs, build_id, worker
from tests.temporal.graphs import (
    APPROVAL,
    EFFECTS_ENV,
    RELAY,
    REVIEWED_V1,
    REVIEWED_V2,
    Approval,
    Refused,
    Tally,
    bump,
    chain,
)
from tests.temporal.processes import cli_worker


pytestmark = [pytest.mark.temporal, pytest.mark.slow]


def test_the_build_id_follows_names_and_fingerprints() -> None:
    """Same machines, same id (in any order); another shape, another
    version or another name, another id."""
    g = chain(["a", "b"], name="versioned")
    assert build_id([g, RELAY]) == build_id([RELAY, g])
    assert build_id([g]) == build_id([chain(["a", "b"], name="versioned")])
    assert build_id([g]) != build_id([chain(["a", "c"], name="versioned")])
    assert build_id([g]) != build_id({"renamed": g})


def test_a_version_bump_is_another_build() -> None:
    """``build(version=...)`` changes the fingerprint, so the build id."""

    def line(version: str) -> Graph[Tally, Refused]:
        return (
            builder(Tally)
            .node("a", bump("a"))
            .entry("a")
            .edge("a", END)
            .build(name="line", version=version)
        )

    assert line("1").fingerprint != line("2").fingerprint
    assert build_id([line("1")]) != build_id([line("2")])
    assert build_id([line("1")]) == build_id([line("1")])


async def test_a_versioned_worker_is_pinned_to_its_build(
    client: Client, queue: str
) -> None:
    """``deployment=`` turns on worker versioning: the worker's build id is
    the hosted graphs' build id, and runs are pinned to it."""
    w = worker(client, [APPROVAL], task_queue=queue, deployment="reviews")
    config = w.config()
    deployment = config["deployment_config"]
    assert deployment is not None
    assert deployment.use_worker_versioning
    assert deployment.version.deployment_name == "reviews"
    assert deployment.version.build_id == build_id([APPROVAL])
    assert deployment.default_versioning_behavior.name == "PINNED"


async def make_current(client: Client, deployment: str, build: str) -> None:
    """Make *build* the current version of *deployment*, once its
    worker's pollers have registered it (asked again until then)."""
    request = SetWorkerDeploymentCurrentVersionRequest(
        namespace=client.namespace,
        deployment_name=deployment,
        build_id=build,
    )
    with anyio.fail_after(30):
        while True:
            try:
                await client.workflow_service.set_worker_deployment_current_version(
                    request
                )
            except RPCError as exc:
                if exc.status not in {
                    RPCStatusCode.NOT_FOUND,
                    RPCStatusCode.FAILED_PRECONDITION,
                }:
                    raise
                await anyio.sleep(0.05)  # poll: the worker is registering
            else:
                return


async def current_build(client: Client, deployment: str) -> str:
    """The build id of *deployment*'s current version."""
    described = await client.workflow_service.describe_worker_deployment(
        DescribeWorkerDeploymentRequest(
            namespace=client.namespace, deployment_name=deployment
        )
    )
    routing = described.worker_deployment_info.routing_config
    return routing.current_deployment_version.build_id


async def pinned_to(run: Run[Any, Any], client: Client) -> tuple[str, str]:
    """The versioning behaviour of *run* and the build id it is on."""
    description = await client.get_workflow_handle(run.id).describe()
    info = description.raw_description.workflow_execution_info.versioning_info
    behavior = VersioningBehavior.Name(info.behavior)
    return behavior, info.deployment_version.build_id


async def test_runs_stay_on_the_build_they_started_on(
    client: Client,
    temporal_address: str,
    queue: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two builds of ``reviewed`` serve one task queue and deployment: this
    process hosts version 1, a CLI worker version 2.  A run started while
    version 1 is current waits at its interrupt, version 2 becomes current,
    and the answered run still finishes on version 1's worker; a run
    started then runs on version 2's.  The nodes record which process ran
    them; without pinning, the waiting run would move to version 2's
    worker, which refuses it (another fingerprint), and never end."""
    effects = tmp_path / "effects"
    effects.touch()
    monkeypatch.setenv(EFFECTS_ENV, str(effects))
    deployment = f"reviews-{queue}"
    v1, v2 = build_id([REVIEWED_V1]), build_id([REVIEWED_V2])
    assert v1 != v2
    runs = Runs(client, task_queue=queue)
    yes = Approval(approved=True, by="ada")
    with anyio.fail_after(90):  # an unpinned run would never end
        async with worker(
            client, [REVIEWED_V1], task_queue=queue, deployment=deployment
        ):
            await make_current(client, deployment, v1)
            old = await runs.start(REVIEWED_V1, Tally())
            assert (await old.paused()).unwrap().pending is not None
            async with cli_worker(
                temporal_address,
                queue,
                "tests.temporal.graphs:REVIEWED_V2",
                env={EFFECTS_ENV: str(effects)},
                options=["--deployment", deployment],
            ) as (process, _):
                await make_current(client, deployment, v2)
                # Queries of the pinned run still reach version 1's worker.
                waiting = (await old.snapshot()).unwrap()
                assert waiting.status is Status.INTERRUPTED
                new = await runs.start(REVIEWED_V2, Tally())
                assert (await new.paused()).unwrap().pending is not None
                assert (await new.answer(yes)) == Success(None)
                assert (await old.answer(yes)) == Success(None)
                new_final = (await new.result()).unwrap()
                old_final = (await old.result()).unwrap()
                assert await pinned_to(old, client) == (
                    "VERSIONING_BEHAVIOR_PINNED",
                    v1,
                )
                assert await pinned_to(new, client) == (
                    "VERSIONING_BEHAVIOR_PINNED",
                    v2,
                )
                assert await current_build(client, deployment) == v2
                here, there = str(os.getpid()), str(process.pid)
    assert old_final.state.trail == pvector(["draft", "publish"])
    assert new_final.state.trail == pvector(["draft", "publish", "announce"])
    ran = Counter(
        tuple(line.split()) for line in effects.read_text().splitlines()
    )
    assert ran == Counter(
        {
            (old.id, "draft", here): 1,
            (old.id, "publish", here): 1,
            (new.id, "draft", there): 1,
            (new.id, "publish", there): 1,
            (new.id, "announce", there): 1,
        }
    )
