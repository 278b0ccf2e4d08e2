"""W8: `import pipeline` time, minus a bare interpreter start."""

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
    _start("import pipeline")  # warm the file cache
    bare = statistics.median(_start("pass") for _ in range(reps))
    full = statistics.median(_start("import pipeline") for _ in range(reps))
    return [
        Case("W8", "import", "baseline", 1, "import", reps, bare, bare * 1e6),
        Case(
            "W8",
            "import",
            "pipeline",
            1,
            "import",
            reps,
            full,
            (full - bare) * 1e6,
        ),
    ]
