"""``python -m pipeline.temporal worker MODULE:OBJECT ...``: run a worker.

Each ``MODULE:OBJECT`` names a graph or a swarm (or a sequence or a
mapping of them) importable from the current directory; the worker hosts
them all on one task queue until it receives SIGINT or SIGTERM, then
finishes the steps in flight (up to ``--grace`` seconds) and exits 0.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import math
import os
import signal
import sys

from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any

from ._client import connect
from ._hosted import Hostable
from ._worker import DEFAULT_TASK_QUEUE, worker


def _load(spec: str) -> object:
    module, sep, name = spec.partition(":")
    if not sep or not module or not name:
        msg = f"{spec!r} is not MODULE:OBJECT"
        raise SystemExit(msg)
    if "" not in sys.path:
        sys.path.insert(0, "")  # the current directory, as `python -m` does
    try:
        value: object = importlib.import_module(module)
    except ImportError as exc:
        msg = f"cannot import {module!r}: {exc}"
        raise SystemExit(msg) from None
    for part in name.split("."):
        try:
            value = getattr(value, part)
        except AttributeError:
            msg = f"{module!r} has no {name!r}"
            raise SystemExit(msg) from None
    return value


def _machines(specs: Sequence[str]) -> dict[str, Hostable]:
    from ..graph._graph import Graph  # noqa: PLC0415  # after argument errors
    from ..swarm._swarm import Swarm  # noqa: PLC0415

    found: dict[str, Hostable] = {}
    for spec in specs:
        value = _load(spec)
        items: list[tuple[str | None, object]]
        if isinstance(value, Mapping):
            named: Mapping[Any, object] = value
            items = [(str(k), v) for k, v in named.items()]
        elif isinstance(value, (Graph, Swarm)):
            items = [(None, value)]
        elif isinstance(value, (list, tuple)):
            seq: Sequence[object] = value
            items = [(None, v) for v in seq]
        else:
            items = [(None, value)]
        for key, item in items:
            if not isinstance(item, (Graph, Swarm)):
                msg = (
                    f"{spec}: not a graph or a swarm (a {type(item).__name__})"
                )
                raise SystemExit(msg)
            machine: Hostable = item
            found[key or machine.name] = machine
    return found


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m pipeline.temporal",
        description="Run pipeline graphs and swarms on Temporal.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser(
        "worker", help="host graphs and swarms on a task queue"
    )
    run.add_argument(
        "objects",
        nargs="+",
        metavar="MODULE:OBJECT",
        help="a graph or swarm (or a list or dict of them)",
    )
    run.add_argument("--address", default="127.0.0.1:7233")
    run.add_argument("--namespace", default="default")
    run.add_argument("--task-queue", default=DEFAULT_TASK_QUEUE)
    run.add_argument(
        "--max-activities",
        type=_count,
        default=100,
        help="steps this worker runs at once (default 100)",
    )
    run.add_argument(
        "--max-calls",
        type=_count,
        default=100,
        help="agents' model and tool calls it makes at once (default 100)",
    )
    run.add_argument(
        "--failures",
        nargs="*",
        default=[],
        metavar="MODULE:OBJECT",
        help="your failure types (attrs classes), sent by name",
    )
    run.add_argument(
        "--deployment",
        default=None,
        help="turn on worker versioning under this deployment name",
    )
    run.add_argument(
        "--grace",
        type=_seconds,
        default=30.0,
        help="seconds to let steps in flight finish on shutdown",
    )
    return parser


def _count(text: str) -> int:
    """A positive whole number (argparse type)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        msg = "must be a whole number, at least 1"
        raise argparse.ArgumentTypeError(msg)
    return value


def _seconds(text: str) -> float:
    """A finite number of seconds, zero or more (argparse type)."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not (math.isfinite(value) and value >= 0):
        msg = "must be a number of seconds, zero or more"
        raise argparse.ArgumentTypeError(msg)
    return value


async def _serve(args: argparse.Namespace) -> None:
    machines = _machines(args.objects)
    failures = [_load(spec) for spec in args.failures]
    for kind in failures:
        if not isinstance(kind, type):
            msg = f"--failures: {kind!r} is not a class"
            raise SystemExit(msg)
    client = await connect(args.address, namespace=args.namespace)
    w = worker(
        client,
        machines,
        task_queue=args.task_queue,
        max_concurrent_activities=args.max_activities,
        max_concurrent_calls=args.max_calls,
        failures=[k for k in failures if isinstance(k, type)],
        deployment=args.deployment,
        graceful_shutdown=timedelta(seconds=args.grace),
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with w:
        names = ", ".join(sorted(machines))
        print(
            f"pipeline.temporal worker on {args.address} "
            f"(queue {args.task_queue!r}): {names}",
            flush=True,
        )
        await stop.wait()


def main(argv: Sequence[str] | None = None) -> int:
    """The command line; returns the exit status."""
    args = _parser().parse_args(argv)
    asyncio.run(_serve(args))
    return 0


def exit_now(status: int) -> None:
    """Exit at once, once the worker (and its client) shut down cleanly.

    Temporal's Rust core keeps threads that may touch the interpreter while
    it finalizes, which then aborts (temporalio/sdk-python#300): a worker
    that stopped cleanly would exit with SIGABRT.  Everything of ours is
    done by now; flush, and skip the interpreter's teardown.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


if __name__ == "__main__":
    exit_now(main())
