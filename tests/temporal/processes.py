"""Workers in processes of their own, through the CLI entry."""

from __future__ import annotations

import os
import sys

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import anyio

from anyio.abc import Process
from anyio.streams.text import TextReceiveStream


ROOT = Path(__file__).resolve().parents[2]


@asynccontextmanager
async def cli_worker(
    address: str,
    queue: str,
    *objects: str,
    env: dict[str, str],
    options: Sequence[str] = (),
) -> AsyncIterator[tuple[Process, AsyncIterator[str]]]:
    """``python -m pipeline.temporal worker`` (with more *options*) in a
    process of its own, started once it says it polls; yields it and its
    output lines."""
    process = await anyio.open_process(
        [
            sys.executable,
            "-m",
            "pipeline.temporal",
            "worker",
            *objects,
            "--address",
            address,
            "--task-queue",
            queue,
            "--grace",
            "5",
            *options,
        ],
        cwd=ROOT,
        env={**os.environ, **env},
        stderr=None,
    )
    assert process.stdout is not None

    async def lines() -> AsyncIterator[str]:
        assert process.stdout is not None
        buffer = ""
        async for chunk in TextReceiveStream(process.stdout):
            buffer += chunk
            *done, buffer = buffer.split("\n")
            for line in done:
                yield line

    output = lines()
    try:
        with anyio.fail_after(60):
            async for line in output:
                if line.startswith("pipeline.temporal worker on"):
                    break
        yield process, output
    finally:
        if process.returncode is None:
            process.kill()
        await process.wait()
        await process.aclose()
