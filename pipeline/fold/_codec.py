"""Snapshot records: compact canonical JSON that stores what changed.

A record holds one snapshot as a delta against its parent:

* top-level state fields holding a persistent vector (a
  :class:`~pipeline.Context`'s messages, say) are append-only logs; when the
  new vector extends the parent's, only the appended items are stored;
* other top-level fields of an attrs state are stored only when they
  changed; the root record of a chain stores every field;
* the envelope is short: schema, fingerprint, next and step, and the rest
  only when it is not at its default (the node that ran is the parent's
  *next*);
* ``in`` carries the progress of folds nested in the step in flight (an
  agent's turns inside a graph node): each such record appends documents
  to the nested folds' chains; a record without ``in`` starts afresh.

So bytes per step grow with what the step added, not with the history.
The checksum covers the record's thread, version and parent as well as its
bytes: a record swapped to another thread or version fails it.
"""

from __future__ import annotations

import hashlib
import json

from collections.abc import Mapping, Sequence
from typing import Any, Generic, TypeVar, cast, final, get_origin

import attrs
import cattrs

from pyrsistent import PVector, pvector
from pyrsistent._pvector import PythonPVector
from returns.result import Failure, Result, Success

from .._context import Context, extends
from .._serde import STRUCTURE_ERRORS, canonical, make_converter
from ..errors import CheckpointDecodeError, ConstructionError
from ._model import NO_PROGRESS, Pending, Progress, Snapshot, Status
from ._store import Record


S = TypeVar("S")

SCHEMA = 1

Doc = dict[str, Any]
"""One record's parsed JSON document."""


def record_checksum(
    thread_id: str, version: int, parent: int | None, data: bytes
) -> str:
    """SHA-256 over the record's identity and bytes, hex."""
    h = hashlib.sha256(f"{thread_id}\n{version}\n{parent}\n".encode())
    h.update(data)
    return h.hexdigest()


def _appended(old: PVector[Any], new: PVector[Any]) -> bool:
    """For logs appended to by construction: the last shared item suffices."""
    n = len(old)
    if len(new) < n:
        return False
    return n == 0 or new[n - 1] is old[n - 1]


APPEND_ONLY = "pipeline_append_only"
"""attrs field metadata key: the machine that owns this persistent-vector
field only ever appends to it, so a checkpoint may trust its last item."""


@final
class Codec(Generic[S]):
    """Encodes snapshots of state type *S* to records and back."""

    def __init__(
        self, state_type: type[S], converter: cattrs.Converter | None = None
    ) -> None:
        self.state_type = state_type
        self.converter = converter or make_converter()
        # cattrs generates (compiles) its hooks on first use; do it now, when
        # the machine is built, so that decoding a checkpoint compiles nothing.
        try:
            self._structure = self.converter.get_structure_hook(state_type)
            self.converter.get_unstructure_hook(state_type)
        except NameError as exc:
            msg = (
                f"cannot checkpoint {_type_name(state_type)}: its annotations "
                f"do not resolve ({exc}); define the types it names at "
                "module level"
            )
            raise ConstructionError(msg) from None
        except cattrs.errors.StructureHandlerNotFoundError as exc:
            what = getattr(exc, "type_", None)
            msg = (
                f"cannot checkpoint {_type_name(state_type)}: no converter "
                f"for {_type_name(what)} (state fields must be types cattrs "
                "can structure: scalars, attrs classes, tuples, PVector, ...)"
            )
            raise ConstructionError(msg) from None
        for kind in (str, int, bool, list[str]):
            self.converter.get_structure_hook(kind)
        cls = get_origin(state_type) or state_type
        self._cls: type[Any] = cls
        self._fields: tuple[str, ...] | None = (
            tuple(f.name for f in attrs.fields(cls) if f.init)
            if attrs.has(cls)
            else None
        )
        self._trusted = frozenset(
            f.name
            for f in (attrs.fields(cls) if attrs.has(cls) else ())
            if f.metadata.get(APPEND_ONLY)
        )
        self._context = cls is Context

    # -- encoding -----------------------------------------------------------

    def document(
        self,
        snap: Snapshot[S],
        parent: Snapshot[S] | None,
        progress: Progress | None = None,
    ) -> Doc:
        """*snap* as a document: a delta against *parent* when given.

        *progress*, when given (even empty), is stored as ``in``: documents
        that nested folds appended since *parent* (or their whole chains in
        a root record).  Without it the record starts afresh.
        """
        doc: Doc = {
            "v": SCHEMA,
            "fp": snap.fingerprint,
            "next": list(snap.next),
            "step": snap.step,
        }
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
            doc["status"] = snap.status.value
        if snap.pending is not None:
            doc["pending"] = {
                "source": snap.pending.source,
                "targets": list(snap.pending.targets),
                "question": snap.pending.question,
            }
        if progress is not None:
            doc["in"] = {k: list(v) for k, v in progress.items()}
        conv = self.converter
        state = snap.state
        fields = self._fields if type(state) is self._cls else None
        if fields is None:
            doc["whole"] = conv.unstructure(state)
            return doc
        old = parent.state if parent is not None else None
        if parent is not None and state is old:
            return doc  # unchanged: a progress record, say
        changed: dict[str, Any] = {}
        logs: dict[str, Any] = {}
        for name in fields:
            value = getattr(state, name)
            before = getattr(old, name) if old is not None else _ABSENT
            if type(value) in _VECTORS:  # not isinstance: an ABC, slow
                if type(before) in _VECTORS and self._grown(
                    name, before, value, state
                ):
                    base = len(before)
                    if base == len(value):
                        continue  # unchanged log
                else:
                    base = 0
                logs[name] = [
                    base,
                    [conv.unstructure(v) for v in value[base:]],
                ]
            elif before is _ABSENT or not (value is before or value == before):
                changed[name] = conv.unstructure(value)
        if changed:
            doc["state"] = changed
        if logs:
            doc["logs"] = logs
        return doc

    def _grown(
        self, name: str, before: PVector[Any], value: PVector[Any], state: Any
    ) -> bool:
        """Whether log *name* only had items appended since *before*."""
        if name in self._trusted:
            return _appended(before, value)
        if self._context and name == "messages":
            return extends(before, value, state._lineage)
        return extends(before, value)

    def encode(
        self,
        snap: Snapshot[S],
        parent: Snapshot[S] | None,
        progress: Progress | None = None,
    ) -> Record:
        """The record for *snap*, as a delta against *parent* when given."""
        if parent is None and progress is None and snap.progress:
            progress = snap.progress  # a root keeps its whole progress
        return self.record(snap, self.document(snap, parent, progress))

    @staticmethod
    def record(snap: Snapshot[Any], doc: Doc) -> Record:
        """Seal *doc* as the record of *snap* (canonical bytes, checksum)."""
        data = canonical(doc)
        return Record(
            snap.thread_id,
            snap.version,
            snap.parent,
            data,
            record_checksum(snap.thread_id, snap.version, snap.parent, data),
        )

    # -- decoding -----------------------------------------------------------

    def parse(self, record: Record) -> Result[Doc, CheckpointDecodeError]:
        """Check and parse one record's bytes (not its state)."""
        expected = record_checksum(
            record.thread_id, record.version, record.parent, record.data
        )
        if expected != record.checksum:
            return Failure(
                CheckpointDecodeError(
                    "$",
                    "checksum mismatch (torn, tampered or misplaced record)",
                )
            )
        try:
            doc = json.loads(record.data)
        except (ValueError, RecursionError) as exc:
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

    def rebuild(
        self,
        docs: Sequence[Doc],
        thread_id: str,
        version: int,
        parent: int | None,
    ) -> Result[Snapshot[S], CheckpointDecodeError]:
        """The snapshot that *docs* (checked documents, root first) build up."""
        state_doc: Any = {}
        logs: dict[str, list[Any]] = {}
        progress: dict[str, list[Any]] | None = None
        for doc in docs:
            nested = doc.get("in")
            if nested is None:
                progress = None
            else:
                progress = {} if progress is None else progress
                for key, more in nested.items():
                    progress.setdefault(key, []).extend(more)
            if "whole" in doc:
                state_doc = doc["whole"]
                continue
            if not isinstance(state_doc, dict):
                return Failure(
                    CheckpointDecodeError(
                        "$.state", "a partial state follows a whole one"
                    )
                )
            state_doc.update(doc.get("state", {}))
            for name, log in doc.get("logs", {}).items():
                if not (
                    isinstance(log, list)
                    and len(log) == 2
                    and type(log[0]) is int
                    and isinstance(log[1], list)
                ):
                    return Failure(
                        CheckpointDecodeError(
                            f"$.logs.{name}", "malformed log"
                        )
                    )
                base, items = log
                prior = logs.get(name, [])
                if not 0 <= base <= len(prior):
                    return Failure(
                        CheckpointDecodeError(
                            f"$.logs.{name}",
                            "extends a longer log than its parent has",
                        )
                    )
                logs[name] = prior[:base] + items
        if logs:
            if not isinstance(state_doc, dict):
                return Failure(
                    CheckpointDecodeError(
                        "$.logs", "logs on a state that is not an object"
                    )
                )
            state_doc = {**state_doc, **logs}
        try:
            state = self._structure(state_doc, self.state_type)
        except STRUCTURE_ERRORS as exc:
            return Failure(CheckpointDecodeError("$.state", _why(exc)))
        head = docs[-1]
        node = head.get("node", _ABSENT)
        if node is _ABSENT:
            node = None
            if len(docs) > 1:
                previous = docs[-2]["next"]
                if not all(isinstance(n, str) for n in previous):
                    return Failure(
                        CheckpointDecodeError("$.next", "not a list of names")
                    )
                node = "+".join(previous)
        try:
            pending = None
            if "pending" in head:
                p = head["pending"]
                pending = Pending(
                    _opt_str(p["source"]),
                    tuple(self.converter.structure(p["targets"], list[str])),
                    self.converter.structure(p["question"], str),
                )
            snap = Snapshot(
                thread_id=thread_id,
                version=version,
                parent=parent,
                state=state,
                node=_opt_str(node),
                next=tuple(self.converter.structure(head["next"], list[str])),
                join=_opt_str(head.get("join")),
                step=head["step"],
                fingerprint=head["fp"],
                status=Status(head.get("status", "running")),
                pending=pending,
                progress=(
                    NO_PROGRESS
                    if not progress
                    else {k: tuple(v) for k, v in progress.items()}
                ),
            )
        except (
            cattrs.BaseValidationError,
            ValueError,
            TypeError,
            KeyError,
        ) as exc:
            return Failure(CheckpointDecodeError("$", _why(exc)))
        return Success(snap)


def check_document(doc: object) -> Result[Doc, CheckpointDecodeError]:
    """*doc* if it has the shape of a record document, else why not."""
    if not isinstance(doc, dict):
        return Failure(CheckpointDecodeError("$", "not an object"))
    doc = cast("Doc", doc)
    if doc.get("v") != SCHEMA:
        return Failure(
            CheckpointDecodeError("$.v", f"unknown schema {doc.get('v')!r}")
        )
    for key, kinds in _ENVELOPE.items():
        value = doc.get(key, _ABSENT)
        if value is _ABSENT and key in _OPTIONAL:
            continue
        if not isinstance(value, kinds) or type(value) is bool:
            return Failure(
                CheckpointDecodeError(
                    f"$.{key}", "missing or of the wrong type"
                )
            )
    unknown = set(doc) - set(_ENVELOPE) - {"v", "whole"}
    if unknown:
        return Failure(
            CheckpointDecodeError("$", f"unknown keys {sorted(unknown)}")
        )
    nested = doc.get("in")
    if nested is not None:
        for name, docs in cast("Mapping[object, object]", nested).items():
            if not isinstance(name, str) or not isinstance(docs, list):
                return Failure(
                    CheckpointDecodeError("$.in", "malformed progress")
                )
    return Success(doc)


_ABSENT: Any = object()
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
}
_OPTIONAL = {"node", "join", "status", "pending", "state", "logs", "in"}


def _opt_str(value: object) -> str | None:
    if value is None or isinstance(value, str):
        return value
    msg = f"expected a string or null, got {type(value).__name__}"
    raise TypeError(msg)


def _type_name(t: object) -> str:
    return str(getattr(t, "__qualname__", None) or t).replace("typing.", "")


def _why(exc: BaseException) -> str:
    if isinstance(exc, cattrs.BaseValidationError):
        return "; ".join(cattrs.transform_error(exc))
    return f"{type(exc).__name__}: {exc}"
