"""W7: an agent whose scripted model calls a trivial tool each turn, then answers."""

from __future__ import annotations

import json

from collections.abc import Awaitable, Callable

from benchmarks._harness import Case, Settings, measure
from pipeline import Message
from pipeline.agents import Agent
from pipeline.testing import Reply, ScriptedModel
from pipeline.tools import tool


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


def _plain(turns: int) -> Callable[[], Awaitable[int]]:
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
        n = 0
        while True:
            n += 1
            reply = await model(history, n)
            history.append(reply)
            calls = reply.get("tool_calls")
            if not isinstance(calls, list):
                return n
            for call in calls:
                args = json.loads(call["arguments"])
                history.append(
                    {
                        "role": "tool",
                        "tool_call_id": call["id"],
                        "content": await echo_plain(args["text"]),
                    }
                )

    return run


def cases(settings: Settings, *, quick: bool) -> list[Case]:
    """W7 at 10, 50 and 200 turns (10 and 50 when quick)."""
    out: list[Case] = []
    for turns in [10, 50] if quick else [10, 50, 200]:
        for impl, run in (
            ("baseline", _plain(turns)),
            ("pipeline", _ours(turns)),
        ):
            case = measure(
                "W7",
                "agent",
                impl,
                size=turns,
                unit="turn",
                run=run,
                expected=turns,
                settings=settings,
            )
            out.append(case)
    return out
