"""``pipeline ui`` in a real browser: a real server process on loopback,
Chromium driven by Playwright, on SQLite and on PostgreSQL."""

from __future__ import annotations

import uuid

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.cli.runner import FLOWS, cli, environment
from tests.cli.ui_browser import browser, serving


if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page


pytestmark = pytest.mark.slow

EVIL = "<img src=x onerror=alert(1)> charge"


@pytest.fixture(name="chromium", scope="module")
def _chromium() -> Iterator[Browser]:
    with browser() as launched:
        yield launched


@pytest.fixture(
    name="store",
    params=[
        pytest.param("sqlite"),
        pytest.param("postgres", marks=pytest.mark.postgres),
    ],
)
def _store(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "postgres":
        return str(request.getfixturevalue("postgres_url"))
    return str(tmp_path / "threads.sqlite3")


def paused(store: str, tmp_path: Path) -> str:
    """A new desk thread paused on its question; its id."""
    thread = f"ui-{uuid.uuid4().hex[:10]}"
    ran = cli(
        "run",
        f"{FLOWS}:desk",
        "--input",
        f'{{"text": "{EVIL}"}}',
        "--store",
        store,
        "--thread",
        thread,
        cwd=tmp_path,
    )
    assert ran.returncode == 4, ran.stderr
    return thread


def refused(page: Page, says: str) -> None:
    alert = page.get_by_role("alert")
    assert says in alert.inner_text()


def bad_input_in_every_field(page: Page, here: str, thread: str) -> None:
    """Each form field given bad input: a clear line, nothing written."""
    for field, value, says in [
        ("diff version", "x", "a must be a version"),
        ("and", "-3", "b must be a version"),
        ("and", "999", "at version 999"),
    ]:
        page.get_by_label(field, exact=True).fill(value)
        page.get_by_role("button", name="diff").click()
        refused(page, says)
        page.goto(here)
    for field, value, says in [
        ("fork from version", "one", "v must be a version"),
        ("fork from version", "77", "at version 77"),
        ("into thread", "z" * 300, "300 characters"),
        ("into thread", thread, "already exists"),
        ("into thread", "pipeline-cli:x", "keeps for itself"),
    ]:
        page.get_by_label(field).fill(value)
        page.get_by_role("button", name="fork and resume").click()
        refused(page, says)
        page.goto(here)
    deep = "[" * 3000 + "]" * 3000
    # too deep, an integer past Python's digit limit, a lone surrogate
    for answer in (deep, "9" * 5000, '"\\ud800"'):
        page.get_by_label("answer", exact=False).fill(answer)
        page.get_by_role("button", name="answer", exact=True).click()
        refused(page, "malformed answer")
        assert "[[[" not in page.content()
        assert "99999" not in page.content()  # never echoed
        page.goto(here)
    assert "4 versions" in page.inner_text("p")  # nothing written


def test_browse_answer_and_fork(
    chromium: Browser, store: str, tmp_path: Path
) -> None:
    thread = paused(store, tmp_path)
    dialogs: list[str] = []
    with serving(
        store, "--allow-writes", cwd=tmp_path, env=environment()
    ) as url:
        page = chromium.new_page()
        page.on("dialog", lambda d: dialogs.append(d.message))
        page.goto(url)
        page.get_by_label("search threads").fill(thread[3:])
        page.get_by_role("button", name="search").click()
        listed = page.locator("tr", has_text=thread)
        assert "interrupted" in listed.inner_text()  # its status and node
        assert "draft" in listed.inner_text()
        page.get_by_role("link", name=thread).click()
        here = page.url
        assert "interrupted" in page.inner_text("p")
        assert "send this reply?" in page.inner_text(".question")
        assert "draft" in page.inner_text("b.here")
        # the drawing marks the node the thread stands at
        marked = page.locator(
            "svg g.node", has=page.locator("[fill='#ffd54f']")
        )
        assert marked.locator("text").text_content() == "draft"
        assert page.locator("svg g.node").count() > 3

        # the state holds attacker text: shown, never run
        page.get_by_role("link", name="0", exact=True).click()
        assert EVIL in page.inner_text("pre.state")
        page.goto(here)

        bad_input_in_every_field(page, here, thread)

        # a good diff, then answer
        page.get_by_label("diff version").fill("1")
        page.get_by_role("button", name="diff").click()
        assert "About your billing issue" in page.inner_text("pre.diff")
        page.goto(here)
        page.get_by_label("answer", exact=False).fill("yes")
        page.get_by_role("button", name="answer", exact=True).click()
        assert "status done" in page.inner_text("p")

        # fork from version 2 and resume: it runs on to the question again
        page.get_by_label("fork from version").fill("2")
        page.get_by_label("into thread").fill(thread + "-f")
        page.get_by_role("button", name="fork and resume").click()
        assert page.url.endswith(f"/thread?id={thread}-f")
        assert "send this reply?" in page.inner_text(".question")
        # the fork's record names its origin: a link back to it
        assert page.inner_text("p.lineage") == f"fork of {thread} at version 2"
        page.get_by_role("link", name="version 2").first.click()
        assert f"thread {thread} at version 2" in page.inner_text("h1")
    assert dialogs == []  # no script in the state ever ran


def test_a_run_commits_while_the_page_is_open(
    chromium: Browser, store: str, tmp_path: Path
) -> None:
    thread = paused(store, tmp_path)
    with serving(
        store, "--allow-writes", cwd=tmp_path, env=environment()
    ) as url:
        page = chromium.new_page()
        here = f"{url}thread?id={thread}"
        page.goto(here)
        assert "4 versions" in page.inner_text("p")
        # meanwhile, the CLI answers and the run commits two more versions
        answered = cli("answer", thread, "yes", "--store", store, cwd=tmp_path)
        assert answered.returncode == 0, answered.stderr
        page.get_by_label("answer", exact=False).fill("no")
        page.get_by_role("button", name="answer", exact=True).click()
        refused(page, "moved on")
        page.goto(here)
        page.get_by_role("link", name="reload").click()
        assert "6 versions" in page.inner_text("p")
        assert "status done" in page.inner_text("p")
        assert page.locator("form#answer").count() == 0


def test_read_only_and_the_token(chromium: Browser, tmp_path: Path) -> None:
    store = str(tmp_path / "threads.sqlite3")
    thread = paused(store, tmp_path)
    with serving(store, cwd=tmp_path, env=environment()) as url:
        assert url.startswith("http://127.0.0.1:")  # loopback, no token
        assert "token" not in url
        page = chromium.new_page()
        page.goto(f"{url}thread?id={thread}")
        assert "read-only" in page.inner_text("body")
        assert page.locator("form[method=post]").count() == 0
        # a write posted anyway (with the browser's cookies) is refused
        for action in ("fork", "answer"):
            posted = page.request.post(
                f"{url}{action}",
                form={"id": thread, "v": "1", "seen": "3", "answer": "yes"},
            )
            assert posted.status == 400
            assert "this UI is read-only" in posted.text()
        page.reload()
        assert "4 versions" in page.inner_text("p")  # nothing written
    # another loopback address is not 127.0.0.1: a token is required
    with serving(
        store, "--host", "127.0.0.2", cwd=tmp_path, env=environment()
    ) as url:
        assert "?token=" in url
        bare = url.partition("?")[0]
        page = chromium.new_page()
        answer = page.goto(bare)
        assert answer is not None
        assert answer.status == 403
        page.goto(url)
        assert thread in page.inner_text("table")
        page.get_by_role("link", name=thread).click()  # the cookie carries it
        assert "send this reply?" in page.inner_text(".question")
