"""Guard the gains: compare a benchmark run with the recorded one.

`make bench-quick` writes every case it measured to
`benchmarks/results/quick.json`; this script pairs each pipeline case with
the baseline (plain Python) case of the *same run* and compares the ratio
``pipeline / baseline`` with the ratio recorded in
`benchmarks/quick-recorded.json`.  Ratios, not absolute times: a loaded or
slower machine slows both sides of a ratio alike, so only a change in our
own overhead moves it.

    python -m benchmarks.compare [RUN] [--against RECORDED] [--threshold 0.2]
        [--report-only] [--record]

It prints every case whose ratio grew by more than the threshold (20%) and
exits 1 when there is one, unless `--report-only` (what `make check` uses:
a shared machine's noise must never fail a build).  A missing run file is
reported and skipped (`make check` does not run the benchmarks: it compares
the last `make bench-quick` when there is one).  `--record` copies the run
over the recorded figures after a change that moved them on purpose.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import sys

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import attrs


RUN = Path("benchmarks/results/quick.json")
RECORDED = Path("benchmarks/quick-recorded.json")
THRESHOLD = 0.2

Key = tuple[str, str, int]
"""A case's identity: workload, variant, size."""


@attrs.frozen
class Regression:
    """A case whose same-run ratio grew by more than the threshold."""

    key: Key
    recorded: float
    now: float

    @property
    def growth(self) -> float:
        """How much the ratio grew: 0.25 is 25% more overhead relative to plain."""
        return self.now / self.recorded - 1

    def line(self) -> str:
        """One printed line."""
        workload, variant, size = self.key
        return (
            f"{workload} {variant} size={size}: ratio {self.recorded:.2f}x"
            f" -> {self.now:.2f}x (+{self.growth:.0%})"
        )


def ratios(cases: Iterable[Mapping[str, Any]]) -> dict[Key, float]:
    """Each pipeline case's time over its same-run baseline's.

    Cases without a baseline of the same workload, variant and size, and
    baselines that took no measurable time, give no ratio.
    """
    cases = list(cases)
    base: dict[Key, float] = {
        (c["workload"], c["variant"], c["size"]): c["per_unit_us"]
        for c in cases
        if c["impl"] == "baseline"
    }
    out: dict[Key, float] = {}
    for c in cases:
        if c["impl"] != "pipeline":
            continue
        key: Key = (c["workload"], c["variant"], c["size"])
        b = base.get(key)
        if b is None or not b > 0 or not math.isfinite(b):
            continue
        out[key] = c["per_unit_us"] / b
    return out


def regressions(
    recorded: Mapping[Key, float],
    now: Mapping[Key, float],
    threshold: float = THRESHOLD,
) -> list[Regression]:
    """The cases in both whose ratio grew by more than *threshold*, worst first."""
    found = [
        Regression(key, recorded[key], now[key])
        for key in recorded.keys() & now.keys()
        if now[key] > recorded[key] * (1 + threshold)
    ]
    return sorted(found, key=lambda r: (-r.growth, r.key))


def load(path: Path) -> list[dict[str, Any]]:
    """The cases of a JSON file written by `python -m benchmarks --json`."""
    data = json.loads(path.read_text(encoding="utf-8"))
    cases = data["cases"] if isinstance(data, dict) else data
    if not isinstance(cases, list):
        msg = f"{path}: expected a list of cases or an object with 'cases'"
        raise TypeError(msg)
    return cases


def main(argv: list[str] | None = None) -> int:
    """Compare, print, and return the exit status."""
    parser = argparse.ArgumentParser(prog="benchmarks.compare")
    parser.add_argument("run", nargs="?", type=Path, default=RUN)
    parser.add_argument("--against", type=Path, default=RECORDED)
    parser.add_argument("--threshold", type=float, default=THRESHOLD)
    parser.add_argument("--report-only", action="store_true")
    parser.add_argument("--record", action="store_true")
    args = parser.parse_args(argv)
    if not args.run.exists():
        print(f"benchmarks: no run at {args.run} (make bench-quick writes it)")
        return 0
    if args.record:
        shutil.copyfile(args.run, args.against)
        print(f"benchmarks: recorded {args.run} as {args.against}")
        return 0
    if not args.against.exists():
        print(f"benchmarks: nothing recorded at {args.against}")
        return 0
    now, then = ratios(load(args.run)), ratios(load(args.against))
    found = regressions(then, now, args.threshold)
    compared = len(now.keys() & then.keys())
    print(
        f"benchmarks: {compared} same-run ratios compared with {args.against},"
        f" {len(found)} grew over {args.threshold:.0%}"
    )
    for r in found:
        print("  " + r.line())
    return 1 if found and not args.report_only else 0


if __name__ == "__main__":
    sys.exit(main())
