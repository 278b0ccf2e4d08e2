"""What each command does, once its arguments are parsed (async)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import uuid

from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from returns.result import Result, Success

from . import _output as out
from ._events import JsonLines, reporter
from ._execute import Work, execute
from ._exits import ExitCode, UserError
from ._stores import (
    describe,
    forget,
    is_companion,
    note_target,
    noted_target,
    open_store,
)
from ._target import (
    RESOLVER_HINT,
    UNRESOLVED,
    Target,
    UnfitJSON,
    as_context,
    load,
    parse_json,
    read_json,
    structure_input,
)


if TYPE_CHECKING:
    from ..stores import CheckpointStore


@attrs.frozen
class Settings:
    """What every command may use: where checkpoints are, how to print."""

    store: str
    json: bool = False
    traceback: bool = False


# -- running ----------------------------------------------------------------


async def run(
    settings: Settings,
    ref: str,
    *,
    input_text: str | None,
    thread_id: str | None,
    store_given: bool,
    context: bool,
) -> ExitCode:
    """``pipeline run``."""
    target = load(ref, traceback=settings.traceback)
    value = None if input_text is None else read_json(input_text, "--input")
    arg = structure_input(target, value)
    if context and target.kind == "handler":
        arg = as_context(target, value)
    if target.kind == "handler":
        if thread_id is not None or store_given:
            raise UserError(
                f"{ref} is a handler: it keeps no checkpoints",
                hint="--store and --thread are for graphs and swarms; "
                "put the handler in a graph to make it resumable",
            )
        handler = target.obj
        return await _finish(
            settings,
            target,
            None,
            await _watch(settings, target, lambda: handler(arg)),
        )
    tid = uuid.uuid4().hex[:16] if thread_id is None else thread_id
    if is_companion(tid):
        raise UserError(
            "thread ids starting 'pipeline-cli:' are the CLI's own",
            hint="pick another --thread",
        )
    target.obj.start(arg, thread_id=tid)  # InvalidThreadId before anything
    async with open_store(settings.store, create=True) as store:
        if await store.head(tid) is not None:
            raise UserError(
                f"thread {tid!r} already exists",
                hint=f"continue it with `pipeline resume {tid}"
                f"{_store_flag(settings)}`, or pick another --thread",
            )
        await note_target(store, tid, target.ref)
        if not settings.json:
            out.say(f"thread {tid} (store {describe(settings.store)})")
        obj = target.obj

        async def work() -> Result[Any, Any]:
            return await obj.run(arg, store=store, thread_id=tid)  # type: ignore[no-any-return]

        result = await _watch(settings, target, work)
        return await _finish(settings, target, (store, tid), result)


async def resume(
    settings: Settings,
    thread_id: str,
    *,
    version: int | None,
    ref: str | None,
    answer_text: str | None,
) -> ExitCode:
    """``pipeline resume`` and ``pipeline answer``."""
    async with open_store(settings.store) as store:
        target = await _thread_target(settings, store, thread_id, ref)
        answer: object = None
        if answer_text is not None:
            answer = _answer(answer_text)
            loaded = await target.obj.load(store, thread_id)
            snap = _found(loaded, thread_id, settings)
            if snap.pending is None or snap.pending.answered:
                raise UserError(
                    f"thread {thread_id!r} is not waiting for an answer "
                    f"(it is {snap.status})",
                    hint=f"`pipeline show {thread_id}` shows where it is",
                )
        obj = target.obj

        async def work() -> Result[Any, Any]:
            return await obj.resume(  # type: ignore[no-any-return]
                store, thread_id, version=version, answer=answer
            )

        from ..errors import InvalidAnswer  # noqa: PLC0415

        try:
            result = await _watch(settings, target, work)
        except InvalidAnswer as exc:
            if answer_text is None:  # an answer stored before: code's to fix
                raise
            # The engine paused the thread again: nothing is lost.
            raise UserError(
                f"malformed answer: {exc}",
                hint=f"thread {thread_id} still waits; answer again with "
                f"`pipeline answer {thread_id} ANSWER{_store_flag(settings)}`"
                " (an answer that parses as JSON is that value: quote text "
                """that looks like JSON, '"123"')""",
            ) from None
        return await _finish(settings, target, (store, thread_id), result)


def _answer(text: str) -> object:
    """An answer is JSON when it parses as JSON, else the text itself
    (``pipeline answer t1 yes`` answers ``"yes"``, ``NaN`` ``"NaN"``)."""
    try:
        return parse_json(text)
    except json.JSONDecodeError:  # not JSON: the text
        pass
    except UnfitJSON as exc:
        if not exc.nan:
            raise UserError(
                f"malformed answer: {exc}", hint=exc.hint
            ) from None
    try:
        text.encode()
    except UnicodeEncodeError:  # undecodable bytes on the command line
        raise UserError(
            "malformed answer: it is not UTF-8 text",
            hint="give the answer as UTF-8 text",
        ) from None
    return text


def _write(path: Path, text: str) -> None:
    """*text* into the file *path* (``draw -o``), or a usage error."""
    try:
        path.write_text(text, encoding="utf-8")
    except FileNotFoundError:
        raise _no_directory(path) from None
    except OSError as exc:
        raise UserError(
            f"-o: cannot write {str(path)!r} ({type(exc).__name__})",
            hint="pick a file you can write",
        ) from None


def _no_directory(path: Path) -> UserError:
    return UserError(
        f"-o: no directory {str(path.parent)!r}",
        hint="create it first, or write elsewhere",
    )


async def _watch(
    settings: Settings, target: Target, work: Work
) -> Result[Any, Any] | None:
    report = reporter(
        json=settings.json, converter=target.converter, title=target.ref
    )
    return await execute(work, report)


async def _finish(
    settings: Settings,
    target: Target,
    thread: tuple[CheckpointStore, str] | None,
    result: Result[Any, Any] | None,
) -> ExitCode:
    """Report how the run ended; the exit code says it too."""
    from ..fold import Snapshot, Status  # noqa: PLC0415

    lines = JsonLines(target.converter, sys.stdout) if settings.json else None
    tid = thread[1] if thread is not None else None
    store_hint = _store_flag(settings)
    if result is None:
        version = await thread[0].head(thread[1]) if thread else None
        if lines is not None:
            lines.write(
                "result",
                {"status": "cancelled", "thread": tid, "version": version},
            )
        out.say("cancelled")
        if tid is not None:
            out.say(
                f"hint: thread {tid} is kept at version {version}; continue "
                f"with `pipeline resume {tid}{store_hint}`"
            )
        return ExitCode.CANCELLED
    if type(result) is not Success:
        failure = result.failure()
        refused = _failure_error(failure, settings)
        if refused is not None:
            raise refused
        if lines is not None:
            lines.write(
                "result",
                {"status": "failed", "thread": tid, "error": str(failure)},
            )
        out.say(f"error: the run failed: {failure}")
        return ExitCode.FAILED
    value = result.unwrap()
    if not isinstance(value, Snapshot):
        if lines is not None:
            lines.write(
                "result",
                {"status": "done", "value": out.value_doc(target, value)},
            )
        else:
            out.print_value(target, value)
        return ExitCode.OK
    snap: Snapshot[Any] = value
    where = {"thread": snap.thread_id, "version": snap.version}
    if snap.status is Status.INTERRUPTED:
        question = snap.pending.question if snap.pending is not None else ""
        if lines is not None:
            lines.write(
                "result",
                {"status": "interrupted", **where, "question": question},
            )
        out.say(f"paused: {question}")
        out.say(
            f"hint: answer with `pipeline answer {snap.thread_id} ANSWER"
            f"{store_hint}`"
        )
        return ExitCode.PAUSED
    if snap.status is Status.STOPPED:
        if lines is not None:
            lines.write(
                "result", {"status": "stopped", **where, "reason": snap.reason}
            )
        out.say(f"stopped: {snap.reason}" if snap.reason else "stopped")
        return ExitCode.STOPPED
    if lines is not None:
        lines.write(
            "result",
            {
                "status": "done",
                **where,
                "value": out.value_doc(target, snap.state),
            },
        )
    else:
        out.print_value(target, snap.state)
    return ExitCode.OK


def _failure_error(failure: object, settings: Settings) -> UserError | None:
    """A failure that is about the thread, not the run: one line, a hint."""
    from ..failures import (  # noqa: PLC0415
        IncompatibleGraph,
        LeaseLost,
        SnapshotNotFound,
        ThreadBusy,
    )

    flag = _store_flag(settings)
    unresolved = _unresolved(failure)
    if unresolved is not None:
        return unresolved
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


def _store_flag(settings: Settings) -> str:
    from ._stores import resolve  # noqa: PLC0415

    if settings.store == resolve(None):
        return ""
    return f" --store {describe(settings.store)}"


# -- reading threads --------------------------------------------------------


async def _thread_target(
    settings: Settings, store: CheckpointStore, thread_id: str, ref: str | None
) -> Target:
    """The graph or swarm that runs *thread_id* (``--target`` or noted)."""
    if is_companion(thread_id) or await store.head(thread_id) is None:
        raise UserError(
            f"no thread {thread_id!r} in {describe(settings.store)}",
            hint=f"`pipeline threads{_store_flag(settings)}` lists them",
            code=ExitCode.NOT_FOUND,
        )
    ref = ref or await noted_target(store, thread_id)
    if ref is None:
        raise UserError(
            f"thread {thread_id!r} was not started by `pipeline run`",
            hint="say what runs it: --target MODULE:OBJECT",
        )
    target = load(ref, traceback=settings.traceback)
    if target.kind == "handler":
        raise UserError(
            f"{ref} is a handler; threads belong to graphs and swarms",
            hint="--target names the graph or swarm that ran the thread",
        )
    return target


def _found(
    loaded: Result[Any, Any], thread_id: str, settings: Settings
) -> Any:
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
            hint=f"`pipeline history {thread_id}{_store_flag(settings)}` "
            "lists its versions",
            code=ExitCode.NOT_FOUND,
        )
    unresolved = _unresolved(failure)
    if unresolved is not None:
        raise unresolved
    raise UserError(
        f"cannot read thread {thread_id!r}: {failure}",
        hint="was it written by another version of this graph? "
        "--target names the one that wrote it",
        code=ExitCode.FAILED,
    )


def _unresolved(failure: object) -> UserError | None:
    """A checkpoint or state holding a secret reference no resolver in force
    knows: the command needs ``--resolver`` (a usage mistake, not a bug)."""
    from ..failures import CheckpointDecodeError, InvalidState  # noqa: PLC0415

    if not isinstance(failure, CheckpointDecodeError | InvalidState):
        return None
    text = str(failure)  # names references, never values
    if UNRESOLVED not in text:
        return None
    return UserError(f"a secret is missing: {text}", hint=RESOLVER_HINT)


async def threads(settings: Settings) -> ExitCode:
    """``pipeline threads``."""
    async with open_store(settings.store) as store:
        rows = []
        for tid in await store.threads():
            if is_companion(tid):
                continue
            head = await store.head(tid)
            rows.append((tid, head, await noted_target(store, tid)))
    if settings.json:
        for tid, head, ref in rows:
            out.emit_json({"thread": tid, "head": head, "target": ref})
    else:
        out.table("threads", ("thread", "head", "target"), rows)
    return ExitCode.OK


async def history(
    settings: Settings, thread_id: str, ref: str | None
) -> ExitCode:
    """``pipeline history``."""
    async with open_store(settings.store) as store:
        target = await _thread_target(settings, store, thread_id, ref)
        snaps = _found(
            await target.obj.history(store, thread_id), thread_id, settings
        )
    rows = out.history_rows(snaps)
    if settings.json:
        for row in rows:
            out.emit_json(row)
        return ExitCode.OK
    out.table(
        f"thread {thread_id}",
        out.HISTORY_COLUMNS,
        [out.history_cells(r) for r in rows],
    )
    return ExitCode.OK


async def show(
    settings: Settings, thread_id: str, version: int | None, ref: str | None
) -> ExitCode:
    """``pipeline show``."""
    async with open_store(settings.store) as store:
        target = await _thread_target(settings, store, thread_id, ref)
        snap = _found(
            await target.obj.load(store, thread_id, version=version),
            thread_id,
            settings,
        )
    out.emit_json(out.snapshot_doc(target, snap), pretty=not settings.json)
    return ExitCode.OK


async def fork(
    settings: Settings,
    thread_id: str,
    version: int | None,
    new_id: str | None,
    ref: str | None,
) -> ExitCode:
    """``pipeline fork``."""
    async with open_store(settings.store) as store:
        target = await _thread_target(settings, store, thread_id, ref)
        new_id = new_id or uuid.uuid4().hex[:16]
        if is_companion(new_id) or await store.head(new_id) is not None:
            raise UserError(
                f"thread {new_id!r} already exists", hint="pick another --to"
            )
        snap = _found(
            await target.obj.fork(
                store, thread_id, version=version, new_thread_id=new_id
            ),
            thread_id,
            settings,
        )
        await note_target(store, snap.thread_id, target.ref)
    print(snap.thread_id)
    return ExitCode.OK


async def delete(settings: Settings, thread_id: str) -> ExitCode:
    """``pipeline delete``."""
    async with open_store(settings.store) as store:
        if is_companion(thread_id) or await store.head(thread_id) is None:
            raise UserError(
                f"no thread {thread_id!r} in {describe(settings.store)}",
                hint=f"`pipeline threads{_store_flag(settings)}` lists them",
                code=ExitCode.NOT_FOUND,
            )
        await forget(store, thread_id)
    out.say(f"deleted thread {thread_id}")
    return ExitCode.OK


# -- drawing ----------------------------------------------------------------


def draw(
    ref: str, fmt: str, output: str | None, *, traceback: bool
) -> ExitCode:
    """``pipeline draw``."""
    target = load(ref, traceback=traceback)
    if target.kind == "handler":
        raise UserError(
            f"{ref} is a handler; draw takes a graph or a swarm",
            hint="handlers print their structure with repr()",
        )
    text: str = target.obj.mermaid()
    if fmt == "mermaid":
        if output is None:
            sys.stdout.write(text if text.endswith("\n") else text + "\n")
        else:
            _write(Path(output), text)
        return ExitCode.OK
    renderer = shutil.which("mmdc")
    if renderer is None:
        raise UserError(
            f"--format {fmt} needs the Mermaid CLI (mmdc), which is not "
            "installed",
            hint="npm install -g @mermaid-js/mermaid-cli; or use "
            "--format mermaid and render the text elsewhere",
            code=ExitCode.UNAVAILABLE,
        )
    dest = Path(output or f"{ref.rpartition(':')[2]}.{fmt}")
    if not dest.parent.is_dir():
        raise _no_directory(dest)
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "graph.mmd"
        source.write_text(text, encoding="utf-8")
        done = subprocess.run(  # noqa: S603  # a fixed program, our arguments
            [renderer, "--input", str(source), "--output", str(dest)],
            capture_output=True,
            check=False,
        )
    if done.returncode != 0:
        raise UserError(
            f"mmdc failed (exit {done.returncode})",
            hint="run mmdc by hand on the output of --format mermaid",
            code=ExitCode.UNAVAILABLE,
        )
    out.say(f"wrote {dest}")
    return ExitCode.OK
