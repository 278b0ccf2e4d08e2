"""Graphs: a builder that validates, and a fold over immutable snapshots.

Running a graph is folding :meth:`Graph.step` (snapshot -> snapshot) until a
snapshot has nowhere left to go.  With a store, every snapshot is committed
as one record (state and next node together) with a compare-and-set on the
head version before the next node starts: a node whose record committed
never runs again, and the node in flight when a process dies runs at most
once more on resume.
"""

from __future__ import annotations

import collections
import uuid

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import (
    TYPE_CHECKING,
    Any,
    Generic,
    Never,
    TypeAlias,
    TypeVar,
    cast,
    final,
)

import anyio
import attrs

from pyrsistent import PVector
from returns.result import Failure, Result, Success

from .._context import Context, Message, merge_branches
from .._handler import Handler, located, ok, run_pool
from .._serde import canonical, checksum
from ..errors import (
    CheckpointDecodeError,
    ConcurrentModification,
    FanOutLimitExceeded,
    GraphDefect,
    GraphDefects,
    IncompatibleGraph,
    MergeConflict,
    SnapshotNotFound,
    StepLimitExceeded,
    UnknownRoute,
)
from ..events import emit, listening
from ._codec import Codec
from ._model import (
    END,
    CheckpointSaved,
    Continue,
    Decision,
    Gate,
    GraphEvent,
    Interrupt,
    Interrupted,
    Limits,
    NodeFinished,
    NodeStarted,
    Observer,
    Pending,
    Snapshot,
    Status,
    Stop,
    Stopped,
    Transition,
)
from ._store import CheckpointStore, Record


if TYPE_CHECKING:
    from ..agents import AgentError, AgentLike, AgentRun


S = TypeVar("S")
E = TypeVar("E")
E2 = TypeVar("E2")
E_co = TypeVar("E_co", covariant=True)

GraphFailure: TypeAlias = (
    UnknownRoute
    | StepLimitExceeded
    | FanOutLimitExceeded
    | MergeConflict
    | ConcurrentModification
    | IncompatibleGraph
    | CheckpointDecodeError
    | SnapshotNotFound
)
"""Failures the graph machinery itself can return."""

Reducer: TypeAlias = Callable[[Any, tuple[Any, ...]], Any]
"""Merges one field: ``(value before the fan-out, changed values) -> value``."""

Migration: TypeAlias = Callable[[Snapshot[Any]], Snapshot[Any]]
EventSink: TypeAlias = Callable[[GraphEvent], Awaitable[None]]


@final
@attrs.frozen
class _Static:
    to: str


@final
@attrs.frozen
class _Route:
    router: Callable[[Any], str]
    to: tuple[str, ...]


@final
@attrs.frozen
class _FanOut:
    to: tuple[str, ...]
    join: str
    merge: Callable[[Any, tuple[Any, ...]], Any] | None
    reducers: Mapping[str, Reducer]


_Edge: TypeAlias = _Static | _Route | _FanOut


def _targets(edge: _Edge) -> tuple[str, ...]:
    if isinstance(edge, _Static):
        return (edge.to,)
    if isinstance(edge, _Route):
        return edge.to
    return (*edge.to, edge.join)


# -- builder --------------------------------------------------------------------


@final
@attrs.frozen
class Builder(Generic[S, E_co]):
    """An immutable graph description; :meth:`build` validates it.

    >>> from pipeline import graph
    >>> b = graph.builder(int)   # the state type
    """

    state_type: type[S]
    _nodes: tuple[tuple[str, Handler[S, S, Any]], ...] = ()
    _edges: tuple[tuple[str, _Edge], ...] = ()
    _entry: str | None = None
    _limits: Limits = Limits()

    def node(
        self: Builder[S, E], name: str, action: Handler[S, S, E2]
    ) -> Builder[S, E | E2]:
        """Add an action node: a handler from state to new state."""
        return attrs.evolve(self, nodes=(*self._nodes, (name, action)))

    def agent(
        self: Builder[S, E],
        name: str,
        agent: AgentLike,
        *,
        messages: Callable[[S], Sequence[Message]],
        update: Callable[[S, AgentRun], S],
        fields: Sequence[str] | None = None,
    ) -> Builder[S, E | AgentError]:
        """Add an agent node (see :func:`~pipeline.graph.agent_node`)."""
        from ._agent import agent_node  # noqa: PLC0415  # agents load on use

        node = agent_node(
            agent,
            messages=messages,
            update=update,
            state_type=self.state_type,
            fields=fields,
            name=name,
        )
        return self.node(name, node)

    def edge(self, source: str, target: str) -> Builder[S, E_co]:
        """After *source*, go to *target* (a node name or ``END``)."""
        return attrs.evolve(
            self, edges=(*self._edges, (source, _Static(target)))
        )

    def route(
        self,
        source: str,
        router: Callable[[S], str],
        to: Sequence[str],
    ) -> Builder[S, E_co]:
        """After *source*, go where *router* says: one of *to*.

        List ``END`` in *to* if the router may end the run.  A name outside
        *to* (``END`` included) is an :class:`~pipeline.errors.UnknownRoute`
        failure at run time, never a silent end.
        """
        return attrs.evolve(
            self, edges=(*self._edges, (source, _Route(router, tuple(to))))
        )

    def fan_out(
        self,
        source: str,
        to: Sequence[str],
        *,
        join: str,
        merge: Callable[[S, tuple[S, ...]], S] | None = None,
        reducers: Mapping[str, Reducer] | None = None,
    ) -> Builder[S, E_co]:
        """After *source*, run *to* concurrently from the same snapshot.

        Their states merge, then the run goes on at *join* (a node or
        ``END``).  Merging is independent of completion order: a field one
        branch changed takes that value; vectors several branches extended
        get every branch's additions in definition order; contexts merge as
        ``&`` merges them; any other field several branches changed needs a
        *reducers* entry ``(before, changed_values) -> value`` or the step
        fails with :class:`~pipeline.errors.MergeConflict`.  *merge*
        replaces all of this with your own ``(before, outputs) -> state``.
        """
        edge = _FanOut(tuple(to), join, merge, dict(reducers or {}))
        return attrs.evolve(self, edges=(*self._edges, (source, edge)))

    def entry(self, name: str) -> Builder[S, E_co]:
        """Start runs at *name*."""
        return attrs.evolve(self, entry=name)

    def limits(self, limits: Limits) -> Builder[S, E_co]:
        """Default limits for runs of the built graph."""
        return attrs.evolve(self, limits=limits)

    def build(self, *, version: str = "1") -> Graph[S, E_co]:
        """Validate and freeze the graph.

        *version* is folded into the fingerprint: bump it when a node's
        behaviour changes in a way old checkpoints must not resume across.

        Raises:
            GraphDefects: listing every structural defect found, at once.
        """
        defects = _validate(self)
        if defects:
            raise GraphDefects(defects)
        assert self._entry is not None  # noqa: S101  # validated
        return Graph(
            self.state_type,
            dict(self._nodes),
            dict(self._edges),
            self._entry,
            self._limits,
            version,
        )


def builder(state_type: type[S]) -> Builder[S, Never]:
    """Start describing a graph over *state_type* (an attrs class, say)."""
    return Builder(state_type)


def _validate(b: Builder[Any, Any]) -> list[GraphDefect]:
    defects: list[GraphDefect] = []
    names: dict[str, Handler[Any, Any, Any]] = {}
    for name, action in b._nodes:
        if name == END:
            defects.append(
                GraphDefect("reserved name", name, "END cannot be a node")
            )
        elif name in names:
            defects.append(
                GraphDefect("duplicate node", name, "added more than once")
            )
        elif not isinstance(cast("object", action), Handler):
            defects.append(
                GraphDefect(
                    "not a handler", name, f"got {type(action).__name__}"
                )
            )
        names.setdefault(name, action)
    edges: dict[str, _Edge] = {}
    for source, edge in b._edges:
        if source not in names:
            defects.append(
                GraphDefect(
                    "unknown node",
                    source,
                    "edge from a node that does not exist",
                )
            )
        if source in edges:
            defects.append(
                GraphDefect(
                    "several edges",
                    source,
                    "a node has one outgoing edge (use route or fan_out to branch)",
                )
            )
            continue
        edges[source] = edge
        for target in _targets(edge):
            if target != END and target not in names:
                defects.append(
                    GraphDefect(
                        "unknown node",
                        target,
                        f"edge from {source!r} to a node that does not exist",
                    )
                )
        if isinstance(edge, _Route) and not edge.to:
            defects.append(
                GraphDefect(
                    "empty route", source, "route needs at least one target"
                )
            )
        if isinstance(edge, _FanOut):
            if not edge.to:
                defects.append(
                    GraphDefect(
                        "empty fan-out",
                        source,
                        "fan_out needs at least one branch",
                    )
                )
            if END in edge.to:
                defects.append(
                    GraphDefect(
                        "fan-out to END",
                        source,
                        "branches must be nodes; use join=END",
                    )
                )
            if len(edge.to) > b._limits.max_fanout:
                defects.append(
                    GraphDefect(
                        "fan-out too wide",
                        source,
                        f"{len(edge.to)} branches > limit {b._limits.max_fanout}",
                    )
                )
            if len(set(edge.to)) != len(edge.to):
                defects.append(
                    GraphDefect(
                        "duplicate branch",
                        source,
                        "a fan-out lists a branch twice",
                    )
                )
    branches = {
        t for e in edges.values() if isinstance(e, _FanOut) for t in e.to
    }
    for name in names:
        if name in branches and name in edges:
            defects.append(
                GraphDefect(
                    "branch with edges",
                    name,
                    "fan-out branches continue at the join; remove their own edge",
                )
            )
        elif name not in branches and name not in edges:
            defects.append(
                GraphDefect(
                    "dead end",
                    name,
                    "no outgoing edge (add an edge to END to finish there)",
                )
            )
    if b._entry is None:
        defects.append(GraphDefect("missing entry", "", "call .entry(name)"))
        return defects
    if b._entry not in names:
        defects.append(
            GraphDefect("unknown node", b._entry, "entry is not a node")
        )
        return defects
    # Reachability from the entry, and whether END is reachable from each node.
    succ: dict[str, set[str]] = {n: set() for n in names}
    for source, edge in edges.items():
        if source in succ:
            if isinstance(edge, _FanOut):
                succ[source].update(edge.to)
                for t in edge.to:
                    if t in succ:
                        succ[t].add(edge.join)
            else:
                succ[source].update(_targets(edge))
    seen = {b._entry}
    queue = collections.deque([b._entry])
    while queue:
        for nxt in succ.get(queue.popleft(), ()):
            if nxt != END and nxt not in seen:
                seen.add(nxt)
                queue.append(nxt)
    defects.extend(
        GraphDefect("unreachable", n, f"no path from the entry {b._entry!r}")
        for n in names
        if n not in seen
    )
    exits = {END}
    changed = True
    while changed:
        changed = False
        for n, nexts in succ.items():
            if n not in exits and nexts & exits:
                exits.add(n)
                changed = True
    defects.extend(
        GraphDefect(
            "no way out",
            n,
            "every path from here cycles forever; no path to END",
        )
        for n in names
        if n in seen and n not in exits
    )
    return defects


# -- the graph --------------------------------------------------------------------


_MISSING: Any = object()


@final
class Graph(Generic[S, E_co]):
    """A validated graph over state *S* whose nodes fail with *E*.

    Make one with :func:`builder`.  Immutable; one graph serves any number
    of concurrent runs.
    """

    def __init__(
        self,
        state_type: type[S],
        nodes: dict[str, Handler[S, S, Any]],
        edges: dict[str, _Edge],
        entry: str,
        limits: Limits,
        version: str,
    ) -> None:
        self.state_type = state_type
        self._nodes = nodes
        self._calls = {name: h._call for name, h in nodes.items()}
        self._edges = edges
        self._advance = {
            name: _advancer(name, edge) for name, edge in edges.items()
        }
        self.entry = entry
        self.limits = limits
        self.codec = Codec(state_type)
        shape = {
            "entry": entry,
            "version": version,
            "nodes": sorted([name, h.name] for name, h in nodes.items()),
            "edges": sorted(
                [src, type(e).__name__, list(_targets(e))]
                for src, e in edges.items()
            ),
        }
        # 64 bits: plenty to tell graph shapes apart, and short in records.
        self.fingerprint = checksum(canonical(shape))[:16]

    @property
    def nodes(self) -> tuple[str, ...]:
        """Node names, in the order they were added."""
        return tuple(self._nodes)

    def __repr__(self) -> str:
        return f"Graph({len(self._nodes)} nodes, entry={self.entry!r}, fingerprint={self.fingerprint[:12]})"

    # -- the transition -------------------------------------------------------

    def start(self, state: S, *, thread_id: str | None = None) -> Snapshot[S]:
        """The admission snapshot: *state* before the entry node runs."""
        return Snapshot(
            thread_id=thread_id or uuid.uuid4().hex,
            version=0,
            parent=None,
            state=state,
            node=None,
            next=(self.entry,),
            join=None,
            step=0,
            fingerprint=self.fingerprint,
        )

    async def step(
        self, snap: Snapshot[S]
    ) -> Result[Snapshot[S], E_co | GraphFailure]:
        """Run what *snap* says comes next; return the following snapshot.

        Pure: *snap* is not changed and nothing is written.  The result's
        version is ``snap.version + 1``.
        """
        out = await self._step(snap, snap.version + 1, self.limits)
        return out if type(out) is Failure else Success(out)

    async def _step(
        self,
        snap: Snapshot[S],
        version: int,
        limits: Limits,
        store: CheckpointStore | None = None,
    ) -> Any:
        """The transition; returns the new snapshot or a ``Failure``.

        (Not a ``Result``: wrapping every step in ``Success`` costs more than
        the rest of the step.)
        """
        targets = snap.next
        if snap.join is None and len(targets) == 1:
            name = targets[0]
            r = await self._calls[name](snap.state)
            if type(r) is not Success:
                return located(r, name)
            state: S = r.unwrap()
            where = self._advance[name](state)
            if type(where) is Failure:
                return where
            nxt, join = where
            label = name
        else:
            if len(targets) > limits.max_fanout:
                return Failure(
                    FanOutLimitExceeded(
                        len(targets),
                        limits.max_fanout,
                        path=(snap.node or "",),
                    )
                )
            merged = await self._branches(snap, limits, store)
            if type(merged) is not Success:
                return Failure(merged.failure())
            state = merged.unwrap()
            nxt = () if snap.join == END else (cast("str", snap.join),)
            join = None
            label = "+".join(targets)
        return Snapshot(
            snap.thread_id,
            version,
            snap.version,
            state,
            label,
            nxt,
            join,
            snap.step + 1,
            snap.fingerprint,
            _RUNNING if nxt else _DONE,
        )

    async def _branches(
        self,
        snap: Snapshot[S],
        limits: Limits,
        store: CheckpointStore | None,
    ) -> Result[S, Any]:
        targets = snap.next
        base = snap.state
        outs: list[Any] = [_MISSING] * len(targets)
        failed: list[tuple[int, Result[Any, Any]]] = []
        # Branches that finished in an earlier attempt of this very fan-out
        # (same thread, same starting version) are not run again.
        if store is not None:
            kept = await store.pending(snap.thread_id, snap.version)
            for i, name in enumerate(targets):
                if name in kept:
                    outs[i] = self._unpending(kept[name], name)
        todo = [(i, n) for i, n in enumerate(targets) if outs[i] is _MISSING]
        calls = self._calls

        async def branch(
            item: tuple[int, str], scope: anyio.CancelScope
        ) -> None:
            i, name = item
            r = await calls[name](base)
            if type(r) is Success:
                outs[i] = r.unwrap()
                if store is not None:
                    await store.put_pending(
                        self._pending(snap, name, outs[i]), name
                    )
                return
            if not failed or i < failed[0][0]:
                failed[:] = [(i, located(r, name))]
            scope.cancel()

        workers = min(len(todo), limits.concurrency)
        await run_pool(workers, iter(todo), branch)
        if failed:
            return failed[0][1]
        source = self._edges.get(snap.node or "")
        if isinstance(source, _FanOut) and source.merge is not None:
            return Success(source.merge(base, tuple(outs)))
        reducers = source.reducers if isinstance(source, _FanOut) else {}
        return merge_states(base, tuple(outs), targets, reducers)

    def _pending(self, snap: Snapshot[S], branch: str, state: S) -> Record:
        # A whole (not delta) record of the branch's output, at the version
        # the fan-out started from, naming the branch.
        kept = Snapshot(
            snap.thread_id,
            snap.version,
            None,
            state,
            branch,
            (),
            None,
            snap.step,
            snap.fingerprint,
        )
        return self.codec.encode(kept, None)

    def _unpending(self, record: Record, branch: str) -> Any:
        """A kept branch output, or _MISSING if it cannot be trusted."""
        doc = self.codec.parse(record)
        if not ok(doc):
            return _MISSING
        snap = self.codec.decode([(record, doc.unwrap())])
        if not ok(snap):
            return _MISSING
        kept: Snapshot[S] = snap.unwrap()
        if kept.node != branch or kept.fingerprint != self.fingerprint:
            return _MISSING
        return kept.state

    # -- running ----------------------------------------------------------------

    async def run(
        self,
        state: S,
        *,
        store: CheckpointStore | None = None,
        thread_id: str | None = None,
        gates: Sequence[Gate[S]] = (),
        observers: Sequence[Observer[S]] = (),
        on_event: EventSink | None = None,
        limits: Limits | None = None,
    ) -> Result[Snapshot[S], E_co | GraphFailure]:
        """Run from *state* to END (or a limit, a stop, an interrupt).

        With a *store*, an admission record (version 0) is committed first,
        then one record per transition, before the next node starts.  The
        result is the last snapshot; its status says how the run ended.
        """
        snap = self.start(state, thread_id=thread_id)
        on_event = _sink(on_event)
        head: int | None = None
        if store is not None:
            committed = await store.commit(
                self.codec.encode(snap, None), expected_head=None
            )
            if not ok(committed):
                return Failure(committed.failure())
            head = 0
            if on_event is not None:
                await on_event(CheckpointSaved(snap.thread_id, 0))
        return await self._fold(
            snap,
            head,
            store,
            gates,
            observers,
            on_event,
            limits or self.limits,
            None,
        )

    async def resume(
        self,
        store: CheckpointStore,
        thread_id: str,
        *,
        version: int | None = None,
        answer: str | None = None,
        migrate: Migration | None = None,
        gates: Sequence[Gate[S]] = (),
        observers: Sequence[Observer[S]] = (),
        on_event: EventSink | None = None,
        limits: Limits | None = None,
    ) -> Result[Snapshot[S], E_co | GraphFailure]:
        """Continue a thread from its latest (or a chosen) checkpoint.

        Resuming from an older *version* grows a new branch inside the
        thread; older records never change.  A checkpoint written by a
        graph with another fingerprint is refused with
        :class:`~pipeline.errors.IncompatibleGraph` unless *migrate* maps
        it to this graph.  *answer* goes to the gate of an interrupted
        transition.
        """
        loaded = await self.load(store, thread_id, version=version)
        if not ok(loaded):
            return Failure(loaded.failure())
        snap: Snapshot[S] = loaded.unwrap()
        if snap.fingerprint != self.fingerprint:
            if migrate is None:
                return Failure(
                    IncompatibleGraph(snap.fingerprint, self.fingerprint)
                )
            snap = attrs.evolve(migrate(snap), fingerprint=self.fingerprint)
        if snap.status is Status.DONE:
            return Success(snap)
        if snap.status is not Status.RUNNING:
            snap = attrs.evolve(snap, status=Status.RUNNING, pending=None)
        head = await store.head(thread_id)
        on_event = _sink(on_event)
        return await self._fold(
            snap,
            head,
            store,
            gates,
            observers,
            on_event,
            limits or self.limits,
            answer,
        )

    async def _fold(
        self,
        snap: Snapshot[S],
        head: int | None,
        store: CheckpointStore | None,
        gates: Sequence[Gate[S]],
        observers: Sequence[Observer[S]],
        on_event: EventSink | None,
        limits: Limits,
        answer: str | None,
    ) -> Result[Snapshot[S], Any]:
        tail: collections.deque[str] = collections.deque(maxlen=8)
        version = snap.version if head is None else head
        while snap.next:
            if snap.step >= limits.max_steps:
                return Failure(
                    StepLimitExceeded(limits.max_steps, tuple(tail))
                )
            if gates:
                decision = await _decide(
                    gates,
                    Transition(
                        snap.node, snap.next, snap.state, snap.step, answer
                    ),
                )
                answer = None
                if isinstance(decision, Stop):
                    await _emit(on_event, Stopped(decision.reason))
                    return Success(attrs.evolve(snap, status=Status.STOPPED))
                if isinstance(decision, Interrupt):
                    version += 1
                    paused = attrs.evolve(
                        snap,
                        version=version,
                        parent=snap.version,
                        status=Status.INTERRUPTED,
                        pending=Pending(
                            snap.node, snap.next, decision.question
                        ),
                    )
                    if store is not None:
                        committed = await store.commit(
                            self.codec.encode(paused, snap),
                            expected_head=version - 1,
                        )
                        if not ok(committed):
                            return Failure(committed.failure())
                    await _emit(on_event, Interrupted(decision.question))
                    return Success(paused)
            if on_event is not None:
                await on_event(NodeStarted(snap.next, snap.step))
            new = await self._step(snap, version + 1, limits, store)
            if type(new) is Failure:
                return new
            if store is not None:
                committed = await store.commit(
                    self.codec.encode(new, snap), expected_head=version
                )
                if not ok(committed):
                    return Failure(committed.failure())
                if on_event is not None:
                    await on_event(CheckpointSaved(new.thread_id, new.version))
            version = new.version
            if on_event is not None:
                await on_event(NodeFinished(snap.next, new.step))
            for observe in observers:
                await observe(new)
            tail.append(new.node or "")  # for StepLimitExceeded's tail
            snap = new
        return Success(
            attrs.evolve(snap, status=Status.DONE)
            if snap.status is not Status.DONE
            else snap
        )

    # -- checkpoints ----------------------------------------------------------------

    async def load(
        self,
        store: CheckpointStore,
        thread_id: str,
        *,
        version: int | None = None,
    ) -> Result[Snapshot[S], SnapshotNotFound | CheckpointDecodeError]:
        """The snapshot at *version*, or the latest usable one.

        Records that fail their checksum or do not decode are skipped when
        looking for the latest: a torn last write falls back to the
        version before it.  An explicit *version* must decode.
        """
        rows = await store.records(thread_id, upto=version)
        if not rows:
            return Failure(SnapshotNotFound(thread_id, version))
        by_version = {r.version: r for r in rows}
        parsed: dict[int, Result[dict[str, Any], CheckpointDecodeError]] = {}
        candidates = (
            [version]
            if version is not None
            else sorted(by_version, reverse=True)
        )
        error: CheckpointDecodeError | None = None
        for v in candidates:
            if v not in by_version:
                return Failure(SnapshotNotFound(thread_id, version))
            chain: list[tuple[Record, dict[str, Any]]] = []
            cursor: int | None = v
            while cursor is not None:
                row = by_version.get(cursor)
                if row is None:
                    error = CheckpointDecodeError(
                        "$.parent",
                        f"version {v} descends from missing version {cursor}",
                    )
                    break
                doc = parsed.get(cursor)
                if doc is None:
                    doc = parsed[cursor] = self.codec.parse(row)
                if type(doc) is not Success:
                    error = doc.failure()
                    break
                chain.append((row, doc.unwrap()))
                cursor = row.parent
            else:
                chain.reverse()
                decoded = self.codec.decode(chain)
                if type(decoded) is Success:
                    return decoded
                error = decoded.failure()
        assert error is not None  # noqa: S101  # some candidate failed
        return Failure(error)

    async def history(
        self, store: CheckpointStore, thread_id: str
    ) -> Result[
        tuple[Snapshot[S], ...], SnapshotNotFound | CheckpointDecodeError
    ]:
        """Every decodable snapshot of the thread, oldest first."""
        rows = await store.records(thread_id)
        if not rows:
            return Failure(SnapshotNotFound(thread_id, None))
        out: list[Snapshot[S]] = []
        for row in rows:
            snap = await self.load(store, thread_id, version=row.version)
            if type(snap) is Success:
                out.append(snap.unwrap())
        return Success(tuple(out))

    async def fork(
        self,
        store: CheckpointStore,
        thread_id: str,
        *,
        version: int | None = None,
        new_thread_id: str | None = None,
    ) -> Result[
        Snapshot[S],
        SnapshotNotFound | CheckpointDecodeError | ConcurrentModification,
    ]:
        """Copy a snapshot into a new thread (version 0); the original is untouched."""
        loaded = await self.load(store, thread_id, version=version)
        if not ok(loaded):
            return Failure(loaded.failure())
        forked = attrs.evolve(
            loaded.unwrap(),
            thread_id=new_thread_id or uuid.uuid4().hex,
            version=0,
            parent=None,
        )
        committed = await store.commit(
            self.codec.encode(forked, None), expected_head=None
        )
        if not ok(committed):
            return Failure(committed.failure())
        return Success(forked)

    # -- drawing ----------------------------------------------------------------

    def mermaid(self) -> str:
        """A Mermaid flowchart of the graph."""

        def ident(name: str) -> str:
            return (
                "END"
                if name == END
                else "n_" + "".join(c if c.isalnum() else "_" for c in name)
            )

        lines = ["flowchart TD", "  START([start])", "  END([end])"]
        lines.extend(f'  {ident(n)}["{n}"]' for n in self._nodes)
        lines.append(f"  START --> {ident(self.entry)}")
        for source, edge in self._edges.items():
            if isinstance(edge, _Static):
                lines.append(f"  {ident(source)} --> {ident(edge.to)}")
            elif isinstance(edge, _Route):
                lines.extend(
                    f"  {ident(source)} -.-> {ident(t)}" for t in edge.to
                )
            else:
                lines.extend(
                    f"  {ident(source)} ==> {ident(t)}" for t in edge.to
                )
                lines.extend(
                    f"  {ident(t)} --> {ident(edge.join)}" for t in edge.to
                )
        return "\n".join(lines) + "\n"


_RUNNING = Status.RUNNING
_DONE = Status.DONE
_Where: TypeAlias = (
    "tuple[tuple[str, ...], str | None] | Failure[UnknownRoute]"
)


def _advancer(name: str, edge: _Edge) -> Callable[[Any], _Where]:
    """Where to go after *name*, precomputed per edge kind."""
    if isinstance(edge, _Static):
        fixed: _Where = ((), None) if edge.to == END else ((edge.to,), None)
        return lambda _state: fixed
    if isinstance(edge, _FanOut):
        branches: _Where = (edge.to, edge.join)
        return lambda _state: branches
    router, allowed = edge.router, edge.to
    choices: dict[str, _Where] = {
        t: (((), None) if t == END else ((t,), None)) for t in allowed
    }

    def route(state: Any) -> _Where:
        choice = router(state)
        where = choices.get(choice)
        if where is None:
            return Failure(
                UnknownRoute(name, str(choice), allowed, path=(name,))
            )
        return where

    return route


def _sink(on_event: EventSink | None) -> EventSink | None:
    """One place for events: *on_event* and any listening stream (checked
    once per run: nothing is paid per step when nobody listens)."""
    if not listening():
        return on_event
    if on_event is None:
        return emit

    async def both(event: GraphEvent) -> None:
        await on_event(event)
        await emit(event)

    return both


async def _emit(sink: EventSink | None, event: GraphEvent) -> None:
    if sink is not None:
        await sink(event)


async def _decide(
    gates: Sequence[Gate[Any]], transition: Transition[Any]
) -> Decision:
    for gate in gates:
        decision = await gate(transition)
        if not isinstance(decision, Continue):
            return decision
    return Continue()


# -- merging branch states ---------------------------------------------------------


def merge_states(
    base: S,
    outs: tuple[S, ...],
    names: Sequence[str],
    reducers: Mapping[str, Reducer],
) -> Result[S, MergeConflict]:
    """Merge fan-out branch states; the result ignores completion order."""
    if isinstance(base, Context):
        return Success(
            cast("S", merge_branches(base, cast("tuple[Context, ...]", outs)))
        )
    if not attrs.has(type(base)):
        changed = [(i, o) for i, o in enumerate(outs) if o != base]
        if not changed:
            return Success(base)
        if all(o == changed[0][1] for _, o in changed):
            return Success(changed[0][1])
        return Failure(
            MergeConflict("<state>", tuple(names[i] for i, _ in changed))
        )
    updates: dict[str, Any] = {}
    for field in attrs.fields(cast("type[Any]", type(base))):
        before = getattr(base, field.name)
        changed_values = []
        for i, out in enumerate(outs):
            value = getattr(out, field.name)
            if value is not before and value != before:
                changed_values.append((i, value))
        if not changed_values:
            continue
        values = tuple(v for _, v in changed_values)
        if field.name in reducers:
            merged = reducers[field.name](before, values)
        elif len(changed_values) == 1 or all(v == values[0] for v in values):
            merged = values[0]
        elif isinstance(before, PVector) and all(
            _grows(before, v) for v in values
        ):
            merged = before.extend(
                item for v in values for item in v[len(before) :]
            )
        elif isinstance(before, Context) and all(
            isinstance(v, Context) for v in values
        ):
            merged = merge_branches(before, values)
        else:
            culprits = tuple(str(names[i]) for i, _ in changed_values)
            return Failure(MergeConflict(field.name, culprits))
        updates[field.alias or field.name] = merged
    if not updates:
        return Success(base)
    return Success(cast("S", attrs.evolve(cast("Any", base), **updates)))


def _grows(before: PVector[Any], after: object) -> bool:
    if not isinstance(after, PVector) or len(after) < len(before):
        return False
    n = len(before)
    return n == 0 or after[n - 1] is before[n - 1] or after[:n] == before
