"""The graph's step: run the next node (or fan out), say where to go next.

This is all a graph adds to the fold engine (:mod:`pipeline.fold`): the
transition from one snapshot to the next.  A fan-out's branches that
finish inside a journaled run are saved at once as progress of the step,
so a resumed fan-out runs only the branches that had not finished.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, ClassVar, TypeVar, cast, final

import anyio
import attrs
import cattrs

from returns.result import Failure, Result, Success

from .._concurrency import Earliest, Siblings, run_pool
from .._handler import Handler
from .._runners import AnyCall, located
from .._step import WAITED, run_apart
from ..errors import Suspended
from ..failures import FanOutLimitExceeded
from ..fold import (
    Boundary,
    Codec,
    MachineBase,
    Snapshot,
    Status,
    ambient,
    branch_key,
    check_document,
    fingerprint,
    same_shape,
)
from ._cache import CachePolicy, cached
from ._edges import Edge, FanOut, Where, advancer, targets
from ._merge import merge_states
from ._model import END, GraphLimits


S = TypeVar("S")

_RUNNING = Status.RUNNING
_DONE = Status.DONE
_MISSING: Any = object()


@final
@attrs.frozen(eq=False)
class GraphMachine(MachineBase[S]):
    """A validated graph's nodes and edges, with each node's call and each
    edge's decision computed once (:meth:`make`), stepped by the engine."""

    kind: ClassVar[str] = "graph"
    """What its spans call it (see :mod:`pipeline._tracing`)."""

    state_type: type[S]
    nodes: Mapping[str, Handler[S, S, Any]]
    edges: Mapping[str, Edge]
    calls: Mapping[str, AnyCall]
    advance: Mapping[str, Callable[[Any], Where]]

    @classmethod
    def make(
        cls,
        name: str,
        state_type: type[S],
        nodes: Mapping[str, Handler[S, S, Any]],
        edges: Mapping[str, Edge],
        entry: str,
        version: str,
        converter: cattrs.Converter | None = None,
        caches: Mapping[str, CachePolicy[Any]] | None = None,
    ) -> GraphMachine[S]:
        """Precompute the calls and edge decisions; fingerprint the shape."""
        shape = {
            "entry": entry,
            "version": version,
            "nodes": sorted([n, h.name] for n, h in nodes.items()),
            "edges": sorted(
                [src, type(e).__name__, list(targets(e))]
                for src, e in edges.items()
            ),
        }
        codec = Codec(state_type, converter)
        fp = fingerprint(shape)
        calls = {n: h._call for n, h in nodes.items()}
        for n, policy in (caches or {}).items():
            calls[n] = cached(calls[n], n, policy, fp, codec)
        return cls(
            name=name,
            entry=entry,
            codec=codec,
            fingerprint=fp,
            state_type=state_type,
            nodes=MappingProxyType(dict(nodes)),
            edges=MappingProxyType(dict(edges)),
            calls=MappingProxyType(calls),
            advance=MappingProxyType(
                {n: advancer(n, e) for n, e in edges.items()}
            ),
        )

    def gated(self, snap: Snapshot[S], /) -> bool:  # noqa: ARG002
        """Gates see every transition of a graph."""
        return True

    def start(self, state: S, thread_id: str | None) -> Snapshot[S]:
        """The admission snapshot: *state* before the entry node runs."""
        return self.admission(state, thread_id)

    async def step(self, snap: Snapshot[S], limits: GraphLimits, /) -> Any:
        """The transition; the new snapshot or a ``Failure``."""
        nodes = snap.next
        if snap.join is None and len(nodes) == 1:
            name = nodes[0]
            r = await self.calls[name](snap.state)
            if type(r) is not Success:
                return located(r, name)
            return self.after(snap, name, r.unwrap())
        refused = self.refuse_fanout(snap, limits)
        if refused is not None:
            return refused
        outs = await self._branches(snap, limits)
        if type(outs) is Failure:
            return outs
        return self.fan_in(snap, outs)

    def after(self, snap: Snapshot[S], name: str, state: S) -> Any:
        """The snapshot after node *name* turned *snap*'s state into
        *state*: where its edge goes next (or the edge's ``Failure``)."""
        where: Where = self.advance[name](state)
        if type(where) is Failure:
            return where
        nxt, join = where
        return snap.successor(state, name, nxt, join)

    def refuse_fanout(
        self, snap: Snapshot[S], limits: GraphLimits
    ) -> Failure[FanOutLimitExceeded] | None:
        """Why *snap*'s fan-out may not start (too wide), or ``None``."""
        if len(snap.next) > limits.max_fanout:
            return Failure(
                FanOutLimitExceeded(
                    len(snap.next), limits.max_fanout, path=(snap.node or "",)
                )
            )
        return None

    def fan_in(self, snap: Snapshot[S], outs: tuple[S, ...]) -> Any:
        """The snapshot after *snap*'s fan-out, from its branches' final
        states *outs* (in the order of ``snap.next``), or a ``Failure``.

        Pure: the fan-out's merge (or reducers) over the branch outputs;
        wherever the branches ran (in this process, or as activities of a
        durable workflow).
        """
        base = snap.state
        source = self.edges.get(snap.node or "")
        if isinstance(source, FanOut) and source.merge is not None:
            state = source.merge(base, outs)
            if type(state) is Failure:
                return state
        else:
            reducers = source.reducers if isinstance(source, FanOut) else {}
            merged = merge_states(base, outs, snap.next, reducers)
            if type(merged) is not Success:
                return merged
            state = merged.unwrap()
        nxt = () if snap.join == END else (cast("str", snap.join),)
        return snap.successor(state, "+".join(snap.next), nxt)

    async def _branches(self, snap: Snapshot[S], limits: GraphLimits) -> Any:
        names = snap.next
        base = snap.state
        outs: list[Any] = [_MISSING] * len(names)
        failed: Earliest[Result[Any, Any]] = Earliest()
        env = ambient()  # the enclosing step and the tracing, read once
        boundary = env.boundary
        if boundary is not None:
            # Branches that finished in an earlier attempt of this very step
            # (same lineage: progress belongs to the records it grew from)
            # are not run again.
            for i, name in enumerate(names):
                docs = boundary.docs(branch_key(name))
                if docs:
                    outs[i] = self._restore(snap, name, docs[-1])
        todo = [(i, n) for i, n in enumerate(names) if outs[i] is _MISSING]
        calls = self.calls
        tracing = env.tracing
        if tracing is not None:  # a span per branch
            calls = {n: tracing.branch(n, calls[n]) for _, n in todo}

        waited = False

        async def branch(item: tuple[int, str], siblings: Siblings) -> None:
            nonlocal waited
            i, name = item
            if boundary is None:
                r = await calls[name](base)
            elif (lapsed := await boundary.ensure()) is not None:
                r = lapsed  # the lease may have lapsed: start no branch
            else:
                r = await run_apart(
                    boundary.branch(name, i), lambda: calls[name](base)
                )
                if r is WAITED:  # it asked: the other branches go on
                    waited = True
                    return
            if type(r) is Success:
                outs[i] = r.unwrap()
                if boundary is None:
                    return
                refused = await self._keep(boundary, snap, name, outs[i])
                if refused is None:
                    return
                r = refused
            await failed.settle(i, located(r, name), siblings)

        workers = min(len(todo), limits.concurrency)
        await run_pool(workers, iter(todo), branch)
        if failed.found:
            return failed.value()
        if waited:
            raise Suspended  # the finished branches are kept
        return tuple(outs)

    async def branch(self, snap: Snapshot[S], name: str) -> Any:
        """Run fan-out branch *name* of *snap* alone: its final state, or a
        ``Failure`` located at the branch (for :meth:`fan_in`)."""
        r = await self.calls[name](snap.state)
        return r.unwrap() if type(r) is Success else located(r, name)

    def _output(self, snap: Snapshot[S], branch: str, state: S) -> Snapshot[S]:
        return Snapshot(
            thread_id=snap.thread_id,
            version=snap.version,
            parent=None,
            state=state,
            node=branch,
            next=(),
            join=None,
            step=snap.step,
            fingerprint=snap.fingerprint,
            status=_DONE,
        )

    async def _keep(
        self, boundary: Boundary, snap: Snapshot[S], branch: str, state: S
    ) -> Any:
        # A delta against the state the fan-out started from.
        doc = self.codec.document(self._output(snap, branch, state), snap)
        # A branch that finished keeps its output, even when a failing
        # sibling is cancelling the rest at this very moment.
        with anyio.CancelScope(shield=True):
            return await boundary.save(branch_key(branch), doc)

    def _restore(self, snap: Snapshot[S], branch: str, doc: Any) -> Any:
        """A kept branch output, or _MISSING if it cannot be trusted."""
        if type(check_document(doc)) is not Success:
            return _MISSING
        root = self.codec.document(snap, None)
        rebuilt = self.codec.rebuild(
            [root, doc], snap.thread_id, snap.version, None
        )
        if type(rebuilt) is not Success:
            return _MISSING
        kept = rebuilt.unwrap()
        if kept.node != branch or not same_shape(
            kept.fingerprint, self.fingerprint
        ):
            return _MISSING
        return kept.state
