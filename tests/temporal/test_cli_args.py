"""The worker command refuses bad numbers with a usage line, not a
traceback."""

from __future__ import annotations

import subprocess
import sys

import pytest


pytestmark = pytest.mark.slow  # a Python process per case


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("--max-activities", "-5"),
        ("--max-activities", "many"),
        ("--max-calls", "0"),
        ("--grace", "-1"),
        ("--grace", "inf"),
    ],
)
def test_bad_numbers_are_usage_errors(option: str, value: str) -> None:
    """Exit 2 and one usage error naming the option; no traceback."""
    done = subprocess.run(  # noqa: S603  # our own module
        [sys.executable, "-m", "pipeline.temporal", "worker", "m:g",
         f"{option}={value}"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert option in done.stderr
    assert "Traceback" not in done.stderr
