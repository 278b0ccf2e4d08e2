"""``pipeline`` with several questions waiting at once (fan-out branches
that each ask): listed with their ids by ``run``, ``show``, ``threads``
and the web UI, answered one by one with ``answer --question`` (or the
UI's form for each)."""

from __future__ import annotations

import json
import re

from pathlib import Path
from typing import Literal

import anyio
import pytest

from starlette.testclient import TestClient

from pipeline.cli import ExitCode
from pipeline.cli._stores import note_target
from pipeline.cli._ui import app
from pipeline.stores import SQLiteStore
from tests.cli import flows
from tests.cli.runner import FLOWS, cli


@pytest.mark.slow
def test_questions_of_branches_are_listed_and_answered_by_id(
    tmp_path: Path,
) -> None:
    store = str(tmp_path / "threads.sqlite3")
    ran = cli(
        "run",
        f"{FLOWS}:two_asks",
        "--input",
        "{}",
        "--store",
        store,
        "--thread",
        "t",
        cwd=tmp_path,
    )
    assert ran.returncode == ExitCode.PAUSED, ran.stderr
    assert "paused: a? (question " in ran.stderr
    assert "paused: b? (question " in ran.stderr
    assert "--question ID" in ran.stderr

    shown = json.loads(cli("show", "t", "--store", store, cwd=tmp_path).stdout)
    listed = shown["pending"]["questions"]
    assert [(q["question"], q["where"]) for q in listed] == [
        ("a?", "b:ask_a"),
        ("b?", "b:ask_b"),
    ]
    ids = {q["question"]: q["id"] for q in listed}

    threads = cli("threads", "--store", store, cwd=tmp_path)
    assert "interrupted (2 questions)" in threads.stdout

    forked = cli(
        "fork", "t", "--to", "t2", "--answer", "1", "--store", store,
        cwd=tmp_path,
    )  # fmt: skip
    assert forked.returncode == ExitCode.USAGE  # which question? not said
    assert "waits at 2 questions" in forked.stderr
    assert "nothing was forked" in forked.stderr

    for answer in ("1", "null"):  # null too: never the first one's
        unnamed = cli("answer", "t", answer, "--store", store, cwd=tmp_path)
        assert unnamed.returncode == ExitCode.USAGE
        assert ids["a?"] in unnamed.stderr
        assert ids["b?"] in unnamed.stderr

    first = cli(
        "answer", "t", "2", "--question", ids["b?"], "--store", store,
        cwd=tmp_path,
    )  # fmt: skip
    assert first.returncode == ExitCode.PAUSED, first.stderr
    assert "paused: a?" in first.stderr
    again = json.loads(cli("show", "t", "--store", store, cwd=tmp_path).stdout)
    assert again["pending"]["id"] == ids["a?"]  # the same id as before

    done = cli(
        "answer", "t", "1", "--question", ids["a?"], "--store", store,
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == ExitCode.OK, done.stderr
    assert json.loads(done.stdout) == {"a": 1, "b": 2}


async def _seed_two(path: Path) -> None:
    async with SQLiteStore(path) as store:
        snap = flows.two_asks.start(flows.Pair(), thread_id="t")
        paused = (await flows.two_asks.fold(snap, store=store)).unwrap()
        assert len(paused.questions) == 2
        await note_target(store, "t", f"{FLOWS}:two_asks")


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_the_web_ui_answers_each_question_by_id(
    tmp_path: Path, backend: Literal["asyncio", "trio"]
) -> None:
    path = tmp_path / "threads.sqlite3"
    anyio.run(_seed_two, path)
    with TestClient(
        app(str(path), writes=True), backend=backend, follow_redirects=False
    ) as client:
        page = client.get("/thread", params={"id": "t"}).text
        assert "waiting for answers" in page
        forms = re.findall(r"name='question' value='([^']+)'", page)
        assert len(forms) == 2
        token = re.search(r"name='csrf' value='([^']+)'", page)
        assert token is not None
        seen = re.search(r"name='seen' value='(\d+)'", page)
        assert seen is not None
        form = {"csrf": token.group(1), "id": "t", "seen": seen.group(1)}
        # Without saying which: refused, nothing ran.
        refused = client.post("/answer", data=form | {"answer": "1"})
        assert refused.status_code == 400
        assert forms[1] in refused.text
        sent = client.post(
            "/answer", data=form | {"answer": "2", "question": forms[1]}
        )
        assert sent.status_code == 303
        page = client.get("/thread", params={"id": "t"}).text
        assert "waiting for an answer" in page
        assert "a?" in page
        assert "b?" not in page.split("waiting for an answer")[1]
