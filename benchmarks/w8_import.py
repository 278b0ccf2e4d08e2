"""W8: import time, minus a bare interpreter start: ``from pipeline import
*`` (every public name: ``import pipeline`` alone loads them lazily, on first
use) and ``import pipeline`` itself."""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

from benchmarks._harness import Case


def _start(code: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True)  # noqa: S603
    return time.perf_counter() - start


def cases(reps: int) -> list[Case]:
    """Median import cost over *reps* fresh interpreters."""
    _start("from pipeline import *")  # warm the file cache
    bare = statistics.median(_start("pass") for _ in range(reps))
    out: list[Case] = []
    for variant, code in (
        ("from pipeline import *", "from pipeline import *"),
        ("import pipeline", "import pipeline"),
    ):
        full = statistics.median(_start(code) for _ in range(reps))
        out += [
            Case(
                "W8", variant, "baseline", 1, "import", reps, bare, bare * 1e6
            ),
            Case(
                "W8",
                variant,
                "pipeline",
                1,
                "import",
                reps,
                full,
                (full - bare) * 1e6,
            ),
        ]
    return out
