"""W7: an agent whose scripted model calls a trivial tool each turn, then answers."""

from __future__ import annotations

import hashlib
import json

from collections.abc import Awaitable, Callable

from benchmarks._harness import Case, Settings, measure
from pipeline import Agent, Context, Message, graph, stores, tool
from pipeline.testing import Reply, ScriptedModel


@tool
async def echo(text: str) -> str:
    """Return the text."""
    return text


def _ours(turns: int) -> Callable[[], Awaitable[int]]:
    steps = [Reply.tool_call("echo", {"text": "hi"}) for _ in range(turns - 1)]

    async def run() -> int:
        model = ScriptedModel(*steps, Reply.text("done"))
        agent = Agent("bench", model, tools=[echo], max_turns=turns)
        out = (await agent.run([Message.user("go")])).unwrap()
        return out.turns

    return run


def _ours_checkpointed(turns: int) -> Callable[[], Awaitable[int]]:
    """The agent as the node of a graph over contexts, on the in-memory
    store: every turn is a record."""
    steps = [Reply.tool_call("echo", {"text": "hi"}) for _ in range(turns - 1)]
    model = ScriptedModel(*steps, Reply.text("done"), cycle=True)
    agent = Agent("bench", model, tools=[echo], max_turns=turns)
    g = (
        graph.builder(Context)
        .node("bench", agent)
        .entry("bench")
        .edge("bench", graph.END)
        .build()
    )

    async def run() -> int:
        # The scripted model keeps every request it is sent (for tests to
        # read): shared by every run, it would hold ten more a run, and
        # the timing would count the collector scanning them all (about
        # 8 µs a turn by the end of a quick run), as no user's model does.
        model.requests.clear()
        store = stores.MemoryStore()
        out = await g.run(
            Context.of(Message.user("go"), run_id="r"),
            store=store,
            thread_id="t",
        )
        if not out.unwrap().done:
            return -1
        # The admission and the node's own record aside, one per turn.
        return len(await store.records("t")) - 2

    return run


def _plain(
    turns: int, *, checkpoint: bool = False
) -> Callable[[], Awaitable[int]]:
    async def model(
        _history: list[dict[str, object]], n: int
    ) -> dict[str, object]:
        if n < turns:
            return {
                "role": "assistant",
                "tool_calls": [
                    {
                        "id": f"c{n}",
                        "name": "echo",
                        "arguments": '{"text": "hi"}',
                    }
                ],
            }
        return {"role": "assistant", "content": "done"}

    async def echo_plain(text: str) -> str:
        return text

    async def run() -> int:
        history: list[dict[str, object]] = [{"role": "user", "content": "go"}]
        records: list[tuple[bytes, str]] = []
        n = 0
        while True:
            n += 1
            reply = await model(history, n)
            start = len(history)
            history.append(reply)
            calls = reply.get("tool_calls")
            if isinstance(calls, list):
                for call in calls:
                    args = json.loads(call["arguments"])
                    history.append(
                        {
                            "role": "tool",
                            "tool_call_id": call["id"],
                            "content": await echo_plain(args["text"]),
                        }
                    )
            if checkpoint:  # the turn's messages, as JSON with a checksum
                data = json.dumps(history[start:], sort_keys=True).encode()
                records.append((data, hashlib.sha256(data).hexdigest()))
            if not isinstance(calls, list):
                return len(records) if checkpoint else n

    return run


def cases(settings: Settings, *, quick: bool) -> list[Case]:
    """W7 at 10, 50 and 200 turns (10 and 50 when quick), plain and with
    every turn checkpointed in memory."""
    out: list[Case] = []
    for turns in [10, 50] if quick else [10, 50, 200]:
        for variant, impl, run in (
            ("agent", "baseline", _plain(turns)),
            ("agent", "pipeline", _ours(turns)),
            ("agent+memory", "baseline", _plain(turns, checkpoint=True)),
            ("agent+memory", "pipeline", _ours_checkpointed(turns)),
        ):
            case = measure(
                "W7",
                variant,
                impl,
                size=turns,
                unit="turn",
                run=run,
                expected=turns,
                settings=settings,
            )
            out.append(case)
    return out
