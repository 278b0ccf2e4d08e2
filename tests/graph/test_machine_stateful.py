"""A state machine over generated graphs: step, crash, resume, fork.

Invariants: resuming from any checkpoint ends where the uninterrupted run
ends; committed records never change; versions only grow.
"""

from __future__ import annotations

from contextlib import ExitStack

import attrs
import pytest

from anyio.from_thread import start_blocking_portal
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)
from returns.result import Success

from pipeline import fold, stores
from tests.graph.crashgraphs import make_graph
from tests.graph.helpers import Counted, Runs


pytestmark = pytest.mark.slow


class GraphMachine(RuleBasedStateMachine):
    """Drives one thread of a generated graph through random operations."""

    backend = "asyncio"

    def __init__(self) -> None:
        super().__init__()
        self._stack = ExitStack()
        self.portal = self._stack.enter_context(
            start_blocking_portal(self.backend)
        )
        self.store = stores.MemoryStore()
        self.seen: dict[tuple[str, int], bytes] = {}
        self.forks = 0

    @initialize(seed=st.integers(0, 10_000))
    def start(self, seed: int) -> None:
        self.graph = make_graph(seed, Runs())
        self.expected = (
            self.portal.call(self.graph.run, Counted()).unwrap().state
        )
        first = self.graph.start(Counted(), thread_id="t")
        committed = self.portal.call(
            lambda: self.store.commit(
                self.graph.codec.encode(first, None), expected_head=None
            )
        )
        assert isinstance(committed, Success)

    def head(self) -> fold.Snapshot[Counted]:
        return self.portal.call(
            lambda: self.graph.load(self.store, "t")
        ).unwrap()

    @precondition(lambda self: hasattr(self, "graph") and not self.head().done)
    @rule()
    def step_once(self) -> None:
        """Advance the thread by one committed transition."""
        snap = self.head()
        before = self.snapshot_bytes()
        new = self.portal.call(self.graph.step, snap).unwrap()
        head = self.portal.call(self.store.head, "t")
        assert head is not None
        new = attrs.evolve(new, version=head + 1, parent=snap.version)
        r = self.portal.call(
            lambda: self.store.commit(
                self.graph.codec.encode(new, snap), expected_head=head
            )
        )
        assert isinstance(r, Success)
        assert (
            snap.state == self.head_at(snap.version).state
        )  # old snapshot intact
        assert self.snapshot_bytes()[: len(before)] == before

    def head_at(self, version: int) -> fold.Snapshot[Counted]:
        return self.portal.call(
            lambda: self.graph.load(self.store, "t", version=version)
        ).unwrap()

    def snapshot_bytes(self) -> list[bytes]:
        return [r.data for r in self.portal.call(self.store.records, "t")]

    @precondition(lambda self: hasattr(self, "graph"))
    @rule(data=st.data())
    def fork_and_finish(self, data: st.DataObject) -> None:
        """Fork any committed version and run the fork to the end."""
        versions = [
            r.version for r in self.portal.call(self.store.records, "t")
        ]
        version = data.draw(st.sampled_from(versions), label="version")
        self.forks += 1
        thread = f"fork{self.forks}"
        forked = self.portal.call(
            lambda: self.graph.fork(
                self.store, "t", version=version, new_thread_id=thread
            )
        )
        assert isinstance(forked, Success)
        done = self.portal.call(
            lambda: self.graph.resume(self.store, thread)
        ).unwrap()
        assert done.state == self.expected

    @precondition(lambda self: hasattr(self, "graph"))
    @rule()
    def crash_and_resume(self) -> None:
        """Forget everything in memory; resume the thread from the store."""
        done = self.portal.call(
            lambda: self.graph.resume(self.store, "t")
        ).unwrap()
        assert done.state == self.expected

    @invariant()
    def records_never_change(self) -> None:
        for record in self.portal.call(self.store.records, "t"):
            key = (record.thread_id, record.version)
            assert self.seen.setdefault(key, record.data) == record.data

    @invariant()
    def versions_increase(self) -> None:
        versions = [
            r.version for r in self.portal.call(self.store.records, "t")
        ]
        assert versions == sorted(set(versions))

    def teardown(self) -> None:
        self._stack.close()


class TrioGraphMachine(GraphMachine):
    """The same machine on trio."""

    backend = "trio"


TestGraphMachine = GraphMachine.TestCase
TestGraphMachine.settings = settings(
    max_examples=60, stateful_step_count=25, deadline=None
)
TestTrioGraphMachine = TrioGraphMachine.TestCase
TestTrioGraphMachine.settings = settings(
    max_examples=60, stateful_step_count=25, deadline=None
)
