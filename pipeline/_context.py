"""The conversation context: immutable messages plus metadata.

Every change returns a new :class:`Context`; older snapshots never change.
Messages live in a persistent vector (:mod:`pyrsistent`), so appending to a
history of *n* messages shares the *n* existing ones instead of copying them.
"""

from __future__ import annotations

import enum
import os
import weakref

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TypeAlias, cast, final

import attrs

from pyrsistent import PMap, PVector, pmap, pvector

from ._fields import LINEAGE, READ_BACK, extends, starts_with
from ._messages import Message


__all__ = (
    "Context",
    "MergeStrategy",
    "MetaValue",
    "Metadata",
    "merge_branches",
    "merge_metadata",
)

MetaValue: TypeAlias = "str | int | float | bool | tuple[MetaValue, ...] | Mapping[str, MetaValue] | None"
"""A metadata value: JSON-shaped and immutable (lists become tuples)."""

Metadata: TypeAlias = "PMap[str, MetaValue]"
"""A context's metadata: an immutable map of names to metadata values."""

MetaMerge: TypeAlias = Callable[["MetaValue", "MetaValue"], "MetaValue"]
"""A per-key merge: ``(existing, new) -> merged`` (see
:func:`~pipeline.merge_metadata`'s *custom*)."""


@final
class MergeStrategy(enum.Enum):
    """What to do when merged metadata has a key on both sides.

    * ``KEEP_EXISTING``: keep the value already there.
    * ``KEEP_NEW``: take the incoming value.
    * ``COMBINE``: tuples concatenate, mappings union (incoming wins),
      strings concatenate, numbers add (``bool`` is not a number here);
      values of different kinds take the incoming value.
    * ``SKIP``: ignore the incoming metadata entirely, new keys included.
      (The Go seed's ``Skip`` behaved exactly like ``KeepExisting``; a
      strategy named *skip* that still adds keys surprised users.)

    Keys only on the incoming side are added under every strategy but
    ``SKIP``.  Per-key functions given as *custom* take precedence.

    .. versionadded:: 0.1.0
    """

    KEEP_EXISTING = "keep-existing"
    KEEP_NEW = "keep-new"
    COMBINE = "combine"
    SKIP = "skip"


_Path: TypeAlias = "tuple[_Path, str] | str"


def _render(path: _Path) -> str:
    parts: list[str] = []
    while isinstance(path, tuple):
        path, seg = path
        parts.append(seg)
    parts.append(path)
    return "".join(reversed(parts))


def _bad_value(node: object, path: _Path) -> TypeError:
    msg = (
        f"metadata value at {_render(path)} is a {type(node).__name__}; "
        "expected str, int, float, bool, None, a list/tuple or a mapping "
        "with str keys"
    )
    return TypeError(msg)


_SCALARS = (str, int, float, bool)


def freeze(value: object, where: str) -> MetaValue:
    """Turn a JSON-shaped value into its immutable form, or say what is wrong.

    Iterative on purpose: deeply nested input must not hit the recursion
    limit, and paths are only rendered for the error message.
    """
    if value is None or type(value) in _SCALARS:
        return cast("MetaValue", value)
    out: list[MetaValue] = []
    stack: list[tuple[object, _Path, bool]] = [(value, where, False)]
    while stack:
        node, path, done = stack.pop()
        if node is None or type(node) in _SCALARS:
            out.append(cast("MetaValue", node))
        elif isinstance(node, (list, tuple)):
            if done:
                n = len(node)
                items = tuple(out[len(out) - n :]) if n else ()
                del out[len(out) - n :]
                out.append(items)
            else:
                stack.append((node, path, True))
                stack.extend(
                    (node[i], (path, f"[{i}]"), False)
                    for i in range(len(node) - 1, -1, -1)
                )
        elif isinstance(node, Mapping):
            keys = list(node)
            if done:
                n = len(keys)
                vals = out[len(out) - n :] if n else []
                del out[len(out) - n :]
                out.append(pmap(dict(zip(keys, vals, strict=True))))
            else:
                for k in keys:
                    if not isinstance(k, str):
                        msg = (
                            f"metadata key {k!r} at {_render(path)} is a "
                            f"{type(k).__name__}; keys must be str"
                        )
                        raise TypeError(msg)
                stack.append((node, path, True))
                stack.extend(
                    (node[k], (path, f".{k}"), False) for k in reversed(keys)
                )
        else:
            raise _bad_value(node, path)
    return out[0]


def _to_metadata(value: Mapping[str, object] | None) -> Metadata:
    if value is None:
        return pmap()
    if type(value) is _PMAP or isinstance(value, PMap):
        return value  # type: ignore[return-value]  # a PMap's values were frozen
    frozen = freeze(value, "metadata")
    if not isinstance(frozen, PMap):
        msg = f"metadata must be a mapping, got {type(value).__name__}"
        raise TypeError(msg)
    return cast("Metadata", frozen)


def _check_messages(items: Sequence[object], where: str) -> None:
    if _ONLY_MESSAGE.issuperset(map(id, map(type, items))):
        # Exact messages all, asked in C (an agent run adds many), by the
        # types' identities: a type's own __eq__ (its metaclass's) is not
        # asked.
        return
    for i, m in enumerate(items):
        if not isinstance(m, Message):
            msg = f"{where}[{i}] is a {type(m).__name__}, not a Message"
            raise TypeError(msg)


def _to_messages(value: Iterable[Message]) -> PVector[Message]:
    # Exact type first: isinstance against pyrsistent's ABC costs microseconds.
    if type(value) is _PVECTOR or isinstance(value, PVector):
        return cast("PVector[Message]", value)  # checked when it was made
    msgs = pvector(value)
    _check_messages(msgs, "messages")
    return msgs


_ONLY_MESSAGE: frozenset[int] = frozenset({id(Message)})

_PVECTOR: type = type(pvector())
_PMAP: type = type(pmap())


def _no_metadata() -> Metadata:
    return pmap()


def _new_run_id() -> str:
    return random_id()


def random_id() -> str:
    """A new random id, as ``uuid.uuid4().hex`` writes one (32 hex
    digits, the version and variant bits set), without building the
    ``UUID`` (half the time: once per run and per context)."""
    return hex_id(_urandom(16))


def hex_id(raw: bytes) -> str:
    """``uuid.UUID(bytes=raw, version=4).hex``: *raw*'s 16 bytes with the
    version 4 and RFC 4122 variant bits set."""
    n = int.from_bytes(raw)
    return f"{n & _KEEP | _VERSION_4:032x}"


_urandom = os.urandom
_KEEP = ~((0xC000 << 48) | (0xF000 << 64)) & ((1 << 128) - 1)
_VERSION_4 = (0x8000 << 48) | (4 << 76)


def metadata_from_json(value: object) -> Metadata:
    """Metadata from a record's JSON object."""
    if type(value) is dict and not value:
        # Most records' metadata (every admission of a context without
        # any): what freeze() makes of it, the one empty map, without
        # its walk (an ABC check, a stack, a dict built and copied).
        return _EMPTY_METADATA
    if not isinstance(value, dict):
        msg = f"expected an object, got {type(value).__name__}"
        raise TypeError(msg)
    return _to_metadata(value)


_EMPTY_METADATA: Metadata = pmap()


@final
@attrs.frozen
class Context:
    """An immutable conversation: messages, metadata and a run id.

    >>> ctx = Context().append(Message.user("hello"))
    >>> later = ctx.set("topic", "greeting")
    >>> len(ctx.metadata), later.metadata["topic"]
    (0, 'greeting')

    .. versionadded:: 0.1.0
    """

    messages: PVector[Message] = attrs.field(
        factory=pvector,
        converter=_to_messages,
        metadata={LINEAGE: "_lineage"},
    )
    metadata: Metadata = attrs.field(
        factory=_no_metadata,
        converter=_to_metadata,
        metadata={READ_BACK: metadata_from_json},
    )
    run_id: str = attrs.field(factory=_new_run_id)
    # Weak references to the message vectors this one was appended to
    # (newest first, a few): how a checkpoint or a merge knows, without
    # comparing every message, that these messages extend an older
    # snapshot's.  Weak, because a vector kept alive here is scanned whole
    # by every young-generation garbage collection (it is a new object at
    # each step): with strong references a step cost grew with the
    # history.  Not part of the value (equality, hash and repr ignore it).
    _lineage: tuple[weakref.ref[PVector[Message]], ...] = attrs.field(
        init=False, default=(), eq=False, hash=False, repr=False
    )

    @classmethod
    def of(
        cls,
        *messages: Message,
        metadata: Mapping[str, object] | None = None,
        run_id: str | None = None,
    ) -> Context:
        """Build a context from messages (and optional metadata)."""
        return cls(messages, _to_metadata(metadata), run_id or _new_run_id())

    def append(self, *messages: Message) -> Context:
        """Return a context with *messages* added at the end.

        Shares every existing message with *self*: O(len(messages)).
        """
        if len(messages) == 1 and type(messages[0]) is Message:
            msgs = self.messages.append(messages[0])  # the hot path
        else:
            _check_messages(messages, "append() argument")
            msgs = self.messages.extend(messages)
        lineage = (_ref(self.messages), *self._lineage[: _LINEAGE - 1])
        return _make(msgs, self.metadata, self.run_id, lineage)

    def with_messages(self, messages: Iterable[Message]) -> Context:
        """Return a context whose history is exactly *messages*."""
        return Context(_to_messages(messages), self.metadata, self.run_id)

    def set(self, key: str, value: MetaValue) -> Context:
        """Return a context with metadata *key* set to *value*.

        *value* is a ``MetaValue`` (:mod:`pipeline.typing`): JSON-shaped and
        immutable (a ``list`` is accepted at run time and stored as a
        tuple, but the type asks for the tuple).  Anything else is a
        :class:`TypeError` naming the key, never echoing the value.
        """
        frozen = freeze(value, f"metadata.{key}")
        return _make(
            self.messages,
            self.metadata.set(key, frozen),
            self.run_id,
            self._lineage,
        )

    def discard(self, key: str) -> Context:
        """Return a context without metadata *key* (if it was there)."""
        return _make(
            self.messages,
            self.metadata.discard(key),
            self.run_id,
            self._lineage,
        )

    def with_metadata(self, metadata: Mapping[str, object]) -> Context:
        """Return a context whose metadata is exactly *metadata*."""
        return Context(self.messages, _to_metadata(metadata), self.run_id)

    def merge_metadata(
        self,
        other: Mapping[str, object],
        strategy: MergeStrategy = MergeStrategy.KEEP_NEW,
        custom: Mapping[str, MetaMerge] | None = None,
    ) -> Context:
        """Merge *other* into the metadata (see :class:`MergeStrategy`)."""
        merged = merge_metadata(
            self.metadata, _to_metadata(other), strategy, custom
        )
        return _make(self.messages, merged, self.run_id, self._lineage)

    @property
    def last(self) -> Message | None:
        """The newest message, or ``None`` for an empty history."""
        return self.messages[-1] if self.messages else None


_LINEAGE = 16


def _make(
    messages: PVector[Message],
    metadata: Metadata,
    run_id: str,
    lineage: tuple[weakref.ref[PVector[Message]], ...] = (),
) -> Context:
    """A context from parts that are already valid: skips the converters."""
    ctx = _new(Context)
    _set_messages(ctx, messages)
    _set_metadata(ctx, metadata)
    _set_run_id(ctx, run_id)
    _set_lineage(ctx, lineage)
    return ctx


# Each field's slot, set directly (frozen: no __setattr__ to go through):
# half the cost of object.__setattr__, which looks the name up every time.
_new = object.__new__
_set_messages = Context.__dict__["messages"].__set__
_set_metadata = Context.__dict__["metadata"].__set__
_set_run_id = Context.__dict__["run_id"].__set__
_set_lineage = Context.__dict__["_lineage"].__set__
_ref = weakref.ref


def lineage(ctx: Context) -> tuple[weakref.ref[PVector[Message]], ...]:
    """Weak references to the message vectors *ctx*'s messages are known
    to extend."""
    return ctx._lineage  # noqa: SLF001  # the one reader outside the class


def context_extends(old: Context, new: Context) -> bool:
    """Whether *new*'s messages start with *old*'s: the same messages, or
    equal ones (see :func:`~pipeline._fields.starts_with`)."""
    return extends(old.messages, new.messages, lineage(new)) or starts_with(
        old.messages, new.messages
    )


def _is_number(v: MetaValue) -> bool:
    return type(v) in (int, float)


def combine_values(existing: MetaValue, new: MetaValue) -> MetaValue:
    """The ``COMBINE`` rule for one key."""
    if isinstance(existing, tuple) and isinstance(new, tuple):
        return existing + new
    if isinstance(existing, PMap) and isinstance(new, PMap):
        return existing.update(new)  # type: ignore[no-any-return]
    if isinstance(existing, str) and isinstance(new, str):
        return existing + new
    if _is_number(existing) and _is_number(new):
        return existing + new  # type: ignore[operator]
    return new


def merge_metadata(
    existing: Metadata,
    new: Metadata,
    strategy: MergeStrategy = MergeStrategy.KEEP_NEW,
    custom: Mapping[str, MetaMerge] | None = None,
) -> Metadata:
    """Merge *new* into *existing* by *strategy* and per-key *custom* rules.

    .. versionadded:: 0.1.0
    """
    if strategy is MergeStrategy.SKIP and not custom:
        return existing
    out = existing.evolver()
    for key, value in new.items():
        fn = custom.get(key) if custom else None
        if key not in existing:
            if fn is not None or strategy is not MergeStrategy.SKIP:
                out[key] = value
            continue
        if fn is not None:
            out[key] = fn(existing[key], value)
        elif strategy is MergeStrategy.KEEP_NEW:
            out[key] = value
        elif strategy is MergeStrategy.COMBINE:
            out[key] = combine_values(existing[key], value)
        # KEEP_EXISTING and SKIP keep what is there.
    return out.persistent()


def _added_messages(
    base: PVector[Message],
    out: PVector[Message],
    lineage: Sequence[Callable[[], object]] = (),
) -> Sequence[Message]:
    """Messages *out* has beyond the prefix it shares with *base*."""
    if out is base:
        return ()
    if extends(base, out, lineage):
        return out[len(base) :]
    # A branch that rewrote history: what follows the common prefix.
    n = min(len(base), len(out))
    k = 0
    while k < n and (out[k] is base[k] or out[k] == base[k]):
        k += 1
    return out[k:]


def merge_branches(
    base: Context,
    outputs: Sequence[Context],
    strategy: MergeStrategy = MergeStrategy.KEEP_NEW,
    custom: Mapping[str, MetaMerge] | None = None,
) -> Context:
    """Merge the contexts that parallel branches produced from *base*.

    Messages: *base*'s history, then what each branch added, in definition
    order (the shared prefix appears once).  Metadata: *base*'s, updated by
    the keys each branch changed or added, resolved between branches by
    *strategy* in definition order (``KEEP_NEW``: the last branch that
    changed a key wins).  The result does not depend on the order in which
    the branches finished.

    .. versionadded:: 0.1.0
    """
    added: list[Message] = []
    changed: Metadata = pmap()
    base_meta = base.metadata
    for out in outputs:
        added.extend(
            _added_messages(base.messages, out.messages, lineage(out))
        )
        if out.metadata is base_meta:
            continue
        delta = {
            k: v
            for k, v in out.metadata.items()
            if k not in base_meta or base_meta[k] != v
        }
        if delta:
            changed = merge_metadata(changed, pmap(delta), strategy, custom)
    messages = base.messages.extend(added) if added else base.messages
    metadata = base_meta.update(changed) if changed else base_meta
    if strategy is MergeStrategy.SKIP and not custom:
        metadata = base_meta
    return _make(messages, metadata, base.run_id)


def to_metadata(value: Mapping[str, object] | None) -> Metadata:
    """*value* frozen into metadata (checked: JSON-shaped, str keys)."""
    return _to_metadata(value)
