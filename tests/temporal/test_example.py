"""The example project examples/temporal_deployment runs as documented."""

from __future__ import annotations

import os
import subprocess
import sys

from pathlib import Path

import pytest

from pipeline.temporal._devserver import ADDRESS_ENV


pytestmark = [pytest.mark.temporal, pytest.mark.slow]

EXAMPLE = (
    Path(__file__).resolve().parents[2] / "examples" / "temporal_deployment"
)


def test_the_deployment_example_runs(temporal_address: str) -> None:
    """``python run_local.py``: a worker process hosts the graph, the
    client answers the editor, the run publishes, the worker stops with 0."""
    out = subprocess.run(
        [sys.executable, "run_local.py"],
        cwd=EXAMPLE,
        env={**os.environ, ADDRESS_ENV: temporal_address},
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    lines = out.stdout.splitlines()
    assert lines[0].startswith("pipeline.temporal worker on")
    assert "asks: publish 'Tea is better than you think.'?" in lines[1]
    assert lines[2:] == ["done: drafted -> published", "worker exited with 0"]
