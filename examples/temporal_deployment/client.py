"""Start a review on the workers, answer the editor's question, await it.

python client.py --address 127.0.0.1:7233 --topic "tea"
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys

from review import REVIEW, Article, EmptyTopic, Verdict

from pipeline.temporal import Runs, connect


async def review(address: str, topic: str, queue: str) -> str:
    client = await connect(address)
    runs = Runs(client, task_queue=queue, failures=[EmptyTopic])
    run = await runs.start(REVIEW, Article(topic=topic))
    paused = (await run.paused()).unwrap()
    assert paused.pending is not None
    print(f"run {run.id} asks: {paused.pending.question}")
    (await run.answer(Verdict(approved=True, editor="ada"))).unwrap()
    final = (await run.result()).unwrap()
    return " -> ".join(final.state.log)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--address", default="127.0.0.1:7233")
    parser.add_argument("--task-queue", default="reviews")
    parser.add_argument("--topic", default="tea")
    args = parser.parse_args()
    log = asyncio.run(review(args.address, args.topic, args.task_queue))
    print(f"done: {log}")


if __name__ == "__main__":
    main()
    # Temporal's Rust core may touch the interpreter while it finalizes and
    # abort it (temporalio/sdk-python#300): we are done, skip the teardown.
    sys.stdout.flush()
    os._exit(0)
