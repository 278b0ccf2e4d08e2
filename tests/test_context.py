"""Context: immutable snapshots, persistent history, metadata merging."""

from __future__ import annotations

import gc
import tracemalloc
import weakref

import attrs
import pytest

from hypothesis import given
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    invariant,
    rule,
)
from pyrsistent import PVector, pmap

from pipeline import (
    Context,
    MergeStrategy,
    Message,
    Role,
    ToolCall,
    Usage,
    merge_branches,
    merge_metadata,
)
from pipeline._context import context_extends
from pipeline.typing import Metadata, MetaValue
from tests.strategies import contexts, messages, meta_values


def meta(**values: object) -> Metadata:
    """Frozen metadata from keyword arguments."""
    return Context().with_metadata(values).metadata


def test_new_context_is_empty_with_a_run_id() -> None:
    """A new context has no messages, no metadata and a fresh run id."""
    a, b = Context(), Context()
    assert len(a.messages) == 0
    assert len(a.metadata) == 0
    assert a.run_id
    assert a.run_id != b.run_id
    assert a.last is None


def test_context_is_frozen() -> None:
    """Assigning to a context's fields raises."""
    ctx = Context()
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        ctx.run_id = "x"  # type: ignore[misc]


def test_append_returns_new_snapshot() -> None:
    """append() leaves the original untouched."""
    ctx = Context.of(Message.user("a"))
    later = ctx.append(Message.assistant("b"), Message.user("c"))
    assert [m.content for m in ctx.messages] == ["a"]
    assert [m.content for m in later.messages] == ["a", "b", "c"]
    assert later.run_id == ctx.run_id
    assert later.last == Message.user("c")


def test_append_rejects_non_messages() -> None:
    """Appending something that is not a Message names what it got."""
    with pytest.raises(TypeError, match="str, not a Message"):
        Context().append("hello")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"messages\[1\] is a int"):
        Context.of(Message.user("x"), 3)  # type: ignore[arg-type]


@pytest.mark.slow
def test_append_shares_history() -> None:
    """Appending to a 100,000-message history allocates O(1), not O(n)."""
    ctx = Context()
    for i in range(100_000):
        ctx = ctx.append(Message.user(str(i)))
    extra = Message.assistant("new")
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        later = ctx.append(extra)
        after, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(later.messages) == 100_001
    assert len(ctx.messages) == 100_000
    # A copy of 100,000 references would be ~800 kB; sharing costs a few
    # hundred bytes of tree nodes.
    assert after - before < 4_096
    assert later.messages[5] is ctx.messages[5]


def test_metadata_is_frozen_json() -> None:
    """Lists become tuples, dicts become immutable maps, others are refused."""
    # Untyped input (JSON from outside): the static type asks for tuples,
    # the run time freezes lists and refuses what is not JSON-shaped.
    tags: object = ["a", ["b"]]
    cfg: object = {"k": [1, 2]}
    ctx = Context().set("tags", tags).set("cfg", cfg)  # type: ignore[arg-type]
    assert ctx.metadata["tags"] == ("a", ("b",))
    assert ctx.metadata["cfg"] == pmap({"k": (1, 2)})
    with pytest.raises(TypeError, match=r"metadata\.bad\[1\] is a set"):
        Context().set("bad", [1, {2}])  # type: ignore[arg-type]  # a set
    with pytest.raises(TypeError, match="keys must be str"):
        Context().set("bad", {1: "x"})  # type: ignore[dict-item]  # int key


@pytest.mark.slow
def test_deeply_nested_metadata_does_not_recurse() -> None:
    """A 100,000-deep nested list freezes without RecursionError."""
    value: list[object] = []
    deep = value
    for _ in range(100_000):
        inner: list[object] = []
        deep.append(inner)
        deep = inner
    frozen = Context().set("deep", value).metadata["deep"]  # type: ignore[arg-type]
    depth = 0
    node: object = frozen
    while isinstance(node, tuple) and node:
        node = node[0]
        depth += 1
    assert depth == 100_000


def test_message_constructors() -> None:
    """The role constructors fill in role and fields."""
    call = ToolCall("c1", "search", '{"q": "x"}')
    assert Message.system("s").role is Role.SYSTEM
    msg = Message.assistant("", tool_calls=[call], usage=Usage(3, 4))
    assert msg.tool_calls == (call,)
    assert msg.usage is not None
    assert msg.usage.total_tokens == 7
    assert Message.tool("42", tool_call_id="c1").tool_call_id == "c1"
    assert Message("user", "x").role is Role.USER
    assert Usage(1, 2) + Usage(3, 4) == Usage(4, 6)


# -- merge strategies ---------------------------------------------------------


def test_merge_strategies_on_a_shared_key() -> None:
    """Each strategy resolves a key present on both sides its own way."""
    old = meta(n=1, s="a", t=(1,), m={"x": 1}, o=1)
    new = meta(n=2, s="b", t=(2,), m={"y": 2}, o="z", fresh=0)
    keep = merge_metadata(old, new, MergeStrategy.KEEP_EXISTING)
    assert keep == old.set("fresh", 0)
    assert merge_metadata(old, new, MergeStrategy.KEEP_NEW) == old.update(new)
    assert merge_metadata(old, new, MergeStrategy.SKIP) == old
    combined = merge_metadata(old, new, MergeStrategy.COMBINE)
    assert combined == meta(
        n=3, s="ab", t=(1, 2), m={"x": 1, "y": 2}, o="z", fresh=0
    )


def test_combine_does_not_add_booleans() -> None:
    """True + True is not 2: booleans take the incoming value."""
    merged = merge_metadata(meta(b=True), meta(b=True), MergeStrategy.COMBINE)
    assert merged["b"] is True


def test_custom_per_key_merge_wins() -> None:
    """A per-key function overrides the strategy for its key only."""

    def bigger(a: MetaValue, b: MetaValue) -> MetaValue:
        assert isinstance(a, int)
        assert isinstance(b, int)
        return max(a, b)

    merged = merge_metadata(
        meta(k=2, j=1),
        meta(k=5, j=9),
        MergeStrategy.KEEP_EXISTING,
        {"k": bigger},
    )
    assert merged == meta(k=5, j=1)


def test_context_merge_metadata() -> None:
    """Context.merge_metadata merges a plain mapping by a strategy."""
    ctx = Context().set("n", 1)
    assert (
        ctx.merge_metadata({"n": 2}, MergeStrategy.COMBINE).metadata["n"] == 3
    )
    assert ctx.merge_metadata({"n": 2}).metadata["n"] == 2


@pytest.mark.slow
@given(
    old=st.dictionaries(st.text(max_size=3), meta_values),
    new=st.dictionaries(st.text(max_size=3), meta_values),
)
def test_keep_new_is_dict_update(
    old: dict[str, object], new: dict[str, object]
) -> None:
    """KEEP_NEW behaves like dict.update; KEEP_EXISTING like the reverse."""
    a = Context().with_metadata(old).metadata
    b = Context().with_metadata(new).metadata
    assert merge_metadata(a, b, MergeStrategy.KEEP_NEW) == a.update(b)
    assert merge_metadata(a, b, MergeStrategy.KEEP_EXISTING) == b.update(a)


@pytest.mark.slow
@given(
    base=contexts(),
    adds=st.lists(st.lists(messages(), max_size=3), min_size=1, max_size=4),
)
def test_merge_branches_keeps_prefix_once(
    base: Context, adds: list[list[Message]]
) -> None:
    """Branch additions follow the shared history once, in order."""
    outs = [base.append(*a) if a else base for a in adds]
    merged = merge_branches(base, outs)
    expected = list(base.messages) + [m for a in adds for m in a]
    assert list(merged.messages) == expected


def test_merge_branches_handles_rewritten_history() -> None:
    """A branch that rewrote history contributes what differs from base."""
    base = Context.of(Message.user("a"), Message.user("b"))
    rewritten = base.with_messages([Message.user("a"), Message.system("sum")])
    merged = merge_branches(base, [rewritten, base.append(Message.user("c"))])
    assert [m.content for m in merged.messages] == ["a", "b", "sum", "c"]


def test_merge_branches_skip_ignores_metadata() -> None:
    """SKIP keeps the base metadata whatever the branches did."""
    base = Context().set("k", 1)
    merged = merge_branches(
        base, [base.set("k", 2), base.set("j", 3)], MergeStrategy.SKIP
    )
    assert dict(merged.metadata) == {"k": 1}


# -- snapshots never change ---------------------------------------------------


class ContextMachine(RuleBasedStateMachine):
    """Random edits: every snapshot keeps its contents forever."""

    snapshots = Bundle("snapshots")

    def __init__(self) -> None:
        super().__init__()
        self.model: dict[int, tuple[list[Message], dict[str, object]]] = {}
        self.live: dict[int, Context] = {}

    def _keep(
        self, ctx: Context, msgs: list[Message], meta: dict[str, object]
    ) -> Context:
        self.model[id(ctx)] = (msgs, meta)
        self.live[id(ctx)] = ctx
        return ctx

    @rule(target=snapshots)
    def start(self) -> Context:
        return self._keep(Context(), [], {})

    @rule(target=snapshots, ctx=snapshots, msg=messages())
    def append(self, ctx: Context, msg: Message) -> Context:
        msgs, meta = self.model[id(ctx)]
        return self._keep(ctx.append(msg), [*msgs, msg], dict(meta))

    @rule(
        target=snapshots,
        ctx=snapshots,
        key=st.sampled_from("abc"),
        value=st.integers(),
    )
    def set_key(self, ctx: Context, key: str, value: int) -> Context:
        msgs, meta = self.model[id(ctx)]
        return self._keep(
            ctx.set(key, value), list(msgs), {**meta, key: value}
        )

    @rule(target=snapshots, ctx=snapshots, key=st.sampled_from("abc"))
    def discard(self, ctx: Context, key: str) -> Context:
        msgs, meta = self.model[id(ctx)]
        rest = {k: v for k, v in meta.items() if k != key}
        return self._keep(ctx.discard(key), list(msgs), rest)

    @invariant()
    def snapshots_unchanged(self) -> None:
        for key, ctx in self.live.items():
            msgs, meta = self.model[key]
            assert list(ctx.messages) == msgs
            assert dict(ctx.metadata) == meta


TestContextMachine = pytest.mark.slow(ContextMachine.TestCase)


def test_lineage_keeps_no_vector_alive() -> None:
    """The lineage holds its vectors weakly: an append keeps only its own
    messages vector alive (a strongly held one is scanned whole by every
    young garbage collection), yet still knows the live ones it extends."""
    first = Context().append(Message.user("a"))
    older = weakref.ref(first.messages)
    ctx = first
    for i in range(20):
        ctx = ctx.append(Message.assistant(str(i)))
    kept = [r for r in gc.get_referents(ctx) if isinstance(r, PVector)]
    assert kept == [ctx.messages]
    assert context_extends(first, ctx)  # first alive: the check still holds
    mid = ctx
    ctx = ctx.append(Message.user("b"))
    assert context_extends(mid, ctx)
    del first
    gc.collect()
    assert older() is None
