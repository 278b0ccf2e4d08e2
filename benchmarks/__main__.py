"""Run the benchmarks: `python -m benchmarks [--quick] [--backend trio]`."""

from __future__ import annotations

import argparse
import json
import os

from collections.abc import Callable
from pathlib import Path

from benchmarks import (
    cli_startup,
    mcp,
    w1_chain,
    w3_loop,
    w7_agent,
    w8_import,
    w9_durable,
    w10_swarm,
    w11_temporal,
    w_cache,
    w_graph,
    w_observe,
    w_servers,
)
from benchmarks._harness import Case, Settings, table


def main() -> None:
    """Run every workload, print JSON lines, then the table."""
    parser = argparse.ArgumentParser(prog="benchmarks")
    parser.add_argument(
        "--quick", action="store_true", help="small sizes, few reps"
    )
    parser.add_argument(
        "--backend", default="asyncio", choices=["asyncio", "trio"]
    )
    parser.add_argument(
        "--only",
        default="",
        help="comma-separated batches: chain,loop,graph,agent,swarm,durable,servers,import,cli,observe,temporal,mcp,cache",
    )
    parser.add_argument(
        "--json",
        type=Path,
        default=None,
        help="also write every case to this file (benchmarks.compare reads it)",
    )
    args = parser.parse_args()
    reps = 3 if args.quick else 7
    min_units = 20_000 if args.quick else 200_000
    w1 = [10, 100, 1000] if args.quick else [10, 100, 1000, 10_000]
    w3 = [100, 1000, 10_000] if args.quick else [100, 1000, 10_000, 1_000_000]
    settings = Settings(reps, min_units, args.backend)
    batches: dict[str, Callable[[], list[Case]]] = {
        "chain": lambda: w1_chain.cases(w1, settings),
        "loop": lambda: w3_loop.cases(w3, settings),
        "graph": lambda: w_graph.cases(settings, quick=args.quick),
        "agent": lambda: w7_agent.cases(settings, quick=args.quick),
        "swarm": lambda: w10_swarm.cases(settings, quick=args.quick),
        "durable": lambda: w9_durable.cases(settings, quick=args.quick),
        "servers": lambda: w_servers.cases(settings),
        "import": lambda: w8_import.cases(reps),
        "cli": lambda: cli_startup.cases(max(reps, 20)),
        "observe": lambda: w_observe.cases(settings, quick=args.quick),
        "temporal": lambda: w11_temporal.cases(settings, quick=args.quick),
        "mcp": lambda: mcp.cases(settings, quick=args.quick),
        "cache": lambda: w_cache.cases(settings, quick=args.quick),
    }
    chosen = [b for b in args.only.split(",") if b] or list(batches)
    cases: list[Case] = []
    for batch in (batches[b] for b in chosen):  # printed as each finishes
        for case in batch():
            print(case.line(), flush=True)
            cases.append(case)
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        record = {
            "backend": args.backend,
            "quick": args.quick,
            "loadavg": list(os.getloadavg()),
            "cases": [json.loads(c.line()) for c in cases],
        }
        args.json.write_text(json.dumps(record, indent=1) + "\n")
    print()
    print(f"backend: {args.backend}; medians of {reps} runs after a warm-up")
    print(table(cases))


if __name__ == "__main__":
    main()
