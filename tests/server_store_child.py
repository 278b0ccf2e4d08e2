"""Child process of the server store tests (tests/test_server_stores.py).

``race KIND URL NAME WHO VERSIONS``: open the store, say ``ready``, wait for
a line on stdin, then commit versions 0..VERSIONS-1 of thread ``t`` racing
the other child (on a conflict, go on after the head it found); print the
versions this one won and how many commits it lost, as JSON.

``lease KIND URL NAME TTL``: take thread ``t``'s lease for TTL seconds,
commit version 0 under it, print the lease as JSON, then block until
killed.
"""

from __future__ import annotations

import json
import sys

import anyio

from returns.pipeline import is_successful

from pipeline.failures import ConcurrentModification
from pipeline.stores import Record
from tests import servers


async def race(kind: str, url: str, name: str, who: str, n: int) -> None:
    """Commit as many of *n* versions as this process wins."""
    async with servers.open_store(kind, url, name, drop=False) as store:
        sys.stdout.write("ready\n")
        sys.stdout.flush()
        await anyio.to_thread.run_sync(sys.stdin.readline)
        won: list[int] = []
        lost = 0
        v = 0
        while v < n:
            out = await store.commit(
                Record(
                    "t", v, v - 1 if v else None, f"{who}:{v}".encode(), "-"
                ),
                expected_head=v - 1 if v else None,
            )
            if is_successful(out):
                won.append(v)
                v += 1
                continue
            lost += 1
            failure = out.failure()
            assert isinstance(failure, ConcurrentModification)
            assert failure.actual_head is not None
            v = failure.actual_head + 1
        sys.stdout.write(json.dumps({"won": won, "lost": lost}) + "\n")
        sys.stdout.flush()


async def lease(kind: str, url: str, name: str, ttl: float) -> None:
    """Hold thread ``t`` until killed."""
    async with servers.open_store(kind, url, name, drop=False) as store:
        held = (await store.acquire("t", "doomed", ttl=ttl)).unwrap()
        committed = await store.commit(
            Record("t", 0, None, b"{}", "-"), expected_head=None, lease=held
        )
        assert is_successful(committed)
        sys.stdout.write(
            json.dumps({"token": held.token, "expires": held.expires}) + "\n"
        )
        sys.stdout.flush()
        await anyio.sleep_forever()


def main() -> None:
    """Run the command in ``sys.argv``."""
    command, kind, url, name, *rest = sys.argv[1:]
    if command == "race":
        anyio.run(race, kind, url, name, rest[0], int(rest[1]))
    else:
        anyio.run(lease, kind, url, name, float(rest[0]))


if __name__ == "__main__":
    main()
