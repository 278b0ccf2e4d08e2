"""W10: three scripted agents passing a conversation round-robin K times.

Each agent's model answers with a transfer to the next agent until K
handoffs happened, then with a final answer.  The baseline is a plain loop
making the same model calls: keep a history list, ask the active agent's
model, append its reply and the transfer's result, switch agents.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from returns.result import Result, Success

from benchmarks._harness import Case, Settings, measure
from pipeline import Agent, Context, Message, swarm
from pipeline.failures import ModelError
from pipeline.models import ModelRequest, ModelResponse
from pipeline.models._types import DeltaSink
from pipeline.testing import Reply


NAMES = ("a0", "a1", "a2")


class Ring:
    """A model shared by the three agents: transfer onwards K times, then answer."""

    def __init__(self, handoffs: int) -> None:
        self.left = handoffs
        self.replies = {
            n: Reply.tool_call(f"transfer_to_{NAMES[(i + 1) % 3]}")
            for i, n in enumerate(NAMES)
        }
        self.answer = Reply.text("done")

    @property
    def name(self) -> str:
        return "ring"

    async def generate(
        self,
        request: ModelRequest,
        *,
        on_delta: DeltaSink | None = None,  # noqa: ARG002  # never streams
    ) -> Result[ModelResponse, ModelError]:
        if self.left == 0:
            return Success(self.answer)
        self.left -= 1
        # Who is asking: the last assistant message's author, or the entry.
        return Success(self.replies[_asker(request)])


def _asker(request: ModelRequest) -> str:
    # The tools offered tell the agents apart: each may transfer to one.
    target = request.tools[0].name.removeprefix("transfer_to_")
    return NAMES[(NAMES.index(target) - 1) % 3]


def _ours(k: int) -> Callable[[], Awaitable[int]]:
    model = Ring(k)
    b = swarm.builder()
    for i, n in enumerate(NAMES):
        b = b.agent(n, Agent(n, model), handoffs=[NAMES[(i + 1) % 3]])
    team = b.entry("a0").limits(swarm.SwarmLimits(max_handoffs=k)).build()

    async def run() -> int:
        model.left = k
        out = (await team.run(Context.of(Message.user("go")))).unwrap()
        return out.state.handoffs

    return run


def _plain(k: int) -> Callable[[], Awaitable[int]]:
    async def run() -> int:
        left = [k]
        replies: dict[str, dict[str, object]] = {
            n: {
                "role": "assistant",
                "tool_calls": [
                    {
                        "id": "c",
                        "name": f"transfer_to_{NAMES[(i + 1) % 3]}",
                        "arguments": "{}",
                    }
                ],
            }
            for i, n in enumerate(NAMES)
        }
        answer: dict[str, object] = {"role": "assistant", "content": "done"}

        async def model(
            _history: list[dict[str, object]], agent: str
        ) -> dict[str, object]:
            if left[0] == 0:
                return answer
            left[0] -= 1
            return replies[agent]

        history: list[dict[str, object]] = [{"role": "user", "content": "go"}]
        active, handoffs = 0, 0
        while True:
            reply = await model(history, NAMES[active])
            history.append(reply)
            calls = reply.get("tool_calls")
            if not isinstance(calls, list):
                return handoffs
            for call in calls:
                history.append(
                    {
                        "role": "tool",
                        "tool_call_id": call["id"],
                        "content": "Transferring...",
                    }
                )
            active = (active + 1) % 3
            handoffs += 1

    return run


def cases(settings: Settings, *, quick: bool) -> list[Case]:
    """W10 at K = 10, 100, 1000 handoffs (10 and 100 when quick)."""
    out: list[Case] = []
    for k in [10, 100] if quick else [10, 100, 1000]:
        for impl, run in (("baseline", _plain(k)), ("pipeline", _ours(k))):
            out.append(
                measure(
                    "W10",
                    "swarm",
                    impl,
                    size=k,
                    unit="handoff",
                    run=run,
                    expected=k,
                    settings=settings,
                )
            )
    return out
