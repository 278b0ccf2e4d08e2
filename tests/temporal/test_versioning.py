"""Worker versioning: the build id names the hosted graphs' shapes."""

from __future__ import annotations

import pytest

from temporalio.client import Client

from pipeline.graph import END, Graph, builder
from pipeline.temporal import build_id, worker
from tests.temporal.graphs import APPROVAL, RELAY, Refused, Tally, bump, chain


pytestmark = pytest.mark.temporal


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
