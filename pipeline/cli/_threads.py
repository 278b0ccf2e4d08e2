"""What the commands and the web UI share about a thread: the settings a
command runs with, a snapshot read or a one-line refusal, failures that
are about the thread (not the run) as usage errors, and answers parsed
and checked as ``pipeline answer`` does."""

from __future__ import annotations

import json

from typing import TYPE_CHECKING, Any

import attrs

from returns.result import Result, Success

from ._exits import ExitCode, UserError
from ._stores import describe
from ._target import RESOLVER_HINT, UNRESOLVED, UnfitJSON, parse_json


if TYPE_CHECKING:
    from ..stores import CheckpointStore
    from ._target import Target


@attrs.frozen
class Settings:
    """What every command may use: where checkpoints are, how to print."""

    store: str
    json: bool = False
    traceback: bool = False


def failure_error(failure: object, settings: Settings) -> UserError | None:
    """A failure that is about the thread, not the run: one line, a hint."""
    from ..failures import (  # noqa: PLC0415
        IncompatibleGraph,
        LeaseLost,
        SnapshotNotFound,
        StaleAnswer,
        ThreadBusy,
    )

    flag = store_flag(settings)
    if isinstance(failure, StaleAnswer):
        return UserError(
            str(failure),
            hint=f"`pipeline show {failure.thread_id}{flag}` shows the "
            "question it waits at (pending.id); answer that one",
        )
    missing = unresolved(failure)
    if missing is not None:
        return missing
    if isinstance(failure, IncompatibleGraph):
        return UserError(
            "the thread was written by another version of this graph "
            f"({failure.stored[:12]}, now {failure.current[:12]})",
            hint="resume it with the code that wrote it (--target), or "
            "declare a migration (Graph.resume(migrate=...))",
            code=ExitCode.FAILED,
        )
    if isinstance(failure, ThreadBusy | LeaseLost):
        return UserError(
            str(failure),
            hint="another process is running this thread; wait for it, "
            "or for its lease to lapse",
            code=ExitCode.UNAVAILABLE,
        )
    if isinstance(failure, SnapshotNotFound):
        return UserError(
            str(failure),
            hint=f"`pipeline history {failure.thread_id}{flag}` lists its "
            "versions",
            code=ExitCode.NOT_FOUND,
        )
    return None


def store_flag(settings: Settings) -> str:
    """`` --store STORE`` for a hint, when the store is not the default."""
    from ._stores import resolve  # noqa: PLC0415

    if settings.store == resolve(None):
        return ""
    return f" --store {describe(settings.store)}"


def found(loaded: Result[Any, Any], thread_id: str, settings: Settings) -> Any:
    """What *loaded* holds, or a one-line usage error saying why not."""
    from ..failures import SnapshotNotFound  # noqa: PLC0415

    if type(loaded) is Success:
        return loaded.unwrap()
    failure = loaded.failure()
    if isinstance(failure, SnapshotNotFound):
        at = (
            "" if failure.version is None else f" at version {failure.version}"
        )
        raise UserError(
            f"no checkpoint for thread {thread_id!r}{at}",
            hint=f"`pipeline history {thread_id}{store_flag(settings)}` "
            "lists its versions",
            code=ExitCode.NOT_FOUND,
        )
    missing = unresolved(failure)
    if missing is not None:
        raise missing
    raise UserError(
        f"cannot read thread {thread_id!r}: {failure}",
        hint="was it written by another version of this graph? "
        "--target names the one that wrote it",
        code=ExitCode.FAILED,
    )


def unresolved(failure: object) -> UserError | None:
    """A checkpoint or state holding a secret reference no resolver in force
    knows: the command needs ``--resolver`` (a usage mistake, not a bug)."""
    from ..failures import CheckpointDecodeError, InvalidState  # noqa: PLC0415

    if not isinstance(failure, CheckpointDecodeError | InvalidState):
        return None
    text = str(failure)  # names references, never values
    if UNRESOLVED not in text:
        return None
    return UserError(f"a secret is missing: {text}", hint=RESOLVER_HINT)


async def checked_answer(
    settings: Settings,
    store: CheckpointStore,
    target: Target,
    thread_id: str,
    text: str,
    question: str | None,
) -> tuple[object, str | None]:
    """*text* as the answer to the question *thread_id* waits on (JSON
    when it parses as JSON, else the text), or a usage error when it is
    malformed or the thread waits for no answer (``pipeline answer`` and
    the web UI's form); with the id of the *question* it answers (``null``
    answers ``None`` only for a named question: see ``resume``)."""
    answer = parse_answer(text)
    loaded = await target.obj.load(store, thread_id)
    snap = found(loaded, thread_id, settings)
    await _check_waiting(settings, store, target, snap)
    if answer is None and question is None:
        # null answers None; which question, when several wait, the
        # human says (as for any answer: see StaleAnswer).
        if len(snap.questions) != 1:
            from ..failures import StaleAnswer  # noqa: PLC0415

            stale = StaleAnswer(
                thread_id, None, ", ".join(snap.questions), str(snap.status)
            )
            refused = failure_error(stale, settings)
            assert refused is not None  # noqa: S101  # a StaleAnswer's
            raise refused
        question = snap.question_id
    return answer, question


async def _check_waiting(
    settings: Settings,
    store: CheckpointStore,
    target: Target,
    snap: Any,
) -> None:
    """Refuse an answer for a thread that waits for none: a stopped one
    says how to go on (answer its question again on a fork)."""
    from ..fold import Status  # noqa: PLC0415

    if snap.question_id is not None:
        return
    tid = snap.thread_id
    if snap.status is Status.STOPPED:
        asked = await _asked_at(store, target, snap)
        flag = store_flag(settings)
        why = f": {snap.reason}" if snap.reason else ""
        if asked is None:
            hint = (
                f"it stays stopped; to go on, fork the version before the "
                f"stop and resume the fork: `pipeline fork {tid} --version "
                f"{snap.parent}{flag}`, then `pipeline resume NEW{flag}`"
            )
        else:
            hint = (
                f"it stays stopped; to answer its question (version "
                f"{asked}) again, fork there: `pipeline fork {tid} "
                f"--version {asked} --answer ANSWER{flag}`"
            )
        raise UserError(
            f"thread {tid!r} is stopped{why}; it waits for no answer",
            hint=hint,
        )
    if snap.status is Status.RUNNING:
        # Answered already (its run cut short: a crash, Ctrl-C), or failed.
        raise UserError(
            f"thread {tid!r} is not waiting for an answer (it is "
            f"{snap.status}: answered already, or its run failed or was cut short)",
            hint=f"`pipeline resume {tid}{store_flag(settings)}` continues "
            "it; `pipeline show` shows where it is",
        )
    raise UserError(
        f"thread {tid!r} is not waiting for an answer (it is {snap.status})",
        hint=f"`pipeline show {tid}` shows where it is",
    )


async def _asked_at(
    store: CheckpointStore, target: Target, snap: Any
) -> int | None:
    """The version of the question last asked on *snap*'s lineage (the
    one a stop after an answer declined), if any."""
    from ..fold import Status  # noqa: PLC0415

    read = await target.obj.history(store, snap.thread_id)
    if type(read) is not Success:
        return None
    by_version = {s.version: s for s in read.unwrap()}
    cursor = snap.parent
    while cursor is not None and cursor in by_version:
        at = by_version[cursor]
        if at.status is Status.INTERRUPTED and at.question_id is not None:
            return int(cursor)
        cursor = at.parent
    return None


def refused_answer(
    exc: Exception, thread_id: str, settings: Settings
) -> UserError:
    """The engine refused an answer (its gate's type): the thread paused
    again, nothing is lost."""
    return UserError(
        f"malformed answer: {exc}",
        hint=f"thread {thread_id} still waits; answer again with "
        f"`pipeline answer {thread_id} ANSWER{store_flag(settings)}`"
        " (an answer that parses as JSON is that value: quote text "
        """that looks like JSON, '"123"')""",
    )


def parse_answer(text: str) -> object:
    """An answer is JSON when it parses as JSON, else the text itself
    (``pipeline answer t1 yes`` answers ``"yes"``, ``NaN`` ``"NaN"``,
    ``null`` ``None``)."""
    try:
        value = parse_json(text)
    except json.JSONDecodeError:  # not JSON: the text
        pass
    except UnfitJSON as exc:
        if not exc.nan:
            raise UserError(
                f"malformed answer: {exc}", hint=exc.hint
            ) from None
    else:
        return value
    try:
        text.encode()
    except UnicodeEncodeError:  # undecodable bytes on the command line
        raise UserError(
            "malformed answer: it is not UTF-8 text",
            hint="give the answer as UTF-8 text",
        ) from None
    return text
