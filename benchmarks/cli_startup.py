"""CLI start-up: ``pipeline --help`` against ``python -c pass``, same run.

The ``pipeline`` console script runs ``pipeline.cli.main``; both sides start
a fresh interpreter, so the difference is what the command line costs
before it does anything (click and the command table: ``import pipeline``
loads its public names lazily, on first use, so ``--help`` loads none).
The target is at most 150 ms over the bare interpreter.

Wall time suffers on a shared machine (every start waits for a core), so
the CPU time the child used (user + system, from ``getrusage``) is
reported too: it is what the start-up costs when a core is free.
"""

from __future__ import annotations

import resource
import statistics
import subprocess
import sys
import time

from benchmarks._harness import Case


def _start(*args: str) -> tuple[float, float]:
    """Wall and CPU seconds of one fresh interpreter running *args*."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(  # noqa: S603  # our own interpreter
        [sys.executable, *args], check=True, stdout=subprocess.DEVNULL
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (
        after.ru_stime - before.ru_stime
    )
    return wall, cpu


def _pair(variant: str, reps: int, base: float, full: float) -> list[Case]:
    return [
        Case("CLI", variant, "baseline", 1, "start", reps, base, base * 1e6),
        Case(
            "CLI",
            variant,
            "pipeline",
            1,
            "start",
            reps,
            full,
            full * 1e6,  # the table subtracts the baseline
        ),
    ]


def cases(reps: int) -> list[Case]:
    """Median start-up over *reps* fresh interpreters, alternating sides."""
    _start("-m", "pipeline", "--help")  # warm the file cache
    bare: list[tuple[float, float]] = []
    cli: list[tuple[float, float]] = []
    lib: list[tuple[float, float]] = []
    for _ in range(reps):  # interleaved: drift hits every side alike
        bare.append(_start("-c", "pass"))
        cli.append(_start("-m", "pipeline", "--help"))
        lib.append(_start("-c", "import click"))
    # What the command line adds to click's own import (the command
    # table, the package's lazy __init__), on CPU time: the pair's
    # "baseline" is ``import click``.
    return [
        *_pair(
            "--help wall",
            reps,
            statistics.median(w for w, _ in bare),
            statistics.median(w for w, _ in cli),
        ),
        *_pair(
            "--help cpu",
            reps,
            statistics.median(c for _, c in bare),
            statistics.median(c for _, c in cli),
        ),
        *_pair(
            "--help cpu over import click",
            reps,
            statistics.median(c for _, c in lib),
            statistics.median(c for _, c in cli),
        ),
    ]
