"""A typed swarm's state tools: built once per agent, reading the state of
the step they are called in (so concurrent runs never share it)."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from returns.result import Result, Success

from pipeline import Agent, swarm
from pipeline.failures import ModelError
from pipeline.models import ModelRequest, ModelResponse
from pipeline.models._types import DeltaSink
from pipeline.swarm import _machine
from pipeline.testing import Reply, ScriptedModel
from tests.swarm.helpers import Mission, ask, transfer


async def test_state_tools_are_built_once_per_agent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two agents: two builds when the swarm is built, none per step."""
    built: list[object] = []
    real = _machine.state_tools  # type: ignore[attr-defined]

    def counting(*args: Any, **kwargs: Any) -> Any:
        built.append(args[1])
        return real(*args, **kwargs)

    monkeypatch.setattr(_machine, "state_tools", counting)
    a = ScriptedModel(
        Reply.tool_call("write_state", {"mission": "a"}),
        transfer("b"),
        Reply.tool_call("read_state", {"field": "mission"}),
        Reply.tool_call("write_state", {"mission": "a2"}),
        transfer("b"),
    )
    b = ScriptedModel(
        Reply.tool_call("read_state", {"field": "mission"}),
        transfer("a"),
        Reply.tool_call("write_state", {"mission": "b"}),
        Reply.text("done"),
    )
    team = (
        swarm.builder(state=Mission())
        .agent("a", Agent("a", a), handoffs=["b"], writable=["mission"])
        .agent("b", Agent("b", b), handoffs=["a"], writable=["mission"])
        .entry("a")
        .build()
    )
    assert built == [Mission, Mission]
    snap = (await team.run(ask("go"))).unwrap()
    assert built == [Mission, Mission]  # none per step: 4 steps ran
    assert snap.state.handoffs == 3
    assert snap.state.state == Mission("b")
    assert b.requests[1].messages[-1].content == '"a"'
    assert a.requests[3].messages[-1].content == '"a"'


class _Paced:
    """A model writing *mission*, then waiting for *go* before reading it
    back: two runs' turns interleave where it matters."""

    def __init__(self, mission: str, wrote: anyio.Event, go: anyio.Event):
        self.replies = [
            Reply.tool_call("write_state", {"mission": mission}),
            Reply.tool_call("read_state", {"field": "mission"}),
            Reply.text("done"),
        ]
        self.wrote, self.go = wrote, go
        self.read: list[str] = []

    @property
    def name(self) -> str:
        return "paced"

    async def generate(
        self,
        request: ModelRequest,
        *,
        on_delta: DeltaSink | None = None,  # noqa: ARG002  # never streams
    ) -> Result[ModelResponse, ModelError]:
        turn = 3 - len(self.replies)
        if turn == 1:  # after the write, before the read
            self.wrote.set()
            await self.go.wait()
        if turn == 2:
            self.read.append(str(request.messages[-1].content))
        return Success(self.replies.pop(0))


async def test_concurrent_runs_of_one_swarm_keep_their_own_state() -> None:
    """Both runs share the swarm's tools: each reads and writes only its
    own state, though the other wrote in between."""
    first_wrote, second_wrote = anyio.Event(), anyio.Event()
    one = _Paced("one", first_wrote, second_wrote)
    two = _Paced("two", second_wrote, anyio.Event())
    two.go.set()  # the second run does not wait
    models = {"one": one, "two": two}

    class Either:
        name = "either"

        async def generate(
            self, request: ModelRequest, *, on_delta: DeltaSink | None = None
        ) -> Result[ModelResponse, ModelError]:
            who = str(request.messages[0].content)
            return await models[who].generate(request, on_delta=on_delta)

    team = (
        swarm.builder(state=Mission())
        .agent("solo", Agent("solo", Either()), writable=["mission"])
        .entry("solo")
        .build()
    )
    out: dict[str, Mission] = {}

    async def run(who: str) -> None:
        snap = (await team.run(ask(who))).unwrap()
        out[who] = snap.state.state

    async with anyio.create_task_group() as tg:
        tg.start_soon(run, "one")
        await first_wrote.wait()  # the first run wrote, and waits
        tg.start_soon(run, "two")  # the second writes and ends
    assert out == {"one": Mission("one"), "two": Mission("two")}
    assert one.read == ['"one"']
    assert two.read == ['"two"']
