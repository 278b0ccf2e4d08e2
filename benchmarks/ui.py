"""``pipeline ui``: start-up on a 10,000-record SQLite store, and the time a
browser takes to render a thread page of 1,000 versions.

    python -m benchmarks.ui [--reps N]

Start-up is wall time from spawning ``pipeline ui`` to the first answer of
its threads page (the process prints its URL once it listens).  Render time
is what Chromium reports for the thread page (its newest 200 versions
listed, as the page lists them by default; Navigation Timing: request
start to the load event), the page served by that process: the first
visit (the process imports the graph's code, decodes the thread and draws
it) and a second one.  The target is
under a second for each; this is a measurement, not a test.

The store: one thread of 1,000 versions and 90 of 100 (10,000 records),
all of the support desk from ``tests/cli/flows.py``, written directly.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
import urllib.request

from pathlib import Path

import anyio
import attrs

from tests.cli.runner import environment
from tests.cli.ui_browser import browser, serving


BIG = "big"
"""The thread of 1,000 versions."""


async def _build(path: Path) -> int:
    """Fill *path*; the number of records written."""
    from pipeline.cli._stores import note_target  # noqa: PLC0415
    from pipeline.stores import SQLiteStore  # noqa: PLC0415
    from tests.cli import flows  # noqa: PLC0415

    written = 0
    async with SQLiteStore(path) as store:
        for thread, versions in [(BIG, 1000)] + [
            (f"t{i:02}", 100) for i in range(90)
        ]:
            snap = flows.plain.start(flows.Ticket("charge"), thread_id=thread)
            records = [flows.plain.codec.encode(snap, None)]
            for i in range(1, versions):  # classify and draft, taking turns
                node = ("classify", "draft")[i % 2]
                state = attrs.evolve(snap.state, reply=f"draft {i}")
                nxt = snap.successor(state, node, ("draft",))
                records.append(flows.plain.codec.encode(nxt, snap))
                snap = nxt
            for record in records:
                await store.commit(record, expected_head=record.parent)
            written += len(records)
            await note_target(store, thread, "tests.cli.flows:plain")
    return written


def main() -> None:
    """Print the figures (and JSON with --json)."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        where = Path(tmp)
        store = where / "big.sqlite3"
        records = anyio.run(_build, store)
        starts: list[float] = []
        renders: list[float] = []
        servers: list[float] = []  # request start to the response's end
        again: list[float] = []  # the same page, visited a second time
        rows = 0
        with browser() as chromium:
            for _ in range(args.reps):
                began = time.perf_counter()
                with serving(str(store), cwd=where, env=environment()) as url:
                    with urllib.request.urlopen(url) as first:  # noqa: S310
                        first.read()
                    starts.append(time.perf_counter() - began)
                    for visits in (renders, again):
                        page = chromium.new_page()
                        page.goto(f"{url}thread?id={BIG}")
                        timing = page.evaluate(
                            "() => { const t = performance.getEntriesByType("
                            "'navigation')[0]; return [t.requestStart, "
                            "t.loadEventEnd, document.querySelectorAll("
                            "'tr').length, t.responseEnd]; }"
                        )
                        rows = int(timing[2]) - 1
                        visits.append((timing[1] - timing[0]) / 1000)
                        if visits is renders:
                            servers.append((timing[3] - timing[0]) / 1000)
                        page.close()
    figures = {
        "records": records,
        "thread_versions": 1000,
        "rows_listed": rows,
        "startup_s_median": statistics.median(starts),
        "render_s_median": statistics.median(renders),
        "startup_s": starts,
        "render_s": renders,
        "served_s_median": statistics.median(servers),
        "served_s": servers,
        "again_s_median": statistics.median(again),
        "again_s": again,
    }
    if args.json:
        print(json.dumps(figures))
        return
    print(
        f"store: {records} records; thread page: 1000 versions, {rows} listed"
    )
    print(
        f"pipeline ui start-up: median {figures['startup_s_median']:.3f} s "
        f"over {len(starts)} (target < 1 s)"
    )
    print(
        f"thread page render:   median {figures['render_s_median']:.3f} s "
        f"over {len(renders)} (target < 1 s), of which served in "
        f"{figures['served_s_median']:.3f} s; a second visit "
        f"{figures['again_s_median']:.3f} s"
    )


if __name__ == "__main__":
    main()
