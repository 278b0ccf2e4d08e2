"""Record the histories ``test_replay`` replays: ``python -m
tests.temporal.record_histories`` (starts a dev server of its own).

Re-record only on purpose: a history that no longer replays means runs
in flight would break on upgrade (use worker versioning, see
``docs/temporal.md``, and keep the old histories with the old build).
"""

from __future__ import annotations

import asyncio
import uuid

from pathlib import Path

from pipeline.temporal import connect, dev_server
from tests.temporal.test_replay import HISTORIES, record


async def main() -> None:
    """Run the recorded machines on a fresh dev server; write histories."""
    with dev_server() as address:
        client = await connect(address)
        histories = await record(client, f"record-{uuid.uuid4().hex}")
    HISTORIES.mkdir(exist_ok=True)
    for old in HISTORIES.glob("*.json"):
        old.unlink()
    for i, history in enumerate(histories):
        path: Path = HISTORIES / f"{i:02d}-{history.workflow_id}.json"
        path.write_text(history.to_json())  # noqa: ASYNC240


if __name__ == "__main__":
    asyncio.run(main())
