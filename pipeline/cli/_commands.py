"""What each command does, once its arguments are parsed (async)."""

from __future__ import annotations

import json
import sys
import uuid

from pathlib import Path
from typing import TYPE_CHECKING, Any

from returns.result import Result, Success

from .._decode import DECODE_ERRORS, explain
from .._render import render
from ..errors import RendererUnavailable
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
    Target,
    as_context,
    load,
    load_object,
    read_json,
    structure_input,
)
from ._threads import (
    Settings,
    checked_answer,
    failure_error,
    found,
    parse_answer,
    refused_answer,
    store_flag,
)


if TYPE_CHECKING:
    from ..stores import CheckpointStore


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
                f"{store_flag(settings)}`, or pick another --thread",
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
    question: str | None = None,
    author: str = "",
) -> ExitCode:
    """``pipeline resume`` and ``pipeline answer`` (for the question whose
    id is *question*, if given; by *author*)."""
    from ..fold import checked_author  # noqa: PLC0415

    try:
        author = checked_author(author)
    except (TypeError, ValueError) as exc:  # never shows the author
        raise UserError(
            str(exc), hint="an author is at most 256 characters, without NUL"
        ) from None
    async with open_store(settings.store) as store:
        target = await _thread_target(settings, store, thread_id, ref)
        answer: object = None
        if answer_text is not None:
            answer, question = await checked_answer(
                settings, store, target, thread_id, answer_text, question
            )
        obj = target.obj

        async def work() -> Result[Any, Any]:
            if answer_text is None:
                return await obj.resume(  # type: ignore[no-any-return]
                    store, thread_id, version=version
                )
            return await obj.resume(  # type: ignore[no-any-return]
                store,
                thread_id,
                version=version,
                answer=answer,
                question=question,
                author=author,
            )

        from ..errors import InvalidAnswer  # noqa: PLC0415

        try:
            result = await _watch(settings, target, work)
        except InvalidAnswer as exc:
            if answer_text is None:  # an answer stored before: code's to fix
                raise
            raise refused_answer(exc, thread_id, settings) from None
        return await _finish(settings, target, (store, thread_id), result)


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
    return await execute(work, report, name=target.ref)


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
    store_hint = store_flag(settings)
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
        refused = failure_error(failure, settings)
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
            shown: dict[str, Any] = {"question": question}
            if len(snap.questions) > 1:
                shown["questions"] = out.questions_doc(snap)
            lines.write("result", {"status": "interrupted", **where, **shown})
        if len(snap.questions) > 1:  # several branches or items wait
            for qid, p in snap.questions.items():
                out.say(f"paused: {p.question} (question {qid})")
            out.say(
                f"hint: answer each with `pipeline answer {snap.thread_id} "
                f"ANSWER --question ID{store_hint}`"
            )
            return ExitCode.PAUSED
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
        if tid is not None and snap.parent is not None:
            out.say(
                f"hint: thread {tid} stays stopped (version {snap.version});"
                f" to go on, fork it: `pipeline fork {tid} --version "
                f"{snap.parent}{store_hint}` (a question it declined: "
                f"`pipeline fork {tid} --version V --answer ANSWER"
                f"{store_hint}`, V its version in `pipeline history {tid}`)"
            )
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


# -- reading threads --------------------------------------------------------


async def _thread_target(
    settings: Settings, store: CheckpointStore, thread_id: str, ref: str | None
) -> Target:
    """The graph or swarm that runs *thread_id* (``--target`` or noted)."""
    if is_companion(thread_id) or await store.head(thread_id) is None:
        raise UserError(
            f"no thread {thread_id!r} in {describe(settings.store)}",
            hint=f"`pipeline threads{store_flag(settings)}` lists them",
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


async def threads(settings: Settings) -> ExitCode:
    """``pipeline threads``."""
    async with open_store(settings.store) as store:
        rows = []
        for tid in await store.threads():
            if is_companion(tid):
                continue
            head = await store.head(tid)
            status = await _head_status(store, tid)
            rows.append((tid, head, status, await noted_target(store, tid)))
    if settings.json:
        for tid, head, status, ref in rows:
            out.emit_json(
                {"thread": tid, "head": head, "status": status, "target": ref}
            )
    else:
        out.table("threads", ("thread", "head", "status", "target"), rows)
    return ExitCode.OK


async def _head_status(store: CheckpointStore, thread_id: str) -> str:
    """Where a thread stands (``running``, ``interrupted``, ``stopped``,
    ``done``), read from its head record without its code (a torn head
    record counts as its parent, as a load does); ``unreadable`` if that
    record does not parse."""
    from ..stores import record_checksum  # noqa: PLC0415

    rows = {r.version: r for r in await store.records(thread_id)}
    if not rows:
        return "unreadable"
    row = rows[max(rows)]
    intact = record_checksum(row.thread_id, row.version, row.parent, row.data)
    if intact != row.checksum and row.parent in rows:
        row = rows[row.parent]
    try:
        doc = json.loads(row.data)
    except ValueError:
        return "unreadable"
    status = doc.get("status", "running") if isinstance(doc, dict) else None
    if not isinstance(status, str):
        return "unreadable"
    pending = doc.get("pending") if status == "interrupted" else None
    waiting = pending.get("waiting") if isinstance(pending, dict) else None
    if isinstance(waiting, list) and waiting:
        # Several fan-out branches or map_reduce items wait at once.
        return f"{status} ({len(waiting) + 1} questions)"
    return status


async def history(
    settings: Settings, thread_id: str, ref: str | None
) -> ExitCode:
    """``pipeline history``."""
    async with open_store(settings.store) as store:
        target = await _thread_target(settings, store, thread_id, ref)
        snaps = found(
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
        snap = found(
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
    answer_text: str | None = None,
    *,
    author: str = "",
) -> ExitCode:
    """``pipeline fork`` (and, with *answer_text*, answer the question the
    fork waits at, by *author*: how a stopped thread's question is answered
    again).  A malformed answer or author is refused before anything is
    forked."""
    if answer_text is not None:
        from ..fold import checked_author  # noqa: PLC0415

        parse_answer(answer_text)  # a usage error, before the fork
        try:
            author = checked_author(author)
        except (TypeError, ValueError) as exc:  # never shows the author
            raise UserError(
                str(exc),
                hint="an author is at most 256 characters, without NUL",
            ) from None
    async with open_store(settings.store) as store:
        target = await _thread_target(settings, store, thread_id, ref)
        new_id = new_id or uuid.uuid4().hex[:16]
        if is_companion(new_id) or await store.head(new_id) is not None:
            raise UserError(
                f"thread {new_id!r} already exists", hint="pick another --to"
            )
        if answer_text is not None:
            source = found(
                await target.obj.load(store, thread_id, version=version),
                thread_id,
                settings,
            )
            if len(source.questions) > 1:
                raise UserError(
                    f"thread {thread_id!r} waits at {len(source.questions)} "
                    "questions: --answer would not say which one; nothing "
                    "was forked",
                    hint="fork without --answer, then `pipeline answer NEW "
                    "ANSWER --question ID` (`pipeline show NEW` lists the "
                    "ids)",
                )
            if source.question_id is None:
                at = "" if version is None else f" at version {version}"
                raise UserError(
                    f"thread {thread_id!r}{at} waits for no answer "
                    f"(it is {source.status}); nothing was forked",
                    hint=f"`pipeline history {thread_id}"
                    f"{store_flag(settings)}` lists the questions and "
                    "their versions (--version V)",
                )
        snap = found(
            await target.obj.fork(
                store, thread_id, version=version, new_thread_id=new_id
            ),
            thread_id,
            settings,
        )
        await note_target(store, snap.thread_id, target.ref)
    if answer_text is not None:
        if not settings.json:
            out.say(f"thread {snap.thread_id}")
        return await resume(
            settings,
            snap.thread_id,
            version=None,
            ref=target.ref,
            answer_text=answer_text,
            question=snap.question_id,
            author=author,
        )
    if settings.json:
        out.emit_json({"thread": snap.thread_id})
    else:
        print(snap.thread_id)
    return ExitCode.OK


async def edit(
    settings: Settings,
    thread_id: str,
    *,
    state_text: str | None,
    patch_text: str | None,
    author: str,
    reason: str,
    ref: str | None,
) -> ExitCode:
    """``pipeline edit``: a paused or stopped thread's state, replaced
    (``--state``) or patched (``--patch``, a JSON merge patch)."""
    if (state_text is None) == (patch_text is None):
        raise UserError(
            "edit takes --state or --patch (one of them)",
            hint='--patch \'{"field": "value"}\' changes one field',
        )
    async with open_store(settings.store) as store:
        target = await _thread_target(settings, store, thread_id, ref)
        codec = target.obj.codec
        state: object = None
        patch: dict[str, object] | None = None
        if state_text is not None:
            value = read_json(state_text, "--state")
            try:
                state = codec.converter.structure(value, codec.state_type)
            except Exception as exc:  # noqa: BLE001  # cattrs raises many kinds
                where = (
                    "; ".join(explain(exc, codec.state_type))
                    if isinstance(exc, DECODE_ERRORS)
                    else type(exc).__name__
                )
                raise UserError(
                    f"--state does not fit the thread's state type ({where})",
                    hint=f"`pipeline show {thread_id}` prints the state as "
                    "it is; --patch changes only what it names",
                ) from None
        else:
            value = read_json(patch_text or "", "--patch")
            if not isinstance(value, dict):
                raise UserError(
                    "--patch is a JSON object (a JSON merge patch)",
                    hint='for example: --patch \'{"field": "value"}\'',
                )
            patch = value
        out_ = await target.obj.update_state(
            store,
            thread_id,
            state,
            patch=patch,
            author=author,
            reason=reason,
        )
        if type(out_) is not Success:
            failure = out_.failure()
            refused = failure_error(failure, settings)
            raise refused or UserError(
                str(failure),
                hint=f"`pipeline show {thread_id}"
                f"{store_flag(settings)}` shows where it stands",
            )
        snap = out_.unwrap()
        if settings.json:  # its history row, time and all, as read back
            snaps = found(
                await target.obj.history(store, thread_id), thread_id, settings
            )
            rows = out.history_rows(snaps)
            out.emit_json(
                next(r for r in rows if r["version"] == snap.version)
            )
            return ExitCode.OK
    out.say(
        f"thread {thread_id}: version {snap.version} edited by "
        f"{author} ({snap.status})"
    )
    return ExitCode.OK


async def delete(settings: Settings, thread_id: str) -> ExitCode:
    """``pipeline delete``."""
    async with open_store(settings.store) as store:
        if is_companion(thread_id) or await store.head(thread_id) is None:
            raise UserError(
                f"no thread {thread_id!r} in {describe(settings.store)}",
                hint=f"`pipeline threads{store_flag(settings)}` lists them",
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
    if fmt == "mermaid":
        text: str = target.obj.mermaid()
        if output is None:
            sys.stdout.write(text if text.endswith("\n") else text + "\n")
        else:
            _write(Path(output), text)
        return ExitCode.OK
    source: str = target.obj.dot()
    if fmt == "dot":
        if output is None:
            sys.stdout.write(source)
        else:
            _write(Path(output), source)
        return ExitCode.OK
    dest = Path(output or f"{ref.rpartition(':')[2]}.{fmt}")
    if not dest.parent.is_dir():
        raise _no_directory(dest)
    try:
        picture = render(source, "png" if fmt == "png" else "svg")
    except RendererUnavailable as exc:
        raise UserError(
            str(exc),
            hint="or use --format mermaid or --format dot and render the "
            "text elsewhere",
            code=ExitCode.UNAVAILABLE,
        ) from None
    try:
        dest.write_bytes(picture)
    except OSError as exc:
        raise UserError(
            f"-o: cannot write {str(dest)!r} ({type(exc).__name__})",
            hint="pick a file you can write",
        ) from None
    out.say(f"wrote {dest}")
    return ExitCode.OK


def mcp_serve(ref: str, *, backend: str, traceback: bool) -> ExitCode:
    """``pipeline mcp serve``: the agent or graph *ref* on stdio."""
    import anyio  # noqa: PLC0415

    from .._extras import require  # noqa: PLC0415
    from ..errors import MissingExtra  # noqa: PLC0415

    try:  # before the user's code is imported
        require("pipeline mcp serve", "the MCP SDK", "mcp", ("mcp",))
    except MissingExtra as exc:
        raise UserError(str(exc), code=ExitCode.UNAVAILABLE) from None
    obj = load_object(ref, traceback=traceback)
    from ..agents import Agent  # noqa: PLC0415
    from ..graph._graph import Graph  # noqa: PLC0415
    from ..mcp import serve_stdio  # noqa: PLC0415

    if not isinstance(obj, Agent | Graph):
        raise UserError(
            f"{ref} is a {type(obj).__name__}, not an agent or a graph",
            hint="point at an Agent(...) or a value built with "
            "graph.builder()",
        )
    anyio.run(serve_stdio, obj, backend=backend)
    return ExitCode.OK
