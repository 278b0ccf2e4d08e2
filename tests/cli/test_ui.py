"""``pipeline ui`` over HTTP: the ASGI application with Starlette's test
client on real SQLite files, on both event loops."""

from __future__ import annotations

import re
import secrets
import sys

from collections.abc import Iterator
from pathlib import Path
from typing import Literal

import anyio
import pytest

from starlette.testclient import TestClient

from pipeline.cli import ExitCode, main
from pipeline.cli import _ui as ui_module
from pipeline.cli._stores import note_target
from pipeline.cli._ui import COOKIE, app
from pipeline.stores import SQLiteStore
from tests.cli import flows, guarded


DESK = "tests.cli.flows:desk"
EVIL = "<script>alert('x')</script> & charge"
Backend = Literal["asyncio", "trio"]
BACKENDS: list[Backend] = ["asyncio", "trio"]


async def seed(path: Path, thread: str, text: str = EVIL) -> None:
    """A desk thread paused on its approval question, noted as `run` does."""
    async with SQLiteStore(path) as store:
        snap = flows.desk.start(flows.Ticket(text), thread_id=thread)
        done = await flows.desk.fold(snap, store=store)
        assert done.unwrap().pending is not None
        await note_target(store, thread, DESK)


@pytest.fixture(name="db")
def _db(tmp_path: Path) -> Path:
    path = tmp_path / "threads.sqlite3"
    anyio.run(seed, path, "t1")
    return path


@pytest.fixture(name="client", params=BACKENDS)
def _client(request: pytest.FixtureRequest, db: Path) -> Iterator[TestClient]:
    with TestClient(
        app(str(db), writes=True),
        backend=request.param,
        follow_redirects=False,
    ) as client:
        yield client


def csrf(page: str) -> str:
    found = re.search(r"name='csrf' value='([^']+)'", page)
    assert found is not None, "no CSRF token on the page"
    return found.group(1)


def test_threads_status_and_search(client: TestClient) -> None:
    page = client.get("/")
    assert page.status_code == 200
    assert "href='/thread?id=t1'" in page.text
    assert "interrupted" in page.text
    assert (
        "t1"
        not in client.get("/", params={"q": "nothing"}).text.split("<h1>")[1]
    )
    assert "'/thread?id=t1'" in client.get("/", params={"q": "T1"}).text


def test_attacker_text_is_escaped_everywhere(client: TestClient) -> None:
    for path, query in [
        ("/state", {"id": "t1", "v": "0"}),
        ("/diff", {"id": "t1", "a": "0", "b": "3"}),
        ("/", {"q": EVIL}),
        ("/thread", {"id": EVIL}),
    ]:
        page = client.get(path, params=query)
        assert "<script>" not in page.text, path
    state = client.get("/state", params={"id": "t1", "v": "0"}).text
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in state


def test_security_headers(client: TestClient) -> None:
    headers = client.get("/").headers
    assert "default-src 'none'" in headers["content-security-policy"]
    assert headers["x-content-type-options"] == "nosniff"
    assert headers["referrer-policy"] == "same-origin"


def test_timeline_drawing_and_question(client: TestClient) -> None:
    page = client.get("/thread", params={"id": "t1"}).text
    for version in range(4):
        assert f"'/state?id=t1&amp;v={version}'" in page
    assert "the thread stands at <b class=here>draft</b>" in page
    drawing = page[page.index("<svg") : page.index("</svg>")]
    marked = drawing.split('fill="#ffd54f"', 1)[1].split("</g>", 1)[0]
    assert ">draft</text>" in marked  # the node it stands at, marked
    assert "send this reply?" in page
    assert "id=answer" in page
    assert "id=fork" in page


async def _seed_refund(path: Path) -> None:
    async with SQLiteStore(path) as store:
        snap = guarded.refunds.start(guarded.Refund(40), thread_id="r1")
        done = await guarded.refunds.fold(snap, store=store)
        assert done.unwrap().pending is not None
        await note_target(store, "r1", f"{guarded.GUARDED}:refunds")


def test_a_question_from_a_node_shows_its_payload(
    client: TestClient, db: Path
) -> None:
    """A node's ``interrupt``: the page shows the question and, as JSON,
    what it carries for the human to look at."""
    anyio.run(_seed_refund, db)
    page = client.get("/thread", params={"id": "r1"}).text
    assert "<p class=question>refund this?</p>" in page
    assert "<pre class=payload>{\n  &quot;amount&quot;: 40\n}</pre>" in page
    assert "id=answer" in page


def test_timeline_in_pages(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A long timeline lists its newest versions, with links to the rest."""
    monkeypatch.setattr(ui_module, "TIMELINE", 2)
    newest = client.get("/thread", params={"id": "t1"}).text
    assert (
        "versions 2 to 3 of 4 · <a href='/thread?id=t1&amp;from=0'>older"
        in (newest)
    )
    assert "'/state?id=t1&amp;v=1'" not in newest
    assert "<tr class=here><td><a href='/state?id=t1&amp;v=3'>" in newest
    oldest = client.get("/thread", params={"id": "t1", "from": "0"}).text
    assert "versions 0 to 1 of 4" in oldest
    assert "&amp;from=2'>newer</a>" in oldest
    assert "'/state?id=t1&amp;v=0'" in oldest
    assert "'/state?id=t1&amp;v=3'" not in oldest
    assert "class=here><td>" not in oldest  # the head is on the next page
    past = client.get("/thread", params={"id": "t1", "from": "99"}).text
    assert "versions 2 to 3 of 4" in past


@pytest.mark.parametrize("backend", BACKENDS)
def test_drawing_without_graphviz(
    db: Path, backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No ``dot`` on the PATH: the Mermaid text, escaped, still naming the
    node the thread stands at."""
    monkeypatch.setenv("PATH", str(db.parent))
    with TestClient(app(str(db)), backend=backend) as client:
        page = client.get("/thread", params={"id": "t1"}).text
    assert "<svg" not in page
    assert "<pre class=mermaid-text>flowchart" in page
    assert "the thread stands at <b class=here>draft</b>" in page


@pytest.mark.parametrize(
    ("path", "query", "status", "says"),
    [
        ("/thread", {"id": "nope"}, 404, "no thread"),
        ("/thread", {}, 400, "cannot name a thread"),
        ("/thread", {"id": "x" * 300}, 400, "300 characters"),
        ("/thread", {"id": "pipeline-cli:t1"}, 404, "no thread"),
        ("/thread", {"id": "t1", "from": "x"}, 400, "from must be a version"),
        ("/state", {"id": "t1", "v": "abc"}, 400, "v must be a version"),
        ("/state", {"id": "t1", "v": "-1"}, 400, "v must be a version"),
        ("/state", {"id": "t1", "v": "99"}, 404, "at version 99"),
        ("/state", {"id": "t1"}, 400, "v must be a version"),
        ("/diff", {"id": "t1", "a": "x", "b": "1"}, 400, "a must be"),
        ("/diff", {"id": "t1", "a": "0", "b": ""}, 400, "b must be"),
        ("/diff", {"id": "t1", "a": "0", "b": "7"}, 404, "at version 7"),
        # Digits str.isdigit() takes and int() refuses, and too many digits
        # (refused as typed, never cut short to another number).
        ("/state", {"id": "t1", "v": "\u00b2"}, 400, "v must be"),
        ("/thread", {"id": "t1", "from": "\u00b2"}, 400, "from must be"),
        ("/diff", {"id": "t1", "a": "0", "b": "\u0663"}, 400, "b must be"),
        ("/state", {"id": "t1", "v": "9" * 20}, 400, "v must be"),
    ],
)
def test_bad_input_in_reading(
    client: TestClient,
    path: str,
    query: dict[str, str],
    status: int,
    says: str,
) -> None:
    page = client.get(path, params=query)
    assert page.status_code == status
    assert says in page.text
    assert "role=alert" in page.text


def test_answer_resumes_the_thread(client: TestClient) -> None:
    page = client.get("/thread", params={"id": "t1"}).text
    done = client.post(
        "/answer",
        data={"csrf": csrf(page), "id": "t1", "seen": "3", "answer": "yes"},
    )
    assert done.status_code == 303
    assert done.headers["location"] == "/thread?id=t1"
    after = client.get("/thread", params={"id": "t1"}).text
    assert "status <b>done</b>" in after
    assert "id=answer" not in after


def _answer_form(client: TestClient) -> dict[str, str]:
    page = client.get("/thread", params={"id": "t1"}).text
    question = re.search(r"name='question' value='([^']+)'", page)
    assert question is not None, "the form names no question"
    return {
        "csrf": csrf(page),
        "id": "t1",
        "seen": "3",
        "answer": "yes",
        "question": question.group(1),
    }


def test_an_answer_carries_its_author(client: TestClient) -> None:
    form = _answer_form(client) | {"author": "Ann <ops>"}
    assert client.post("/answer", data=form).status_code == 303
    after = client.get("/thread", params={"id": "t1"}).text
    assert "status <b>done</b>" in after
    assert "Ann &lt;ops&gt;" in after  # in the timeline, escaped


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"author": "a\x00b"}, "author"),
        ({"author": "x" * 300}, "author"),
        ({"question": "1-0000"}, "question"),
    ],
)
def test_a_bad_author_or_question_is_refused(
    client: TestClient, change: dict[str, str], says: str
) -> None:
    page = client.post("/answer", data=_answer_form(client) | change)
    assert page.status_code in {400, 409}, page.text
    assert says in page.text
    assert "xxxxxxxx" not in page.text  # the author is never echoed
    still = client.get("/thread", params={"id": "t1"}).text
    assert "status <b>interrupted</b>" in still


@pytest.mark.parametrize(
    ("change", "status", "says"),
    [
        ({"csrf": "forged"}, 400, "CSRF"),
        ({"csrf": ""}, 400, "CSRF"),
        ({"id": ""}, 400, "cannot name a thread"),
        ({"id": "gone"}, 404, "no thread"),
        ({"id": "pipeline-cli:t1"}, 400, "keeps for itself"),
        ({"seen": "two"}, 400, "seen must be"),
        ({"seen": "\u00b2"}, 400, "seen must be"),
        ({"seen": "2"}, 409, "moved on"),
        ({"answer": "[" * 5000 + "]" * 5000}, 400, "malformed answer"),
        ({"answer": "9" * 5000}, 400, "malformed answer"),
        ({"answer": '"\\ud800"'}, 400, "malformed answer"),
    ],
)
def test_bad_input_in_the_answer_form(
    client: TestClient, change: dict[str, str], status: int, says: str
) -> None:
    form = _answer_form(client) | change
    page = client.post("/answer", data=form)
    assert page.status_code == status, page.text
    assert says in page.text
    assert "[[[[" not in page.text  # the answer is never echoed
    still = client.get("/thread", params={"id": "t1"}).text
    assert "status <b>interrupted</b>" in still


def test_answer_field_missing(client: TestClient) -> None:
    form = _answer_form(client)
    del form["answer"]
    page = client.post("/answer", data=form)
    assert page.status_code == 400
    assert "the form has no answer" in page.text


def test_fork_and_resume(client: TestClient) -> None:
    page = client.get("/thread", params={"id": "t1"}).text
    done = client.post(
        "/fork", data={"csrf": csrf(page), "id": "t1", "v": "1", "to": "f1"}
    )
    assert done.status_code == 303
    assert done.headers["location"] == "/thread?id=f1"
    forked = client.get("/thread", params={"id": "f1"}).text
    assert "send this reply?" in forked  # ran on until the same question
    assert "'/thread?id=f1'" in client.get("/").text


STAMP = re.compile(r"<td>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d</td>")


def test_times_and_fork_lineage(client: TestClient) -> None:
    """The list shows each thread's last change; a timeline, each
    version's time; a fork, where it came from (linked)."""
    listed = client.get("/").text
    assert "<th>last change (UTC)</th>" in listed
    assert STAMP.search(listed)
    page = client.get("/thread", params={"id": "t1"}).text
    assert len(STAMP.findall(page)) == 4  # one per version
    assert "fork of" not in page
    client.post(
        "/fork", data={"csrf": csrf(page), "id": "t1", "v": "2", "to": "f2"}
    )
    forked = client.get("/thread", params={"id": "f2"}).text
    lineage = (
        "fork of <a href='/thread?id=t1'>t1</a> at "
        "<a href='/state?id=t1&amp;v=2'>version 2</a>"
    )
    assert f"<p class=lineage>{lineage}</p>" in forked  # above the page
    assert f"<td>{lineage}</td>" in forked  # and as version 0's parent


@pytest.mark.parametrize(
    ("change", "status", "says"),
    [
        ({"v": "x"}, 400, "v must be"),
        ({"v": "50"}, 404, "at version 50"),
        ({"to": "t1"}, 400, "already exists"),
        ({"to": "y" * 257}, 400, "257 characters"),
        ({"to": "pipeline-cli:z"}, 400, "keeps for itself"),
        ({"id": "nope"}, 404, "no thread"),
        ({"csrf": "forged"}, 400, "CSRF"),
    ],
)
def test_bad_input_in_the_fork_form(
    client: TestClient, change: dict[str, str], status: int, says: str
) -> None:
    page = client.get("/thread", params={"id": "t1"}).text
    form = {"csrf": csrf(page), "id": "t1", "v": "1", "to": "f2"} | change
    refused = client.post("/fork", data=form)
    assert refused.status_code == status, refused.text
    assert says in refused.text
    assert "'/thread?id=f2'" not in client.get("/").text


def test_foreign_origin_is_refused(client: TestClient) -> None:
    form = _answer_form(client)
    page = client.post(
        "/answer", data=form, headers={"origin": "http://evil.example"}
    )
    assert page.status_code == 400
    assert "another site" in page.text


@pytest.mark.parametrize("backend", BACKENDS)
def test_read_only_by_default(db: Path, backend: Backend) -> None:
    with TestClient(app(str(db)), backend=backend) as client:
        page = client.get("/thread", params={"id": "t1"}).text
        assert "read-only" in page
        assert "method=post" not in page
        refused = client.post(
            "/answer", data={"id": "t1", "seen": "3", "answer": "yes"}
        )
        assert refused.status_code == 400
        assert "read-only" in refused.text
        assert (
            "status <b>interrupted</b>"
            in client.get("/thread", params={"id": "t1"}).text
        )


@pytest.mark.parametrize("backend", BACKENDS)
def test_token_on_every_request(db: Path, backend: Backend) -> None:
    token = secrets.token_urlsafe(16)
    with TestClient(app(str(db), token=token), backend=backend) as client:
        assert client.get("/").status_code == 403
        wrong = client.get("/", params={"token": "guess"})
        assert wrong.status_code == 403
        assert "guess" not in wrong.text
        right = client.get("/", params={"token": token})
        assert right.status_code == 200
        assert client.cookies.get(COOKIE) == token
        assert client.get("/thread", params={"id": "t1"}).status_code == 200
        client.cookies.clear()
        assert client.get("/thread", params={"id": "t1"}).status_code == 403


@pytest.mark.parametrize("backend", BACKENDS)
def test_thread_without_a_noted_target(
    tmp_path: Path, backend: Backend
) -> None:
    path = tmp_path / "bare.sqlite3"

    async def bare() -> None:
        async with SQLiteStore(path) as store:
            snap = flows.desk.start(flows.Ticket("hi"), thread_id="b1")
            await flows.desk.fold(snap, store=store)

    anyio.run(bare)
    with TestClient(app(str(path)), backend=backend) as client:
        assert "interrupted" in client.get("/").text  # read from records
        page = client.get("/thread", params={"id": "b1"})
        assert page.status_code == 400
        assert "--target" in page.text
    with TestClient(app(str(path), ref=DESK), backend=backend) as client:
        assert (
            "send this reply?"
            in client.get("/thread", params={"id": "b1"}).text
        )


def test_a_store_that_changes_while_the_page_is_open(
    client: TestClient, db: Path
) -> None:
    """Another process answers first: the page's form is refused, the
    reload shows the new versions."""
    page = client.get("/thread", params={"id": "t1"}).text

    async def elsewhere() -> None:
        async with SQLiteStore(db) as store:
            done = await flows.desk.resume(store, "t1", answer="yes")
            assert done.unwrap().state.sent

    anyio.run(elsewhere)
    late = client.post(
        "/answer",
        data={"csrf": csrf(page), "id": "t1", "seen": "3", "answer": "no"},
    )
    assert late.status_code == 409
    assert "moved on" in late.text
    now = client.get("/thread", params={"id": "t1"}).text
    assert "status <b>done</b>" in now
    assert "'/state?id=t1&amp;v=5'" in now


@pytest.mark.parametrize("hidden", ["starlette", "uvicorn"])
def test_a_missing_extra_is_one_line(
    db: Path,
    hidden: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Without Starlette or uvicorn: one line naming the extra, exit 6."""
    monkeypatch.setitem(sys.modules, hidden, None)
    code = main(["ui", "--store", str(db), "--port", "0"])
    assert code == ExitCode.UNAVAILABLE
    err = capsys.readouterr().err.strip()
    assert err == (
        "pipeline: error: pipeline ui needs Starlette and uvicorn "
        f"(missing: {hidden}): pip install 'typed-pipeline[ui]'"
    )


def test_a_torn_last_record_is_said_on_the_page(
    client: TestClient, db: Path
) -> None:
    """A last record cut short is skipped (for its parent) and the thread
    page says so; the timeline ends at the parent."""
    import sqlite3  # noqa: PLC0415

    anyio.run(seed, db, "t2")
    with sqlite3.connect(db) as conn:
        conn.execute(
            "UPDATE checkpoints SET data = substr(data, 1, 10) "
            "WHERE thread_id = 't1' AND version = 3"
        )
    conn.close()
    page = client.get("/thread", params={"id": "t1"}).text
    assert "the last record (version 3) is torn" in page
    assert "goes on from version 2" in page
    assert "role=status" in page
    clean = client.get("/thread", params={"id": "t2"})
    assert clean.status_code == 200
    assert "head 3" in clean.text
    assert "is torn" not in clean.text


def test_a_hint_for_the_cli_says_so_on_a_page(client: TestClient) -> None:
    page = client.get("/state", params={"id": "t1", "v": "99"})
    assert page.status_code == 404
    assert "in a terminal: `pipeline history t1" in page.text
    gone = client.get("/thread", params={"id": "gone"})
    assert "the list of threads shows what there is" in gone.text
    assert "in a terminal" not in gone.text  # a hint for the page itself


def test_a_port_in_use_is_named_plainly(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A port another program holds: the reason in words, exit 6."""
    import socket  # noqa: PLC0415

    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen(1)
        port = held.getsockname()[1]
        code = main(["ui", "--store", str(db), "--port", str(port)])
    assert code == ExitCode.UNAVAILABLE
    err = capsys.readouterr().err
    assert f"cannot listen on 127.0.0.1:{port}: address already in use" in err
    assert "OSError" not in err


LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1"})


@pytest.mark.parametrize("backend", BACKENDS)
def test_another_host_name_is_refused(db: Path, backend: Backend) -> None:
    """DNS rebinding: a page at attacker.example whose name now points at
    127.0.0.1 reaches the UI with its own name in ``Host``: refused, reads
    and writes alike, before any store access; the loopback names pass."""
    application = app(str(db), writes=True, hosts=LOOPBACK_NAMES)
    with TestClient(
        application,
        backend=backend,
        base_url="http://127.0.0.1:8765",
        follow_redirects=False,
    ) as client:
        page = client.get("/thread", params={"id": "t1"})
        assert page.status_code == 200
        form = {"csrf": csrf(page.text), "id": "t1", "seen": "3"}
        for host in ("localhost:8765", "[::1]:8765", "127.0.0.1"):
            assert client.get("/", headers={"host": host}).status_code == 200
        evil = {
            "host": "attacker.example:8765",
            "origin": "http://attacker.example:8765",
        }
        for path in ("/", "/thread?id=t1", "/state?id=t1&v=0"):
            refused = client.get(path, headers=evil)
            assert refused.status_code == 421
            assert "csrf" not in refused.text
        posted = client.post(
            "/answer", data=form | {"answer": "yes"}, headers=evil
        )
        assert posted.status_code == 421
        still = client.get("/thread", params={"id": "t1"}).text
        assert "status <b>interrupted</b>" in still


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_store_file_removed_or_replaced_is_refused(
    db: Path, backend: Backend
) -> None:
    """Writes to a file nobody will open again would be lost: once the
    file the UI opened is gone or another, every page says so."""
    with TestClient(
        app(str(db), writes=True), backend=backend, follow_redirects=False
    ) as client:
        page = client.get("/thread", params={"id": "t1"})
        form = {"csrf": csrf(page.text), "id": "t1", "seen": "3"}
        moved = db.with_name("moved.sqlite3")
        db.rename(moved)
        gone = client.get("/")
        assert gone.status_code == 503
        assert "was removed or replaced" in gone.text
        refused = client.post("/answer", data=form | {"answer": "yes"})
        assert refused.status_code == 503
        db.write_bytes(b"")  # another file by the same name
        assert client.get("/").status_code == 503
    db.unlink()
    moved.rename(db)
    with TestClient(app(str(db)), backend=backend) as client:
        still = client.get("/thread", params={"id": "t1"}).text
        assert "status <b>interrupted</b>" in still


async def _seed_optional(path: Path, thread: str) -> None:
    """A thread paused at an ``int | None`` question."""
    async with SQLiteStore(path) as store:
        snap = flows.optional.start(flows.Limit(), thread_id=thread)
        done = await flows.optional.fold(snap, store=store)
        assert done.unwrap().pending is not None
        await note_target(store, thread, "tests.cli.flows:optional")


@pytest.mark.parametrize("backend", BACKENDS)
def test_null_in_the_answer_form_answers_none(
    db: Path, backend: Backend
) -> None:
    """``null`` in the form answers ``None`` (an optional question's none),
    with or without the question's id in the form."""
    for thread, named in (("o1", True), ("o2", False)):
        anyio.run(_seed_optional, db, thread)
        with TestClient(
            app(str(db), writes=True), backend=backend, follow_redirects=False
        ) as client:
            page = client.get("/thread", params={"id": thread}).text
            seen = re.search(r"name='seen' value='([^']+)'", page)
            question = re.search(r"name='question' value='([^']+)'", page)
            assert seen is not None
            assert question is not None
            form = {
                "csrf": csrf(page),
                "id": thread,
                "seen": seen.group(1),
                "answer": "null",
            }
            if named:
                form["question"] = question.group(1)
            done = client.post("/answer", data=form)
            assert done.status_code == 303, done.text
            after = client.get("/thread", params={"id": thread}).text
            assert "status <b>done</b>" in after

        async def limit(thread: str = thread) -> object:
            async with SQLiteStore(db) as store:
                snap = (await flows.optional.load(store, thread)).unwrap()
                return snap.state.limit

        assert anyio.run(limit) is None
