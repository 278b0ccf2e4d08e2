"""Snapshot records: compact canonical JSON that stores what changed.

A record holds one snapshot as a delta against its parent:

* top-level state fields holding a persistent vector (a
  :class:`~pipeline.Context`'s messages, say) are append-only logs; when the
  new vector extends the parent's, only the appended items are stored;
* other top-level fields of an attrs state are stored only when they
  changed; the root record of a chain stores every field;
* the envelope is short: schema, fingerprint, next and step, and the rest
  only when it is not at its default (the node that ran is the parent's
  *next*; a stop's ``reason`` only in the stop record);
* in a store's thread (``inherit``: schema 2), a record whose parent is the
  record before it in the store leaves out what that parent implies: the
  fingerprint when it is the parent's, the step when it is the parent's
  plus one.  A fingerprint is 80-odd bytes, a third of a small step's
  record, and a thread's stays the same for its whole life.  Nested
  folds' documents, which are deltas against a snapshot never stored
  (rebuilt on resume with today's fingerprint), keep both, so that a
  changed machine is still refused; schema 1 records hold both always;
* ``at`` is the time the record was committed (UTC milliseconds since the
  epoch, from :data:`CLOCK`), ``by`` who answered on the record storing an
  answer, ``from`` the thread and version a forked thread's
  first record was copied from; records written before these existed read
  as written at an unknown time, by nobody, from nowhere;
* ``in`` carries the progress of folds nested in the step in flight (an
  agent's turns inside a graph node): each such record appends documents
  to the nested folds' chains; a record without ``in`` starts afresh.

So bytes per step grow with what the step added, not with the history.
The checksum covers the record's thread, version and parent as well as its
bytes (time, author and origin included, being bytes of the document): a
record swapped to another thread or version, or given another time, fails
it.

**Validated commits**: before a record is sealed, what it stores is
structured back into the declared types (field by field, item by item) and
compared with the live state; a state that would not come back as it is
(a wrong type, a float where an int belongs, a non-finite float, a lone
surrogate, a value too large or too deeply nested) is an
:class:`~pipeline.failures.InvalidState` naming the field, and nothing is
written.  Decoding uses the same per-field hooks, incrementally: rebuilding
a chain costs what its records hold, not what every snapshot holds.
"""

from __future__ import annotations

import binascii
import contextvars
import hashlib
import hmac
import json
import time

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any, Final, Generic, TypeVar, cast, final, get_origin

import attrs
import cattrs

from cattrs.fns import identity
from pyrsistent import PMap, PVector, pvector
from pyrsistent._pvector import PythonPVector
from returns.result import Failure, Result, Success

from .._depth import RECORD_DEPTH, check_depth, depth_of
from .._fields import APPEND_ONLY, LINEAGE, extends
from .._message_structure import scalar_kind
from .._serde import (
    NO_PART_UNLESS,
    ORJSON_WITHIN_RECORD_DEPTH,
    PROOFS,
    SINK,
    SOURCE,
    STRUCTURE_ERRORS,
    BlobSink,
    Proof,
    canonical,
    canonical_exact,
    digest,
    holds_keyed,
    large_parts,
    make_converter,
)
from ..errors import ConstructionError, NestedTooDeeply, SecretUnresolved
from ..failures import CheckpointDecodeError, InvalidState
from ..stores import Record, record_checksum
from ._model import NO_PROGRESS, Edit, Pending, Progress, Snapshot, Status
from ._plan import Plan, plan_for, type_name


S = TypeVar("S")

SCHEMA = 2
"""The schema records are written in: 2 may leave out an inherited
fingerprint and step (1 always held them; both are read)."""

_SCHEMAS = frozenset({1, SCHEMA})

Doc = dict[str, Any]
"""One record's parsed JSON document."""

Memo = dict[int, tuple[Any, Callable[[Any], Any], Any]]
"""Values a step's records proved (see :meth:`Codec.seal`): by ``id``, the
value (kept alive, so that its id is not reused), the fused writer that
proved it, and what that wrote (a value of a frozen type: the same
document whenever it is written)."""

CLOCK: contextvars.ContextVar[Callable[[], float]] = contextvars.ContextVar(
    "pipeline_commit_clock", default=time.time
)
"""The wall clock records are stamped with (seconds since the epoch): tests
set another, so that times are known without waiting for them."""

ENCODE_ERRORS = (ValueError, TypeError, RecursionError, OverflowError)
"""What turning a value into JSON may raise (a non-finite float, a lone
surrogate, an integer past the digit limit, a structure too deep)."""

_FIELD_DEPTH = 4
"""Levels a field's value may sit under in a record (the document, its
``state`` or ``logs``, a log's pair and item list): a value nesting past
``RECORD_DEPTH`` less these is what made a record too deep."""


def alike(converter: cattrs.Converter, back: Any, live: Any) -> bool:
    """Whether *back* (decoded) is *live* (written) again, where ``==``
    alone cannot say: the same types all the way down, and values without
    value equality (``eq=False`` classes) storing the same data.  A ``str``
    is never an enum member, a list never a tuple, ``bytes`` never ``str``."""
    stack = [(back, live)]
    while stack:
        b, v = stack.pop()
        if b is v:
            continue
        kind = type(b)
        if kind is not type(v):
            return False
        if attrs.has(kind):
            stack.extend(
                (getattr(b, f.name), getattr(v, f.name))
                for f in attrs.fields(kind)
            )
        elif isinstance(b, dict | PMap):
            if b.keys() != v.keys():
                return False
            stack.extend((b[k], v[k]) for k in b)
        elif isinstance(b, list | tuple | PVector):
            if len(b) != len(v):
                return False
            stack.extend(zip(b, v, strict=True))
        elif b != v:
            eq: object = kind.__eq__
            if eq is not object.__eq__:
                return False
            try:  # no value equality: compare what they store
                if converter.unstructure(b) != converter.unstructure(v):
                    return False
            except ENCODE_ERRORS:  # pragma: no cover  # it came from JSON
                return False
    return True


def _field_of(state_type: type[Any], missing: object) -> str:
    """`` field `x` `` when *missing* is the type of the state's field
    ``x`` (or appears in it), else nothing."""
    cls = get_origin(state_type) or state_type
    if not attrs.has(cls):
        return ""
    try:
        fields = attrs.fields(attrs.resolve_types(cls))
    except NameError:  # pragma: no cover  # reported as such before this
        return ""
    for f in fields:
        if f.type is missing or missing in getattr(f.type, "__args__", ()):
            return f" field {f.name!r}"
    return ""


def _current(plan: Plan, state: dict[str, Any]) -> dict[str, Any]:
    """A stored state part with the fields an older version stored read
    into today's (see :data:`pipeline._fields.FORMER_FIELDS`)."""
    if not plan.formerly or not any(k in plan.formerly for k in state):
        return state
    out: dict[str, Any] = {}
    for name, value in state.items():
        former = plan.formerly.get(name)
        if former is None:
            out[name] = value
            continue
        try:
            out.update(former(value))
        except (TypeError, ValueError, KeyError):
            out[name] = value  # refused below, as a field it does not have
    return out


def _appended(old: PVector[Any], new: PVector[Any]) -> bool:
    """For logs appended to by construction: the last shared item suffices."""
    n = len(old)
    if len(new) < n:
        return False
    return n == 0 or new[n - 1] is old[n - 1]


@final
class Codec(Generic[S]):
    """Encodes snapshots of state type *S* to records and back.

    The checksum detects torn, bit-flipped and misplaced records, not
    deliberate forgeries: :class:`~pipeline.stores.SignedStore` signs them.

    .. versionadded:: 0.1.0
    """

    def __init__(
        self,
        state_type: type[S],
        converter: cattrs.Converter | None = None,
    ) -> None:
        self.state_type = state_type
        self.converter = converter or make_converter()
        # cattrs generates (compiles) its hooks on first use; do it now, when
        # the machine is built, so that decoding a checkpoint compiles nothing.
        try:
            self._structure = self.converter.get_structure_hook(state_type)
            self.converter.get_unstructure_hook(state_type)
            self._plan: Plan | None = plan_for(state_type, self.converter)
        except NameError as exc:
            msg = (
                f"cannot checkpoint {type_name(state_type)}: its annotations "
                f"do not resolve ({exc}); define the types it names at "
                "module level"
            )
            raise ConstructionError(msg) from None
        except cattrs.errors.StructureHandlerNotFoundError as exc:
            what = getattr(exc, "type_", None)
            where = _field_of(state_type, what)
            msg = (
                f"cannot checkpoint {type_name(state_type)}{where}: no "
                f"converter for {type_name(what)} (state fields must be types "
                "cattrs can structure: scalars, attrs classes, tuples, "
                "PVector, ...; or register a hook on make_converter() and "
                "pass it to build(converter=...))"
            )
            raise ConstructionError(msg) from None
        for kind in (str, int, bool, list[str]):
            self.converter.get_structure_hook(kind)
        cls = get_origin(state_type) or state_type
        self._cls: type[Any] = cls
        self._fields: tuple[str, ...] | None = (
            tuple(f.name for f in self._plan.fields) if self._plan else None
        )
        # Fields a reader takes a log for (declared PVector, or Any): a
        # vector in any other field (``PVector[int] | None``) is written
        # whole, as its declared type reads it back.
        # Fields written by their declared type (see FieldPlan.unstructure).
        self._declared: dict[str, Callable[[Any], Any]] = {
            f.name: f.unstructure
            for f in (self._plan.fields if self._plan else ())
            if f.unstructure is not None
        }
        # A state stored whole, written by its declared type likewise.
        self._whole: Callable[[Any], Any] = (
            self.converter.get_unstructure_hook(state_type)
            if holds_keyed(state_type)
            else self.converter.unstructure
        )
        self._declared_items: dict[str, Callable[[Any], Any]] = {
            f.name: f.unstructure_item
            for f in (self._plan.fields if self._plan else ())
            if f.unstructure_item is not None
        }
        self._logged: frozenset[str] = (
            frozenset(f.name for f in self._plan.fields if f.item is not None)
            if self._plan
            else frozenset()
        )
        declared = attrs.fields(cls) if attrs.has(cls) else ()
        self._trusted = frozenset(
            f.name for f in declared if f.metadata.get(APPEND_ONLY)
        )
        # Logs whose state lists vectors they are known to extend.
        self._lineage: dict[str, str] = {
            f.name: f.metadata[LINEAGE]
            for f in declared
            if f.metadata.get(LINEAGE)
        }
        self._hook_of = _hooks_of(self.converter)
        # Fields whose values a fused writer may prove (see seal): a log's
        # items or the field's value read back by one of our hooks.
        self._proofs: dict[str, Proof] = {}
        for f in self._plan.fields if self._plan else ():
            proof = PROOFS.get(f.same_item if f.item is not None else f.same)
            if proof is not None:
                self._proofs[f.name] = proof
        # Whether a record may be written without a blob sink: until a
        # state of this codec holds a value not written as itself (a
        # part, a message, a log), after which it never tries again.
        # (Never for a log of keyed mappings: its items go by their
        # declared type's hook.)
        self._plain = self._fields is not None and not self._declared_items
        # How each field is written in one pass (document_proved): none
        # when no field can be (a state stored whole, say).
        one_pass = tuple(
            self._one_pass_field(f.name, f.same)
            for f in (self._plan.fields if self._plan else ())
        )
        self._one_pass: tuple[_OnePass, ...] = (
            one_pass
            if any(how not in (_OTHER, _HOOKED) for _, how, _ in one_pass)
            else ()
        )
        # For a field written by its value's hook: the hook, the type of
        # an empty value and the type of what it writes, once an empty
        # value was written and read back as itself (see _empty_written).
        self._empties: dict[str, tuple[Any, type[Any], type[Any]]] = {}

    def _one_pass_field(self, name: str, same: Any) -> _OnePass:
        """How :meth:`document_proved` writes field *name* (whose
        comparison, for a scalar, is *same*)."""
        proof = self._proofs.get(name)
        if name in self._declared or name in self._declared_items:
            return (name, _OTHER, None)  # written by its declared type
        if name in self._logged:
            if proof is not None:
                return (name, _LOG, proof)
            return (name, _OTHER, None)
        if proof is not None:
            return (name, _PROVED, proof)
        kind = scalar_kind(same)
        if kind is not None:
            return (name, _SCALAR, kind)
        return (name, _HOOKED, None)  # by its value's hook: empty, maybe

    # -- encoding -----------------------------------------------------------

    def document(
        self,
        snap: Snapshot[S],
        parent: Snapshot[S] | None,
        progress: Progress | None = None,
        *,
        inherit: bool = False,
    ) -> Doc:
        """*snap* as a document: a delta against *parent* when given.

        With *inherit* (only for a parent that is stored, as the record
        before this one: a store's thread), what *parent* implies is left
        out of the envelope (see the module's docstring).

        The bytes of large images and files (``BLOB_MIN`` bytes and over)
        are written by content: the part holds their SHA-256, and the
        document's ``blobs`` holds the bytes unless *parent*'s state has a
        part with them already (its chain stores them).  So a part is
        stored once per chain, however often the history holding it is
        rewritten.
        """
        return self._with_blobs(snap, parent, progress, inherit)[0]

    def _with_blobs(
        self,
        snap: Snapshot[S],
        parent: Snapshot[S] | None,
        progress: Progress | None,
        inherit: bool = False,
        proven: list[str] | None = None,
        memo: Memo | None = None,
    ) -> tuple[Doc, BlobSink | None]:
        """:meth:`document`, and the sink its large parts went to (``None``
        when the state is its parent's, or every value it writes is
        written as itself: no part can reach a sink then, so the record
        needs neither a sink nor the context variable)."""
        if (
            parent is not None
            and snap.state is parent.state
            and type(snap.state) is self._cls
            and self._fields is not None
        ):
            doc = self._document(snap, parent, progress, inherit, proven, memo)
            return doc, None
        if (
            self._plain
            and parent is not None
            and type(snap.state) is self._cls
        ):
            # A value written as itself (an int, a string), or by a hook
            # that reaches no part for it (a message without parts,
            # usage), holds no part: no sink, no context variable.  (Not
            # a root record: once per thread, it writes every field, and
            # one kind that may hold a part would stop every later try.)
            doc = self._document(
                snap, parent, progress, inherit, proven, memo, plain=True
            )
            if doc is _NOT_PLAIN:
                self._plain = False
            elif doc is not _NOT_NOW:
                return doc, None
            if proven:
                proven.clear()  # written again, below
        sink = BlobSink(parent.state if parent is not None else None)
        token = SINK.set(sink)
        try:
            doc = self._document(snap, parent, progress, inherit, proven, memo)
        finally:
            SINK.reset(token)
        if sink.new:
            doc["blobs"] = sink.new
        return doc, sink

    def _document(
        self,
        snap: Snapshot[S],
        parent: Snapshot[S] | None,
        progress: Progress | None = None,
        inherit: bool = False,
        proven: list[str] | None = None,
        memo: Memo | None = None,
        *,
        plain: bool = False,
    ) -> Doc:
        """*snap* as a document: a delta against *parent* when given.

        *progress*, when given (even empty), is stored as ``in``: documents
        that nested folds appended since *parent* (or their whole chains in
        a root record).  Without it the record starts afresh.  Raises what
        unstructuring raises for a value that cannot be stored (see
        :meth:`seal` for the checked way).  *plain*: only if no value it
        writes can reach a part (an int, a string, a bool or ``None``
        whose hook is cattrs' ``identity``; a value whose hook is one of
        :data:`~pipeline._serde.NO_PART_UNLESS` and passes its test; at
        most :data:`_FEW` new items of a log), else :data:`_NOT_PLAIN`
        (a value of another kind: the codec stops trying) or
        :data:`_NOT_NOW` (this record may: a message with parts, a long
        log); written with no sink.  *proven*, when given, gets the
        names of the fields whose new values a fused writer wrote and
        proved (see :meth:`seal`, and for *memo*).
        """
        # The state's parts first: a plain document gives up there, before
        # anything else (the clock) is read.
        doc: Doc = {}
        state = snap.state
        fields = self._fields if type(state) is self._cls else None
        old = parent.state if parent is not None else None
        if fields is None:
            doc["whole"] = self._whole(state)
            fields = ()
        elif parent is not None and state is old:
            fields = ()  # unchanged: a progress record, say
        changed: dict[str, Any] = {}
        logs: dict[str, Any] = {}
        # The hook for each value, called directly (what conv.unstructure
        # does, less its call), and not at all when it is the identity.
        hook_of = self._hook_of
        for name in fields:
            value = getattr(state, name)
            before = getattr(old, name) if old is not None else _ABSENT
            if type(value) in _VECTORS and name in self._logged:
                # (type(), not isinstance: an ABC, slow.)
                if type(before) in _VECTORS and self._grown(
                    name, before, value, state
                ):
                    base = len(before)
                    if base == len(value):
                        continue  # unchanged log
                else:
                    base = 0
                items = self._items(
                    name, value[base:], proven, memo, plain=plain
                )
                if isinstance(items, dict):  # why not: not plain
                    return items
                logs[name] = [base, items]
            elif before is _ABSENT or not (
                value is before
                # Same type too: True == 1, but a bool where an int was is
                # a change (and one the check below refuses).
                or (type(value) is type(before) and value == before)
            ):
                proved = (
                    self._proved(name, (value,), proven)
                    if name in self._proofs
                    else None  # a count, say: not a call per record
                )
                if proved is not None:
                    changed[name] = proved[0]
                    continue
                hook = hook_of(value.__class__)
                if hook is identity and type(value) in _SCALARS:
                    changed[name] = value
                elif name in self._declared:
                    if plain:
                        return _NOT_PLAIN
                    changed[name] = self._declared[name](value)
                elif type(value) in _VECTORS:
                    # A vector in a field that is not a log (``PVector[T]
                    # | None``): written whole, as a list, which the field's
                    # type reads back (the vector's own class has no hook).
                    if plain:
                        return _NOT_PLAIN
                    changed[name] = self.converter.unstructure(value, PVector)
                elif plain:
                    written = self._plain_written((value,))
                    if isinstance(written, dict):  # why not: not plain
                        return written
                    changed[name] = written[0]
                else:
                    changed[name] = value if hook is identity else hook(value)
        return _completed(doc, changed, logs, snap, parent, progress, inherit)

    def document_proved(
        self,
        snap: Snapshot[S],
        parent: Snapshot[S] | None,
        progress: Progress | None,
        inherit: bool,
        memo: Memo | None,
    ) -> Doc | None:
        """:meth:`_document` of *snap* against *parent* in one pass, when
        every field that changed is a log that only grew, of items a fused
        writer proves; a value one proves; a strict
        scalar (``int``, ``str``, ``bool``) of exactly its type; or an
        empty immutable container its hook writes as an empty one that
        reads back as it (see :meth:`_empty_written`): a document
        with nothing left to check (see :meth:`seal`).  ``None`` when one
        is not (the general way writes it).  Without *parent* (a root
        record: a thread's admission), every field counts as changed and
        every log is written whole.  The same document as the
        general way's (a property test compares them); *memo* as there."""
        state = snap.state
        old = _ROOT if parent is None else parent.state
        if (
            not self._one_pass
            or type(state) is not self._cls
            or (type(old) is not self._cls and old is not _ROOT)
        ):
            return None
        changed: dict[str, Any] = {}
        logs: dict[str, Any] = {}
        for name, how, what in self._one_pass:
            value = getattr(state, name)
            before = getattr(old, name, _ABSENT)
            if value is before:
                continue
            if how is _LOG:
                if type(value) not in _VECTORS:
                    return None
                if before is _ABSENT:  # a root's: written whole
                    n = 0
                elif type(before) not in _VECTORS or not self._grown(
                    name, before, value, state
                ):
                    return None
                else:
                    n = len(before)
                    if len(value) == n:
                        continue
                items = self._proved(name, value[n:], [], memo)
                if items is None:
                    return None
                logs[name] = [n, items]
                continue
            if type(value) is type(before) and value == before:
                continue  # unchanged (True == 1: a bool is not an int)
            if how is _PROVED:
                proved = self._proved(name, (value,), [])
                if proved is None:
                    return None
                changed[name] = proved[0]
            elif (
                how is _SCALAR
                and type(value) is what
                and self._hook_of(what) is identity  # written as itself
            ):
                changed[name] = value
            elif how is _HOOKED and type(value) in _FROZEN and not value:
                empty = self._empty_written(name, value, state)
                if empty is None:
                    return None
                changed[name] = empty
            else:
                return None
        return _completed({}, changed, logs, snap, parent, progress, inherit)

    def _empty_written(self, name: str, value: Any, state: Any) -> Any:
        """What the general way writes for *value*, an empty immutable
        container (a context's metadata, most often) in field *name* of
        *state*, by its class's hook: a new empty ``dict`` or ``list``,
        if that is what the hook writes and it reads back as *value*;
        else ``None``.  Written and checked the first time for each field,
        hook and type (every empty value of one such type is equal, and
        holds nothing a hook could write otherwise or a sink could take),
        then known."""
        cls = value.__class__
        hook = self._hook_of(cls)
        known = self._empties.get(name)
        if known is None or known[0] is not hook or known[1] is not cls:
            written = value if hook is identity else hook(value)
            if type(written) not in (dict, list) or written:
                return None
            if self._check({"state": {name: written}}, state, "") is not None:
                return None
            known = self._empties[name] = (hook, cls, type(written))
        return known[2]()

    def _items_written(self, name: str, values: Sequence[Any]) -> list[Any]:
        """A log's new items as written: by their own class's hook, or by
        their declared type's (a log of mappings keyed by something else
        than strings, see :attr:`FieldPlan.unstructure_item`)."""
        write = self._declared_items.get(name)
        if write is None:
            hook_of = self._hook_of
            return [hook_of(v.__class__)(v) for v in values]
        return [write(v) for v in values]

    def _items(
        self,
        name: str,
        new: PVector[Any],
        proven: list[str] | None,
        memo: Memo | None,
        *,
        plain: bool,
    ) -> list[Any] | Doc:
        """The *new* items of log *name*, written (see :meth:`_document`:
        with *plain*, why not instead where one may reach a part)."""
        # Proven items hold no part: no sink, however many.
        proved = self._proved(name, new, proven, memo)
        if proved is not None:
            return proved
        if plain:
            if len(new) > _FEW:
                return _NOT_NOW  # testing each would cost more
            return self._plain_written(new)
        return self._items_written(name, new)

    def _proved(
        self,
        name: str,
        values: Sequence[Any],
        proven: list[str] | None,
        memo: Memo | None = None,
    ) -> list[Any] | None:
        """*values*, new in field *name*, written and proved by the
        field's fused writer (see :meth:`seal`; those in *memo* proved by
        that writer already), *name* added to *proven*; ``None`` if the
        field has none, *proven* is not asked for, or a value is not
        proved (the general way then writes and checks them all)."""
        proof = self._proofs.get(name) if proven is not None else None
        if proof is None:
            return None
        hook_of = self._hook_of
        hook, prove = proof
        items = []
        for v in values:
            # This converter writes it with the hook the proof replaces.
            if hook_of(v.__class__) is not hook:
                return None
            known = None if memo is None else memo.get(id(v))
            if known is not None and known[0] is v and known[1] is prove:
                items.append(known[2])
                continue
            written = prove(v)
            if written is None:
                return None
            if memo is not None:  # kept alive there: its id stays its own
                memo[id(v)] = (v, prove, written)
            items.append(written)
        proven.append(name)  # type: ignore[union-attr]  # tested above
        return items

    def _plain_written(self, values: Sequence[Any]) -> list[Any] | Doc:
        """*values* written, if none can reach a part (see
        :meth:`_document`'s *plain*); else why not."""
        hook_of = self._hook_of
        tests = NO_PART_UNLESS
        items: list[Any] = []
        for v in values:
            hook = hook_of(v.__class__)
            try:
                test = tests.get(hook, _MAY)
            except TypeError:  # not hashable: none of ours
                return _NOT_PLAIN
            if test is _MAY:
                return _NOT_PLAIN
            if test is not None and not test(v):
                return _NOT_NOW
            items.append(hook(v))
        return items

    def _grown(
        self, name: str, before: PVector[Any], value: PVector[Any], state: Any
    ) -> bool:
        """Whether log *name* only had items appended since *before*."""
        if name in self._trusted:
            return _appended(before, value)
        known = self._lineage.get(name)
        if known is not None:
            return extends(before, value, getattr(state, known))
        return extends(before, value)

    def encode(
        self,
        snap: Snapshot[S],
        parent: Snapshot[S] | None,
        progress: Progress | None = None,
    ) -> Record:
        """The record for *snap*, as a delta against *parent* when given
        (unchecked: :meth:`seal` is the checked way)."""
        if parent is None and progress is None and snap.progress:
            progress = snap.progress  # a root keeps its whole progress
        return self.record(snap, self.document(snap, parent, progress))

    def record(self, snap: Snapshot[Any], doc: Doc) -> Record:
        """Seal *doc* as the record of *snap* (canonical bytes, checksum)."""
        data = canonical(doc)
        return Record(
            snap.thread_id,
            snap.version,
            snap.parent,
            data,
            record_checksum(snap.thread_id, snap.version, snap.parent, data),
        )

    def seal(
        self,
        snap: Snapshot[S],
        parent: Snapshot[S] | None,
        progress: Progress | None = None,
        *,
        inherit: bool = False,
        encode: bool = True,
        memo: Memo | None = None,
    ) -> tuple[Doc, bytes] | InvalidState:
        """*snap*'s document and bytes, checked: what is written decodes
        back to the live state, field by field; else why not.  (Not a
        ``Result``: this is on every record's path.)  *inherit*: as for
        :meth:`document`.  Without *encode* (a nested fold's document,
        which the enclosing record holds and writes), no bytes (``b""``)
        and the document checked as orjson writes it: the caller must
        write it inside a record orjson wrote exactly (see
        :meth:`seal_progress`), or seal it again with *encode*.

        Values of a log whose type a fused writer knows (messages, see
        :func:`~pipeline._serde.proven_message`) are written and proved in
        one pass, and not compared again.  *memo* (a step's: see
        :class:`~pipeline.fold._journal.ThreadJournal`) holds the items its
        records proved, by identity: an item found there is not proved
        again (a node's record of the conversation its turns recorded),
        and what this record proves is added."""
        node = snap.node or "<start>"
        proven: list[str] = []
        try:
            at_once = self.document_proved(
                snap, parent, progress, inherit, memo
            )
            if at_once is None:
                doc, sink = self._with_blobs(
                    snap, parent, progress, inherit, proven, memo
                )
            else:
                doc, sink = at_once, None
            if encode:
                data, exact = canonical_exact(doc)
                # What a reader would refuse is not written (orjson refuses
                # to write it: its bytes need no count).
                if not (exact and ORJSON_WITHIN_RECORD_DEPTH):
                    check_depth(data, "the record", RECORD_DEPTH)
            else:
                data, exact = b"", True
        except ENCODE_ERRORS as exc:  # NestedTooDeeply included
            return self._diagnose(snap, node, exc)
        if at_once is not None and exact:
            # Every value it writes was proved, or is a strict scalar of
            # its exact type, which reads back as itself: nothing to check.
            return doc, data
        checked = doc
        if not exact:
            # The standard library wrote it (orjson refused: integer keys,
            # say): check what a reader will see, not what was handed in
            # (the proofs hold for what orjson writes, so all of it).
            proven = []
            try:
                checked = json.loads(data, parse_constant=_no_constant)
            except ENCODE_ERRORS as exc:  # pragma: no cover  # we wrote it
                return self._diagnose(snap, node, exc)
        if not ("state" in checked or "logs" in checked or "whole" in checked):
            return doc, data
        if sink is None or not sink.by_hash:  # no part by hash: no source
            failure = self._check(checked, snap.state, node, proven)
        else:
            token = SOURCE.set(
                _source(
                    checked.get("blobs"),
                    parent.state if parent is not None else None,
                )
            )
            try:
                failure = self._check(checked, snap.state, node, proven)
            finally:
                SOURCE.reset(token)
        if failure is not None:
            return failure
        return doc, data

    def seal_progress(
        self,
        last: Snapshot[S],
        progress: Progress,
        author: str,
        pending: Pending | None,
        *,
        inherit: bool = False,
        exact: bool = False,
    ) -> tuple[Doc, bytes] | None:
        """:meth:`seal` of a progress record after *last*: the snapshot
        *last* is, with *progress* (what nested folds appended), *author*
        and *pending* (the questions still waiting), as its next record;
        written without building that snapshot, when its state is stored
        field by field (then it stores none of it, and there is nothing to
        check).  ``None``: take the general way (a state stored whole, or
        a document that cannot be written, which :meth:`seal` explains).

        The same document and bytes as :meth:`seal`'s for that snapshot
        (a property test compares them).  With *exact*, ``None`` too when
        orjson did not write it (its bytes might not read back as the
        document: nested documents sealed without *encode* were checked
        as orjson writes them)."""
        if self._fields is None or type(last.state) is not self._cls:
            return None
        # _document's envelope for it: the same next, node, join and
        # fingerprint as its parent, the parent's own step (never the one
        # after it), running, no reason, no edit, never a fork's first.
        doc: Doc = {
            "v": SCHEMA,
            "next": list(last.next),
            "at": int(CLOCK.get()() * 1000),
            "step": last.step,
        }
        if author:
            doc["by"] = author
        if not inherit:
            doc["fp"] = last.fingerprint
        if last.node != "+".join(last.next):
            doc["node"] = last.node
        if last.join is not None:
            doc["join"] = last.join
        if pending is not None:
            doc["pending"] = _pending_doc(pending)
        doc["in"] = {k: list(v) for k, v in progress.items()}
        try:
            data, wrote = canonical_exact(doc)
            if exact and not wrote:
                return None
            if not (wrote and ORJSON_WITHIN_RECORD_DEPTH):  # as in seal
                check_depth(data, "the record", RECORD_DEPTH)
        except ENCODE_ERRORS:
            return None
        return doc, data

    def _check(
        self,
        doc: Doc,
        state: Any,
        node: str,
        proven: Sequence[str] = (),
    ) -> InvalidState | None:
        """Whether *doc*'s state parts come back as *state*'s values
        (but for the fields in *proven*: their fused writer proved it)."""
        plan = self._plan
        if "whole" in doc or plan is None:
            if "whole" not in doc:
                return None
            return self._same(
                lambda v: self._structure(v, self.state_type),
                doc["whole"],
                state,
                node,
                "$",
                type_name(self.state_type),
            )
        # A part the record does not hold costs no empty dict (and the
        # logs, most often absent, no lookup).
        for name, value in doc.get("state", _NONE).items():
            if name in proven:
                continue
            f = plan.by_name[name]
            live = getattr(state, name)
            # Plain messages and usage: compared where they are stored.
            if f.same is not None and f.same(value, live):
                continue
            wrong = self._same(
                f.structure,
                value,
                live,
                node,
                name,
                f.expected,
            )
            if wrong is not None:
                return wrong
        if "logs" not in doc:
            return None
        for name, (base, items) in doc["logs"].items():
            if name in proven:
                continue
            f = plan.by_name[name]
            live = getattr(state, name)
            item = f.item or (lambda v: v)
            same = f.same_item
            for i, value in enumerate(items):
                if same is not None and same(value, live[base + i]):
                    continue
                wrong = self._same(
                    item,
                    value,
                    live[base + i],
                    node,
                    f"{name}[{base + i}]",
                    f.expected,
                )
                if wrong is not None:
                    return wrong
        return None

    def _same(
        self,
        structure: Any,
        stored: Any,
        live: Any,
        node: str,
        where: str,
        expected: str,
    ) -> InvalidState | None:
        try:
            back = structure(stored)
        except STRUCTURE_ERRORS as exc:
            return InvalidState(node, where, expected, _reason(exc))
        if back is live or (
            # Equal scalars of one type are the same value; anything else
            # may hold a look-alike (a str subclass in a message, an int
            # subclass in a count) that compares equal and reads back as
            # another type: compared all the way down.
            type(live) in _EXACT_SCALARS
            and type(back) is type(live)
            and back == live
        ):
            return None
        if alike(self.converter, back, live):
            return None
        return InvalidState(
            node, where, expected, "does not decode back to an equal value"
        )

    def _diagnose(
        self, snap: Snapshot[S], node: str, exc: BaseException
    ) -> InvalidState:
        """Which field could not be written, for a failure at *node*."""
        state = snap.state
        if self._plan is not None and type(state) is self._cls:
            for f in self._plan.fields:
                value = getattr(state, f.name)
                # A log is written item by item (the vector itself is not
                # a JSON value).
                parts = value if isinstance(value, PVector) else (value,)
                try:
                    for part in parts:
                        written = canonical(self.converter.unstructure(part))
                        # The record holds it a few levels down.
                        if (
                            depth_of(written, RECORD_DEPTH)
                            > RECORD_DEPTH - _FIELD_DEPTH
                        ):
                            raise NestedTooDeeply(f.name, RECORD_DEPTH)
                except ENCODE_ERRORS as inner:
                    return InvalidState(
                        node, f.name, f.expected, _reason(inner)
                    )
        return InvalidState(
            node, "$", type_name(self.state_type), _reason(exc)
        )

    # -- decoding -----------------------------------------------------------

    def intact(self, record: Record) -> bool:
        """Whether *record*'s bytes pass its checksum (a torn or tampered
        record does not)."""
        expected = record_checksum(
            record.thread_id,
            record.version,
            record.parent,
            record.data,
        )
        return hmac.compare_digest(expected, record.checksum)

    def parse(self, record: Record) -> Result[Doc, CheckpointDecodeError]:
        """Check and parse one record's bytes (not its state)."""
        if not self.intact(record):
            return Failure(
                CheckpointDecodeError(
                    "$",
                    "checksum mismatch (torn, tampered or misplaced record)",
                )
            )
        try:
            check_depth(record.data, "the record", RECORD_DEPTH)
            doc = json.loads(record.data, parse_constant=_no_constant)
        except NestedTooDeeply as exc:
            return Failure(CheckpointDecodeError("$", str(exc)))
        except ValueError as exc:
            return Failure(CheckpointDecodeError("$", f"not JSON: {exc}"))
        return check_document(doc)

    def decode(
        self, chain: Sequence[tuple[Record, Doc]]
    ) -> Result[Snapshot[S], CheckpointDecodeError]:
        """Rebuild the snapshot of the last record from its ancestry (root first)."""
        record = chain[-1][0]
        return self.rebuild(
            [doc for _, doc in chain],
            record.thread_id,
            record.version,
            record.parent,
        )

    def _pending(self, p: Any, outer: bool = True) -> Pending:
        """A record's ``pending`` (raises what structuring raises)."""
        if not isinstance(p, dict):
            msg = f"expected a question, got {type(p).__name__}"
            raise TypeError(msg)
        conv = self.converter
        asked = p.get("asked")
        if asked is not None and (type(asked) is not int or asked < 0):
            msg = "expected the version that asked, a natural number"
            raise TypeError(msg)
        waiting = p.get("waiting", ())
        if waiting and not (outer and isinstance(waiting, list)):
            msg = "expected the other questions waiting as a list"
            raise TypeError(msg)
        return Pending(
            _opt_str(p["source"]),
            tuple(conv.structure(p["targets"], list[str])),
            conv.structure(p["question"], str),
            p.get("answer"),
            "answer" in p,
            p.get("payload"),
            conv.structure(p.get("scope", ""), str),
            asked,
            tuple(self._pending(w, outer=False) for w in waiting),
        )

    def rebuild(
        self,
        docs: Sequence[Doc],
        thread_id: str,
        version: int,
        parent: int | None,
    ) -> Result[Snapshot[S], CheckpointDecodeError]:
        """The snapshot that *docs* (checked documents, root first) build up."""
        acc: Acc | None = None
        for doc in docs:
            step = self.advance(acc, doc)
            if isinstance(step, CheckpointDecodeError):
                return Failure(step)
            acc = step
        assert acc is not None  # noqa: S101  # docs is not empty
        return self.snapshot(acc, thread_id, version, parent)

    def apply(
        self, base: Snapshot[S], doc: Doc, version: int, parent: int | None
    ) -> Result[Snapshot[S], CheckpointDecodeError]:
        """The snapshot *doc* describes as a delta against *base* (the
        document :meth:`document` wrote with *base* as the parent).

        What *doc* leaves unchanged are *base*'s own values, and logs it
        extends extend *base*'s vectors: the result shares them, exactly
        as the snapshot a step returned shares its input's (so a fan-out's
        merge sees which branch appended what).
        """
        checked = check_document(doc)
        if type(checked) is not Success:
            return Failure(checked.failure())
        state = base.state
        origin = None if base.origin is None else list(base.origin)
        first = {"next": list(base.next)}
        if self._fields is not None and type(state) is self._cls:
            values = {name: getattr(state, name) for name in self._fields}
            acc = Acc(values, _ABSENT, {}, first, None, origin)
        else:
            acc = Acc({}, state, {}, first, None, origin)
        acc.blobs = _source(None, state)
        acc.fp, acc.step = base.fingerprint, base.step
        step = self.advance(acc, doc)
        if isinstance(step, CheckpointDecodeError):
            return Failure(step)
        return self.snapshot(step, base.thread_id, version, parent)

    def advance(
        self, acc: Acc | None, doc: Doc
    ) -> Acc | CheckpointDecodeError:
        """The accumulated state after one more document (typed, shared
        with *acc*: nothing of the parent is copied but a small dict)."""
        fp = doc.get("fp")
        n = doc.get("step")
        if fp is None or n is None:  # schema 2: what the parent implies
            if acc is None:
                key = "fp" if fp is None else "step"
                return CheckpointDecodeError(
                    f"$.{key}", "missing or of the wrong type"
                )
            fp = acc.fp if fp is None else fp
            n = acc.step + 1 if n is None else n
        blobs = acc.blobs if acc is not None else _NO_BLOBS
        if "blobs" in doc:
            more = _blobs(doc["blobs"])
            if isinstance(more, CheckpointDecodeError):
                return more
            blobs = blobs.adding(more)
        token = SOURCE.set(blobs)
        try:
            step = self._advance(acc, doc)
        finally:
            SOURCE.reset(token)
        if not isinstance(step, CheckpointDecodeError):
            step.blobs = blobs
            step.fp, step.step = fp, n
        return step

    def _advance(
        self, acc: Acc | None, doc: Doc
    ) -> Acc | CheckpointDecodeError:
        nested = doc.get("in")
        progress: dict[str, tuple[Any, ...]] = {}
        if nested is not None:
            progress = dict(acc.progress) if acc is not None else {}
            for key, more in nested.items():
                progress[key] = (*progress.get(key, ()), *more)
        previous = acc.doc if acc is not None else None
        plan = self._plan
        if "whole" in doc:
            try:
                whole = self._structure(doc["whole"], self.state_type)
            except STRUCTURE_ERRORS as exc:
                return CheckpointDecodeError("$.whole", _reason(exc))
            return Acc(
                {},
                whole,
                progress,
                doc,
                previous,
                None if acc is None else acc.origin,
            )
        if plan is None:
            return CheckpointDecodeError(
                "$", "a partial state for a state stored whole"
            )
        if acc is not None and acc.whole is not _ABSENT:
            return CheckpointDecodeError(
                "$.state", "a partial state follows a whole one"
            )
        values = dict(acc.values) if acc is not None else {}
        for name, value in _current(plan, doc.get("state", {})).items():
            f = plan.by_name.get(name)
            if f is None:
                return CheckpointDecodeError(
                    f"$.state.{name}", "no such field"
                )
            try:
                values[name] = f.structure(value)
            except STRUCTURE_ERRORS as exc:
                return CheckpointDecodeError(f"$.state.{name}", _reason(exc))
        for name, log in doc.get("logs", {}).items():
            f = plan.by_name.get(name)
            if f is None or f.item is None:
                return CheckpointDecodeError(
                    f"$.logs.{name}", "not a log field"
                )
            if not (
                isinstance(log, list)
                and len(log) == 2
                and type(log[0]) is int
                and isinstance(log[1], list)
            ):
                return CheckpointDecodeError(f"$.logs.{name}", "malformed log")
            base, items = log
            prior = values.get(name, _EMPTY)
            if type(prior) not in _VECTORS:  # None, say: a log starts anew
                prior = _EMPTY
            if not 0 <= base <= len(prior):
                return CheckpointDecodeError(
                    f"$.logs.{name}",
                    "extends a longer log than its parent has",
                )
            if base < len(prior):
                prior = pvector(prior[:base])
            try:
                values[name] = prior.extend(f.item(v) for v in items)
            except STRUCTURE_ERRORS as exc:
                return CheckpointDecodeError(f"$.logs.{name}", _reason(exc))
        return Acc(
            values,
            _ABSENT,
            progress,
            doc,
            previous,
            None if acc is None else acc.origin,
        )

    def snapshot(
        self,
        acc: Acc,
        thread_id: str,
        version: int,
        parent: int | None,
    ) -> Result[Snapshot[S], CheckpointDecodeError]:
        """The snapshot *acc* stands for, as record *version* of the thread."""
        if acc.whole is not _ABSENT:
            state = acc.whole
        else:
            plan = self._plan
            assert plan is not None  # noqa: S101  # advance checked
            missing = [f.name for f in plan.fields if f.name not in acc.values]
            if missing:
                return Failure(
                    CheckpointDecodeError(
                        f"$.state.{missing[0]}", "missing from the chain"
                    )
                )
            try:
                state = plan.build(acc.values)
            except STRUCTURE_ERRORS as exc:
                return Failure(CheckpointDecodeError("$.state", _reason(exc)))
        head = acc.doc
        node = head.get("node", _ABSENT)
        if node is _ABSENT:
            node = None
            if acc.previous is not None:
                node = "+".join(acc.previous["next"])
        try:
            pending = None
            if "pending" in head:
                pending = self._pending(head["pending"])
            snap = Snapshot(
                thread_id=thread_id,
                version=version,
                parent=parent,
                state=cast("S", state),
                node=_opt_str(node),
                next=tuple(self.converter.structure(head["next"], list[str])),
                join=_opt_str(head.get("join")),
                step=acc.step,
                fingerprint=acc.fp,
                status=Status(head.get("status", "running")),
                pending=pending,
                progress=acc.progress or NO_PROGRESS,
                committed_at=_time(head.get("at")),
                author=head.get("by", ""),
                origin=None if acc.origin is None else _origin(acc.origin),
                # Records written before stops were stored have none.
                reason=self.converter.structure(head.get("reason", ""), str),
                edit=None
                if "edit" not in head
                else Edit(
                    self.converter.structure(head["edit"]["author"], str),
                    self.converter.structure(head["edit"]["reason"], str),
                ),
            )
        except (*_STRUCTURE_OR_KEY,) as exc:
            return Failure(CheckpointDecodeError("$", _reason(exc)))
        return Success(snap)


@final
class Acc:
    """What a chain of documents built up to one record (typed)."""

    __slots__ = (
        "blobs",
        "doc",
        "fp",
        "origin",
        "previous",
        "progress",
        "step",
        "values",
        "whole",
    )

    def __init__(
        self,
        values: dict[str, Any],
        whole: Any,
        progress: Mapping[str, tuple[Any, ...]],
        doc: Doc,
        previous: Doc | None,
        origin: list[Any] | None = None,
    ) -> None:
        self.values = values
        self.whole = whole
        self.progress = progress
        self.doc = doc
        self.previous = previous
        # A fork's origin, from its chain's first record on.
        self.origin: list[Any] | None = doc.get("from", origin)
        # The bytes of large parts the chain's records hold so far.
        self.blobs: Blobs = _NO_BLOBS
        # The fingerprint and step of the record, its own or inherited
        # (set by Codec.advance, which knows the parent's).
        self.fp = ""
        self.step = 0


@final
class Blobs:
    """The bytes of large parts a chain's records hold, by SHA-256, and
    where more may be found on first need (a document's own ``blobs``, the
    states of a delta's parent): what a part written by hash is read back
    from."""

    __slots__ = ("_found", "_states", "_stored")

    def __init__(
        self,
        found: Mapping[str, bytes],
        states: tuple[object, ...] = (),
        stored: object = None,
    ) -> None:
        self._found = found
        self._states = states
        self._stored = stored

    def adding(self, more: Mapping[str, bytes]) -> Blobs:
        """These blobs and *more* (a new value: chains share their past)."""
        return Blobs({**self._found, **more}, self._states, self._stored)

    def __call__(self, sha: str) -> bytes | None:
        found = self._found.get(sha)
        if found is not None or not (self._states or self._stored):
            return found
        more: dict[str, bytes] = {}
        if self._stored is not None:
            decoded = _blobs(self._stored)
            if not isinstance(decoded, CheckpointDecodeError):
                more.update(decoded)
        # Only a delta checked or applied against a live base walks it.
        for state in self._states:
            for p in large_parts(state):
                if p.data is not None:
                    more.setdefault(digest(p), p.data)
        self._found = {**more, **self._found}
        self._states = ()
        self._stored = None
        return self._found.get(sha)


_NO_BLOBS = Blobs({})


def _source(stored: object, state: object) -> Blobs:
    """What a document's parts are read back from: its own ``blobs`` (read
    on first need) and *state*'s large parts (a delta's parent)."""
    return Blobs({}, () if state is None else (state,), stored)


def _blobs(value: object) -> dict[str, bytes] | CheckpointDecodeError:
    """A document's ``blobs``: base64 texts by SHA-256, each checked
    against its hash."""
    if not isinstance(value, dict):
        return CheckpointDecodeError("$.blobs", "not an object")
    out: dict[str, bytes] = {}
    for sha, text in value.items():
        if not isinstance(text, str):
            return CheckpointDecodeError("$.blobs", "not base64 text")
        try:
            data = binascii.a2b_base64(text, strict_mode=True)
        except binascii.Error:
            return CheckpointDecodeError("$.blobs", "not base64 text")
        if hashlib.sha256(data).hexdigest() != sha:
            return CheckpointDecodeError(
                "$.blobs", "a blob does not match its hash"
            )
        out[sha] = data
    return out


def check_document(doc: object) -> Result[Doc, CheckpointDecodeError]:
    """*doc* if it has the shape of a record document, else why not.

    .. versionadded:: 0.1.0
    """
    if not isinstance(doc, dict):
        return Failure(CheckpointDecodeError("$", "not an object"))
    doc = cast("Doc", doc)
    schema = doc.get("v")
    if type(schema) is not int or schema not in _SCHEMAS:
        return Failure(CheckpointDecodeError("$.v", "unknown schema"))
    for key, kinds in _ENVELOPE.items():
        value = doc.get(key, _ABSENT)
        if value is _ABSENT and (
            key in _OPTIONAL or (key in _INHERITED and schema == SCHEMA)
        ):
            continue
        if not isinstance(value, kinds) or type(value) is bool:
            return Failure(
                CheckpointDecodeError(
                    f"$.{key}", "missing or of the wrong type"
                )
            )
    if not all(isinstance(n, str) for n in doc["next"]):
        return Failure(CheckpointDecodeError("$.next", "not a list of names"))
    unknown = set(doc) - set(_ENVELOPE) - {"v", "whole"}
    if unknown:
        return Failure(CheckpointDecodeError("$", "unknown keys"))
    nested = doc.get("in")
    if nested is not None:
        for name, docs in cast("Mapping[object, object]", nested).items():
            if not isinstance(name, str) or not isinstance(docs, list):
                return Failure(
                    CheckpointDecodeError("$.in", "malformed progress")
                )
    return Success(doc)


def _no_constant(name: str) -> Any:
    msg = f"{name} is not a JSON number"
    raise ValueError(msg)


_ABSENT: Any = object()

_NONE: Mapping[str, Any] = MappingProxyType({})
"""An absent part of a record, read as empty."""

_NOT_PLAIN: Doc = {}
"""What :meth:`Codec._document` returns, asked for a plain document, when
a value is of a kind that may reach a part (the codec stops trying)."""

_NOT_NOW: Doc = {}
"""What it returns when this record may reach a part (a message with
parts, a long log), though its kinds of value need not."""

_FEW = 8
"""The most new items of a log a plain document tests one by one (a
sink costs about as much as testing this many)."""


def _may(value: object) -> bool:  # pragma: no cover  # never called
    """What :data:`NO_PART_UNLESS` does not know: a value that may reach a
    part (compared by identity)."""
    del value
    return False


_MAY = _may


_SCALARS = frozenset({int, str, bool, type(None)})
_LOG, _PROVED, _SCALAR, _HOOKED, _OTHER = (
    "log",
    "proved",
    "scalar",
    "hooked",
    "other",
)
"""How a field is written in one pass (see Codec.document_proved)."""
_FROZEN = frozenset({PMap, tuple, frozenset})
"""Immutable containers whose empty values one pass may write (see
Codec._empty_written)."""


class _Root:
    """The state before a root record's: it has no field (every field of
    the state a root record writes counts as changed)."""

    __slots__ = ()


_ROOT = _Root()
_OnePass = tuple[str, str, Any]
"""A field's name, how it is written in one pass, and with what: a
proof (a log's items', a value's), a scalar type, or nothing."""
_EXACT_SCALARS = frozenset({int, str, bool, float, bytes, type(None)})
"""Types whose equal values of one type are the same value (no parts)."""
"""Types whose values, unstructured by ``identity``, are JSON as they are
(and hold no part).  Not ``float``: the house converter checks it is
finite on the way out."""


def _hooks_of(
    conv: cattrs.Converter,
) -> Callable[[type[Any]], Callable[[Any], Any]]:
    """The unstructure hook for a type, as ``conv.unstructure`` finds it:
    its converter's cached dispatch, called directly.  That cache is
    cleared in place whenever a hook is registered, so holding the
    dispatch misses no later hook.  A converter that unstructures in its
    own way (a subclass overriding ``unstructure``) is always asked."""
    if type(conv).unstructure is cattrs.BaseConverter.unstructure:
        dispatch = getattr(
            getattr(conv, "_unstructure_func", None), "dispatch", None
        )
        if callable(dispatch):
            return cast(
                "Callable[[type[Any]], Callable[[Any], Any]]", dispatch
            )
        return conv.get_unstructure_hook

    def asked(cls: type[Any]) -> Callable[[Any], Any]:
        del cls
        return conv.unstructure

    return asked


_STRUCTURE_OR_KEY: tuple[type[Exception], ...] = (*STRUCTURE_ERRORS, KeyError)
_EMPTY: PVector[Any] = pvector()
_VECTORS = frozenset({type(pvector()), PythonPVector})
_ENVELOPE: dict[str, type | tuple[type, ...]] = {
    "fp": str,
    "next": list,
    "step": int,
    "node": (str, type(None)),
    "join": str,
    "status": str,
    "pending": dict,
    "state": dict,
    "logs": dict,
    "in": dict,
    "reason": str,
    "edit": dict,
    "at": int,
    "by": str,
    "from": list,
    "blobs": dict,
}
_OPTIONAL = {
    "node",
    "join",
    "status",
    "pending",
    "state",
    "logs",
    "in",
    "reason",
    "edit",
    "at",
    "by",
    "from",
    "blobs",
}
_INHERITED = frozenset({"fp", "step"})
"""What a schema 2 record may leave out too, when its parent implies it
(schema 1 records always hold them; a chain's first record too)."""


def _completed(
    doc: Doc,
    changed: dict[str, Any],
    logs: dict[str, Any],
    snap: Snapshot[Any],
    parent: Snapshot[Any] | None,
    progress: Progress | None,
    inherit: bool,
) -> Doc:
    """*doc* with the *changed* fields' values, the *logs*' new items
    (each only if any) and the envelope (see :func:`_envelope`)."""
    if changed:
        doc["state"] = changed
    if logs:
        doc["logs"] = logs
    _envelope(doc, snap, parent, progress, inherit)
    return doc


def _envelope(
    doc: Doc,
    snap: Snapshot[Any],
    parent: Snapshot[Any] | None,
    progress: Progress | None,
    inherit: bool,
) -> None:
    """Put in *doc* what a record holds besides its state (see
    :meth:`Codec._document`): the schema, what runs next, ``at`` (now,
    from :data:`CLOCK`), ``by`` (who answered), on a forked thread's
    first record ``from``; *snap*'s ``fp`` and ``step``, each unless
    *parent* (with *inherit*: the record before it in a store's thread)
    implies it (the same fingerprint, the step after its own); the node,
    when it cannot be derived; whatever else *snap* holds that a record
    keeps; *progress* as ``in``."""
    doc["v"] = SCHEMA
    doc["next"] = list(snap.next)
    doc["at"] = int(CLOCK.get()() * 1000)
    if snap.author:
        doc["by"] = snap.author
    if parent is None and snap.origin is not None:
        doc["from"] = list(snap.origin)
    if parent is None or not inherit:
        doc["fp"] = snap.fingerprint
        doc["step"] = snap.step
    else:
        if snap.fingerprint != parent.fingerprint:
            doc["fp"] = snap.fingerprint
        if snap.step != parent.step + 1:
            doc["step"] = snap.step
    # The node that just ran is what the parent said comes next: stored
    # only when it cannot be derived (a chain's first record, progress).
    if parent is None:
        if snap.node is not None:
            doc["node"] = snap.node
    elif snap.node != "+".join(parent.next):
        doc["node"] = snap.node  # None too: a progress record, say
    if snap.join is not None:
        doc["join"] = snap.join
    if snap.status is not Status.RUNNING:
        # Its value, without the enum's property (every finished run's
        # record): the same str.
        doc["status"] = _STATUS_VALUES[snap.status]
    if snap.reason:
        doc["reason"] = snap.reason
    if snap.edit is not None:
        doc["edit"] = {"author": snap.edit.author, "reason": snap.edit.reason}
    if snap.pending is not None:
        doc["pending"] = _pending_doc(snap.pending)
    if progress is not None:
        doc["in"] = {k: list(v) for k, v in progress.items()}


_STATUS_VALUES: Final[Mapping[Status, str]] = {s: s.value for s in Status}
"""Each status's value (what a record holds)."""


def _pending_doc(pending: Pending) -> dict[str, Any]:
    """*pending* as a record holds it (the fields it uses only)."""
    doc: dict[str, Any] = {
        "source": pending.source,
        "targets": list(pending.targets),
        "question": pending.question,
    }
    if pending.answered:
        doc["answer"] = pending.answer
    if pending.payload is not None:
        doc["payload"] = pending.payload
    if pending.scope:
        doc["scope"] = pending.scope
    if pending.asked is not None:
        doc["asked"] = pending.asked
    if pending.waiting:
        doc["waiting"] = [_pending_doc(p) for p in pending.waiting]
    return doc


def _time(ms: int | None) -> datetime | None:
    """A record's ``at`` as a UTC time (``None``: written before records
    carried one)."""
    if ms is None:
        return None
    try:
        return datetime.fromtimestamp(ms / 1000, UTC)
    except (OverflowError, ValueError, OSError):
        msg = "expected a commit time within the years 1 to 9999"
        raise TypeError(msg) from None


def _origin(value: list[Any]) -> tuple[str, int]:
    """A record's ``from`` as (thread, version), checked."""
    if not (
        len(value) == 2
        and isinstance(value[0], str)
        and type(value[1]) is int
        and value[1] >= 0
    ):
        msg = "expected a fork origin [thread, version]"
        raise TypeError(msg)
    return (value[0], value[1])


def _opt_str(value: object) -> str | None:
    if value is None or isinstance(value, str):
        return value
    msg = f"expected a string or null, got {type(value).__name__}"
    raise TypeError(msg)


def _reason(exc: BaseException) -> str:
    """What was wrong, without the offending value (it may be a secret)."""
    if isinstance(exc, cattrs.BaseValidationError):
        leaves = [_reason(e) for e in exc.exceptions] or [type(exc).__name__]
        return "; ".join(dict.fromkeys(leaves))
    if isinstance(exc, NestedTooDeeply):
        return f"nested deeper than a record can hold ({exc.limit} levels)"
    if isinstance(exc, RecursionError):  # a Python value, while encoding
        return "nested too deeply"
    if isinstance(exc, SecretUnresolved):
        return str(exc)  # names the reference, never a value
    if isinstance(exc, UnicodeError):
        return "text that is not valid Unicode (a lone surrogate)"
    text = str(exc)
    if isinstance(exc, ValueError) and "digits" in text:
        return "an integer too large to store"
    if isinstance(exc, ValueError) and "JSON number" in text:
        return "a non-finite float (NaN or infinity)"
    if isinstance(exc, TypeError) and text.startswith("expected "):
        return text  # our own hooks: type names only, never values
    return type(exc).__name__
