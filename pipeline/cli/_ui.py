"""``pipeline ui``: a local web UI over a store (Starlette, served by uvicorn).

Pages are rendered on the server (:mod:`._ui_pages`): no JavaScript, no
build step.  Reading needs nothing; the two writes (answering a question,
forking and resuming) need ``--allow-writes`` and carry a CSRF token.
Bound to any address but loopback, every request needs the token printed
with the URL (as ``?token=``, then a cookie).
"""

from __future__ import annotations

import hmac
import json
import os
import secrets
import uuid

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

import attrs

from . import _ui_pages as p
from ._exits import ExitCode, UserError
from ._output import snapshot_doc
from ._stores import (
    describe,
    is_companion,
    note_target,
    noted_target,
    open_store,
)
from ._target import Target, load
from ._threads import (
    Settings,
    checked_answer,
    failure_error,
    found,
    refused_answer,
)


if TYPE_CHECKING:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response

    from ..stores import CheckpointStore


LOOPBACK: Final = frozenset({"127.0.0.1", "localhost", "::1"})
WILDCARD: Final = frozenset({"0.0.0.0", "::", ""})  # noqa: S104  # names, not binds
"""Addresses served without a token."""

COOKIE: Final = "pipeline_ui_token"
TIMELINE: Final = 200
"""Versions a thread's page lists at once (the newest first shown;
``?from=N`` lists from version N)."""
MAX_THREADS: Final = 500
"""Threads listed on one page (a search narrows them)."""

_HEADERS: Final = {
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'"
    "; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}


@attrs.define
class UI:
    """What the pages share: the store, the settings, the secrets."""

    settings: Settings
    ref: str | None
    writes: bool
    token: str | None
    hosts: frozenset[str] | None = None
    """The ``Host`` names served (None: any): on loopback without a
    token, the loopback names only, so that a web page whose name an
    attacker rebinds to 127.0.0.1 (DNS rebinding) is refused."""
    csrf: str = attrs.field(factory=lambda: secrets.token_urlsafe(32))
    file: tuple[int, int] | None = None
    """The SQLite store's (device, inode) when the UI opened it."""
    store: CheckpointStore | None = None
    targets: dict[str, Target] = attrs.field(factory=dict)
    pictures: dict[tuple[str, str | None], str | None] = attrs.field(
        factory=dict
    )
    """Drawings made, by target and highlighted node."""

    @property
    def where(self) -> str:
        """The store, for the page (passwords masked)."""
        return describe(self.settings.store)

    def opened(self) -> CheckpointStore:
        """The store (open while the UI serves)."""
        if self.store is None:  # the lifespan opens it before any request
            msg = "the web UI's store is not open"
            raise RuntimeError(msg)
        return self.store

    def note_file(self) -> None:
        """Remember which file a SQLite store is, as it is opened."""
        self.file = _identity(self.settings.store)

    def check_file(self) -> None:
        """Refuse to go on if the SQLite file the UI opened was removed
        or replaced since (the open file would take writes no one sees)."""
        if self.file is not None and _identity(self.settings.store) != (
            self.file
        ):
            raise UserError(
                f"the store file {self.where} was removed or replaced "
                "since this UI opened it",
                hint="restart `pipeline ui` to open the file there now",
                code=ExitCode.UNAVAILABLE,
            )

    async def target(self, thread_id: str) -> Target | None:
        """The graph or swarm that runs *thread_id* (noted or --target)."""
        ref = self.ref or await noted_target(self.opened(), thread_id)
        if ref is None:
            return None
        if ref not in self.targets:
            target = load(ref)
            if target.kind == "handler":
                return None
            self.targets[ref] = target
        return self.targets[ref]


def _identity(spec: str) -> tuple[int, int] | None:
    """A SQLite store file's (device, inode); None for a server store
    or a file that is not there."""
    if "://" in spec:
        return None
    try:
        found = os.stat(spec)  # noqa: PTH116  # one stat, as opened
    except OSError:
        return None
    return (found.st_dev, found.st_ino)


def _hostname(header: str) -> str:
    """The name in a ``Host`` header, without its port."""
    if header.startswith("["):  # [::1]:8000
        return header[1:].partition("]")[0]
    return header.rpartition(":")[0] if ":" in header else header


def app(
    store: str,
    *,
    ref: str | None = None,
    writes: bool = False,
    token: str | None = None,
    opened: CheckpointStore | None = None,
    hosts: frozenset[str] | None = None,
) -> Starlette:
    """The web UI's ASGI application over the store *store* names (opened
    at start-up, unless *opened* is that store, already open), answering
    only requests whose ``Host`` is in *hosts* (None: any)."""
    from starlette.applications import Starlette  # noqa: PLC0415
    from starlette.routing import Route  # noqa: PLC0415

    ui = UI(Settings(store), ref, writes, token, hosts, store=opened)
    ui.note_file()

    @asynccontextmanager
    async def lifespan(_: object) -> AsyncIterator[None]:
        if opened is not None:  # the caller's, open while it serves
            yield
            return
        async with open_store(store) as mine:
            ui.store = mine
            yield
            ui.store = None

    def route(
        path: str,
        body: Callable[[UI, Request], Awaitable[str]],
        methods: tuple[str, ...] = ("GET",),
    ) -> Route:
        async def endpoint(request: Request) -> Response:
            return await _respond(ui, request, body)

        return Route(path, endpoint, methods=list(methods))

    return Starlette(
        routes=[
            route("/", threads_page),
            route("/thread", thread_page),
            route("/state", state_page),
            route("/diff", diff_page),
            route("/answer", answer_post, ("POST",)),
            route("/fork", fork_post, ("POST",)),
        ],
        lifespan=lifespan,
    )


async def _respond(
    ui: UI, request: Request, body: Callable[[UI, Request], Awaitable[str]]
) -> Response:
    """Check the token (and for writes the CSRF token), then render."""
    from starlette.responses import HTMLResponse  # noqa: PLC0415

    if ui.hosts is not None and (
        _hostname(request.headers.get("host", "")).lower() not in ui.hosts
    ):
        return HTMLResponse(
            _page(
                "wrong address",
                p.error(
                    "this UI answers only at the address it printed",
                    "open the URL `pipeline ui` printed (a page that "
                    "reaches it by another name is refused)",
                ),
                ui,
            ),
            status_code=421,
            headers=_HEADERS,
        )
    if ui.token is not None:
        given = request.query_params.get("token") or request.cookies.get(
            COOKIE, ""
        )
        if not hmac.compare_digest(given.encode(), ui.token.encode()):
            return HTMLResponse(
                _page(
                    "token needed",
                    p.error(
                        "this UI needs the token printed with its URL",
                        "open the URL `pipeline ui` printed, token included",
                    ),
                    ui,
                ),
                status_code=403,
                headers=_HEADERS,
            )
    status = 200
    try:
        ui.check_file()
        if request.method == "POST":
            await _check_post(ui, request)
        text = await body(ui, request)
    except UserError as exc:
        status = _STATUS.get(exc.code, 400)
        text = _page("refused", p.error(exc.message, _web_hint(exc.hint)), ui)
    if isinstance(text, _Redirect):
        from starlette.responses import RedirectResponse  # noqa: PLC0415

        response: Response = RedirectResponse(
            str(text), status_code=303, headers=_HEADERS
        )
    else:
        response = HTMLResponse(text, status_code=status, headers=_HEADERS)
    if ui.token is not None and "token" in request.query_params:
        response.set_cookie(COOKIE, ui.token, httponly=True, samesite="strict")
    return response


def _web_hint(hint: str) -> str:
    """A hint the CLI gives (a command to type, a flag to pass), said to be
    one for a terminal when shown on a page."""
    if "`pipeline " in hint or " --" in hint or hint.startswith("--"):
        return f"in a terminal: {hint}"
    return hint


_STATUS: Final = {
    ExitCode.NOT_FOUND: 404,
    ExitCode.UNAVAILABLE: 503,
    ExitCode.FAILED: 409,
    ExitCode.USAGE: 400,
}


class _Redirect(str):
    """A page's answer that is a redirect to this URL."""

    __slots__ = ()


async def _check_post(ui: UI, request: Request) -> None:
    if not ui.writes:
        raise UserError(
            "this UI is read-only",
            hint="start it with `pipeline ui --allow-writes` to answer "
            "questions and fork threads",
        )
    form = await _form(request)
    given = form.get("csrf")
    if not isinstance(given, str) or not hmac.compare_digest(
        given.encode(), ui.csrf.encode()
    ):
        raise UserError(
            "the form is stale or came from another site (CSRF token)",
            hint="reload the page and submit the form again",
        )
    origin = request.headers.get("origin")
    if origin is not None and origin.partition("://")[
        2
    ] != request.headers.get("host"):
        raise UserError(
            "the form came from another site (Origin)",
            hint="submit it from the page this UI served",
        )


def _page(title: str, body: str, ui: UI) -> str:
    return p.page(title, body, store=ui.where, writes=ui.writes)


# -- reading ------------------------------------------------------------------


async def threads_page(ui: UI, request: Request) -> str:
    """Every thread, its status and its last version; ``?q=`` searches."""
    query = request.query_params.get("q", "")
    store = ui.opened()
    ids = [
        t
        for t in await store.threads()
        if not is_companion(t) and query.lower() in t.lower()
    ]
    rows = []
    for tid in sorted(ids)[:MAX_THREADS]:
        head = await store.head(tid)
        status, node, changed = await _status(ui, tid)
        rows.append(
            (
                f"<a href='{p.href('/thread', id=tid)}'>{p.esc(tid)}</a>",
                p.esc(status),
                p.esc(node),
                p.esc(head),
                p.esc(changed),
            )
        )
    more = (
        f"<p>{len(ids) - MAX_THREADS} more: search to narrow</p>"
        if len(ids) > MAX_THREADS
        else ""
    )
    search = (
        "<form method=get action='/'><label>search threads "
        f"<input name=q value='{p.esc(query)}'></label>"
        "<button>search</button></form>"
    )
    body = search + p.table(
        ("thread", "status", "node", "last version", "last change (UTC)"),
        rows,
    )
    return _page("threads", body + more, ui)


async def _status(ui: UI, thread_id: str) -> tuple[str, str, str]:
    """A thread's status, node and last change, read from its records'
    envelopes (no code imported, no state decoded: the list stays quick)."""
    import orjson  # noqa: PLC0415

    rows = await ui.opened().records(thread_id)
    if not rows:
        return "gone", "", ""
    by_version = {r.version: r for r in rows}
    try:
        doc = orjson.loads(rows[-1].data)
        status = str(doc.get("status", "running"))
        node = doc.get("node")
        parent = by_version.get(rows[-1].parent)  # type: ignore[arg-type]
        if "node" not in doc and parent is not None:
            node = "+".join(orjson.loads(parent.data).get("next", []))
        changed = _stamp(doc.get("at"))
    except (orjson.JSONDecodeError, AttributeError, TypeError):
        return "unreadable", "", ""
    return status, node if isinstance(node, str) else "", changed


def _stamp(at: object) -> str:
    """A record's commit time (its envelope's ``at``, UTC milliseconds, in
    stores that keep one) for people; empty when unknown."""
    if not isinstance(at, int) or isinstance(at, bool):
        return ""
    try:
        return _clock(datetime.fromtimestamp(at / 1000, UTC))
    except (OverflowError, ValueError, OSError):
        return ""


def _clock(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def _committed(snap: Any) -> str:
    """When *snap* was committed, where the snapshot says (records that
    carry their time); empty otherwise."""
    at = getattr(snap, "committed_at", None)
    return _clock(at) if isinstance(at, datetime) else ""


def _origin(snap: Any) -> tuple[str, int] | None:
    """The thread and version *snap*'s thread was forked from, where the
    snapshot says (records that carry their origin)."""
    origin = getattr(snap, "origin", None)
    if (
        isinstance(origin, tuple)
        and len(origin) == 2  # thread, version
        and isinstance(origin[0], str)
        and isinstance(origin[1], int)
    ):
        return origin[0], origin[1]
    return None


def _lineage(origin: tuple[str, int]) -> str:
    """A link to where a forked thread came from."""
    thread, version = origin
    return (
        f"fork of <a href='{p.href('/thread', id=thread)}'>{p.esc(thread)}</a>"
        f" at <a href='{p.href('/state', id=thread, v=version)}'>"
        f"version {version}</a>"
    )


def _thread_id(request: Request, name: str = "id") -> str:
    from ..errors import InvalidThreadId  # noqa: PLC0415
    from ..stores import check_thread_id  # noqa: PLC0415

    value = request.query_params.get(name)
    try:
        return check_thread_id(value, name)
    except InvalidThreadId as exc:
        raise UserError(str(exc), hint="pick a thread from the list") from None


_DIGITS: Final = frozenset("0123456789")


def _version(raw: object, name: str) -> int:
    text = raw.strip() if isinstance(raw, str) else ""
    # ASCII digits only: str.isdigit() also takes "²", which int() refuses.
    if not text or not _DIGITS.issuperset(text) or len(text) > 18:
        raise UserError(
            f"{name} must be a version number (0, 1, 2, ...; at most 18 "
            "digits)",
            hint="the thread's page lists its versions",
        )
    return int(text)


async def _needed(ui: UI, thread_id: str) -> Target:
    store = ui.opened()
    if is_companion(thread_id) or await store.head(thread_id) is None:
        raise UserError(
            f"no thread {thread_id!r} in this store",
            hint="the list of threads shows what there is",
            code=ExitCode.NOT_FOUND,
        )
    target = await ui.target(thread_id)
    if target is None:
        raise UserError(
            f"thread {thread_id!r} was not started by `pipeline run`",
            hint="start the UI with --target MODULE:OBJECT to read it",
        )
    return target


async def thread_page(ui: UI, request: Request) -> str:
    """One thread's timeline, drawing, question, diff and fork forms."""
    tid = _thread_id(request)
    target = await _needed(ui, tid)
    # The stored head first: records only grow, so a history that ends
    # below it skipped a torn last record (never a new one).
    stored = await ui.opened().head(tid)
    snaps = found(await target.obj.history(ui.opened(), tid), tid, ui.settings)
    head = snaps[-1]
    start = max(0, len(snaps) - TIMELINE)
    if "from" in request.query_params:
        start = min(_version(request.query_params["from"], "from"), start)
    shown = snaps[start : start + TIMELINE]
    rows = []
    for snap in shown:
        origin = _origin(snap) if snap.version == 0 else None
        pending = snap.pending
        rows.append(
            (
                (
                    f"<a href='{p.href('/state', id=tid, v=snap.version)}'>"
                    f"{snap.version}</a>"
                ),
                _lineage(origin) if origin else p.esc(snap.parent),
                p.esc(_committed(snap)),
                p.esc(getattr(snap, "author", "")),
                p.esc(snap.step),
                p.esc(snap.status),
                p.esc(snap.node),
                p.esc(", ".join(snap.next)),
                p.esc(
                    pending.question
                    if pending is not None and not pending.answered
                    else ""
                ),
            )
        )
    origin = _origin(head)
    parts = [
        (
            f"<p>target {p.esc(target.ref)} · status "
            f"<b>{p.esc(head.status)}</b> · {len(snaps)} versions, head "
            f"{head.version} · <a href='{p.href('/thread', id=tid)}'>"
            "reload</a></p>"
        ),
        f"<p class=lineage>{_lineage(origin)}</p>" if origin else "",
        _torn(stored, head.version),
        "<h2>drawing</h2>",
        p.drawing(
            target.obj, head.node, await _picture(ui, target, head.node)
        ),
    ]
    if head.pending is not None and not head.pending.answered:
        parts.append(_question_form(ui, tid, head))
    parts.append(_diff_form(tid, head.version))
    if ui.writes:
        parts.append(_fork_form(ui, tid, head.version))
    parts.append("<h2>timeline</h2>")
    parts.append(_pager(tid, start, len(shown), len(snaps)))
    parts.append(
        p.table(
            (
                "version",
                "parent",
                "committed (UTC)",
                "author",
                "step",
                "status",
                "node",
                "next",
                "question",
            ),
            rows,
            marked=len(rows) - 1 if shown[-1] is head else None,
        )
    )
    return _page(f"thread {tid}", "".join(parts), ui)


def _torn(stored: int | None, shown: int) -> str:
    """A warning when the stored head is a record that was skipped."""
    if stored is None or stored <= shown:
        return ""
    return p.warning(
        f"the last record (version {stored}) is torn or fails its checksum "
        f"(a write cut short): it is skipped, and the thread goes on from "
        f"version {shown}",
        "`pipeline resume` continues from there; nothing of another branch "
        "is used",
    )


def _pager(tid: str, start: int, shown: int, total: int) -> str:
    """Which versions the timeline lists, and links to the others."""
    links = []
    if start > 0:
        older = max(0, start - TIMELINE)
        links.append(
            f"<a href='{p.href('/thread', id=tid, **{'from': older})}'>older</a>"
        )
    if start + shown < total:
        links.append(f"<a href='{p.href('/thread', id=tid)}'>newest</a>")
        newer = start + TIMELINE
        links.append(
            f"<a href='{p.href('/thread', id=tid, **{'from': newer})}'>newer</a>"
        )
    where = f"versions {start} to {start + shown - 1} of {total}"  # 0, 1, ...
    return f"<p class=pager>{' · '.join([where, *links])}</p>"


async def _picture(ui: UI, target: Target, node: str | None) -> str | None:
    """*target* drawn as SVG with *node* marked (made once, in a worker
    thread: Graphviz runs as a process), or ``None`` without Graphviz."""
    key = (target.ref, node)
    if key not in ui.pictures:
        import anyio.to_thread  # noqa: PLC0415

        ui.pictures[key] = await anyio.to_thread.run_sync(
            _draw, target.obj, node
        )
    return ui.pictures[key]


def _draw(obj: Any, node: str | None) -> str | None:
    from ..errors import RendererUnavailable  # noqa: PLC0415

    try:
        try:
            return str(obj.draw(highlight=node))
        except ValueError:  # not one node: fan-out branches, or the end
            return str(obj.draw())
    except RendererUnavailable:
        return None


def _question_form(ui: UI, tid: str, head: Any) -> str:
    if len(head.questions) > 1:
        return _question_forms(ui, tid, head)
    text = (
        "<h2>waiting for an answer</h2>"
        f"<p class=question>{p.esc(head.pending.question)}</p>"
    )
    if head.pending.payload is not None:  # asked by pipeline.interrupt
        shown = json.dumps(head.pending.payload, indent=2, sort_keys=True)
        text += f"<pre class=payload>{p.esc(shown)}</pre>"
    if not ui.writes:
        return text + "<p>read-only: answer with `pipeline answer`</p>"
    bound = {"csrf": ui.csrf, "id": tid, "seen": head.version}
    if head.question_id is not None:  # the answer is for this question only
        bound["question"] = head.question_id
    return text + (
        "<form method=post action='/answer' id=answer>"
        + p.hidden(bound)
        + _ANSWER_FIELDS
        + "</form>"
    )


_ANSWER_FIELDS: Final = (
    "<label>answer (JSON when it parses as JSON, else text) "
    "<input name=answer required></label> "
    "<label>your name <input name=author maxlength=256 "
    "placeholder=optional></label><button>answer</button>"
)


def _question_forms(ui: UI, tid: str, head: Any) -> str:
    """Several fan-out branches or map_reduce items wait at once: each
    question with its id, and a form that answers that one."""
    text = "<h2>waiting for answers</h2>"
    for qid, pending in head.questions.items():
        text += (
            f"<p class=question>{p.esc(pending.question)} "
            f"<small>(question {p.esc(qid)}, {p.esc(pending.scope)})</small></p>"
        )
        if pending.payload is not None:
            shown = json.dumps(pending.payload, indent=2, sort_keys=True)
            text += f"<pre class=payload>{p.esc(shown)}</pre>"
        if ui.writes:
            fields = {"csrf": ui.csrf, "id": tid, "seen": head.version}
            text += (
                "<form method=post action='/answer' class=answer>"
                + p.hidden({**fields, "question": qid})
                + _ANSWER_FIELDS
                + "</form>"
            )
    if not ui.writes:
        text += (
            "<p>read-only: answer with `pipeline answer THREAD ANSWER "
            "--question ID`</p>"
        )
    return text


def _diff_form(tid: str, head: int) -> str:
    return (
        "<form method=get action='/diff' id=diff>"
        + p.hidden({"id": tid})
        + f"<label>diff version <input name=a value=0 size=6></label> "
        f"<label>and <input name=b value={head} size=6></label>"
        "<button>diff</button></form>"
    )


def _fork_form(ui: UI, tid: str, head: int) -> str:
    return (
        "<form method=post action='/fork' id=fork>"
        + p.hidden({"csrf": ui.csrf, "id": tid})
        + f"<label>fork from version <input name=v value={head} size=6>"
        "</label> <label>into thread <input name=to placeholder=random>"
        "</label><button>fork and resume</button></form>"
    )


async def _state_doc(ui: UI, target: Target, tid: str, version: int) -> Any:
    snap = found(
        await target.obj.load(ui.opened(), tid, version=version),
        tid,
        ui.settings,
    )
    return snap, snapshot_doc(target, snap)


def _json(doc: object) -> str:
    return json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False)


async def state_page(ui: UI, request: Request) -> str:
    """The snapshot (state included) at one version."""
    tid = _thread_id(request)
    version = _version(request.query_params.get("v"), "v")
    target = await _needed(ui, tid)
    snap, doc = await _state_doc(ui, target, tid, version)
    body = (
        f"<p><a href='{p.href('/thread', id=tid)}'>back to the thread</a></p>"
        + p.drawing(
            target.obj, snap.node, await _picture(ui, target, snap.node)
        )
        + f"<pre class=state>{p.esc(_json(doc))}</pre>"
    )
    return _page(f"thread {tid} at version {version}", body, ui)


async def diff_page(ui: UI, request: Request) -> str:
    """What changed between two versions of a thread."""
    tid = _thread_id(request)
    a = _version(request.query_params.get("a"), "a")
    b = _version(request.query_params.get("b"), "b")
    target = await _needed(ui, tid)
    _, before = await _state_doc(ui, target, tid, a)
    _, after = await _state_doc(ui, target, tid, b)
    body = (
        f"<p><a href='{p.href('/thread', id=tid)}'>back to the thread</a></p>"
        + p.diff(_json(before), _json(after), a, b)
    )
    return _page(f"thread {tid}: version {a} against {b}", body, ui)


# -- writing ------------------------------------------------------------------


MAX_FORM: Final = 1 << 20
"""The largest form body accepted, in bytes."""


async def _form(request: Request) -> dict[str, str]:
    """The posted form (URL-encoded, UTF-8), parsed once per request."""
    from urllib.parse import parse_qsl  # noqa: PLC0415

    cached = getattr(request.state, "form", None)
    if cached is not None:
        return cached  # type: ignore[no-any-return]
    kind = request.headers.get("content-type", "").partition(";")[0]
    if kind.strip() != "application/x-www-form-urlencoded":
        raise UserError(
            "the form must be sent URL-encoded",
            hint="submit it from the page this UI served",
        )
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM:
            raise UserError(
                f"the form is over {MAX_FORM} bytes",
                hint="answers are for short values",
            )
    try:
        pairs = parse_qsl(
            body.decode(),
            keep_blank_values=True,
            max_num_fields=16,
            errors="strict",
        )
    except (UnicodeDecodeError, ValueError):
        raise UserError(
            "the form is not URL-encoded UTF-8 text",
            hint="submit it from the page this UI served",
        ) from None
    form = dict(pairs)
    request.state.form = form
    return form


async def _form_text(request: Request, name: str) -> str:
    value = (await _form(request)).get(name)
    if not isinstance(value, str):
        raise UserError(f"the form has no {name}", hint="reload the page")
    return value


async def answer_post(ui: UI, request: Request) -> str:
    """Answer the question a thread waits on, and continue it."""
    form = await _form(request)
    tid = _form_id(form.get("id"), "id")
    text = await _form_text(request, "answer")
    seen = _version(form.get("seen"), "seen")
    target = await _needed(ui, tid)
    store = ui.opened()
    head = await store.head(tid)
    if head != seen:
        raise UserError(
            f"thread {tid!r} moved on (version {seen} when the page was "
            f"drawn, {head} now)",
            hint="reload the thread's page and answer again",
            code=ExitCode.FAILED,
        )
    author = _author(form.get("author", ""))
    question = form.get("question") or None  # several may wait: which one
    answer, question = await checked_answer(
        ui.settings, store, target, tid, text, question
    )
    await _resume(
        ui, target, tid, answer=answer, question=question, author=author
    )
    return _Redirect(f"/thread?{_q(id=tid)}")


def _author(value: str) -> str:
    """The answer form's author, checked like ``pipeline answer --author``
    (never shown back: it might be anything)."""
    from ..fold import checked_author  # noqa: PLC0415

    try:
        return checked_author(value)
    except (TypeError, ValueError) as exc:
        raise UserError(
            str(exc), hint="a name is at most 256 characters, without NUL"
        ) from None


async def fork_post(ui: UI, request: Request) -> str:
    """Fork a thread at a version into a new thread, and resume that."""
    form = await _form(request)
    tid = _form_id(form.get("id"), "id")
    version = _version(form.get("v"), "v")
    to = form.get("to") or uuid.uuid4().hex[:16]
    new_id = _form_id(to, "to")
    target = await _needed(ui, tid)
    store = ui.opened()
    if is_companion(new_id) or await store.head(new_id) is not None:
        raise UserError(
            f"thread {new_id!r} already exists", hint="pick another name"
        )
    found(
        await target.obj.fork(
            store, tid, version=version, new_thread_id=new_id
        ),
        tid,
        ui.settings,
    )
    await note_target(store, new_id, target.ref)
    await _resume(ui, target, new_id, answer=None)
    return _Redirect(f"/thread?{_q(id=new_id)}")


def _q(**query: str) -> str:
    from urllib.parse import urlencode  # noqa: PLC0415

    return urlencode(query)


def _form_id(value: object, name: str) -> str:
    from ..errors import InvalidThreadId  # noqa: PLC0415
    from ..stores import check_thread_id  # noqa: PLC0415

    try:
        tid = check_thread_id(value, name)
    except InvalidThreadId as exc:
        raise UserError(str(exc), hint="give a thread name") from None
    if is_companion(tid):
        raise UserError(f"{name} names a thread the CLI keeps for itself")
    return tid


async def _resume(
    ui: UI,
    target: Target,
    tid: str,
    *,
    answer: object,
    question: str | None = None,
    author: str = "",
) -> None:
    """Continue *tid* until it ends or pauses; a refusal is one line."""
    from ..errors import InvalidAnswer  # noqa: PLC0415

    try:
        if answer is None and question is None:  # no answer: run on
            result = await target.obj.resume(ui.opened(), tid)
        else:
            result = await target.obj.resume(
                ui.opened(),
                tid,
                answer=answer,
                question=question,
                author=author,
            )
    except InvalidAnswer as exc:
        raise refused_answer(exc, tid, ui.settings) from None
    failure = result.failure() if not _ok(result) else None
    if failure is not None:
        refused = failure_error(failure, ui.settings)
        if refused is not None:
            raise refused
        # A failed run is the thread's news, shown on its page.


def _ok(result: Any) -> bool:
    from returns.result import Success  # noqa: PLC0415

    return type(result) is Success


# -- serving ------------------------------------------------------------------


def _require() -> None:
    """Import what the UI needs, or a one-line error saying how to get it."""
    import importlib  # noqa: PLC0415

    for name in ("starlette", "uvicorn"):
        try:
            importlib.import_module(name)
        except ImportError:
            msg = (
                f"pipeline ui needs Starlette and uvicorn (missing: {name}): "
                "pip install 'typed-pipeline[ui]'"
            )
            raise UserError(msg, code=ExitCode.UNAVAILABLE) from None


def serve(
    settings: Settings,
    *,
    host: str,
    port: int,
    ref: str | None,
    writes: bool,
    echo: Callable[[str], None],
) -> ExitCode:
    """Run the UI until Ctrl-C, printing its URL (and token) first."""
    _require()
    import uvicorn  # noqa: PLC0415

    # What every thread page needs (the code a graph or swarm is built
    # with), imported before the URL is printed rather than by the first
    # visit: start-up and the first thread page then share the wait
    # (docs/ui.md, "How fast").
    import pipeline.graph  # noqa: PLC0415
    import pipeline.swarm  # noqa: PLC0415, F401

    token = None if host in LOOPBACK else secrets.token_urlsafe(24)
    # Without a token, the names of loopback only (DNS rebinding).
    hosts = (
        frozenset({"127.0.0.1", "localhost", "::1", host.lower()})
        if token is None
        else None
    )
    shown = f"[{host}]" if ":" in host else host

    import asyncio  # noqa: PLC0415
    import socket  # noqa: PLC0415

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        why = (exc.strerror or type(exc).__name__).lower()
        raise UserError(
            f"cannot listen on {host}:{port}: {why}",
            hint="pick another --port (0: any free one) or --host",
            code=ExitCode.UNAVAILABLE,
        ) from None
    sock.listen(128)
    bound = sock.getsockname()[1]

    async def main() -> None:
        async with open_store(settings.store) as opened:
            application = app(
                settings.store,
                ref=ref,
                writes=writes,
                token=token,
                opened=opened,
                hosts=hosts,
            )
            config = uvicorn.Config(
                application, log_level="warning", lifespan="on"
            )
            server = uvicorn.Server(config)
            query = f"/?token={token}" if token else "/"
            if host in WILDCARD:  # no address to visit: name this machine
                echo(
                    f"pipeline ui: http://{socket.gethostname()}:{bound}"
                    f"{query} (listening on every address of this machine)"
                )
            else:
                echo(f"pipeline ui: http://{shown}:{bound}{query}")
            if not writes:
                echo("read-only (--allow-writes to answer and fork)")
            await server.serve(sockets=[sock])

    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        pass
    finally:
        sock.close()
    return ExitCode.OK
