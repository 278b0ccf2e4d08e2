"""The agent loop as a fold: one step is one turn.

A turn is a model call and the tool calls its reply asks for; the state is
what the run added so far (:class:`Turns`).  Outside a checkpointed run the
engine just loops; inside one (an agent node of a checkpointed graph, a
swarm agent), every turn is a record, so a tool call whose result was
committed never runs again and a crash loses at most the turn in flight.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, Protocol, TypeAlias, final

import anyio
import attrs

from pyrsistent import PVector, pvector
from returns.result import Failure, Result

from ._agent_spec import AgentSpec
from ._approval import approve_calls
from ._fields import APPEND_ONLY
from ._guards import Halt, InputGuard, Verdict
from ._messages import Message, ToolCall, Usage, built
from ._output import repair_request, repairs_in
from ._serde import canonical, checksum, make_converter
from ._views import joined
from .errors import Suspended
from .events import (
    GuardrailChecked,
    MessageComplete,
    MessageDelta,
    OutputRejected,
    ToolCallFinished,
    ToolCallStarted,
)
from .failures import (
    BudgetExceeded,
    GuardrailTripped,
    InvalidOutput,
    ModelError,
    RunPaused,
    StepLimitExceeded,
    TurnLimitExceeded,
)
from .fold import (
    Ambient,
    Answered,
    Boundary,
    Codec,
    Snapshot,
    Status,
    ambient,
    current_boundary,
    known_fresh,
)
from .models._types import (
    ModelDelta,
    ModelResponse,
    TextDelta,
    ToolSpec,
    built_request,
)
from .runs import ToolHook
from .tools import NO_DEPS, Tool, run_tools


__all__ = ("Intercept", "Loop", "TurnLimitExceeded", "Turns")


@final
@attrs.frozen
class Turns:
    """What one run of an agent added so far: the fold's state."""

    messages: PVector[Message] = attrs.field(
        factory=pvector, metadata={APPEND_ONLY: True}
    )
    usage: Usage = Usage()
    turns: int = 0


def _turns(messages: PVector[Message], usage: Usage, turns: int) -> Turns:
    """A :class:`Turns` built without attrs' generic ``__init__`` (its
    fields neither convert nor check what they are given, so the result is
    the same; every turn builds one)."""
    out = _new(Turns)
    _set_messages(out, messages)
    _set_usage(out, usage)
    _set_turns(out, turns)
    return out


_new = object.__new__
_set_messages = Turns.__dict__["messages"].__set__
_set_usage = Turns.__dict__["usage"].__set__
_set_turns = Turns.__dict__["turns"].__set__

CODEC: Codec[Turns] = Codec(Turns)
_NO_TURNS = Turns()
_CONVERTER = make_converter()

Intercept: TypeAlias = Callable[
    [Sequence[ToolCall]], tuple[Mapping[int, tuple[str, bool]], bool]
]
"""Takes some of a reply's tool calls before the tools run (a swarm's
transfers): their results by call index, ``(content, is_error)``, and
whether the loop ends after this turn."""

_NONE_APPROVED: frozenset[int] = frozenset()
_NONE_TAKEN: tuple[Mapping[int, tuple[str, bool]], bool] = (
    MappingProxyType({}),
    False,
)  # no intercept: no call taken, the loop goes on
_RUNNING = Status.RUNNING
_DONE = Status.DONE


class At(Protocol):
    """Where a run of the loop is: the snapshot of a checkpointed or traced
    run, or a :class:`Bare` position (what a turn reads and makes)."""

    @property
    def state(self) -> Turns: ...

    def successor(  # Snapshot.successor's
        self,
        state: Turns,
        node: str | None,
        next: tuple[str, ...],  # noqa: A002  # the snapshot's field
        join: str | None = None,
        fingerprint: str | None = None,
    ) -> Any: ...


@final
class Bare:
    """A position of a run that nothing records nor traces: the state, what
    runs next and the steps taken, without the snapshot only a record or a
    span needs (a snapshot has 17 fields to fill on every turn)."""

    __slots__ = ("next", "state", "step")

    def __init__(
        self,
        state: Turns,
        next: tuple[str, ...],  # noqa: A002  # the snapshot's field
        step: int,
    ) -> None:
        self.state = state
        self.next = next
        self.step = step

    def successor(
        self,
        state: Turns,
        node: str | None,  # noqa: ARG002  # the loop's own name
        next: tuple[str, ...],  # noqa: A002  # the snapshot's field
        join: str | None = None,  # noqa: ARG002  # agents never join
        fingerprint: str | None = None,  # noqa: ARG002  # nothing records it
    ) -> Bare:
        """The position one turn on (see :meth:`Snapshot.successor`)."""
        out = _new(Bare)  # without __init__'s frame: one per turn
        out.state = state
        out.next = next
        out.step = self.step + 1
        return out


def digest(instructions: str, messages: Sequence[Message]) -> str:
    """Identifies an agent run's input (see :meth:`Boundary.claim`): its
    instructions and the messages it was given, before any history policy
    (a summarising policy may word its summary differently next time)."""
    doc = [instructions, [_CONVERTER.unstructure(m) for m in messages]]
    return checksum(canonical(doc))[:16]


ToolFacts: TypeAlias = tuple[tuple[ToolSpec, ...], bool, Mapping[str, Tool]]
"""What a run's loop needs to know of its tools (see :func:`tool_facts`)."""


def tool_facts(tools: Mapping[str, Tool]) -> ToolFacts:
    """*tools*' specs, whether any tool's calls may wait for a person's
    approval, and the tools with secret arguments, by name: what
    :class:`Loop` reads of its tools, in one pass.  Tools are frozen, so
    an agent makes these once for its own (:class:`Loop`'s *facts*)."""
    approvals = False
    secret: dict[str, Tool] = {}
    for tool_name, t in tools.items():
        if t.approval is not False:
            approvals = True
        if t.secret_arguments:
            secret[tool_name] = t
    return (
        tuple(t.spec for t in tools.values()),
        approvals,
        MappingProxyType(secret),
    )


_STARTS: dict[str, Snapshot[Turns]] = {}
"""Each agent name's first snapshot (see :meth:`Loop.start`)."""

_STARTS_MAX = 1024


class PauseRequested(BaseException):  # not an error
    """A tool asks the agent's run to pause for a human (carried through
    the tool machinery, which turns exceptions into error results)."""

    def __init__(self, question: str) -> None:
        super().__init__(question)
        self.question = question


@final
class Loop:
    """One run of an agent's loop: its view, tools and options, as a machine."""

    __slots__ = (
        "agent",
        "approvals",
        "deps",
        "env",
        "fingerprint",
        "guards",
        "intercept",
        "name",
        "secret",
        "specs",
        "tools",
        "view",
        "waiting",
    )

    codec = CODEC
    kind = "agent"

    def __init__(
        self,
        agent: AgentSpec,
        view: Sequence[Message],
        tools: Mapping[str, Tool],
        intercept: Intercept | None = None,
        specs: tuple[ToolSpec, ...] | None = None,
        env: Ambient | None = None,
        guards: tuple[InputGuard, ...] = (),
        deps: object = NO_DEPS,
        facts: ToolFacts | None = None,
    ) -> None:
        self.agent = agent
        # The run's dependencies, for tools that take a RunContext: kept
        # here only, never in the state (so never checkpointed or traced).
        self.deps = deps
        self.guards = guards  # input guardrails, before the first turn
        # What the first turn's answer waits for: the input guards that run
        # alongside its model call.
        self.waiting: Callable[[], Awaitable[object]] | None = None
        # What the run is inside of (scope, stream, offload), read once:
        # none of it changes while the run goes on.
        self.env = ambient() if env is None else env
        self.name = agent.name
        self.fingerprint = f"agent:{agent.name}"
        self.view = view
        self.tools = tools
        self.intercept = intercept
        # The tools' specs, whether any tool's calls may wait for a
        # person's approval (when none can, a turn skips asking: one check
        # per run, not per turn), and the tools with secret arguments
        # (their calls are recorded redacted): one pass over the tools, or
        # the agent's, made once for its own tools (*facts*).
        made_specs, self.approvals, self.secret = (
            tool_facts(tools) if facts is None else facts
        )
        self.specs = made_specs if specs is None else specs

    def start(self) -> Snapshot[Turns]:
        """The snapshot before the first turn: the same for every run of
        an agent of this name (immutable, of nothing but the name), so
        kept once made (for at most :data:`_STARTS_MAX` names)."""
        name = self.name
        known = _STARTS.get(name)
        if (
            known is not None
            and type(name) is str
            and known.fingerprint == self.fingerprint
        ):
            return known
        made = Snapshot.first(name, _NO_TURNS, (name,), self.fingerprint)
        if type(name) is str:  # a subclass's __eq__ could match another
            if len(_STARTS) >= _STARTS_MAX:
                _STARTS.clear()
            _STARTS[name] = made
        return made

    def gated(self, snap: Snapshot[Turns], /) -> bool:  # noqa: ARG002
        """Agents have no gates."""
        return False

    async def unchecked(self, max_steps: int) -> Turns | Failure[Any]:
        """The whole run, when nothing records nor traces it (no enclosing
        checkpointed step, no tracing): the engine's loop without what only
        a journal, gates, observers or spans use, on :class:`Bare`
        positions.  Ends as :func:`pipeline.fold.run_machine` would: the
        state when no turn comes next (itself: the caller wraps what it
        returns), a turn's failure, or
        :class:`~pipeline.failures.StepLimitExceeded` past *max_steps*."""
        at = Bare(_NO_TURNS, (self.name,), 0)
        step = self.step
        while at.next:
            if at.step >= max_steps:
                tail = (self.name,) * min(at.step, 8)
                return Failure(StepLimitExceeded(max_steps, tail))
            new = await step(at, None)
            if type(new) is Failure:
                return new
            at = new
        return at.state

    async def _first(self, snap: At) -> Any:
        """The first turn, behind the agent's input guards: those not
        concurrent run before the model call, the others alongside it (the
        answer waits for them before any tool runs)."""
        guards, self.guards = self.guards, ()  # checked once per run
        if snap.state.turns:  # resumed after the first turn: checked then
            return await self.step(snap, None)
        for guard in guards:
            if not guard.concurrent:
                tripped = await self._input(guard)
                if tripped is not None:
                    return tripped
        alongside = [g for g in guards if g.concurrent]
        if not alongside:
            return await self.step(snap, None)
        tripped_by: list[Failure[GuardrailTripped]] = []
        cleared = anyio.Event()

        async def check_all(scope: anyio.CancelScope) -> None:
            for guard in alongside:
                tripped = await self._input(guard)
                if tripped is not None:
                    tripped_by.append(tripped)
                    scope.cancel()
                    return
            cleared.set()

        out: Any = None
        self.waiting = cleared.wait
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(check_all, tg.cancel_scope)
                out = await self.step(snap, None)
        finally:
            self.waiting = None
        return tripped_by[0] if tripped_by else out

    async def _input(
        self, guard: InputGuard
    ) -> Failure[GuardrailTripped] | None:
        verdict = await self._judge(
            guard.name, "input", guard.check, self.view
        )
        if verdict is None:
            return None
        return Failure(
            GuardrailTripped(
                guard.name, "input", verdict.reason, path=(self.name,)
            )
        )

    async def _judge(
        self,
        guard: str,
        stage: str,
        check: Callable[[Any], Awaitable[Verdict]],
        value: object,
    ) -> Verdict:
        """*check* on *value*, as a span (in a traced run) and an event."""
        env = self.env
        tracing = env.scope.tracing if env.scope is not None else None
        if tracing is None:
            verdict = await check(value)
        else:
            with tracing.span(
                f"guardrail {guard}",
                {
                    "pipeline.agent": self.name,
                    "pipeline.guardrail.name": guard,
                    "pipeline.guardrail.stage": stage,
                },
            ) as span:
                verdict = await check(value)
                span.set_attribute(
                    "pipeline.guardrail.outcome", _outcome(verdict)
                )
        if env.sink is not None:
            reason = "" if verdict is None else verdict.reason
            await env.emit(
                GuardrailChecked(
                    self.name, guard, stage, _outcome(verdict), reason
                )
            )
        return verdict

    async def step(self, snap: At, _: object, /) -> Any:
        """One turn: ask the model; run the tools it asks for."""
        if self.guards:
            return await self._first(snap)
        agent = self.agent
        name = self.name
        progress = snap.state
        turn = progress.turns + 1
        # Repairs of the final answer are model calls, not turns.
        last = turn >= agent.max_turns and (
            agent.output is None
            or turn - len(repairs_in(progress.messages)) >= agent.max_turns
        )
        request = built_request(
            joined(self.view, progress.messages)
            if progress.messages
            else self.view,  # the first turn: the view itself
            self.specs,
            agent.response_schema,
            agent.temperature,
            agent.max_tokens,
            not (last and agent.on_turn_limit == "answer"),
        )
        env = self.env
        if listen := env.sink is not None:  # events only for a listener
            # A reader that left the stream early must not cost a call.
            await env.caught_up()
        scope = env.scope  # budgets and tracing (None: neither)
        offload = env.offload  # calls made elsewhere (None: here)
        model = agent.model if offload is None else offload.model(agent)
        on_delta = _on_delta(env, name) if listen else None
        answer: Result[ModelResponse, ModelError | BudgetExceeded]
        if scope is None:
            answer = await model.generate(request, on_delta=on_delta)
        else:
            answer = await scope.generate(model, request, on_delta)
        if type(answer) is Failure:
            return answer
        response = answer.unwrap()
        if self.waiting is not None:  # input guards alongside the call
            await self.waiting()
        message = _named(response.message, name)
        run_calls = message.tool_calls
        if self.secret and run_calls:
            # The tools get what the model sent; everything else (history,
            # checkpoints, events, spans) the redacted calls.
            message = _redacted(message, self.secret)
        if listen:
            await env.emit(MessageComplete(name, message))
        calls = message.tool_calls
        if not calls:
            return await self._final(
                snap, message, progress.usage + response.usage, turn
            )
        # Calls the caller takes itself (a swarm's transfers), decided
        # before any tool runs: an accepted transfer needs no further model
        # call, so it may come on the last turn.
        taken, stop = (
            self.intercept(calls)
            if self.intercept is not None
            else _NONE_TAKEN
        )
        if last and not stop:
            added = (*progress.messages, message)
            return Failure(TurnLimitExceeded(name, turn, added, path=(name,)))
        # Calls a person must approve: asked before any tool of the reply
        # runs (the others wait with them), one question at a time.
        message, run_calls, taken, approved = (
            await self._approved(message, run_calls, taken)
            if self.approvals
            else (message, run_calls, taken, _NONE_APPROVED)  # none asks
        )
        hook = None
        if scope is not None:
            refused = scope.start_tools(len(run_calls) - len(taken))
            if refused is not None:
                return Failure(attrs.evolve(refused, path=(name,)))
            hook = scope.tool_hook
        hook = (
            self._hook(hook, approved)
            if env.offload is not None or env.boundary is not None
            else hook  # nothing to wrap it in
        )
        lapsed = (
            await self._start_tools(message.tool_calls, listen=listen)
            if listen or env.boundary is not None
            else None  # no lease to check, no one to tell
        )
        if lapsed is not None:
            return lapsed
        try:
            results = await self._tools(
                run_calls,
                taken,
                listen=listen,
                hook=hook,
                shown=message.tool_calls,
            )
        except PauseRequested as pause:
            # A fold used as a tool paused for a human: so does this run.
            return Failure(RunPaused(pause.question, path=(name,)))
        if listen:
            for result in results:
                await env.emit(MessageComplete(name, result))
        done = _turns(
            progress.messages.append(message).extend(results),
            progress.usage + response.usage,
            turn,
        )
        return self._next(snap, done, stop=stop)

    async def _approved(
        self,
        message: Message,
        run_calls: tuple[ToolCall, ...],
        taken: Mapping[int, tuple[str, bool]],
    ) -> tuple[
        Message,
        tuple[ToolCall, ...],
        Mapping[int, tuple[str, bool]],
        frozenset[int],
    ]:
        """The reply after its calls' approvals (see
        :func:`pipeline._approval.approve_calls`): the message as recorded
        (edited calls as they run), the calls to run, the calls taken
        (denied ones added) and the ids of the approved calls.  Asked only
        when some tool of the run may ask (:attr:`approvals`)."""
        approvals = await approve_calls(
            run_calls, self.tools, agent=self.name, skip=taken
        )
        if approvals is None:
            return message, run_calls, taken, frozenset()
        if approvals.calls != run_calls:  # edited: recorded as they run
            run_calls = approvals.calls
            message = attrs.evolve(message, tool_calls=run_calls)
            if self.secret:
                message = _redacted(message, self.secret)
        approved = frozenset(id(run_calls[i]) for i in approvals.approved)
        return message, run_calls, {**taken, **approvals.denied}, approved

    def _hook(
        self, hook: ToolHook | None, approved: frozenset[int] = frozenset()
    ) -> ToolHook | None:
        """What runs each tool call of this turn: *hook* (the scope's),
        inside where the call runs (a host's activity, if offloaded), inside
        the keeping of results that got an answer (in a checkpointed run;
        *approved*: the ids of the calls a person approved)."""
        offload = self.env.offload
        if offload is not None:
            hook = _around(hook, offload.tools(self.agent, self.tools))
        # The turn's, in a checkpointed run: only ever inside an enclosing
        # step (a run outside any has no journal to enter one); not made
        # for a turn known to be fresh with nothing approved (no wrapper).
        boundary = (
            current_boundary()
            if self.env.boundary is not None
            and (approved or not known_fresh())
            else None
        )
        # In a fresh attempt of a turn (no answer to deliver, nothing
        # saved) no call can get an answer nor find a kept result: no
        # keeping wrapper then.
        if boundary is not None and (approved or not boundary.fresh):
            hook = _around(_keeping(boundary, self.secret, approved), hook)
        return hook

    async def _final(
        self, snap: At, message: Message, usage: Usage, turn: int
    ) -> Any:
        """A final answer, checked against the agent's output if it has
        one: accepted, or sent back with the reason (never the value) for another try."""
        output = self.agent.output
        progress = snap.state
        added = progress.messages.append(message)
        name = self.name
        reason: str
        if output is None:
            done = _turns(added, usage, turn)
            return self._next(snap, done, stop=True)
        checked = output.check(message.content)
        guard: str | None = None
        if type(checked) is not Failure:
            value = checked.unwrap()
            for each in output.guards:
                verdict = await self._judge(
                    each.name, "output", each.check, value
                )
                if type(verdict) is Halt:
                    return Failure(
                        GuardrailTripped(
                            each.name, "output", verdict.reason, path=(name,)
                        )
                    )
                if verdict is not None:
                    guard, reason = each.name, verdict.reason
                    break
            else:
                done = _turns(added, usage, turn)
                return self._next(snap, done, stop=True)
        else:
            reason = checked.failure()
        # The reasons so far are in the repair requests the run holds (a
        # checkpointed run resumes with them).
        repairs = (*repairs_in(progress.messages), reason)
        retrying = len(repairs) <= output.retries
        env = self.env
        listen = env.sink is not None
        if listen:
            await env.emit(
                OutputRejected(name, len(repairs), reason, retrying)
            )
        if not retrying:
            return Failure(
                InvalidOutput(
                    output.name, reason, attempts=repairs, path=(name,)
                )
            )
        if env.scope is not None:
            refused = env.scope.start_repair()
            if refused is not None:
                return Failure(attrs.evolve(refused, path=(name,)))
        ask = repair_request(output, reason, guard)
        if listen:
            await env.emit(MessageComplete(name, ask))
        done = _turns(added.append(ask), usage, turn)
        return self._next(snap, done, stop=False)

    def _next(self, snap: At, state: Turns, *, stop: bool) -> Any:
        name = self.name
        nxt = () if stop else (name,)
        return snap.successor(state, name, nxt, fingerprint=self.fingerprint)

    async def _start_tools(
        self, calls: tuple[ToolCall, ...], *, listen: bool
    ) -> Failure[Any] | None:
        """Before a reply's tools run: ``Failure`` if the thread's lease may
        have lapsed (no tool starts then), else the calls announced."""
        boundary = self.env.boundary
        if boundary is not None and not boundary.lease_fresh():
            lapsed = await boundary.ensure()
            if lapsed is not None:
                return lapsed
        if listen:
            for call in calls:
                await self.env.emit(ToolCallStarted(self.name, call))
        return None

    async def _tools(
        self,
        calls: tuple[ToolCall, ...],
        taken: Mapping[int, tuple[str, bool]],
        *,
        listen: bool,
        hook: ToolHook | None,
        shown: tuple[ToolCall, ...],
    ) -> tuple[Message, ...]:
        on_result = (
            _finished(self.env, self.name, calls, shown) if listen else None
        )
        name = self.name
        limit = self.agent.max_parallel_tools
        # Calls to unknown tools or with arguments that do not decode are
        # repairs, for budgets (past the limit, the next call is refused).
        scope = self.env.scope
        wrong: list[ToolCall] | None = None if scope is None else []
        malformed = None if wrong is None else wrong.append
        # The calls not *taken* run (all of them, most turns); the taken
        # ones' results are kept (inline, not a helper coroutine: one frame
        # less per handoff).
        rest = (
            calls
            if not taken
            else ()
            if len(taken) == len(calls)  # all taken (a lone transfer)
            else [c for i, c in enumerate(calls) if i not in taken]
        )
        ran = (
            await run_tools(
                rest,
                self.tools,
                on_result=on_result,
                agent=name,
                around=hook,
                limit=limit,
                deps=self.deps,
                malformed=malformed,
            )
            if rest
            else ()  # all taken (a lone transfer): nothing to run
        )
        if not taken:
            out = ran
        else:
            results = iter(ran)
            kept: list[Message] = []
            for i, call in enumerate(calls):
                if i in taken:
                    content, failed = taken[i]
                    kept.append(
                        Message.tool(
                            content,
                            tool_call_id=call.id,
                            name=call.name,
                            agent=name,
                        )
                    )
                    if on_result is not None:
                        await on_result(call, content, failed)
                else:
                    kept.append(next(results))
            out = tuple(kept)
        if wrong and scope is not None:
            scope.malformed_tool_calls(len(wrong))
        return out


def _keeping(
    boundary: Boundary,
    secret: Mapping[str, Tool],
    approved: frozenset[int] = frozenset(),
) -> ToolHook:
    """Keeps the result of each tool call that got a human's answer
    (:func:`pipeline.interrupt`, or the approval of the call: *approved*
    holds those calls' ids) as progress of the turn: when another call's
    question pauses the turn, or the process dies before the turn is
    committed, the call does not run again (nor its side effects after
    the question); the turn run again finds its result.

    Calls are known by their tool and arguments (calls of tools with secret
    arguments are kept only when approved, known by their redacted
    arguments: a digest of a secret is not stored).
    """
    kept = boundary.kept("c")  # results kept in an earlier attempt

    def key_of(call: ToolCall) -> str:
        arguments = call.arguments
        if call.name in secret:
            arguments = secret[call.name].redact(arguments)
        digest = checksum(canonical([call.name, arguments]))[:16]
        return boundary.question_key(digest, "c")

    async def keep(
        call: ToolCall, run: Callable[[], Awaitable[tuple[str, bool]]]
    ) -> tuple[str, bool]:
        if call.name in secret and id(call) not in approved:
            return await run()
        key = None
        if kept:
            key = key_of(call)
            docs = boundary.docs(key)
            doc = docs[-1] if docs else None
            if (
                isinstance(doc, dict)
                and isinstance(doc.get("content"), str)
                and isinstance(doc.get("failed"), bool)
            ):
                return doc["content"], doc["failed"]
        with Answered() as got:
            content, failed = await run()
        if got.answered or id(call) in approved:
            if key is None:
                key = key_of(call)
            saved = None
            with anyio.CancelScope(shield=True):  # a sibling may cancel
                saved = await boundary.save(
                    key, {"content": content, "failed": failed}
                )
            if saved is not None:
                raise Suspended(saved)
        return content, failed

    return keep


def _outcome(verdict: Verdict) -> str:
    if verdict is None:
        return "pass"
    return "stop" if type(verdict) is Halt else "retry"


def _around(outer: ToolHook | None, inner: ToolHook | None) -> ToolHook | None:
    """*inner* inside *outer* (a tool call's span around where it runs)."""
    if outer is None or inner is None:
        return outer or inner

    async def both(
        call: ToolCall, run: Callable[[], Awaitable[tuple[str, bool]]]
    ) -> tuple[str, bool]:
        return await outer(call, lambda: inner(call, run))

    return both


def _finished(
    env: Ambient,
    name: str,
    calls: tuple[ToolCall, ...],
    shown: tuple[ToolCall, ...],
) -> Callable[[ToolCall, str, bool], Awaitable[None]]:
    # Events show the calls as recorded (secret arguments redacted).
    recorded = (
        {id(c): s for c, s in zip(calls, shown, strict=True)}
        if calls is not shown
        else None
    )

    async def on_result(call: ToolCall, content: str, failed: bool) -> None:
        if recorded is not None:
            call = recorded.get(id(call), call)
        await env.emit(ToolCallFinished(name, call, content, failed))

    return on_result


def _redacted(message: Message, secret: Mapping[str, Tool]) -> Message:
    """*message* with the secret arguments of its tool calls redacted."""
    calls = tuple(
        ToolCall(c.id, c.name, secret[c.name].redact(c.arguments))
        if c.name in secret
        else c
        for c in message.tool_calls
    )
    return attrs.evolve(message, tool_calls=calls)


def _named(message: Message, name: str) -> Message:
    """*message* under *name*, from agent *name* (without attrs.evolve's
    generic cost: every field of a message already passed its converters)."""
    if message.name == name and message.agent == name:
        return message
    return built(
        message.role,
        message.content,
        name,
        message.tool_calls,
        message.tool_call_id,
        message.usage,
        name,
        message.parts,
    )


def _on_delta(env: Ambient, name: str) -> Callable[[ModelDelta], Any]:
    async def on_delta(delta: ModelDelta) -> None:
        if isinstance(delta, TextDelta):
            await env.emit(MessageDelta(name, delta.text))

    return on_delta
