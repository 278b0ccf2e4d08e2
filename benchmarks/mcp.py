"""MCP tool-call overhead: ``pipeline.mcp`` against the bare ``mcp`` client.

One server program (the tests' own, ``tests/mcp/servers/tools.py``,
written with the official SDK) answers ``add``; both sides call it with
the same arguments, in the same run, timings interleaved (ours, bare,
ours, ...) so that the shared machine's drift falls on both.  Ours is a
model's call as an agent makes it: ``Tool.call`` on the JSON arguments
(decoded, checked against the server's schema, sent, the structured
result mapped to text); the bare client's is ``Client.call_tool`` on a
dict.  Over stdio each side has its own server process; over HTTP both
talk to one server on loopback.

``python -m benchmarks.mcp [--quick] [--backend trio]``, or the ``mcp``
batch of ``python -m benchmarks``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack

import anyio

from mcp import Client, StdioServerParameters

from benchmarks._harness import Case, Settings, table
from pipeline.mcp import McpServer, http, stdio
from tests.mcp.helpers import TOOLS, http_server


CALLS = 200
"""Calls per timing."""


async def _timed(call: Callable[[], Awaitable[object]], n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        await call()
    return (time.perf_counter() - start) / n


async def _measure(transport: str, reps: int, calls: int) -> list[Case]:
    async with AsyncExitStack() as stack:
        ours: McpServer
        if transport == "stdio":
            ours = stdio(sys.executable, TOOLS, name="ours")
            bare = Client(
                StdioServerParameters(command=sys.executable, args=[TOOLS]),
                mode="legacy",
                cache=None,
            )
        else:
            url = await stack.enter_async_context(http_server())
            ours = http(url, name="ours")
            bare = Client(url, mode="legacy", cache=None)
        await stack.enter_async_context(ours)
        await stack.enter_async_context(bare)
        (add,) = [t for t in await ours.tools() if t.name == "add"]

        async def pipeline_call() -> object:
            text, failed = await add.call('{"a": 2, "b": 3}')
            assert text == '{"sum":5}', text  # noqa: S101
            assert not failed  # noqa: S101
            return text

        async def bare_call() -> object:
            result = await bare.call_tool("add", {"a": 2, "b": 3})
            assert result.structured_content == {"sum": 5}  # noqa: S101
            return result

        await _timed(pipeline_call, calls // 4)  # warm-up
        await _timed(bare_call, calls // 4)
        times: dict[str, list[float]] = {"pipeline": [], "baseline": []}
        for _ in range(reps):
            times["pipeline"].append(await _timed(pipeline_call, calls))
            times["baseline"].append(await _timed(bare_call, calls))
    return [
        Case(
            "MCP",
            f"call-{transport}",
            impl,
            1,
            "call",
            reps,
            statistics.median(ts),
            statistics.median(ts) * 1e6,
        )
        for impl, ts in times.items()
    ]


def cases(settings: Settings, *, quick: bool = False) -> list[Case]:
    """One tool call over stdio and over HTTP, ours beside the bare
    client (µs/call)."""
    calls = CALLS // 4 if quick else CALLS
    out: list[Case] = []
    for transport in ("stdio", "http"):
        out.extend(
            anyio.run(
                _measure,
                transport,
                settings.reps,
                calls,
                backend=settings.backend,
            )
        )
    return out


def main() -> None:
    """Print the cases as JSON lines, then the table."""
    parser = argparse.ArgumentParser(prog="benchmarks.mcp")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--backend", default="asyncio", choices=["asyncio", "trio"]
    )
    args = parser.parse_args()
    reps = 3 if args.quick else 7
    found = cases(Settings(reps, 1, args.backend), quick=args.quick)
    for case in found:
        print(case.line(), flush=True)
    print(f"\nbackend: {args.backend}; medians of {reps} timings")
    print(table(found))


if __name__ == "__main__":
    main()
