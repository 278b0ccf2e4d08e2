"""``Agent(max_parallel_tools=N)``: how many tool calls of one reply run at once.

The tools record the peak of calls running together.  Each call waits,
without sleeping, until as many calls run as the limit allows (or every
call has started), so a peak below the limit would hang (a watchdog fails
it) and a peak above it is seen.
"""

from __future__ import annotations

import anyio
import attrs
import pytest

from pipeline import Agent, Message, Tool, tool
from pipeline.errors import ConstructionError
from pipeline.testing import Reply, ScriptedModel


CALLS = 8


@attrs.define
class Meter:
    """Counts the calls running now and the most that ran at once."""

    expect: int
    total: int = CALLS
    active: int = 0
    started: int = 0
    peak: int = 0
    full: anyio.Event = attrs.field(factory=anyio.Event)

    async def enter(self) -> None:
        self.active += 1
        self.started += 1
        self.peak = max(self.peak, self.active)
        if self.active >= self.expect or self.started == self.total:
            self.full.set()
        await self.full.wait()

    def leave(self) -> None:
        self.active -= 1


def metered(meter: Meter) -> Tool:
    @tool
    async def work(n: int) -> int:
        """Do some work."""
        await meter.enter()
        try:
            # Give every other task the chance to start while this one runs.
            for _ in range(3):
                await anyio.lowlevel.checkpoint()
            return n
        finally:
            meter.leave()

    return work


def reply_of_many() -> ScriptedModel:
    return ScriptedModel(
        Reply.tool_calls(*(("work", {"n": i}, f"c{i}") for i in range(CALLS))),
        Reply.text("done"),
    )


async def _run(limit: int | None, expect: int) -> tuple[Meter, list[Message]]:
    meter = Meter(expect)
    with reply_of_many() as model:
        agent = Agent(
            "busy", model, tools=[metered(meter)], max_parallel_tools=limit
        )
        with anyio.fail_after(10):
            out = (await agent.run([Message.user("go")])).unwrap()
    return meter, list(out.messages)


@pytest.mark.parametrize("limit", [1, 2, 3, 7])
async def test_at_most_n_tool_calls_run_at_once(limit: int) -> None:
    """The peak is the limit: reached, never passed."""
    meter, _ = await _run(limit, limit)
    assert meter.peak == limit
    assert meter.started == CALLS
    assert meter.active == 0


@pytest.mark.parametrize("limit", [None, CALLS, CALLS + 5])
async def test_without_a_binding_limit_every_call_runs_at_once(
    limit: int | None,
) -> None:
    """The default (``None``), or a limit no smaller than the calls: all at once."""
    meter, _ = await _run(limit, CALLS)
    assert meter.peak == CALLS


@pytest.mark.parametrize("limit", [None, 1, 3])
async def test_results_keep_the_call_order(limit: int | None) -> None:
    """Tool results come back in the order of the calls, whatever the limit."""
    _, messages = await _run(limit, limit or CALLS)
    results = [m for m in messages if m.tool_call_id]
    assert [m.tool_call_id for m in results] == [f"c{i}" for i in range(CALLS)]
    assert [m.content for m in results] == [str(i) for i in range(CALLS)]
    assert messages[-1].content == "done"


async def test_a_failed_call_under_a_limit_still_answers_every_call() -> None:
    """Bad arguments become an error result; the other calls still run."""

    @tool
    async def echo(n: int) -> int:
        """Echo."""
        return n

    model = ScriptedModel(
        Reply.tool_calls(
            ("echo", {"n": 1}, "a"),
            ("echo", {"n": "hunter2"}, "b"),
            ("echo", {"n": 3}, "c"),
        ),
        Reply.text("ok"),
    )
    with model:
        agent = Agent("e", model, tools=[echo], max_parallel_tools=2)
        out = (await agent.run([Message.user("go")])).unwrap()
    results = [m for m in out.messages if m.tool_call_id]
    assert [m.tool_call_id for m in results] == ["a", "b", "c"]
    assert results[0].content == "1"
    assert results[1].content.startswith("error:")
    assert "'n'" in results[1].content
    assert "hunter2" not in results[1].content
    assert results[2].content == "3"


@pytest.mark.parametrize("bad", [0, -1, True, 1.5, "2"])
def test_the_limit_must_be_a_whole_number_at_least_one(bad: object) -> None:
    """A limit that cannot run anything is refused when the agent is built,
    naming the agent and the setting."""
    with pytest.raises(
        ConstructionError, match=r"agent 'x': max_parallel_tools must be"
    ):
        Agent("x", ScriptedModel(), max_parallel_tools=bad)  # type: ignore[call-overload]


def test_the_default_is_no_limit() -> None:
    assert Agent("x", ScriptedModel()).max_parallel_tools is None
