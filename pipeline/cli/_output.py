"""What the commands print: results, snapshots, histories, thread lists."""

from __future__ import annotations

import contextlib
import json
import logging
import sys

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any


if TYPE_CHECKING:
    from ..fold import Snapshot
    from ._target import Target


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
    return {
        "thread": snap.thread_id,
        "version": snap.version,
        "parent": snap.parent,
        "status": str(snap.status),
        "step": snap.step,
        "node": snap.node,
        "next": list(snap.next),
        "pending": pending,
        "reason": snap.reason or None,
        "state": state,
    }


def history_row(snap: Snapshot[Any]) -> dict[str, Any]:
    """One line of ``pipeline history``."""
    return {
        "version": snap.version,
        "parent": snap.parent,
        "step": snap.step,
        "status": str(snap.status),
        "node": snap.node,
        "next": list(snap.next),
        "question": snap.pending.question
        if snap.pending is not None and not snap.pending.answered
        else None,
        "question_id": snap.question_id,
        "reason": snap.reason or None,
        "edit": None
        if snap.edit is None
        else {"author": snap.edit.author, "reason": snap.edit.reason},
    }


def table(
    title: str, columns: Sequence[str], rows: Sequence[Sequence[object]]
) -> None:
    """A table: drawn by rich on a terminal, tab-separated otherwise."""
    cells = [["" if v is None else str(v) for v in row] for row in rows]
    if not sys.stdout.isatty():
        for row in cells:
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
