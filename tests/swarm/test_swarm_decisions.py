"""Where a swarm step reads its agent's transfer decision from, and the
state it leaves.

Outside a checkpointed step every turn of the agent's run happens there,
so the step takes the decision the transfer check made; inside one
(a run with a store), a run restored from its records ran no turn, so the
step also reads the decision back from the run's messages.  Both ways
must hand off alike, whatever the replies: the same conversation, the
same handoffs, the same failure.  The transfer check itself decides in
one pass with decisions made once per agent: as its rules say.  The state
a step leaves is built without attrs' constructor: it must be the
constructor's.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs
import pytest

from hypothesis import given
from hypothesis import strategies as st
from returns.result import Success

from pipeline import Agent, Context, Message, ToolCall, swarm, tool
from pipeline.models import ModelResponse
from pipeline.stores import MemoryStore
from pipeline.swarm import SwarmLimits, SwarmState
from pipeline.swarm._transfer import ACCEPTED, Transfers, accepting
from pipeline.testing import Reply, ScriptedModel
from tests.strategies import contexts, messages
from tests.swarm.helpers import PREFIX, ask


@tool(name="transfer_to_c")
async def own_c() -> str:
    """Agent b's own tool, named like a transfer: it hands nothing off."""
    return "b's own tool ran"


REPLIES: dict[str, ModelResponse] = {
    "to a": Reply.tool_call(PREFIX + "a"),
    "to b": Reply.tool_call(PREFIX + "b"),
    "to c": Reply.tool_call(PREFIX + "c"),
    "to zed": Reply.tool_call(PREFIX + "zed"),
    "malformed": Reply.tool_call(PREFIX + "no such!"),
    "two": Reply.tool_calls(
        (PREFIX + "b", None, "x0"), (PREFIX + "c", None, "x1")
    ),
    "answer": Reply.text("an answer"),
}

scripts = st.lists(st.sampled_from(sorted(REPLIES)), max_size=8)


def shape(messages: Sequence[Message]) -> list[tuple[str, str, list[str]]]:
    """What a conversation says, without the generated call ids."""
    return [
        (m.role.value, m.content, [c.name for c in m.tool_calls])
        for m in messages
    ]


async def outcome(script: list[str], *, stored: bool) -> object:
    """The run of a three-agent swarm answering with *script* (then
    answers): its conversation and handoffs, or its failure's kind."""
    model = ScriptedModel(
        *(REPLIES[s] for s in script), *[Reply.text("done")] * 12
    )
    team = (
        swarm.builder()
        .agent("a", Agent("a", model), handoffs=["b", "c"])
        .agent("b", Agent("b", model, tools=[own_c]), handoffs=["a"])
        .agent("c", Agent("c", model))
        .entry("a")
        .limits(SwarmLimits(max_handoffs=3))
        .build()
    )
    out = await team.run(ask("go"), store=MemoryStore() if stored else None)
    if not isinstance(out, Success):
        return type(out.failure()).__name__
    snap = out.unwrap()
    return (
        snap.state.active,
        snap.state.handoffs,
        shape(snap.state.messages),
    )


@given(script=scripts)
async def test_a_handoff_is_decided_alike_with_and_without_records(
    script: list[str],
) -> None:
    """A run with nothing recording its turns (the decision taken from the
    transfer check) hands off as a stored run (whose steps may also read
    it back from the messages)."""
    assert await outcome(script, stored=False) == await outcome(
        script, stored=True
    )


@given(
    ctx=contexts(),
    active=st.text(min_size=1, max_size=5),
    state=st.none() | st.integers(),
    added=st.lists(messages(), max_size=3),
    handoffs=st.integers(0, 100),
)
def test_begun_and_grown_equal_the_constructor(
    ctx: Context,
    active: str,
    state: int | None,
    added: list[Message],
    handoffs: int,
) -> None:
    """The state a run starts from and the state a step leaves (built
    store by store, made a SwarmState last) are the ones attrs'
    constructor gives: every field, the class, still frozen."""
    before = SwarmState(
        "a0",
        None,
        messages=ctx.messages,
        metadata=ctx.metadata,
        run_id=ctx.run_id,
    )
    begun = SwarmState.begun("a0", None, ctx)
    assert type(begun) is SwarmState
    assert begun == before
    assert attrs.asdict(begun, recurse=False) == attrs.asdict(
        before, recurse=False
    )
    messages_ = before.messages.extend(added)
    out = before.grown(active, state, messages_, handoffs)
    built = SwarmState(
        active,
        state,
        messages=messages_,
        metadata=ctx.metadata,
        run_id=ctx.run_id,
        handoffs=handoffs,
    )
    assert type(out) is SwarmState
    assert out == built
    assert hash(out) == hash(built)
    assert attrs.asdict(out, recurse=False) == attrs.asdict(
        built, recurse=False
    )
    assert before.handed_to(active) == attrs.evolve(
        before, active=active, handoffs=1
    )
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        out.active = "x"  # type: ignore[misc]


def reference(
    calls: list[str],
    allowed: list[str],
    own: set[str],
    *,
    limit_reached: bool,
) -> tuple[dict[int, tuple[str, bool]], bool, str | None]:
    """The rules of pipeline.swarm._transfer, written plainly: the results
    of the transfer calls by index (refused ones failed), whether the turn
    stops, the agent accepted."""
    mine = [
        i for i, c in enumerate(calls) if c.startswith(PREFIX) and c not in own
    ]
    if not mine:
        return {}, False, None
    if len(mine) > 1:
        return dict.fromkeys(mine, (SEVERAL, True)), False, None
    (i,) = mine
    target = calls[i].removeprefix(PREFIX)
    if limit_reached or target not in allowed:
        return {i: ("refused", True)}, False, None
    return {i: (ACCEPTED.format(name=target), False)}, True, target


SEVERAL = (
    "error: several transfers in one reply; none was made. "
    "Call exactly one transfer tool."
)
NAMES = ["a", "b", "c", "zed"]


@given(
    calls=st.lists(
        st.sampled_from([PREFIX + n for n in NAMES] + ["lookup"]),
        max_size=4,
    ),
    allowed=st.lists(st.sampled_from(["b", "c"]), unique=True),
    own=st.sets(st.sampled_from([PREFIX + "c", PREFIX + "zed"])),
    limit_reached=st.booleans(),
)
def test_transfers_decide_as_the_rules_say(
    calls: list[str],
    allowed: list[str],
    own: set[str],
    limit_reached: bool,
) -> None:
    """The intercept (one pass, accepted decisions made once per agent)
    decides every reply as the rules say: the results by call index, the
    stop, the agent accepted; a refusal is an error naming no input."""
    transfers = Transfers(
        "a", accepting(allowed), set(NAMES[:3]), own, limit_reached
    )
    taken, stop = transfers(
        [ToolCall(f"id{i}", c, "{}") for i, c in enumerate(calls)]
    )
    want, want_stop, want_target = reference(
        calls, allowed, own, limit_reached=limit_reached
    )
    assert stop is want_stop
    assert transfers.accepted == want_target
    assert set(taken) == set(want)
    for i, (content, failed) in want.items():
        got_content, got_failed = taken[i]
        assert got_failed is failed
        if content == "refused":
            assert got_content.startswith("error: ")
        else:
            assert got_content == content
