"""Snapshot records: canonical JSON with deltas for append-only fields.

A record stores the snapshot's scalar fields and its state.  Top-level state
fields holding a persistent vector (a :class:`~pipeline.Context`'s messages,
say) are append-only logs: when the new vector extends the parent's, the
record keeps only the appended items, so bytes per step grow with what the
step added, not with the history.
"""

from __future__ import annotations

import json

from collections.abc import Sequence
from typing import Any, Generic, TypeVar, cast

import attrs
import cattrs

from pyrsistent import PVector
from returns.result import Failure, Result, Success

from .._serde import canonical, checksum, make_converter
from ..errors import CheckpointDecodeError
from ._model import Pending, Snapshot, Status
from ._store import Record


S = TypeVar("S")

SCHEMA = 1


def _extends(old: PVector[Any], new: PVector[Any]) -> bool:
    n = len(old)
    if len(new) < n:
        return False
    if n == 0:
        return True
    if new[n - 1] is old[n - 1]:  # shared structure: the common case
        return True
    return bool(new[:n] == old)


class Codec(Generic[S]):
    """Encodes snapshots of state type *S* to records and back."""

    def __init__(self, state_type: type[S]) -> None:
        self.state_type = state_type
        self.converter = make_converter()
        # cattrs generates (compiles) its hooks on first use; do it now, when
        # the graph is built, so that decoding a checkpoint compiles nothing.
        self._structure = self.converter.get_structure_hook(state_type)
        self.converter.get_unstructure_hook(state_type)
        for kind in (str, int, bool, list[str]):
            self.converter.get_structure_hook(kind)

    # -- encoding -----------------------------------------------------------

    def _state_parts(
        self, state: S, parent: S | None
    ) -> tuple[object, dict[str, dict[str, object]]]:
        conv = self.converter
        if not attrs.has(type(state)):
            return conv.unstructure(state), {}
        body: dict[str, object] = {}
        logs: dict[str, dict[str, object]] = {}
        for field in attrs.fields(cast("type[Any]", type(state))):
            value = getattr(state, field.name)
            if isinstance(value, PVector):
                old = (
                    getattr(parent, field.name, None)
                    if parent is not None
                    else None
                )
                base = (
                    len(old)
                    if isinstance(old, PVector) and _extends(old, value)
                    else 0
                )
                logs[field.name] = {
                    "base": base,
                    "items": [conv.unstructure(v) for v in value[base:]],
                }
            else:
                body[field.name] = conv.unstructure(value)
        return body, logs

    def encode(self, snap: Snapshot[S], parent: Snapshot[S] | None) -> Record:
        """The record for *snap*, as a delta against *parent* when given."""
        state, logs = self._state_parts(
            snap.state, parent.state if parent is not None else None
        )
        pending = (
            None
            if snap.pending is None
            else {
                "source": snap.pending.source,
                "targets": list(snap.pending.targets),
                "question": snap.pending.question,
            }
        )
        doc = {
            "schema": SCHEMA,
            "thread": snap.thread_id,
            "version": snap.version,
            "parent": snap.parent,
            "fingerprint": snap.fingerprint,
            "node": snap.node,
            "next": list(snap.next),
            "join": snap.join,
            "step": snap.step,
            "status": snap.status.value,
            "pending": pending,
            "state": state,
            "logs": logs,
        }
        data = canonical(doc)
        return Record(
            snap.thread_id, snap.version, snap.parent, data, checksum(data)
        )

    # -- decoding -----------------------------------------------------------

    def parse(
        self, record: Record
    ) -> Result[dict[str, Any], CheckpointDecodeError]:
        """Check and parse one record's bytes (not its state)."""
        if checksum(record.data) != record.checksum:
            return Failure(
                CheckpointDecodeError(
                    "$", "checksum mismatch (torn or tampered record)"
                )
            )
        try:
            doc = json.loads(record.data)
        except (ValueError, RecursionError) as exc:
            return Failure(CheckpointDecodeError("$", f"not JSON: {exc}"))
        if not isinstance(doc, dict):
            return Failure(CheckpointDecodeError("$", "not an object"))
        if doc.get("schema") != SCHEMA:
            return Failure(
                CheckpointDecodeError(
                    "$.schema", f"unknown schema {doc.get('schema')!r}"
                )
            )
        for key, kinds in _ENVELOPE.items():
            if (
                key not in doc
                or not isinstance(doc[key], kinds)
                or type(doc[key]) is bool
            ):
                return Failure(
                    CheckpointDecodeError(
                        f"$.{key}", "missing or of the wrong type"
                    )
                )
        if (
            doc["thread"] != record.thread_id
            or doc["version"] != record.version
            or doc["parent"] != record.parent
        ):
            return Failure(
                CheckpointDecodeError("$", "record does not match its row")
            )
        return Success(doc)

    def decode(
        self, chain: Sequence[dict[str, Any]]
    ) -> Result[Snapshot[S], CheckpointDecodeError]:
        """Rebuild the snapshot of ``chain[-1]`` from its ancestry (root first)."""
        head = chain[-1]
        logs: dict[str, list[Any]] = {}
        for doc in chain:
            doc_logs = doc["logs"]
            if not isinstance(doc_logs, dict):
                return Failure(
                    CheckpointDecodeError("$.logs", "not an object")
                )
            for name, log in doc_logs.items():
                if not (
                    isinstance(log, dict)
                    and type(log.get("base")) is int
                    and isinstance(log.get("items"), list)
                ):
                    return Failure(
                        CheckpointDecodeError(
                            f"$.logs.{name}", "malformed log"
                        )
                    )
                prior = logs.get(name, [])
                if log["base"] > len(prior) or log["base"] < 0:
                    return Failure(
                        CheckpointDecodeError(
                            f"$.logs.{name}.base",
                            "extends a longer log than its parent has",
                        )
                    )
                logs[name] = prior[: log["base"]] + log["items"]
        state_doc = head["state"]
        if logs:
            if not isinstance(state_doc, dict):
                return Failure(
                    CheckpointDecodeError("$.state", "not an object")
                )
            state_doc = {**state_doc, **{k: logs[k] for k in head["logs"]}}
        try:
            state = self._structure(state_doc, self.state_type)
        except (
            cattrs.BaseValidationError,
            ValueError,
            TypeError,
            KeyError,
            AttributeError,
            RecursionError,
        ) as exc:
            return Failure(CheckpointDecodeError("$.state", _why(exc)))
        try:
            status = Status(head["status"])
            pending_doc = head["pending"]
            pending = None
            if pending_doc is not None:
                pending = Pending(
                    _opt_str(pending_doc["source"]),
                    tuple(
                        self.converter.structure(
                            pending_doc["targets"], list[str]
                        )
                    ),
                    self.converter.structure(pending_doc["question"], str),
                )
            snap = Snapshot(
                thread_id=head["thread"],
                version=head["version"],
                parent=head["parent"],
                state=state,
                node=_opt_str(head["node"]),
                next=tuple(self.converter.structure(head["next"], list[str])),
                join=_opt_str(head["join"]),
                step=head["step"],
                fingerprint=head["fingerprint"],
                status=status,
                pending=pending,
            )
        except (
            cattrs.BaseValidationError,
            ValueError,
            TypeError,
            KeyError,
        ) as exc:
            return Failure(CheckpointDecodeError("$", _why(exc)))
        return Success(snap)


_ENVELOPE: dict[str, type | tuple[type, ...]] = {
    "thread": str,
    "version": int,
    "parent": (int, type(None)),
    "fingerprint": str,
    "step": int,
    "status": str,
    "next": list,
    "logs": dict,
}


def _opt_str(value: object) -> str | None:
    if value is None or isinstance(value, str):
        return value
    msg = f"expected a string or null, got {type(value).__name__}"
    raise TypeError(msg)


def _why(exc: BaseException) -> str:
    if isinstance(exc, cattrs.BaseValidationError):
        return "; ".join(cattrs.transform_error(exc))
    return f"{type(exc).__name__}: {exc}"
