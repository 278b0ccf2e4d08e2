"""What the commands print: results, snapshots, histories, thread lists."""

from __future__ import annotations

import contextlib
import json
import logging
import re
import sys

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote


if TYPE_CHECKING:
    from datetime import datetime

    from ..fold import Snapshot
    from ._target import Target


_TAB_BREAKS = re.compile(r"[\t\r\n]")


def say(line: str) -> None:
    """A status line for people, on stderr (stdout is for results)."""
    print(line, file=sys.stderr, flush=True)


@contextlib.contextmanager
def logs(*, traceback: bool) -> Iterator[None]:
    """Log records (warnings and worse) on stderr while a command runs, one
    line each (in full with ``--traceback``), unless the program set up
    logging itself.  Without a handler, :mod:`logging`'s last resort
    would print each record whole."""
    root = logging.getLogger()
    if root.handlers:
        yield
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setLevel(logging.WARNING)
    handler.setFormatter(_Concise(full=traceback))
    root.addHandler(handler)
    try:
        yield
    finally:
        root.removeHandler(handler)


class _Concise(logging.Formatter):
    def __init__(self, *, full: bool) -> None:
        super().__init__()
        self._full = full

    def format(self, record: logging.LogRecord) -> str:
        text = record.getMessage()
        first, _, rest = text.partition("\n")
        line = f"pipeline: {record.levelname.lower()}: {first}"
        if not self._full:
            more = rest or record.exc_info
            return f"{line} (--traceback shows more)" if more else line
        if record.exc_info:
            rest = "\n".join(
                filter(None, (rest, self.formatException(record.exc_info)))
            )
        return f"{line}\n{rest}" if rest else line


def emit_json(doc: object, *, pretty: bool = False) -> None:
    """*doc* as JSON on stdout."""
    # The standard library: integers of any size, as they are.
    text = json.dumps(
        doc, indent=2 if pretty else None, ensure_ascii=False, default=str
    )
    sys.stdout.write(text)
    sys.stdout.write("\n")
    sys.stdout.flush()


def last_text(context: Any) -> str | None:
    """The content of a context's last assistant message."""
    for message in reversed(context.messages):
        if message.role == "assistant" and message.content:
            return str(message.content)
    return None


def value_doc(target: Target, value: object) -> object:
    """A run's final value, JSON-shaped."""
    if target.kind != "handler":
        return target.converter.unstructure(value, target.obj.codec.state_type)
    return target.converter.unstructure(value)


def print_value(target: Target, value: object) -> None:
    """A run's final value: a conversation's last answer as text, any
    other value as JSON."""
    from .. import Context  # noqa: PLC0415

    context = value
    if target.kind == "swarm":
        context = value.conversation  # type: ignore[attr-defined]
    if isinstance(context, Context):
        text = last_text(context)
        if text is not None:
            sys.stdout.write(text + "\n")
            sys.stdout.flush()
            return
    emit_json(value_doc(target, value), pretty=True)


def questions_doc(snap: Snapshot[Any]) -> list[dict[str, Any]]:
    """Every question *snap* waits at: its id, text, where it waits (the
    fan-out branch or ``map_reduce`` item) and payload."""
    docs = []
    for qid, p in snap.questions.items():
        doc: dict[str, Any] = {"id": qid, "question": p.question}
        if p.scope:
            doc["where"] = p.scope
        if p.payload is not None:
            doc["payload"] = p.payload
        docs.append(doc)
    return docs


def snapshot_doc(target: Target, snap: Snapshot[Any]) -> dict[str, Any]:
    """Everything a snapshot says, JSON-shaped (state included)."""
    converter = target.obj.codec.converter
    state = converter.unstructure(snap.state, target.obj.codec.state_type)
    pending = None
    if snap.pending is not None:
        pending = {
            "question": snap.pending.question,
            "answered": snap.pending.answered,
            "id": snap.question_id,
        }
        if snap.pending.payload is not None:  # asked by interrupt()
            pending["payload"] = snap.pending.payload
        if len(snap.questions) > 1:  # several branches or items wait
            pending["questions"] = questions_doc(snap)
    return {
        "thread": snap.thread_id,
        "version": snap.version,
        "parent": snap.parent,
        "status": str(snap.status),
        "step": snap.step,
        "node": snap.node,
        "next": list(snap.next),
        "pending": pending,
        "committed_at": when(snap.committed_at),
        "author": snap.author
        or (snap.edit.author if snap.edit is not None else None),
        "origin": origin_doc(snap),
        "reason": snap.reason or None,
        "state": state,
    }


def when(at: datetime | None) -> str | None:
    """A commit time as ISO 8601 UTC to the millisecond (``None``: a record
    written before records carried their time)."""
    if at is None:
        return None
    return at.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def origin_doc(snap: Snapshot[Any]) -> dict[str, Any] | None:
    """Where a forked thread came from, JSON-shaped."""
    if snap.origin is None:
        return None
    return {"thread": snap.origin[0], "version": snap.origin[1]}


def _segment(key: str) -> str:
    """One part of a progress key, as people name it: a fan-out branch
    (``b:name``) or a nested fold (``f:name#k@digest``)."""
    kind, _, rest = key.partition(":")
    name, _, more = rest.partition("#")
    name = unquote(name)
    if kind == "b":
        return f"branch {name}"
    occurrence = more.partition("@")[0]
    return name if occurrence in {"", "0"} else f"{name} #{occurrence}"


def _tools(doc: dict[str, Any]) -> list[str]:
    """The tools a nested record's appended messages called."""
    names: list[str] = []
    logs = doc.get("logs")
    for log in logs.values() if isinstance(logs, dict) else ():
        items = log[1] if isinstance(log, list) and len(log) == 2 else ()
        for item in items if isinstance(items, list) else ():
            calls = item.get("tool_calls") if isinstance(item, dict) else None
            for call in calls if isinstance(calls, list) else ():
                name = call.get("name") if isinstance(call, dict) else None
                if isinstance(name, str) and name not in names:
                    names.append(name)
    return names


def _leaf(doc: dict[str, Any], before: Any) -> list[str]:
    """What the innermost record saved: an agent's turn (and the tools it
    called), else the step its fold ran."""
    fp = doc.get("fp")
    step = doc.get("step")
    if isinstance(fp, str) and fp.startswith("agent:"):
        tools = _tools(doc)
        turn = [f"turn {step}"]
        return [*turn, f"tool {', '.join(tools)}"] if tools else turn
    node = doc.get("node")
    if isinstance(node, str):
        return [node]
    ran = before.get("next") if isinstance(before, dict) else None
    if isinstance(ran, list) and ran:
        return ["+".join(str(n) for n in ran)]
    return [] if step is None else [f"step {step}"]


def _descend(path: list[str], key: str, docs: Sequence[Any]) -> list[str]:
    """*path*, extended down the nested folds of progress key *key* whose
    chain is *docs*, to the step the newest document saved."""
    while True:
        for part in key.split("/"):
            label = _segment(part)
            if label != path[-1]:  # a node's own cell names it again
                path.append(label)
        if not docs or not isinstance(docs[-1], dict):
            return path
        last = docs[-1]
        nested = last.get("in")
        if not isinstance(nested, dict) or not nested:
            before = docs[-2] if len(docs) > 1 else None
            return path + [p for p in _leaf(last, before) if p != path[-1]]
        key = max(nested)  # canonical JSON sorts keys: one is the rule
        docs = nested[key] if isinstance(nested[key], list) else []


def record_path(
    snap: Snapshot[Any], parent: Snapshot[Any] | None
) -> list[str]:
    """Where in the run a record was written: the node for a step's record;
    for progress saved inside a step (an agent's turn and the tools it
    called, a fan-out branch, a nested graph's node), the node in flight,
    then each fold nested in it, down to what the record saved."""
    if snap.node is None and parent is None:
        return []
    saved = parent.progress if parent is not None else {}
    grown = [
        k for k, v in snap.progress.items() if len(v) > len(saved.get(k, ()))
    ]
    if (
        not grown
        or parent is None
        or parent.step != snap.step
        or parent.next != snap.next
    ):
        return [] if snap.node is None else [snap.node]
    key = max(grown, key=len)  # the innermost fold that saved
    return _descend(["+".join(snap.next)], key, snap.progress[key])


def history_row(
    snap: Snapshot[Any], parent: Snapshot[Any] | None = None
) -> dict[str, Any]:
    """One line of ``pipeline history``: the record's time, status, where
    in the run it was written (given the record it grew from, *parent*),
    and how long after *parent* (``duration``, seconds; ``None`` when
    either time is unknown)."""
    duration = None
    if (
        parent is not None
        and snap.committed_at is not None
        and parent.committed_at is not None
    ):
        duration = round(
            (snap.committed_at - parent.committed_at).total_seconds(), 3
        )
    return {
        "version": snap.version,
        "parent": snap.parent,
        "origin": origin_doc(snap) if snap.version == 0 else None,
        "at": when(snap.committed_at),
        "duration": duration,
        "step": snap.step,
        "status": str(snap.status),
        "node": snap.node,
        "path": record_path(snap, parent),
        "next": list(snap.next),
        "question": " | ".join(p.question for p in snap.questions.values())
        or None,
        "question_id": snap.question_id,
        "reason": snap.reason or None,
        "edit": None
        if snap.edit is None
        else {"author": snap.edit.author, "reason": snap.edit.reason},
        "author": snap.author
        or (snap.edit.author if snap.edit is not None else None),
    }


def history_rows(snaps: Sequence[Snapshot[Any]]) -> list[dict[str, Any]]:
    """The lines of ``pipeline history``, oldest first (see
    :func:`history_row`)."""
    by_version = {s.version: s for s in snaps}
    return [
        history_row(
            snap, None if snap.parent is None else by_version.get(snap.parent)
        )
        for snap in snaps
    ]


def history_cells(row: dict[str, Any]) -> list[object]:
    """One history row as table cells (see :func:`history_row`)."""
    origin = row["origin"]
    parent = row["parent"]
    if origin is not None:
        parent = f"fork of {origin['thread']}@{origin['version']}"
    edit = row["edit"]
    return [
        row["version"],
        parent,
        row["at"] or "?",
        row["status"],
        row["step"],
        " → ".join(row["path"]),
        ", ".join(row["next"]),
        row["question"],
        row["reason"] or (None if edit is None else f"edit: {edit['reason']}"),
        row["author"],
    ]


HISTORY_COLUMNS = (
    "version",
    "parent",
    "committed (UTC)",
    "status",
    "step",
    "path",
    "next",
    "question",
    "reason",
    "author",
)


def table(
    title: str, columns: Sequence[str], rows: Sequence[Sequence[object]]
) -> None:
    """A table: drawn by rich on a terminal, tab-separated otherwise (a
    header row first; tabs and line breaks in a cell become spaces)."""
    cells = [["" if v is None else str(v) for v in row] for row in rows]
    if not sys.stdout.isatty():
        for row in [list(columns), *cells]:
            row = [_TAB_BREAKS.sub(" ", c) for c in row]  # noqa: PLW2901
            sys.stdout.write("\t".join(row) + "\n")
        sys.stdout.flush()
        return
    from rich.console import Console  # noqa: PLC0415
    from rich.table import Table  # noqa: PLC0415

    drawn = Table(title=title)
    for column in columns:
        drawn.add_column(column)
    for row in cells:
        drawn.add_row(*row)
    Console().print(drawn)
