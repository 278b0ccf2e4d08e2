"""CLI start-up: ``pipeline --help`` against ``python -c pass``, same run.

The ``pipeline`` console script runs ``pipeline.cli.main``; both sides start
a fresh interpreter, so the difference is what the command line costs
before it does anything (``import pipeline``, click, the command table).
The target is at most 150 ms over the bare interpreter.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

from benchmarks._harness import Case


def _start(*args: str) -> float:
    start = time.perf_counter()
    subprocess.run(  # noqa: S603  # our own interpreter
        [sys.executable, *args], check=True, stdout=subprocess.DEVNULL
    )
    return time.perf_counter() - start


def cases(reps: int) -> list[Case]:
    """Median start-up over *reps* fresh interpreters, alternating sides."""
    _start("-m", "pipeline", "--help")  # warm the file cache
    bare: list[float] = []
    cli: list[float] = []
    for _ in range(reps):  # interleaved: drift hits both sides alike
        bare.append(_start("-c", "pass"))
        cli.append(_start("-m", "pipeline", "--help"))
    base, full = statistics.median(bare), statistics.median(cli)
    return [
        Case("CLI", "--help", "baseline", 1, "start", reps, base, base * 1e6),
        Case(
            "CLI",
            "--help",
            "pipeline",
            1,
            "start",
            reps,
            full,
            (full - base) * 1e6,
        ),
    ]
